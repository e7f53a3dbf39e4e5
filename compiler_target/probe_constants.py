"""The push constants each dispatch would get for a probe input: the host program's
push-constant operands of every `stream.cmd.dispatch` (executable-sources phase),
evaluated with each dynamic extent of the program's inputs (`hal.buffer_view.dim`) at
one of PROBE_EXTENTS.

A dispatch with dynamic extents is planned at these values at compile time (which
decides npu or host); the values at run time come from the real input. Evaluating the
host program, rather than guessing each dispatch's extents, keeps them consistent with
each other (a convolution's input extent is twice its output extent plus its window).
The evaluator covers the integer and f32 arithmetic IREE's host code computes extents
with (f32 for Resize's scaled extents, rounded as f32 like the host program) and the
integer globals IREE's const-eval left (a Reshape target computed from constant shapes:
the target's dims that were not constant-folded away); a value it cannot compute leaves
that dispatch without probe constants (host fallback, with the reason).
"""
import math

import numpy as np
from iree.compiler import ir

from compiler_target.program_functions import immutable_global_values, loaded_global

# Every dynamic input extent at once, the first first: multiples of 32 (detection nets
# need it); the longer ones for dispatches empty or invalid at 64 (a 512-sample
# STFT window over a dynamic audio length, a length six poolings empty), the shorter
# ones for those too big at 64 (a batch of 64 over a layer past a program's work).
PROBE_EXTENTS = (64, 1024, 16384, 8, 1)


class _Unknown(Exception):
    pass


def probe_constants(module, extent: int) -> dict[str, list[int | None]]:
    """Executable symbol -> the u32 push constants of its first dispatch site with every
    dynamic input extent at `extent` (None for a constant the evaluator cannot compute)."""
    evaluator, found = _Evaluator(extent, _integer_globals(module)), {}

    def visit(op):
        if op.name == "stream.cmd.dispatch":
            executable = op.attributes["entry_points"][0].value[0]
            if executable not in found:
                segments = list(op.attributes["operandSegmentSizes"])
                uniforms = list(op.operands)[segments[0]:segments[0] + segments[1]]
                found[executable] = [evaluator.u32(u) for u in uniforms]
        return ir.WalkResult.ADVANCE

    for op in module.regions[0].blocks[0].operations:
        if op.operation.name in ("util.func", "util.initializer"):
            op.operation.walk(visit)
    return found


def _integer_globals(module) -> dict[str, int]:
    """Symbol -> value of each immutable global with an integer initial value (a scalar
    IREE's const-eval computed: an extent of a Reshape target made of constant shapes)."""
    return {name: ir.IntegerAttr(value).value
            for name, value in immutable_global_values(module).items()
            if isinstance(value, ir.IntegerAttr)}


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _bits(type_) -> int:
    return 64 if isinstance(type_, ir.IndexType) else ir.IntegerType(type_).width


def _float_op(name: str, operands: list) -> int | np.float32:
    """An f32 op (as the host computes it, in f32) or an f32 -> integer conversion."""
    with np.errstate(all="ignore"):
        if name in _FLOAT_BINARY:
            return np.float32(_FLOAT_BINARY[name](*map(np.float32, operands)))
        if name in ("arith.sitofp", "arith.uitofp"):
            return np.float32(operands[0])
        if name == "math.floor":
            return np.floor(np.float32(operands[0]))
        if name == "math.ceil":
            return np.ceil(np.float32(operands[0]))
        if name == "arith.select":
            return operands[1] if operands[0] else operands[2]
        if name in _FLOAT_TO_INT and np.isfinite(operands[0]):
            return int(operands[0])
    raise _Unknown()


def _bitcast(value: int | np.float32) -> int | np.float32:
    """f32 <-> i32 bits."""
    if isinstance(value, np.float32):
        return int(value.view(np.int32))
    return np.int32(_signed(value, 32)).view(np.float32)


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise _Unknown()
    return a // b


def _ceildiv(a: int, b: int) -> int:
    return -_floordiv(-a, b)


def _mod(a: int, b: int) -> int:
    """The remainder of the floor division (affine mod; remui of unsigned operands)."""
    return a - _floordiv(a, b) * b


def _truncdiv(a: int, b: int) -> int:
    if b == 0:
        raise _Unknown()
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _cmp(predicate: int, a: int, b: int, bits: int) -> int:
    ua, ub = a & ((1 << bits) - 1), b & ((1 << bits) - 1)
    return int([a == b, a != b, a < b, a <= b, a > b, a >= b,
                ua < ub, ua <= ub, ua > ub, ua >= ub][predicate])


