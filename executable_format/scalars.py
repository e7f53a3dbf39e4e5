"""Scalar values as instruction fields hold them: the bit pattern of a dtype in a u32.

`fill` stores its value as the dtype's bit pattern in the low bits (f16/bf16 in 16 bits,
i8 in 8, two's complement; u8 in 8); f32 parameters (p0, p1, scale) are f32 bits.
"""
import math

import numpy as np

from .errors import FormatError
from .isa import DTYPE_BYTES, DTYPE_NAMES, DType, bits_f32, f32_bits


def encode_value(dtype: DType, value: int | float) -> int:
    """The bit pattern of `value` in `dtype` (floats round to nearest even; a finite value
    beyond the dtype's range is a FormatError)."""
    if dtype in (DType.F32, DType.F16, DType.BF16):
        bits = _encode_float(dtype, value)
        if math.isfinite(value) and math.isinf(decode_value(dtype, bits)):
            raise FormatError(f"value {value} overflows {DTYPE_NAMES[dtype]}")
        return bits
    low, high = _int_range(dtype)
    if value != int(value) or not low <= value <= high:
        raise FormatError(f"value {value} does not fit {DTYPE_NAMES[dtype]}")
    return int(value) & ((1 << (8 * DTYPE_BYTES[dtype])) - 1)


def _encode_float(dtype: DType, value: float) -> int:
    with np.errstate(over="ignore"):
        if dtype == DType.F32:
            return f32_bits(value)
        if dtype == DType.F16:
            return int(np.array(value, dtype=np.float16).view(np.uint16))
        return _f32_bits_to_bf16(f32_bits(value))


def decode_value(dtype: DType, bits: int) -> int | float:
    """The number whose bit pattern in `dtype` is `bits` (the inverse of encode_value)."""
    if dtype == DType.F32:
        return bits_f32(bits)
    if dtype == DType.F16:
        return float(np.array(bits, dtype=np.uint16).view(np.float16))
    if dtype == DType.BF16:
        return bits_f32(bits << 16)
    width = 8 * DTYPE_BYTES[dtype]
    if dtype == DType.U8:
        return bits
    return bits - (1 << width) if bits >> (width - 1) else bits


def format_float(dtype: DType, bits: int) -> str | None:
    """Shortest text that parses back to exactly `bits`, or None for NaN (no text keeps
    its payload)."""
    value = decode_value(dtype, bits)
    if math.isnan(value):
        return None
    numpy_type = np.float16 if dtype == DType.F16 else np.float32
    return str(numpy_type(value))


def _f32_bits_to_bf16(bits: int) -> int:
    if (bits & 0x7FFFFFFF) > 0x7F800000:                      # NaN: keep it quiet
        return (bits >> 16) | 0x40
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def _int_range(dtype: DType) -> tuple[int, int]:
    width = 8 * DTYPE_BYTES[dtype]
    if dtype == DType.U8:
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << width) - 1
