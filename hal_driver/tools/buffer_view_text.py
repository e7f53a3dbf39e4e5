"""IREE's text form of tensors: `2x3xf32=[1 2 3][4 5 6]` (iree/hal/string_util.c).

`parse_tensor` reads a `--input=`-style spec into a `HostTensor`; `format_tensor`
prints one the way iree-run-module does (`%G` floats, brackets per outer dimension,
`...` past the element limit).
"""
import re
from dataclasses import dataclass

import numpy as np

from hal_driver.device import element_type as et
from hal_driver.status import StatusCode, StatusError

_SEPARATORS = re.compile(r"[\s,\[\]]+")
_MAX_DIM = (1 << 63) - 1               # iree_hal_dim_t is int64_t
_MAX_DEVICE_SIZE = (1 << 64) - 1       # iree_device_size_t


@dataclass
class HostTensor:
    """A tensor in host memory with its HAL element type (numpy loses signlessness)."""
    array: np.ndarray
    element_type: int

    def describe(self) -> str:
        return "x".join([str(d) for d in self.array.shape] + [et.name(self.element_type)])


def parse_shape_and_type(text: str) -> tuple[tuple[int, ...], int]:
    """`2x3xf32` -> ((2, 3), f32); `f32` -> ((), f32)."""
    *dims, type_name = text.split("x")
    for i, d in enumerate(dims):
        if not re.fullmatch(r"[0-9]+", d) or int(d) > _MAX_DIM:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"shape[{i}] invalid value '{d}' of '{'x'.join(dims)}'")
    return tuple(int(d) for d in dims), et.parse(type_name)


def element_count(shape: tuple[int, ...], element_bytes: int) -> int:
    """The elements of `shape`, checked as iree_hal_buffer_compute_view_size does: the
    element count and the byte count must fit the 64-bit device size."""
    count = 1
    for i, d in enumerate(shape):
        count *= d
        if count > _MAX_DEVICE_SIZE:
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"shape element count overflows device size at dimension {i}")
    if count * element_bytes > _MAX_DEVICE_SIZE:
        raise StatusError(StatusCode.OUT_OF_RANGE, "packed byte count overflows device size")
    return count


def parse_elements(text: str, element_type: int, count: int) -> np.ndarray:
    """Whitespace/comma/bracket separated values; one value splats; none is zeros."""
    dtype = et.to_dtype(element_type)
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if not tokens:
        return np.zeros(count, dtype)
    if element_type == et.BOOL_8:   # not a number type: hex bytes, as string_util.c reads it
        values = np.array([_parse_hex_byte(t) for t in tokens[:count]], np.uint8).view(dtype)
    else:
        values = np.array([_parse_element(t, element_type, dtype) for t in tokens[:count]],
                          dtype=dtype)
    if len(tokens) > count:
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"output data overflow: element_capacity={count} < dst_i={count}")
    if 1 < len(tokens) < count:
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"input data string underflow: dst_i={len(tokens)} < "
                          f"element_capacity={count}")
    return np.resize(values, count) if len(tokens) == 1 else values


def _parse_hex_byte(token: str) -> int:
    """Two hex digits; any other character reads as 0 (iree_hal_hex_string_to_bytes)."""
    if len(token) != 2:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"binary hex element count mismatch: buffer length={len(token)} < "
                          f"expected=2")
    nibbles = [int(c, 16) if c in "0123456789abcdefABCDEF" else 0 for c in token]
    return nibbles[0] << 4 | nibbles[1]


def _parse_element(token: str, element_type: int, dtype: np.dtype):
    try:
        if dtype.kind in "f":
            return float(token)
        value = int(token, 0)
    except ValueError:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"failed to parse `{token}` as {et.name(element_type)}") from None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"value `{token}` out of range for {et.name(element_type)}")
    return value


def parse_tensor(spec: str) -> HostTensor:
    """`[shape x]type=values`; the values part may be `@file.bin` (raw contents)."""
    if "=" not in spec:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"expected `[shape]xtype=[value]` but have `{spec}`")
    meta, data = spec.split("=", 1)
    shape, element_type = parse_shape_and_type(meta.strip())
    dtype = et.to_dtype(element_type)
    count = element_count(shape, dtype.itemsize)
    data = data.strip()
    try:
        if data.startswith("@"):
            array = _read_binary(data[1:], dtype, count)
        else:
            array = parse_elements(data, element_type, count)
    except MemoryError:
        raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                          f"out of host memory allocating {count * dtype.itemsize} bytes for a "
                          f"{meta.strip()} tensor") from None
    return HostTensor(array.reshape(shape), element_type)


def _read_binary(path: str, dtype: np.dtype, count: int) -> np.ndarray:
    try:
        raw = open(path, "rb").read()
    except OSError as error:
        raise StatusError(StatusCode.NOT_FOUND,
                          f"failed to open file '{path}': {error.strerror}") from None
    needed = count * dtype.itemsize
    if len(raw) < needed:
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"file '{path}' has {len(raw)} bytes but the tensor needs {needed}")
    return np.frombuffer(raw[:needed], dtype=dtype).copy()


# numerical types iree_hal_format_element prints with %G: f16/f32/f64, bf16, the f8 types
_FLOAT_NUMERICAL_TYPES = (0x21, 0x22, 0x24, 0x25, 0x26, 0x27, 0x28)


def format_element(value, element_type: int) -> str:
    """iree_hal_format_element: floats `%G`, integers in decimal, any other type (i1,
    complex, opaque) as its bytes in hex."""
    if et.numerical_type(element_type) in _FLOAT_NUMERICAL_TYPES:
        return "%G" % float(value)
    if et.numerical_type(element_type) in (0x10, 0x11, 0x12):
        return str(int(value))
    return np.asarray(value).tobytes().hex().upper()


def format_tensor(tensor: HostTensor, max_element_count: int = 1024) -> str:
    """`2x3xf32=[2 6 12][20 30 42]` (iree_hal_buffer_view_format)."""
    budget = [max_element_count]
    flat = tensor.array.reshape(tensor.array.shape or (1,))
    if tensor.element_type == et.BOOL_8:
        flat = flat.view(np.uint8)    # the stored bytes, not numpy's True/False
    body = _format_rows(flat, tensor.element_type, budget)
    return f"{tensor.describe()}={body}"


def _format_rows(array: np.ndarray, element_type: int, budget: list[int]) -> str:
    if array.ndim > 1:
        return "".join(f"[{_format_rows(row, element_type, budget)}]" for row in array)
    shown = min(budget[0], len(array))
    budget[0] -= shown
    text = " ".join(format_element(v, element_type) for v in array[:shown])
    return text + ("..." if shown < len(array) else "")
