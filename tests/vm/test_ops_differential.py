"""Every scalar opcode, differentially: one exported function per op, run on our VM
and on iree.runtime with the same inputs; results must be bit-identical."""
import math
import random
import struct

import pytest

from hal_driver.vm import BytecodeModule, VmContext

from .conftest import IreeRunner

# (mnemonic, argument types, result type); types: i=i32 I=i64 f=f32 F=f64.
_INT_BINARY = ["add", "sub", "mul", "div.{}.s", "div.{}.u", "rem.{}.s", "rem.{}.u", "min.{}.s",
               "min.{}.u", "max.{}.s", "max.{}.u", "and", "or", "xor"]
_FLOAT_BINARY = ["add", "sub", "mul", "div", "rem", "min", "max", "atan2", "pow"]
_FLOAT_UNARY = ["abs", "neg", "ceil", "floor", "round", "round.{}.even", "atan", "cos", "sin", "exp",
                "exp2", "expm1", "log", "log10", "log1p", "log2", "rsqrt", "sqrt", "tanh", "erf"]
_FLOAT_CMP = ["cmp.eq.{}.o", "cmp.eq.{}.u", "cmp.ne.{}.o", "cmp.ne.{}.u", "cmp.lt.{}.o",
              "cmp.lt.{}.u", "cmp.lte.{}.o", "cmp.lte.{}.u"]


def _name(template: str, width: str) -> str:
    return template.format(width) if "{}" in template else f"{template}.{width}"


def _ops():
    ops = []
    for width, t in (("i32", "i"), ("i64", "I")):
        ops += [(_name(o, width), t + t, t) for o in _INT_BINARY]
        ops += [(f"fma.{width}", t * 3, t), (f"abs.{width}", t, t), (f"not.{width}", t, t),
                (f"ctlz.{width}", t, t), (f"cmp.nz.{width}", t, "i")]
        ops += [(f"{o}.{width}", t + "i", t) for o in ("shl",)] + \
               [(f"shr.{width}.{s}", t + "i", t) for s in "su"]
        ops += [(f"cmp.{c}.{width}", t + t, "i") for c in ("eq", "ne", "lt.{}.s", "lt.{}.u")
                if "{}" not in c] + [(f"cmp.lt.{width}.{s}", t + t, "i") for s in "su"]
    for width, t in (("f32", "f"), ("f64", "F")):
        ops += [(_name(o, width), t + t, t) for o in _FLOAT_BINARY]
        ops += [(_name(o, width), t, t) for o in _FLOAT_UNARY]
        ops += [(f"fma.{width}", t * 3, t)]
        ops += [(o.format(width), t + t, "i") for o in _FLOAT_CMP] + [(f"cmp.nan.{width}", t, "i")]
        # The VM dialect has no si32/ui32 <-> f64 cast ops (the opcodes exist).
        sources = (("si32", "i"), ("ui32", "i"), ("si64", "I"), ("ui64", "I")) if width == "f32" \
            else (("si64", "I"), ("ui64", "I"))
        for src, st in sources:
            ops += [(f"cast.{src}.{width}", st, t), (f"cast.{width}.{src}", t, st)]
    ops += [("trunc.i32.i8", "i", "i"), ("trunc.i32.i16", "i", "i"), ("trunc.i64.i32", "I", "i"),
            ("ext.i8.i32.s", "i", "i"), ("ext.i8.i32.u", "i", "i"), ("ext.i16.i32.s", "i", "i"),
            ("ext.i16.i32.u", "i", "i"), ("ext.i32.i64.s", "i", "I"), ("ext.i32.i64.u", "i", "I"),
            ("bitcast.i32.f32", "i", "f"), ("bitcast.f32.i32", "f", "i"),
            ("bitcast.i64.f64", "I", "F"), ("bitcast.f64.i64", "F", "I"),
            ("trunc.f64.f32", "F", "f"), ("ext.f32.f64", "f", "F")]
    return ops


OPS = _ops()
_MLIR_TYPES = {"i": "i32", "I": "i64", "f": "f32", "F": "f64"}


