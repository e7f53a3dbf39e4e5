"""Analysis: what one dispatch computes, read from its linalg IR at the executable-sources
phase, described as an `NpuOp` (ops.py) or as the reason it cannot be.

The walk follows the dispatch function op by op and gives every SSA tensor value one
meaning:
  View    memory: a binding (or an inlined constant) with element strides per tensor dim
  Padded  a View inside `tensor.pad` (low/high per dim, pad value)
  Scalar  a scalar or splat value;  Empty  `tensor.empty` (contents undefined)
  Result  computed in the dispatch: an expression node, and for each tensor dim the
          logical dim of the NpuOp it indexes (and with which multiplier)
Named linalg ops are first generalized (on a clone), so every structured op is a
`linalg.generic` classified by its indexing maps, iterator types and body:
  reduction loops + body out+a*b   -> Conv2D (an input indexed by `s*oy + d*ky`) or Matmul
  reduction loops + body out+x/max -> Pool2D (with a window operand) or Reduce
  parallel loops only              -> copy/broadcast/transpose of a View (body yields an
                                      input) or an elementwise expression; after a
                                      Conv2D/Matmul/Pool2D/Reduce it becomes the epilogue.
Everything is linear: an operand's element address along each loop is the sum over its
tensor dims of (dim stride x affine coefficient), so layouts (NCHW/NHWC, transposes,
broadcasts) become strides of the op's logical dims.
"""
import math
import re
from dataclasses import dataclass, field

import numpy as np
from iree.compiler import ir, passmanager

from .ops import Conv2D, Elementwise, Matmul, NpuOp, Pool2D, Reduce, TensorRef

ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2,
                 "i8": 1, "i1": 1}
BINARY = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
          "arith.maximumf": "max", "arith.maxnumf": "max",
          "arith.minimumf": "min", "arith.minnumf": "min"}
UNARY = {"arith.negf": "neg", "math.absf": "abs", "math.tanh": "tanh", "math.exp": "exp"}
# arith.cmpf predicates: the comparison is `lhs > rhs` or `lhs < rhs` (NaN order ignored).
CMPF_GREATER = {2, 3, 9, 10}   # ogt oge ugt uge
CMPF_LESS = {4, 5, 11, 12}     # olt ole ult ule
_same = lambda a: a  # noqa: E731
_to_float = lambda a: a.astype(np.float64)  # noqa: E731
INDEX_ARITHMETIC = {"arith.index_cast": _same, "arith.index_castui": _same, "arith.extsi": _same,
                    "arith.trunci": _same, "arith.sitofp": _to_float, "arith.uitofp": _to_float,
                    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
                    "arith.minsi": np.minimum, "arith.maxsi": np.maximum,
                    "arith.floordivsi": np.floor_divide}
CONVERSIONS = {"arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci",
               "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui"}
NUMPY_FLOATS = {"f32": np.float32, "f16": np.float16}
GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops))"
IGNORED_OPS = {"func.return", "arith.constant"}
LEAVES = ("input", "acc", "const")
PLUMBING_DIALECTS = ("arith", "hal", "iree_tensor_ext", "tensor", "func", "util")


class NotSupported(Exception):
    """The dispatch cannot be described as an NpuOp; the message says why."""


@dataclass
class Subspan:
    """One `hal.interface.binding.subspan`: a tensor at a byte offset of a binding."""
    binding: int
    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def end(self) -> int:
        return self.offset + math.prod(self.shape) * ELEMENT_BYTES[self.dtype]


@dataclass
class Binding:
    index: int
    read_only: bool
    subspans: list[Subspan] = field(default_factory=list)

    @property
    def size_bytes(self) -> int:
        return max((subspan.end for subspan in self.subspans), default=0)

    @property
    def role(self) -> str:
        return "input" if self.read_only else "output"


@dataclass
class Analysis:
    name: str
    summary: str
    op: NpuOp | None                  # None: `problem` says why
    problem: str
    bindings: list[Binding]
    source_location: str
    macs: int = 0                     # multiply-accumulates of the dispatch's contractions


# ---- values -------------------------------------------------------------------------

@dataclass
class View:
    ref: TensorRef


@dataclass
class Padded:
    ref: TensorRef
    low: tuple[int, ...]
    high: tuple[int, ...]
    value: float


@dataclass
class Scalar:
    value: float | int


@dataclass
class Empty:
    pass


@dataclass
class Result:
    node: int
    dims: list[tuple[int, int]]       # per tensor dim: (logical dim, multiplier)


@dataclass
class Compare:                        # an arith.cmpf inside a body, consumed by select
    greater: bool
    lhs: int
    rhs: int


def analyse(executable_op) -> Analysis:
    """Describes the dispatch of a `hal.executable` (executable-sources phase)."""
    with executable_op.context:
        return _analyse(executable_op)


def _analyse(executable_op) -> Analysis:
    export, inner_module = _export_and_module(executable_op)
    name = ir.StringAttr(export.attributes["sym_name"]).value
    bindings = _layout_bindings(export)
    function = _only_function(inner_module)
    walk = _Walk(bindings)
    macs = 0
    try:
        _check_static(function)
        generalized = inner_module.clone()
        passmanager.PassManager.parse(GENERALIZE).run(generalized.operation)
        macs = contraction_macs(_only_function(generalized))
        walk.run(_only_function(generalized), _op_names(function))
        op, problem = walk.finish(), ""
    except NotSupported as error:
        op, problem = None, str(error)
    summary = walk.summary or _fallback_summary(function)
    location = walk.location or str(function.location)
    return Analysis(name, summary, op, problem, bindings, location, macs)


def contraction_macs(function) -> int:
    """Multiply-accumulates of the function's contractions and convolutions: the
    iteration space of every linalg.generic with a reduction loop whose body multiplies
    (the model's math, whether or not the NPU runs the dispatch)."""
    macs = 0
    for op in _body(function):
        if op.name != "linalg.generic" or "reduction" not in str(op.attributes["iterator_types"]):
            continue
        body = [o.operation.name for o in op.regions[0].blocks[0].operations]
        if any(name in ("arith.mulf", "arith.muli") for name in body):
            macs += math.prod(_loop_extents(op))
    return macs


def _loop_extents(op) -> list[int]:
    """Each loop's extent, from the operand dims it indexes directly."""
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    extents = [1] * maps[0].n_dims
    for value, affine_map in zip(op.operands, maps):
        if isinstance(value.type, ir.ShapedType):
            for n, expr in zip(ir.ShapedType(value.type).shape, affine_map.results):
                if isinstance(expr, ir.AffineDimExpr):
                    extents[expr.position] = n
    return extents


