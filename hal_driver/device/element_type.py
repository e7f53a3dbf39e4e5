"""HAL element types (iree/hal/buffer_view.h): values, names, numpy dtypes."""
import re

import ml_dtypes
import numpy as np

from hal_driver.status import StatusCode, StatusError

# numerical type (high byte) -> name prefix, as iree_hal_format_element_type prints them.
_PREFIXES = {0x10: "i", 0x11: "si", 0x12: "ui", 0x13: "i", 0x21: "f", 0x22: "bf", 0x23: "cf"}
_SPECIAL = {0x24000008: "f8E5M2", 0x25000008: "f8E4M3FN", 0x26000008: "f8E5M2FNUZ",
            0x27000008: "f8E4M3FNUZ", 0x28000008: "f8E8M0FNU"}
BOOL_8 = 0x13000008
OPAQUE_MASK = 0xFF000000

_DTYPES = {
    0x10000008: np.int8, 0x11000008: np.int8, 0x12000008: np.uint8,
    0x10000010: np.int16, 0x11000010: np.int16, 0x12000010: np.uint16,
    0x10000020: np.int32, 0x11000020: np.int32, 0x12000020: np.uint32,
    0x10000040: np.int64, 0x11000040: np.int64, 0x12000040: np.uint64,
    0x21000010: np.float16, 0x21000020: np.float32, 0x21000040: np.float64,
    0x23000040: np.complex64, 0x23000080: np.complex128, BOOL_8: np.bool_,
    # numpy has no bfloat16 or fp8: ml_dtypes' types, as iree.runtime uses
    0x22000010: ml_dtypes.bfloat16, 0x24000008: ml_dtypes.float8_e5m2,
    0x25000008: ml_dtypes.float8_e4m3fn, 0x26000008: ml_dtypes.float8_e5m2fnuz,
    0x27000008: ml_dtypes.float8_e4m3fnuz, 0x28000008: ml_dtypes.float8_e8m0fnu,
}
_DTYPE_OBJECTS = {value: np.dtype(dtype) for value, dtype in _DTYPES.items()}  # to_dtype's
_FROM_DTYPE = {np.dtype(np.int8): 0x11000008, np.dtype(np.uint8): 0x12000008,
               np.dtype(np.int16): 0x11000010, np.dtype(np.uint16): 0x12000010,
               np.dtype(np.int32): 0x11000020, np.dtype(np.uint32): 0x12000020,
               np.dtype(np.int64): 0x11000040, np.dtype(np.uint64): 0x12000040,
               np.dtype(np.float16): 0x21000010, np.dtype(np.float32): 0x21000020,
               np.dtype(np.float64): 0x21000040, np.dtype(np.complex64): 0x23000040,
               np.dtype(np.complex128): 0x23000080, np.dtype(np.bool_): BOOL_8,
               **{np.dtype(dtype): value for value, dtype in _DTYPES.items()
                  if value >> 24 in (0x22, 0x24, 0x25, 0x26, 0x27, 0x28)}}


def numerical_type(element_type: int) -> int:
    return (element_type >> 24) & 0xFF


def bit_count(element_type: int) -> int:
    return element_type & 0xFF


def byte_size(element_type: int) -> int:
    return (bit_count(element_type) + 7) // 8


def is_opaque(element_type: int) -> bool:
    return numerical_type(element_type) == 0


def is_integer(element_type: int) -> bool:
    return numerical_type(element_type) in (0x10, 0x11, 0x12, 0x13)


def name(element_type: int) -> str:
    """`f32`, `i32`, `si8`, `i1` (bool), `bf16`... (iree_hal_format_element_type)."""
    if element_type in _SPECIAL:
        return _SPECIAL[element_type]
    prefix = _PREFIXES.get(numerical_type(element_type), "*")
    bits = 1 if element_type == BOOL_8 else bit_count(element_type)
    return f"{prefix}{bits}"


def parse(text: str) -> int:
    """The element type named `text` (`f32`, `i8`, `ui16`, `i1`...)."""
    for value, special in _SPECIAL.items():
        if text == special:
            return value
    match = re.fullmatch(r"(i|si|ui|f|bf|cf|\*)(\d+)", text)
    if not match:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"unsupported element type '{text}'")
    prefix, bits = match.group(1), int(match.group(2))
    if prefix == "i" and bits == 1:
        return BOOL_8
    numerical = {"i": 0x10, "si": 0x11, "ui": 0x12, "f": 0x21, "bf": 0x22, "cf": 0x23, "*": 0}[prefix]
    return (numerical << 24) | bits


def to_dtype(element_type: int) -> np.dtype:
    dtype = _DTYPE_OBJECTS.get(element_type)
    if dtype is not None:
        return dtype
    if is_opaque(element_type) and bit_count(element_type) in (8, 16, 32, 64):
        return np.dtype(f"V{bit_count(element_type) // 8}")
    raise StatusError(StatusCode.UNIMPLEMENTED,
                      f"element type {name(element_type)} has no numpy equivalent")


def from_dtype(dtype, signless: bool = True) -> int:
    """The element type for a numpy dtype; signless integers (`i32`) by default."""
    dtype = np.dtype(dtype)
    if dtype not in _FROM_DTYPE:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"unsupported numpy dtype {dtype}")
    value = _FROM_DTYPE[dtype]
    if signless and numerical_type(value) == 0x11:
        value = (0x10 << 24) | bit_count(value)
    return value


def compatible(actual: int, expected: int) -> bool:
    """iree_hal_element_types_are_compatible: opaque matches anything; integers of
    the same width match regardless of signedness."""
    if is_opaque(actual):
        return True
    if is_integer(actual) and is_integer(expected) and bit_count(actual) == bit_count(expected):
        return True
    return actual == expected
