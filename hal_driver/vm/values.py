"""Bit-exact scalar semantics of the VM's i32/i64/f32/f64 operations.

Integers are Python ints kept in signed two's-complement range of their width.
Floats are Python floats; f32 values are always exactly representable in f32
(rounded after every operation, no fused multiply-add). f32 math functions call the
C library's f32 routines (expf, sinf, ...) so results match IREE's runtime, which
uses the same libm. Float-to-int casts round half away from zero like IREE
(lroundf/llroundf), including its quirk of rounding f64 sources through f32.
"""
import ctypes
import ctypes.util
import math
import struct

_F32 = struct.Struct("<f")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_I64 = struct.Struct("<q")
_INF = math.inf
_DEFAULT_NAN = -math.nan  # x86's default NaN has the sign bit set


def wrap_int(value: int, bits: int) -> int:
    """Wraps `value` into the signed range of a `bits`-wide integer."""
    half = 1 << (bits - 1)
    return ((value + half) & ((half << 1) - 1)) - half


def i32(value: int) -> int:
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def i64(value: int) -> int:
    return ((value + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


def to_f32(value: float) -> float:
    """Rounds a Python float to the nearest f32 (ties to even; overflow to inf)."""
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except OverflowError:
        return _INF if value > 0 else -_INF


def bitcast_i32_f32(value: int) -> float:
    return _F32.unpack(_I32.pack(value))[0]


def bitcast_f32_i32(value: float) -> int:
    return _I32.unpack(_F32.pack(value))[0]


def bitcast_i64_f64(value: int) -> float:
    return _F64.unpack(_I64.pack(value))[0]


def bitcast_f64_i64(value: float) -> int:
    return _I64.unpack(_F64.pack(value))[0]


def _libm():
    return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _f32_function(libm, name: str, arity: int):
    fn = getattr(libm, name)
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float] * arity
    return fn


_LIBM = _libm()
F32_UNARY = {name: _f32_function(_LIBM, name + "f", 1)
             for name in ("atan", "cos", "sin", "exp", "exp2", "expm1", "log", "log10", "log1p",
                          "log2", "tanh", "erf", "sqrt", "round", "ceil", "floor")}
F32_BINARY = {name: _f32_function(_LIBM, name + "f", 2) for name in ("atan2", "pow", "remainder")}


def _double_function(name: str, arity: int):
    fn = getattr(_LIBM, name)
    fn.restype = ctypes.c_double
    fn.argtypes = [ctypes.c_double] * arity
    return fn


F64_UNARY = {name: _double_function(name, 1)
             for name in ("atan", "cos", "sin", "exp", "exp2", "expm1", "log", "log10", "log1p",
                          "log2", "tanh", "erf", "sqrt", "round", "ceil", "floor")}
F64_BINARY = {name: _double_function(name, 2) for name in ("atan2", "pow", "remainder")}


def round_even(x: float, round_fn) -> float:
    """IREE's vm.round.*.even: round() then step a .5 tie back to the even
    neighbour (so -0.5 gives +0.0, unlike C23 roundeven)."""
    rounded = round_fn(x)
    if abs(x - rounded) == 0.5 and math.fmod(rounded, 2.0) != 0:
        rounded = rounded - 1.0 if rounded > 0.0 else rounded + 1.0
    return rounded


def fdiv(a: float, b: float) -> float:
    """IEEE division (Python raises on a zero divisor)."""
    try:
        return a / b
    except ZeroDivisionError:
        if a != a:
            return a
        if a == 0:
            return _DEFAULT_NAN
        return math.copysign(_INF, a) * math.copysign(1.0, b)


def int_to_f32(value: int) -> float:
    """Correctly rounded int -> f32 (no double rounding through f64)."""
    if -(1 << 53) <= value <= (1 << 53):
        return to_f32(float(value))
    return _exact_int_to_f32(value)


def _exact_int_to_f32(value: int) -> float:
    sign = -1.0 if value < 0 else 1.0
    a = abs(value)
    shift = a.bit_length() - 24
    mantissa, rest = a >> shift, a & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and mantissa & 1):
        mantissa += 1
    return to_f32(sign * math.ldexp(mantissa, shift))


def _round_away(x: float) -> int:
    """Nearest integer to a finite x, ties away from zero (exact)."""
    a = abs(x)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1
    return -r if x < 0 else r


def _lround(x: float) -> int:
    """llround(): x86 returns INT64_MIN when the result does not fit (and for NaN)."""
    if math.isnan(x) or math.isinf(x):
        return -(1 << 63)
    r = _round_away(x)
    return r if -(1 << 63) <= r < (1 << 63) else -(1 << 63)


def cast_f32_si32(x: float) -> int:
    return i32(_lround(x))


def cast_f32_ui32(x: float) -> int:
    return i32(_lround(x))


def cast_f32_si64(x: float) -> int:
    return _lround(x)


def cast_f32_ui64(x: float) -> int:
    """(uint64_t)roundf(x): in-range values convert exactly, wrapping into i64."""
    if math.isnan(x) or math.isinf(x) or not -(2.0 ** 63) <= x < 2.0 ** 64:
        return -(1 << 63)
    return i64(_round_away(x))


def cast_f64_si32(x: float) -> int:
    return i32(_lround(to_f32(x)))


def cast_f64_ui32(x: float) -> int:
    return i32(_lround(to_f32(x)))


def cast_f64_si64(x: float) -> int:
    return _lround(x)


def cast_f64_ui64(x: float) -> int:
    return i64(_lround(x))


def ctlz(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return bits - x.bit_length()


def div_s(a: int, b: int, bits: int) -> int:
    """C truncating signed division (INT_MIN / -1 wraps)."""
    if b == 0:
        raise ZeroDivisionError
    q = abs(a) // abs(b)
    return wrap_int(q if (a < 0) == (b < 0) else -q, bits)


def rem_s(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError
    r = abs(a) % abs(b)
    return -r if a < 0 else r