def _export_and_module(executable_op):
    variant = executable_op.regions[0].blocks[0].operations[0]
    ops = list(variant.regions[0].blocks[0].operations)
    exports = [op for op in ops if op.operation.name == "hal.executable.export"]
    modules = [op for op in ops if op.operation.name == "builtin.module"]
    if len(exports) != 1 or len(modules) != 1:
        raise ValueError(f"executable has {len(exports)} exports and {len(modules)} modules; "
                         "expected one of each (--iree-hal-link-executables=false)")
    return exports[0].operation, modules[0].operation


def _only_function(module):
    functions = [op.operation for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func"]
    if len(functions) != 1:
        raise ValueError(f"dispatch module has {len(functions)} functions, expected 1")
    return functions[0]


def _body(function):
    return [op.operation for op in function.regions[0].blocks[0].operations]


def _op_names(function) -> list[str]:
    return [op.name for op in _body(function) if op.name != "arith.constant"]


def _layout_bindings(export) -> list[Binding]:
    layout = str(export.attributes["layout"])
    flags = re.findall(r"#hal\.pipeline\.binding<storage_buffer(?:, \"?([\w|]+)\"?)?>", layout)
    return [Binding(index, "ReadOnly" in flag.split("|")) for index, flag in enumerate(flags)]


def _check_static(function) -> None:
    for op in _body(function):
        for value in list(op.operands) + list(op.results):
            text = str(value.type)
            if "?" in text:
                raise NotSupported(f"dynamic shape ({text})")


def _fallback_summary(function) -> str:
    """The first compute op and its result type, for dispatches analysis could not describe."""
    for op in _body(function):
        if op.name.split(".")[0] not in PLUMBING_DIALECTS and op.name != "linalg.fill":
            shaped = [r.type for r in op.results if isinstance(r.type, ir.ShapedType)]
            return f"{op.name} {_type_text(shaped[0])}" if shaped else op.name
    return "dispatch without a compute op"


def _type_text(type_) -> str:
    shaped = ir.ShapedType(type_)
    dims = "x".join("?" if shaped.is_dynamic_dim(i) else str(n)
                    for i, n in enumerate(shaped.shape))
    return f"{dims} {shaped.element_type}"


# ---- affine maps ----------------------------------------------------------------------

def _linear(expr) -> tuple[dict[int, int], int]:
    """An affine expression as ({loop: coefficient}, constant)."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position: 1}, 0
    if isinstance(expr, ir.AffineConstantExpr):
        return {}, expr.value
    if isinstance(expr, ir.AffineAddExpr):
        (lc, lk), (rc, rk) = _linear(expr.lhs), _linear(expr.rhs)
        return {d: lc.get(d, 0) + rc.get(d, 0) for d in lc.keys() | rc.keys()}, lk + rk
    if isinstance(expr, ir.AffineMulExpr):
        (lc, lk), (rc, rk) = _linear(expr.lhs), _linear(expr.rhs)
        if lc and rc:
            raise NotSupported(f"non-linear indexing {expr}")
        coefficients, scale, constant = (lc, rk, lk) if lc else (rc, lk, rk)
        return {d: c * scale for d, c in coefficients.items()}, constant * scale
    raise NotSupported(f"indexing expression {expr} is not linear")


@dataclass
class Operand:
    value: object                                   # View | Padded | Scalar | Empty | Result
    terms: list[tuple[dict[int, int], int]]         # per tensor dim of the value

    def loops(self) -> set[int]:
        return {d for coefficients, _ in self.terms for d, c in coefficients.items() if c}


@dataclass
class Generic:
    op: object
    name: str                                        # before generalization
    iterators: list[str]
    inputs: list[Operand]
    output: Operand
    extents: list[int]

    @property
    def reductions(self) -> list[int]:
        return [d for d, kind in enumerate(self.iterators) if kind == "reduction"]

    @property
    def body(self) -> list:
        return [op.operation for op in self.op.regions[0].blocks[0].operations]


def _strides_over_loops(ref: TensorRef, operand: Operand) -> tuple[dict[int, int], int]:
    """Element stride of the operand along each loop, and its extra byte offset."""
    strides: dict[int, int] = {}
    offset = 0
    for stride, (coefficients, constant) in zip(ref.strides, operand.terms):
        for loop, c in coefficients.items():
            strides[loop] = strides.get(loop, 0) + stride * c
        offset += stride * constant
    return strides, offset * ELEMENT_BYTES[ref.dtype]


def _logical_strides(loop_strides: dict[int, int], loop_to_logical: dict[int, tuple[int, int]],
                     extents: list[int], rank: int) -> tuple[int, ...]:
    """Strides over the op's logical dims, given strides over loops that index them
    (logical index = sum of multiplier x loop index)."""
    strides: list[int | None] = [None] * rank
    for loop, (dim, multiplier) in sorted(loop_to_logical.items(), key=lambda kv: kv[1][1]):
        if extents[loop] == 1:
            continue
        stride = loop_strides.get(loop, 0)
        if strides[dim] is None and stride % multiplier == 0:
            strides[dim] = stride // multiplier
        if strides[dim] is None or strides[dim] * multiplier != stride:
            raise NotSupported("an operand's layout does not match the op's logical dims")
    for loop, stride in loop_strides.items():
        if stride and loop not in loop_to_logical and extents[loop] > 1:
            raise NotSupported(f"an operand varies along loop d{loop}, which the op does not index")
    return tuple(s or 0 for s in strides)


def _row_major(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _ref(ref: TensorRef, shape, strides, extra_offset=0) -> TensorRef:
    """`ref` seen with another shape and strides, `extra_offset` bytes further on
    (constants are re-based so that their offset stays 0)."""
    offset = ref.offset + extra_offset
    if ref.constant is None:
        return TensorRef(ref.dtype, tuple(shape), tuple(strides), ref.binding, offset)
    data = ref.constant.reshape(-1)[offset // ELEMENT_BYTES[ref.dtype]:]
    return TensorRef(ref.dtype, tuple(shape), tuple(strides), -1, 0, data)


# ---- the walk -------------------------------------------------------------------------

class _Walk:
    def __init__(self, bindings: list[Binding]):
        self.bindings = bindings
        self.values: dict = {}
        self.nodes: list = []
        self.inputs: list[TensorRef] = []
        self.main: dict | None = None           # kind, name, loop_to_logical, logical shape…
        self.stores: list[tuple[object, TensorRef]] = []
        self.summary = ""
        self.location = ""

    def run(self, function, original_names: list[str]) -> None:
        """Visits the generalized function's ops; `original_names` are the names of the
        non-constant ops before generalization (which may merge and hoist constants)."""
        ops = _body(function)
        names = iter(original_names)
        if len([op for op in ops if op.name != "arith.constant"]) != len(original_names):
            raise NotSupported("generalization changed the op count")
        for op in ops:
            self.visit(op, op.name if op.name == "arith.constant" else next(names))

    def visit(self, op, name: str) -> None:
        kind = op.name
        if kind == "arith.constant":
            self.values[op.results[0]] = _constant(op)
        elif kind == "hal.interface.binding.subspan":
            self.values[op.results[0]] = self.subspan(op)
        elif kind == "iree_tensor_ext.dispatch.tensor.load":
            ref = self.slice_ref(op, op.operands[0], op.results[0].type)
            self.values[op.results[0]] = View(ref)
        elif kind == "iree_tensor_ext.dispatch.tensor.store":
            self.stores.append((self.values[op.operands[0]],
                                self.slice_ref(op, op.operands[1], op.operands[0].type)))
        elif kind == "tensor.empty":
            self.values[op.results[0]] = Empty()
        elif kind == "tensor.pad":
            self.values[op.results[0]] = self.pad(op)
        elif kind == "linalg.generic":
            self.values[op.results[0]] = self.generic(op, name)
        elif kind == "hal.interface.constant.load":
            raise NotSupported("dispatch reads push constants (hal.interface.constant.load)")
        elif kind not in IGNORED_OPS:
            raise NotSupported(f"op {name} has no NPU equivalent")

    # -- memory

    def subspan(self, op) -> Subspan:
        if len(op.operands) != 1:
            raise NotSupported("binding subspan with dynamic dims")
        tensor = _dispatch_tensor_type(op.results[0].type)
        subspan = Subspan(ir.IntegerAttr(op.attributes["binding"]).value,
                          _index_constant(op.operands[0]), str(tensor.element_type),
                          tuple(tensor.shape))
        self.bindings[subspan.binding].subspans.append(subspan)
        return subspan

    def slice_ref(self, op, source, value_type) -> TensorRef:
        """The TensorRef of a load's result (or a store's value) in its binding."""
        subspan = self.values[source]
        if len(op.operands) != (2 if op.name.endswith("store") else 1):
            raise NotSupported("dispatch tensor slice with dynamic offsets or sizes")
        offsets, sizes, steps = (list(ir.DenseI64ArrayAttr(op.attributes[key]))
                                 for key in ("static_offsets", "static_sizes", "static_strides"))
        full = _row_major(subspan.shape)
        kept = _kept_dims(sizes, ir.ShapedType(value_type).shape)
        element = sum(o * s for o, s in zip(offsets, full))
        return TensorRef(subspan.dtype, tuple(sizes[i] for i in kept),
                         tuple(full[i] * steps[i] for i in kept), subspan.binding,
                         subspan.offset + element * ELEMENT_BYTES[subspan.dtype])

    def pad(self, op) -> Padded:
        source = self.values[op.operands[0]]
        if not isinstance(source, View) or len(op.operands) != 1:
            raise NotSupported("tensor.pad of a computed value or with dynamic pads")
        low, high = (tuple(ir.DenseI64ArrayAttr(op.attributes[key]))
                     for key in ("static_low", "static_high"))
        yielded = op.regions[0].blocks[0].operations[0].operation
        value = self.values.get(yielded.operands[0]) if yielded.name == "tensor.yield" else None
        if not isinstance(value, Scalar):
            raise NotSupported("tensor.pad with a non-constant pad value")
        return Padded(source.ref, low, high, float(value.value))

    # -- structured ops

    def generic(self, op, name: str):
        generic = self.describe(op, name)
        if generic.reductions:
            return self.main_op(generic)
        return self.parallel(generic)

    def describe(self, op, name: str) -> Generic:
        if len(op.results) != 1:
            raise NotSupported(f"{name} with {len(op.results)} results (the NPU op writes one)")
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
        iterators = [str(t).split("<")[1].rstrip(">") for t in op.attributes["iterator_types"]]
        operands = [Operand(self.values[v], [_linear(e) for e in m.results])
                    for v, m in zip(op.operands, maps)]
        extents: list[int | None] = [None] * len(iterators)
        for value, operand in zip(op.operands, operands):
            if not isinstance(value.type, ir.ShapedType):
                continue
            for n, (coefficients, constant) in zip(ir.ShapedType(value.type).shape, operand.terms):
                if len(coefficients) == 1 and list(coefficients.values()) == [1] and not constant:
                    extents[next(iter(coefficients))] = n
        if None in extents:
            raise NotSupported(f"{name}: a loop's extent is not given by an operand dim")
        return Generic(op, name, iterators, operands[:-1], operands[-1], extents)

    def parallel(self, generic: Generic):
        copied = _yielded_argument(generic)
        if copied is not None:
            source = (generic.inputs + [generic.output])[copied]
            if isinstance(source.value, View):
                return self.view_through(generic, source)
            if isinstance(source.value, Scalar) and not source.terms:
                return source.value
        if self.main is None:
            self.start_elementwise(generic)
            loop_to_logical = {loop: (loop, 1) for loop in range(len(generic.extents))}
        else:
            loop_to_logical = self.loops_to_logical(generic)
        return self.expression(generic, loop_to_logical)

    def view_through(self, generic: Generic, source: Operand) -> View:
        """A copy, broadcast or transpose of memory is a strided view of it."""
        loop_strides, offset = _strides_over_loops(source.value.ref, source)
        loops = [_single_loop(terms) for terms in generic.output.terms]
        shape = [generic.extents[loop] for loop in loops]
        return View(_ref(source.value.ref, shape, [loop_strides.get(l, 0) for l in loops], offset))

    def start_elementwise(self, generic: Generic) -> None:
        self.main = {"kind": "elementwise", "name": generic.name,
                     "shape": tuple(generic.extents)}
        dtype = ir.ShapedType(generic.op.results[0].type).element_type
        self.summary = f"{generic.name} (elementwise) {'x'.join(map(str, generic.extents))} {dtype}"
        self.location = str(generic.op.location)

    # -- expressions

    def expression(self, generic: Generic, loop_to_logical) -> Result:
        """Appends the body of an all-parallel generic to the expression; its loops index
        the op's logical dims as `loop_to_logical` says."""
        operands = generic.inputs + [generic.output]
        block = generic.op.regions[0].blocks[0]
        nodes: dict = {}      # body value -> expression node (or Compare)
        arrays: dict = {}     # body value -> its value at every loop position (index arithmetic)
        if any(op.name == "tensor.extract" for op in generic.body):
            raise NotSupported(f"{generic.name}: tensor.extract in the body "
                               "(gather: data-dependent indexing)")

        def node_of(value) -> int:
            if value in nodes:
                return nodes[value]
            if value in arrays:
                nodes[value] = self.positional_input(arrays[value], value.type, generic,
                                                     loop_to_logical)
            elif isinstance(value, ir.BlockArgument) and value.owner == block:
                nodes[value] = self.operand_node(operands[value.arg_number], generic,
                                                 loop_to_logical)
            elif value in self.values and isinstance(self.values[value], Scalar):
                nodes[value] = self.add(("const", float(self.values[value].value)))
            else:
                raise NotSupported(f"{generic.name}: unsupported value in body")
            return nodes[value]

        def array_of(value):
            if value in arrays:
                return arrays[value]
            known = self.values.get(value)
            return np.array(known.value) if isinstance(known, Scalar) else None

        for op in generic.body:
            if op.name == "linalg.yield":
                dims = [loop_to_logical[_single_loop(terms)] for terms in generic.output.terms]
                return Result(node_of(op.operands[0]), dims)
            positional = _index_arithmetic(op, array_of, generic.extents)
            if positional is not None:
                arrays[op.results[0]] = positional
            else:
                nodes[op.results[0]] = self.body_op(op, node_of, nodes, generic.name)
        raise NotSupported(f"{generic.name}: body without yield")

    def positional_input(self, array: np.ndarray, type_, generic: Generic,
                         loop_to_logical) -> int:
        """Values computed from loop positions only (e.g. the divisor of an average pool
        that excludes padding) become an inlined constant input."""
        dtype = str(type_)
        if dtype not in NUMPY_FLOATS:
            raise NotSupported(f"{generic.name}: position-dependent {dtype} values")
        rank = len(generic.extents)
        data = np.ascontiguousarray(np.broadcast_to(array, np.broadcast_shapes(
            array.shape, (1,) * rank)), NUMPY_FLOATS[dtype])
        row_major = _row_major(data.shape)
        loop_strides = {loop: row_major[loop] for loop in range(rank) if data.shape[loop] > 1}
        shape = self.main["shape"]
        strides = _logical_strides(loop_strides, loop_to_logical, generic.extents, len(shape))
        self.inputs.append(TensorRef(dtype, shape, strides, -1, 0, data))
        return self.add(("input", len(self.inputs) - 1))

    def body_op(self, op, node_of, nodes, name: str):
        kind = op.name
        if kind == "arith.constant":
            return self.add(("const", float(_constant(op).value)))
        if kind in BINARY:
            return self.add((BINARY[kind], (node_of(op.operands[0]), node_of(op.operands[1]))))
        if kind in UNARY:
            return self.add((UNARY[kind], (node_of(op.operands[0]),)))
        if kind == "arith.cmpf":
            predicate = ir.IntegerAttr(op.attributes["predicate"]).value
            if predicate not in CMPF_GREATER | CMPF_LESS:
                raise NotSupported(f"{name}: arith.cmpf predicate {predicate}")
            return Compare(predicate in CMPF_GREATER, node_of(op.operands[0]),
                           node_of(op.operands[1]))
        if kind == "arith.select":
            return self.select(nodes.get(op.operands[0]), node_of(op.operands[1]),
                               node_of(op.operands[2]), name)
        raise NotSupported(f"{name}: {kind} in an elementwise body has no NPU equivalent")

    def select(self, condition, if_true: int, if_false: int, name: str) -> int:
        """select(a > b, a, b) = max(a, b); the other orders are max or min likewise."""
        if not isinstance(condition, Compare) or \
                {condition.lhs, condition.rhs} != {if_true, if_false} or if_true == if_false:
            raise NotSupported(f"{name}: arith.select other than a max/min")
        picks_larger = condition.greater == (if_true == condition.lhs)
        return self.add(("max" if picks_larger else "min", (if_true, if_false)))

    def operand_node(self, operand: Operand, generic: Generic, loop_to_logical) -> int:
        value = operand.value
        if isinstance(value, Result):
            for (coefficients, _), dim in zip(operand.terms, value.dims):
                if loop_to_logical[_single_loop((coefficients, 0))] != dim:
                    raise NotSupported(f"{generic.name} reads the computed value in two "
                                       "different index orders")
            return value.node
        if _splat(value) is not None:
            return self.add(("const", float(_splat(value).value)))
        if isinstance(value, View):
            return self.add(("input", self.add_input(value.ref, operand, generic.extents,
                                                     loop_to_logical)))
        raise NotSupported(f"{generic.name} reads an undefined or padded tensor")

    def add_input(self, ref: TensorRef, operand: Operand, extents, loop_to_logical) -> int:
        loop_strides, offset = _strides_over_loops(ref, operand)
        shape = self.main["shape"]
        strides = _logical_strides(loop_strides, loop_to_logical, extents, len(shape))
        self.inputs.append(_ref(ref, shape, strides, offset))
        return len(self.inputs) - 1

    def loops_to_logical(self, generic: Generic) -> dict[int, tuple[int, int]]:
        """Which logical dim of the op each loop of a generic consuming its result indexes."""
        mapping = {}
        for operand in generic.inputs + [generic.output]:
            if isinstance(operand.value, Result):
                for terms, dim in zip(operand.terms, operand.value.dims):
                    mapping[_single_loop(terms)] = dim
        if not mapping:
            raise NotSupported(f"{generic.name} is a second computation independent of "
                               f"the {self.main['kind']}")
        if len(mapping) != len(generic.extents):
            raise NotSupported(f"{generic.name} broadcasts the computed value")
        return mapping

    def add(self, node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    # -- main ops (with reduction loops)

    def main_op(self, generic: Generic) -> Result:
        if self.main is not None:
            raise NotSupported(f"{generic.name} after a {self.main['kind']} in the same dispatch")
        for operand in generic.inputs:
            if isinstance(operand.value, Result):
                raise NotSupported(f"{generic.name} consumes a value computed in the dispatch")
        self.location = str(generic.op.location)
        combine = _reduction_body(generic)
        if combine == "mac":
            if any(len(c) > 1 for operand in generic.inputs for c, _ in operand.terms):
                self.conv(generic)
            else:
                self.matmul(generic)
        elif any(isinstance(operand.value, Empty) for operand in generic.inputs):
            self.pool(generic, combine)
        else:
            self.reduce(generic, combine)
        return self.accumulate(generic, "max" if combine == "max" else "add")

    def accumulate(self, generic: Generic, combine: str) -> Result:
        """The accumulator node, combined with the output's initial value."""
        loop_to_logical = self.main["loop_to_logical"]
        acc = self.add(("acc",))
        init = _splat(generic.output.value) or generic.output.value
        identity = -math.inf if combine == "max" else 0.0
        if isinstance(init, Scalar) and float(init.value) != identity:
            acc = self.add((combine, (acc, self.add(("const", float(init.value))))))
        elif isinstance(init, View):
            init_node = self.add(("input", self.add_input(init.ref, generic.output,
                                                          generic.extents, loop_to_logical)))
            acc = self.add((combine, (acc, init_node)))
        elif not isinstance(init, Scalar):
            raise NotSupported(f"{generic.name} accumulates into an undefined or computed tensor")
        dims = [loop_to_logical[_single_loop(terms)] for terms in generic.output.terms]
        return Result(acc, dims)

    def matmul(self, generic: Generic) -> None:
        a, b = generic.inputs
        roles = _loop_roles(generic, {"A": a, "B": b})
        role = _one_loop_per_role(roles, {
            ("A", "B", "O", "parallel"): "batch", ("A", "O", "parallel"): "m",
            ("B", "O", "parallel"): "n", ("A", "B", "reduction"): "k"}, generic.name)
        a_ref, b_ref = _plain_view(a, generic.name), _plain_view(b, generic.name)
        a_strides, a_offset = _strides_over_loops(a_ref, a)
        b_strides, b_offset = _strides_over_loops(b_ref, b)
        size = {r: generic.extents[l] if l is not None else 1 for r, l in role.items()}
        along = lambda strides, r: strides.get(role[r], 0) if role[r] is not None else 0  # noqa
        self.main = {
            "kind": "matmul", "name": generic.name, "shape": (size["batch"], size["m"], size["n"]),
            "loop_to_logical": {l: (i, 1) for i, l in enumerate(
                [role["batch"], role["m"], role["n"]]) if l is not None},
            "a": _ref(a_ref, (size["batch"], size["m"], size["k"]),
                      [along(a_strides, r) for r in ("batch", "m", "k")], a_offset),
            "b": _ref(b_ref, (size["batch"], size["k"], size["n"]),
                      [along(b_strides, r) for r in ("batch", "k", "n")], b_offset)}
        batch = f"B={size['batch']} " if role["batch"] is not None else ""
        transposed = "".join(f" {x}^T" for x, ref in (("a", self.main["a"]), ("b", self.main["b"]))
                             if _column_major(ref))
        self.summary = (f"{_label(generic.name, 'matmul')} {batch}M={size['m']} N={size['n']} "
                        f"K={size['k']}{transposed} {a_ref.dtype}")

    def conv(self, generic: Generic) -> None:
        image, weight = sorted(generic.inputs, key=lambda o: -max(len(c) for c, _ in o.terms))
        if any(len(c) > 1 for c, _ in weight.terms):
            raise NotSupported(f"{generic.name}: both operands have windowed indexing")
        spatial = [(t, c) for t, (c, k) in enumerate(image.terms) if len(c) > 1]
        if len(spatial) != 2:
            raise NotSupported(f"{generic.name}: convolution with {len(spatial)} windowed dims "
                               "(the NPU runs 2-D convolutions)")
        windows = [_window(c, generic) for _, c in spatial]
        windowed = {loop for window in windows for loop in window[::2]}
        roles = _loop_roles(generic, {"I": image, "W": weight}, skip=windowed)
        role = _one_loop_per_role(roles, {
            ("I", "O", "parallel"): "n", ("I", "W", "O", "parallel"): "g",
            ("W", "O", "parallel"): "f", ("I", "W", "reduction"): "c"}, generic.name)
        size = {r: generic.extents[l] if l is not None else 1 for r, l in role.items()}
        (oy, sh, ky, dh), (ox, sw, kx, dw) = windows
        image_ref, pads = self.window_source(image, [t for t, _ in spatial], 0.0, generic.name)
        weight_ref = _plain_view(weight, generic.name)
        i_strides, i_offset = _strides_over_loops(image_ref, _unwindowed(image, spatial))
        w_strides, w_offset = _strides_over_loops(weight_ref, weight)
        extents = generic.extents
        groups, channels = size["g"], size["g"] * size["c"]

        def grouped(strides, inner):
            """Stride of the channel dim indexed by g * size[inner] + inner."""
            loops = {l: (0, m) for l, m in ((role["g"], size[inner]), (role[inner], 1))
                     if l is not None}
            return _logical_strides({l: strides.get(l, 0) for l in loops}, loops, extents, 1)[0]

        h, w = (image_ref.shape[t] for t, _ in spatial)
        self.main = {
            "kind": "conv2d", "name": generic.name,
            "shape": (size["n"], groups * size["f"], extents[oy], extents[ox]),
            "loop_to_logical": {l: d for l, d in ((role["n"], (0, 1)), (role["g"], (1, size["f"])),
                                                  (role["f"], (1, 1)), (oy, (2, 1)), (ox, (3, 1)))
                                if l is not None},
            "input": _ref(image_ref, (size["n"], channels, h, w),
                          (i_strides.get(role["n"], 0), grouped(i_strides, "c"),
                           image_ref.strides[spatial[0][0]], image_ref.strides[spatial[1][0]]),
                          i_offset),
            "weight": _ref(weight_ref, (groups * size["f"], size["c"], extents[ky], extents[kx]),
                           (grouped(w_strides, "f"), w_strides.get(role["c"], 0),
                            w_strides.get(ky, 0), w_strides.get(kx, 0)), w_offset),
            "stride": (sh, sw), "dilation": (dh, dw), "pads": pads, "groups": groups}
        layout = "NHWC" if self.main["input"].strides[1] < self.main["input"].strides[3] else "NCHW"
        kind = "depthwise conv2d" if groups > 1 and groups == channels else "conv2d"
        self.summary = (f"{_label(generic.name, f'{kind} {layout}')} N={size['n']} C={channels} "
                        f"H={h} W={w} F={groups * size['f']} KH={extents[ky]} KW={extents[kx]}"
                        f"{_window_text(self.main)} {image_ref.dtype}")

    def pool(self, generic: Generic, combine: str) -> None:
        image = next(o for o in generic.inputs if not isinstance(o.value, Empty))
        spatial = [(t, c) for t, (c, k) in enumerate(image.terms) if len(c) > 1]
        if len(spatial) != 2 or len(generic.inputs) != 2:
            raise NotSupported(f"{generic.name}: pooling with {len(spatial)} windowed dims")
        windows = [_window(c, generic) for _, c in spatial]
        windowed = {loop for window in windows for loop in window[::2]}
        plain = [_loop_of(coefficients, generic.name)
                 for t, (coefficients, _) in enumerate(image.terms) if t not in dict(spatial)]
        if len(plain) > 2 or any(generic.iterators[l] != "parallel" for l in plain) or \
                set(plain) | windowed != set(range(len(generic.extents))):
            raise NotSupported(f"{generic.name}: pooling loop structure not recognised")
        batch, channel = ([None] * (2 - len(plain)) + plain)
        (oy, sh, ky, dh), (ox, sw, kx, dw) = windows
        pad_value = -math.inf if combine == "max" else 0.0
        image_ref, pads = self.window_source(image, [t for t, _ in spatial], pad_value,
                                             generic.name)
        strides, offset = _strides_over_loops(image_ref, _unwindowed(image, spatial))
        n = generic.extents[batch] if batch is not None else 1
        c = generic.extents[channel] if channel is not None else 1
        h, w = (image_ref.shape[t] for t, _ in spatial)
        self.main = {
            "kind": "pool2d", "name": generic.name, "pool": combine,
            "shape": (n, c, generic.extents[oy], generic.extents[ox]),
            "loop_to_logical": {l: d for l, d in ((batch, (0, 1)), (channel, (1, 1)),
                                                  (oy, (2, 1)), (ox, (3, 1))) if l is not None},
            "input": _ref(image_ref, (n, c, h, w),
                          (strides.get(batch, 0), strides.get(channel, 0),
                           image_ref.strides[spatial[0][0]], image_ref.strides[spatial[1][0]]),
                          offset),
            "kernel": (generic.extents[ky], generic.extents[kx]), "stride": (sh, sw),
            "dilation": (dh, dw), "pads": pads}
        self.summary = (f"{_label(generic.name, f'{combine} pool2d')} N={n} C={c} H={h} W={w} "
                        f"KH={generic.extents[ky]} KW={generic.extents[kx]}"
                        f"{_window_text(self.main)} {image_ref.dtype}")

    def reduce(self, generic: Generic, combine: str) -> None:
        if len(generic.inputs) != 1:
            raise NotSupported(f"{generic.name}: reduction of {len(generic.inputs)} operands")
        source = generic.inputs[0]
        ref = _plain_view(source, generic.name)
        kept = [_single_loop(terms) for terms in generic.output.terms]
        if any(generic.iterators[l] != "parallel" for l in kept) or \
                len(kept) + len(generic.reductions) != len(generic.extents):
            raise NotSupported(f"{generic.name}: reduction loop structure not recognised")
        strides, offset = _strides_over_loops(ref, source)
        reduced = sorted(generic.reductions, key=lambda l: -strides.get(l, 0))
        self.main = {
            "kind": "reduce", "name": generic.name, "reduce": combine,
            "shape": tuple(generic.extents[l] for l in kept),
            "loop_to_logical": {l: (i, 1) for i, l in enumerate(kept)},
            "input": _ref(ref, [generic.extents[l] for l in kept + reduced],
                          [strides.get(l, 0) for l in kept + reduced], offset),
            "kept_rank": len(kept)}
        outer = "x".join(str(generic.extents[l]) for l in kept) or "1"
        inner = "x".join(str(generic.extents[l]) for l in reduced)
        label = _label(generic.name, f"{combine} reduction")
        self.summary = f"{label} {outer} over {inner} {ref.dtype}"

    def window_source(self, image: Operand, spatial_dims: list[int], pad_value: float,
                      name: str) -> tuple[TensorRef, tuple[int, int, int, int]]:
        """The windowed operand's memory and its (top, left, bottom, right) zero pads."""
        value = image.value
        if isinstance(value, View):
            return value.ref, (0, 0, 0, 0)
        if not isinstance(value, Padded):
            raise NotSupported(f"{name} reads a computed or undefined tensor")
        if any((value.low[t] or value.high[t]) for t in range(len(value.low))
               if t not in spatial_dims):
            raise NotSupported(f"{name}: padding of a non-spatial dim")
        if value.value != pad_value:
            raise NotSupported(f"{name}: padding with {value.value} (needs {pad_value})")
        (top, left), (bottom, right) = ([pads[t] for t in spatial_dims]
                                        for pads in (value.low, value.high))
        return value.ref, (top, left, bottom, right)

    # -- the result

    def finish(self) -> NpuOp:
        if len(self.stores) != 1:
            raise NotSupported(f"dispatch writes {len(self.stores)} results "
                               "(the NPU op writes one)")
        value, target = self.stores[0]
        if isinstance(value, View) and self.main is None:
            return self.copy(value.ref, target)
        if isinstance(value, Scalar) and self.main is None:
            self.summary = f"fill {'x'.join(map(str, target.shape))} {target.dtype}"
            return Elementwise(target, [], [("const", float(value.value))])
        if not isinstance(value, Result) or self.main is None:
            raise NotSupported("the stored value is not computed by the dispatch")
        shape = self.main["shape"]
        out = _ref(target, shape, _logical_strides(
            {t: s for t, s in enumerate(target.strides)},
            {t: dim for t, dim in enumerate(value.dims)}, list(target.shape), len(shape)))
        expr, inputs = _pruned(_simplified(self.nodes[:value.node + 1]), self.inputs)
        return getattr(self, f"build_{self.main['kind']}")(out, expr, inputs)

    def copy(self, source: TensorRef, target: TensorRef) -> Elementwise:
        self.summary = f"copy {'x'.join(map(str, source.shape))} {source.dtype}"
        return Elementwise(target, [source], [("input", 0)])

    def build_elementwise(self, out, expr, inputs) -> Elementwise:
        label = " ".join(["elementwise"] + [node[0] for node in expr if node[0] not in LEAVES])
        self.summary = self.summary.replace("(elementwise)", f"({label})")
        return Elementwise(out, inputs, expr)

    def build_conv2d(self, out, expr, inputs) -> Conv2D:
        m = self.main
        return Conv2D(m["input"], m["weight"], out, m["stride"], m["dilation"], m["pads"],
                      m["groups"], expr, inputs)

    def build_matmul(self, out, expr, inputs) -> Matmul:
        return Matmul(self.main["a"], self.main["b"], out, expr, inputs)

    def build_pool2d(self, out, expr, inputs) -> Pool2D:
        m = self.main
        kind, expr, inputs = _averaged(m["pool"], expr, inputs, math.prod(m["kernel"]), "avg")
        self.summary = self.summary.replace("(sum pool2d)", f"({kind} pool2d)")
        return Pool2D(m["input"], out, kind, m["kernel"], m["stride"], m["dilation"], m["pads"],
                      count_include_pad=kind == "avg", epilogue=expr, epilogue_inputs=inputs)

    def build_reduce(self, out, expr, inputs) -> Reduce:
        m = self.main
        source, rank = m["input"], m["kept_rank"]
        kind, expr, inputs = _averaged(m["reduce"], expr, inputs, math.prod(source.shape[rank:]),
                                       "mean")
        self.summary = self.summary.replace("(sum reduction)", f"({kind} reduction)")
        (rows, row_stride), (columns, column_stride) = (
            _flattened(source, dims, m["name"])
            for dims in (range(rank), range(rank, len(source.shape))))
        matrix = _ref(source, (rows, columns), (row_stride, column_stride))

        def vector(ref: TensorRef) -> TensorRef:
            size, stride = _flattened(ref, range(rank), m["name"])
            return _ref(ref, (size,), (stride,))

        return Reduce(matrix, vector(out), kind, expr, [vector(ref) for ref in inputs])


# ---- helpers --------------------------------------------------------------------------

def _dispatch_tensor_type(type_) -> ir.ShapedType:
    text = str(type_)
    match = re.fullmatch(r"!iree_tensor_ext\.dispatch\.tensor<\w+:(.*)>", text)
    if not match:
        raise NotSupported(f"binding of type {text}")
    return ir.ShapedType(ir.Type.parse(match.group(1)))


def _index_constant(value) -> int:
    owner = value.owner.operation if isinstance(value, ir.OpResult) else None
    if owner is None or owner.name != "arith.constant":
        raise NotSupported("binding offset is not a constant")
    return ir.IntegerAttr(owner.attributes["value"]).value


def _kept_dims(sizes: list[int], shape) -> list[int]:
    """Which dims of a (possibly rank-reducing) slice the value keeps."""
    kept, j = [], 0
    for i, n in enumerate(sizes):
        if j < len(shape) and shape[j] == n and len(sizes) - i >= len(shape) - j:
            kept.append(i)
            j += 1
        elif n != 1:
            raise NotSupported(f"slice sizes {sizes} do not match the value shape {list(shape)}")
    return kept


def _constant(op):
    attribute = op.attributes["value"]
    if isinstance(attribute, ir.FloatAttr):
        return Scalar(attribute.value)
    if isinstance(attribute, ir.IntegerAttr):
        return Scalar(attribute.value)
    if isinstance(attribute, (ir.DenseFPElementsAttr, ir.DenseIntElementsAttr)):
        shape = tuple(ir.ShapedType(attribute.type).shape)
        dtype = str(ir.ShapedType(attribute.type).element_type)
        if attribute.is_splat:
            splat = np.array([attribute.get_splat_value().value])
            return View(TensorRef(dtype, shape, (0,) * len(shape), -1, 0, splat))
        try:
            data = np.array(attribute).reshape(shape)
        except TypeError:
            raise NotSupported(f"inlined {dtype} constant cannot be read") from None
        return View(TensorRef(dtype, shape, _row_major(shape), -1, 0, data))
    raise NotSupported(f"constant {str(attribute)[:60]} cannot be read")


def _index_arithmetic(op, array_of, extents: list[int]) -> np.ndarray | None:
    """The op's value at every loop position, if it is integer arithmetic on loop indices
    and constants (or converts such a value to float); else None."""
    if op.name == "linalg.index":
        loop = ir.IntegerAttr(op.attributes["dim"]).value
        shape = [1] * len(extents)
        shape[loop] = extents[loop]
        return np.arange(extents[loop]).reshape(shape)
    if op.name == "arith.constant" and isinstance(op.attributes["value"], ir.IntegerAttr):
        return np.array(ir.IntegerAttr(op.attributes["value"]).value)
    if op.name in INDEX_ARITHMETIC:
        args = [array_of(value) for value in op.operands]
        if all(arg is not None for arg in args):
            return INDEX_ARITHMETIC[op.name](*args)
    return None


def _splat(value) -> Scalar | None:
    """The value of a scalar, or of a tensor constant with a single value."""
    if isinstance(value, Scalar):
        return value
    constant = value.ref.constant if isinstance(value, View) else None
    if constant is not None and constant.size == 1:
        return Scalar(constant.reshape(-1)[0].item())
    return None


def _single_loop(term: tuple[dict[int, int], int]) -> int:
    """The loop a dim of an output or a computed value is indexed by."""
    coefficients, constant = term
    if len(coefficients) != 1 or list(coefficients.values()) != [1] or constant:
        raise NotSupported("an output or computed value is indexed by an expression, not a loop")
    return next(iter(coefficients))


def _loop_of(coefficients: dict[int, int], name: str) -> int:
    """The loop an input dim is indexed by (a constant offset is allowed)."""
    if len(coefficients) != 1 or list(coefficients.values()) != [1]:
        raise NotSupported(f"{name}: an input dim is indexed by {coefficients}, not by one loop")
    return next(iter(coefficients))


def _yielded_argument(generic: Generic) -> int | None:
    body = generic.body
    if len(body) == 1 and isinstance(body[0].operands[0], ir.BlockArgument):
        return body[0].operands[0].arg_number
    return None


def _reduction_body(generic: Generic) -> str:
    """"mac" (out + a*b), "sum" (out + x) or "max" (max(out, x)), x being the input
    that is not a window shape (tensor.empty)."""
    body = generic.body
    names = [op.name for op in body]
    conversions = sorted({name for name in names if name in CONVERSIONS})
    if conversions:
        raise NotSupported(f"{generic.name}: mixed-precision body ({', '.join(conversions)}); "
                           "an NPU op has one element type")
    *args, out = generic.op.regions[0].blocks[0].arguments
    data = [arg for arg, operand in zip(args, generic.inputs)
            if not isinstance(operand.value, Empty)]
    yielded = body[-1].operands[0]
    if names == ["arith.mulf", "arith.addf", "linalg.yield"] and len(data) == 2 and \
            _combines(body[0], *data) and _combines(body[1], out, body[0].results[0]) and \
            yielded == body[1].results[0]:
        return "mac"
    kind = {"arith.addf": "sum", "arith.maximumf": "max", "arith.maxnumf": "max"}.get(names[0])
    if len(names) == 2 and kind and len(data) == 1 and _combines(body[0], out, data[0]) and \
            yielded == body[0].results[0]:
        return kind
    raise NotSupported(f"{generic.name}: reduction body ({', '.join(names[:-1])}) "
                       "is not multiply-accumulate, sum or max of its inputs")


def _combines(op, *values) -> bool:
    """Whether the op's operands are exactly `values`, in any order."""
    operands = list(op.operands)
    return len(operands) == len(values) and all(
        sum(o == v for o in operands) == sum(w == v for w in values) for v in values)


def _loop_roles(generic: Generic, inputs: dict[str, Operand], skip=()) -> dict[int, tuple]:
    """For each loop: the operands indexing it and its iterator type."""
    roles = {}
    for loop, iterator in enumerate(generic.iterators):
        if loop in skip:
            continue
        users = tuple(k for k, operand in inputs.items() if loop in operand.loops())
        output = ("O",) if loop in generic.output.loops() else ()
        roles[loop] = users + output + (iterator,)
    return roles


def _one_loop_per_role(roles: dict[int, tuple], names: dict[tuple, str], op_name: str) -> dict:
    role = {name: None for name in names.values()}
    for loop, key in roles.items():
        name = names.get(key)
        if name is None:
            raise NotSupported(f"{op_name}: loop d{loop} ({' '.join(key)}) fits no role")
        if role[name] is not None:
            raise NotSupported(f"{op_name}: several loops act as {name}")
        role[name] = loop
    return role


def _window(coefficients: dict[int, int], generic: Generic) -> tuple[int, int, int, int]:
    """(output loop, stride, kernel loop, dilation) of a windowed index `s*o + d*k`."""
    if len(coefficients) != 2:
        raise NotSupported(f"{generic.name}: windowed index over {len(coefficients)} loops")
    (a, ca), (b, cb) = sorted(coefficients.items(), key=lambda kv: generic.iterators[kv[0]])
    if generic.iterators[a] != "parallel" or generic.iterators[b] != "reduction":
        raise NotSupported(f"{generic.name}: windowed index is not output + kernel position")
    if ca <= 0 or cb <= 0:
        raise NotSupported(f"{generic.name}: window with stride {ca} and dilation {cb}")
    return a, ca, b, cb


def _unwindowed(image: Operand, spatial) -> Operand:
    """The operand without its windowed dims (their strides are taken per dim)."""
    windowed = {t for t, _ in spatial}
    return Operand(image.value, [({} if t in windowed else c, k)
                                 for t, (c, k) in enumerate(image.terms)])


def _plain_view(operand: Operand, name: str) -> TensorRef:
    if not isinstance(operand.value, View):
        raise NotSupported(f"{name} reads a computed, padded or undefined tensor")
    return operand.value.ref


def _column_major(ref: TensorRef) -> bool:
    """Whether a (B, rows, columns) matrix is stored transposed."""
    return min(ref.shape[1:]) > 1 and ref.strides[1] == 1 and ref.strides[2] != 1


def _label(name: str, kind: str) -> str:
    return f"{name} ({kind})" if name == "linalg.generic" else name


def _window_text(main: dict) -> str:
    text = ""
    for key in ("stride", "dilation"):
        a, b = main[key]
        if key == "stride" or (a, b) != (1, 1):
            text += f" {key}={a}" if a == b else f" {key}={a}x{b}"
    if any(main["pads"]):
        text += " pads=" + ",".join(map(str, main["pads"]))
    if main.get("groups", 1) > 1:
        text += f" groups={main['groups']}"
    return text


def _pruned(nodes: list, inputs: list[TensorRef]) -> tuple[list, list[TensorRef]]:
    """The nodes the last one depends on, renumbered, and the inputs they read."""
    keep, stack = set(), [len(nodes) - 1]
    while stack:
        index = stack.pop()
        if index not in keep:
            keep.add(index)
            if nodes[index][0] not in LEAVES:
                stack.extend(nodes[index][1])
    order = sorted(keep)
    renumber = {old: new for new, old in enumerate(order)}
    used_inputs = sorted({nodes[i][1] for i in order if nodes[i][0] == "input"})
    input_index = {old: new for new, old in enumerate(used_inputs)}
    expr = []
    for i in order:
        node = nodes[i]
        if node[0] == "input":
            expr.append(("input", input_index[node[1]]))
        elif node[0] in ("acc", "const"):
            expr.append(node)
        else:
            expr.append((node[0], tuple(renumber[a] for a in node[1])) + tuple(node[2:]))
    return expr, [inputs[i] for i in used_inputs]


def _simplified(nodes: list) -> list:
    """Names the activation patterns the vector unit has instructions for:
    max(x, 0) -> relu(x); min(max(x, lo), hi) and max(min(x, hi), lo) -> clamp(x, lo, hi);
    1 / (exp(-x) + 1) -> sigmoid(x); relu(x) + min(x, 0) * a -> leakyrelu(x, a).
    Nodes that become dead are left for _pruned."""
    nodes = list(nodes)

    def const(i):
        return nodes[i][1] if nodes[i][0] == "const" else None

    def split(i, kind):
        """(x, c) if node i is kind(x, const c) in either order, else (None, None)."""
        if nodes[i][0] != kind:
            return None, None
        a, b = nodes[i][1]
        if const(b) is not None:
            return a, const(b)
        return (b, const(a)) if const(a) is not None else (None, None)

    def bounded(i, kind):
        """(x, bound) if node i bounds x below (kind max, or relu) or above (kind min)."""
        if kind == "max" and nodes[i][0] == "relu":
            return nodes[i][1][0], 0.0
        return split(i, kind)

    for i, node in enumerate(nodes):
        kind = node[0]
        for outer, inner in (("min", "max"), ("max", "min")):
            y, bound = split(i, outer)
            if y is not None:
                x, other = bounded(y, inner)
                if x is not None:
                    lo, hi = (other, bound) if outer == "min" else (bound, other)
                    nodes[i] = ("clamp", (x,), lo, hi)
        x, c = split(i, "max")
        if x is not None and c == 0.0:
            nodes[i] = ("relu", (x,))
        if kind == "div" and const(node[1][0]) == 1.0:
            e, one = split(node[1][1], "add")
            if one == 1.0 and nodes[e][0] == "exp" and nodes[nodes[e][1][0]][0] == "neg":
                nodes[i] = ("sigmoid", (nodes[nodes[e][1][0]][1][0],))
        if kind == "add":
            for r, m in (node[1], node[1][::-1]):
                low, alpha = split(m, "mul")
                if nodes[r][0] == "relu" and low is not None:
                    x, zero = split(low, "min")
                    if zero == 0.0 and x == nodes[r][1][0]:
                        nodes[i] = ("leakyrelu", (x,), alpha)
    return nodes


def _averaged(kind: str, expr: list, inputs: list, count: int, average: str):
    """A sum whose only use is a division by the count it summed is an average.
    Returns (kind, expr, inputs) with kind "max", "sum" or `average`."""
    if kind != "sum":
        return kind, expr, inputs
    users = [i for i, node in enumerate(expr) if node[0] not in LEAVES and 0 in node[1]]
    if expr[0] == ("acc",) and len(users) == 1 and expr[users[0]][0] == "div":
        dividend, divisor = expr[users[0]][1]
        if dividend == 0 and expr[divisor] == ("const", float(count)):
            rewritten = [("acc",) if i == users[0] else node for i, node in enumerate(expr)]
            return (average,) + _pruned(rewritten, inputs)
    return kind, expr, inputs


def _flattened(ref: TensorRef, dims, name: str) -> tuple[int, int]:
    """(size, stride) of the given consecutive dims of `ref` seen as one dim."""
    size, stride = 1, 0
    for d in reversed(list(dims)):
        if ref.shape[d] == 1:
            continue
        if size > 1 and ref.strides[d] != stride * size:
            raise NotSupported(f"{name}: reduction operand dims cannot be flattened")
        if size == 1:
            stride = ref.strides[d]
        size *= ref.shape[d]
    return size, stride