def _function(index: int, mnemonic: str, args: str, result: str) -> str:
    params = ", ".join(f"%a{i}: {_MLIR_TYPES[t]}" for i, t in enumerate(args))
    operands = ", ".join(f"%a{i}" for i in range(len(args)))
    if args[0] != result or mnemonic.startswith(("cmp.", "trunc.", "ext.", "cast.", "bitcast.")):
        if mnemonic.startswith("cmp."):
            suffix = f"{_MLIR_TYPES[args[0]]}"
        else:
            suffix = f"{_MLIR_TYPES[args[0]]} -> {_MLIR_TYPES[result]}"
    else:
        suffix = _MLIR_TYPES[result]
    return (f"  vm.export @op{index}\n"
            f"  vm.func @op{index}({params}) -> {_MLIR_TYPES[result]} {{\n"
            f"    %r = vm.{mnemonic} {operands} : {suffix}\n"
            f"    vm.return %r : {_MLIR_TYPES[result]}\n  }}\n")


def _module_source() -> str:
    body = "".join(_function(i, *op) for i, op in enumerate(OPS))
    return "vm.module @ops {\n" + body + "}\n"


_SPECIAL_I32 = [0, 1, -1, 2, 7, -7, 31, 32, 0x7FFFFFFF, -0x80000000, 0x12345678, 255, 256, -129]
_SPECIAL_I64 = [0, 1, -1, 3, 63, 64, (1 << 63) - 1, -(1 << 63), 0x123456789ABCDEF, 1 << 32, -(1 << 40)]
_SPECIAL_F = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.7, -3.7, 1e10, -1e-10, 0.1,
              math.inf, -math.inf, math.nan, 3.4e38, 1e-45, 123456.789, 2.0 ** 31, -(2.0 ** 31) - 1.0,
              2.0 ** 63, 2.0 ** 64]


def _to_f32(x: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _inputs(args: str, rng: random.Random, count: int):
    def pick(t):
        if t == "i":
            return rng.choice(_SPECIAL_I32) if rng.random() < 0.5 else rng.randrange(-2 ** 31, 2 ** 31)
        if t == "I":
            return rng.choice(_SPECIAL_I64) if rng.random() < 0.5 else rng.randrange(-2 ** 63, 2 ** 63)
        value = rng.choice(_SPECIAL_F) if rng.random() < 0.5 else rng.uniform(-100, 100)
        return _to_f32(value) if t == "f" else value
    return [[pick(t) for t in args] for _ in range(count)]


def _bits(value, kind: str):
    if kind == "f":
        return struct.pack("<f", value)
    if kind == "F":
        return struct.pack("<d", value)
    return value


def _same(a, b, kind: str) -> bool:
    if kind in "fF" and math.isnan(a) and math.isnan(b):
        return True  # NaN payloads are not compared
    return _bits(a, kind) == _bits(b, kind)


@pytest.fixture(scope="module")
def ops_module(compile_mlir):
    return compile_mlir(_module_source())


def test_every_scalar_opcode_matches_iree_runtime(ops_module):
    iree = IreeRunner(ops_module)
    module = BytecodeModule.from_file(ops_module)
    context = VmContext([module])
    rng = random.Random(1234)
    mismatches = []
    for index, (mnemonic, args, result) in enumerate(OPS):
        function = context.lookup_function(f"ops.op{index}")
        for inputs in _inputs(args, rng, 24):
            if mnemonic.startswith(("div.i", "rem.i")) and (inputs[1] == 0 or (
                    mnemonic.endswith(".s") and inputs[1] == -1)):
                continue  # undefined behaviour in C (SIGFPE)
            expected = iree(f"op{index}", inputs, args)[0]
            actual = context.invoke(function, inputs)[0]
            if not _same(actual, expected, result):
                mismatches.append((mnemonic, inputs, actual, expected))
    assert not mismatches, f"{len(mismatches)} mismatches, e.g. {mismatches[:10]}"


def test_integer_division_by_zero_is_a_status_error(ops_module):
    from hal_driver.status import StatusCode, StatusError
    module = BytecodeModule.from_file(ops_module)
    context = VmContext([module])
    index = OPS.index(("div.i32.s", "ii", "i"))
    with pytest.raises(StatusError) as error:
        context.invoke(context.lookup_function(f"ops.op{index}"), [1, 0])
    assert error.value.code == StatusCode.INVALID_ARGUMENT
    assert f"ops.op{index}+" in str(error.value)