_BINARY = {
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": _truncdiv,
    "arith.divui": _floordiv,
    "arith.floordivsi": _floordiv,
    "arith.ceildivsi": _ceildiv,
    "arith.ceildivui": _ceildiv,
    "arith.remsi": lambda a, b: a - _truncdiv(a, b) * b,
    "arith.remui": _mod,
    "arith.maxsi": max, "arith.minsi": min, "arith.maxui": max, "arith.minui": min,
    "arith.andi": lambda a, b: a & b,
    "arith.ori": lambda a, b: a | b,
    "arith.xori": lambda a, b: a ^ b,
    "arith.shli": lambda a, b: a << b,
    "arith.shrui": lambda a, b: a >> b,
    "arith.shrsi": lambda a, b: a >> b,
}
_FLOAT_BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
    "arith.divf": np.divide, "arith.maximumf": np.maximum, "arith.minimumf": np.minimum,
}
_FLOAT_TO_INT = ("arith.fptosi", "arith.fptoui")
_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui",
          "arith.trunci")


class _Evaluator:
    def __init__(self, extent: int, globals_: dict[str, int]):
        self._extent = extent
        self._globals = globals_
        self._values = {}

    def u32(self, value) -> int | None:
        """The integer or f32 `value` as pushed (u32 bits), or None."""
        try:
            result = self.value(value)
        except _Unknown:
            return None
        if isinstance(result, np.float32):
            return int(result.view(np.uint32))
        return result & 0xFFFFFFFF

    def value(self, value) -> int | np.float32:
        if isinstance(value, ir.BlockArgument) or not isinstance(
                value.type, (ir.IndexType, ir.IntegerType, ir.F32Type)):
            raise _Unknown()
        owner = value.owner
        key = (owner, ir.OpResult(value).result_number)
        if key not in self._values:
            self._values[key] = self._compute(owner, value)
        return self._values[key]

    def _compute(self, op, value) -> int | np.float32:
        name = op.name
        if name == "hal.buffer_view.dim":
            return self._extent
        if name == "util.global.load":
            symbol = loaded_global(op)
            if symbol not in self._globals:
                raise _Unknown()
            return self._globals[symbol]
        if name == "arith.constant":
            attribute = op.attributes["value"]
            if isinstance(attribute, ir.FloatAttr):
                return np.float32(ir.FloatAttr(attribute).value)
            if not isinstance(attribute, ir.IntegerAttr):
                raise _Unknown()
            return ir.IntegerAttr(attribute).value
        operands = [self.value(v) for v in op.operands]
        if name == "arith.bitcast":
            return _bitcast(operands[0])
        if isinstance(value.type, ir.F32Type) or name in _FLOAT_TO_INT:
            return _float_op(name, operands)
        bits = _bits(value.type)
        if name in _BINARY:
            if name in ("arith.shrui", "arith.divui", "arith.remui", "arith.ceildivui",
                        "arith.maxui", "arith.minui"):
                operands = [v & ((1 << bits) - 1) for v in operands]
            return _signed(_BINARY[name](*operands), bits)
        if name in _CASTS:
            source_bits = _bits(op.operands[0].type)
            unsigned = name in ("arith.index_castui", "arith.extui")
            source = operands[0] & ((1 << source_bits) - 1) if unsigned else operands[0]
            return _signed(source, bits)
        if name == "arith.select":
            return operands[1] if operands[0] else operands[2]
        if name == "arith.cmpi":
            return _cmp(ir.IntegerAttr(op.attributes["predicate"]).value, *operands,
                        _bits(op.operands[0].type))
        if name == "util.align":
            return math.ceil(operands[0] / operands[1]) * operands[1]
        if name == "affine.apply":
            return self._affine(op, operands)
        raise _Unknown()

    def _affine(self, op, operands: list[int]) -> int:
        affine_map = ir.AffineMapAttr(op.attributes["map"]).value
        dims, symbols = operands[:affine_map.n_dims], operands[affine_map.n_dims:]
        [result] = affine_map.results
        return _affine_expr(result, dims, symbols)


def _affine_expr(expr, dims: list[int], symbols: list[int]) -> int:
    if isinstance(expr, ir.AffineConstantExpr):
        return expr.value
    if isinstance(expr, ir.AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, ir.AffineSymbolExpr):
        return symbols[expr.position]
    for kind, combine in ((ir.AffineAddExpr, lambda a, b: a + b),
                          (ir.AffineMulExpr, lambda a, b: a * b),
                          (ir.AffineFloorDivExpr, _floordiv),
                          (ir.AffineCeilDivExpr, _ceildiv),
                          (ir.AffineModExpr, _mod)):
        if kind.isinstance(expr):
            binary = kind(expr)
            return combine(_affine_expr(binary.lhs, dims, symbols),
                           _affine_expr(binary.rhs, dims, symbols))
    raise _Unknown()
