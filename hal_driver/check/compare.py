"""The comparisons of IREE's check module (runtime/src/iree/modules/check/module.cc) over
npu-sim buffer views: which element types each check accepts and where contents differ.

  equal_contents     expect_eq: the views' bytes, whatever the element type
  first_zero         expect_all_true: integer (8-64 bit, any signedness), f32, f64
  first_mismatch     expect_almost_eq: f16, bf16, f32, f64 and the five f8 types, each
                     loaded as IREE loads it, compared by iree_math_fuzzy_compare_f64

An element type a check does not accept is INVALID_ARGUMENT `unsupported element type
i1`, as in IREE; the call fails (a recorded failure is for contents, shapes and types).
"""
import numpy as np

from hal_driver.device import element_type as et
from hal_driver.device.buffer_view import BufferView
from hal_driver.status import StatusCode, StatusError

# expect_all_true reads these as integers or floats and tests each element against 0.
ALL_TRUE_TYPES = frozenset({
    0x10000008, 0x11000008, 0x12000008, 0x10000010, 0x11000010, 0x12000010,
    0x10000020, 0x11000020, 0x12000020, 0x10000040, 0x11000040, 0x12000040,
    0x21000020, 0x21000040})
# expect_almost_eq loads these to float (f64 to double) before comparing in double.
ALMOST_EQ_TYPES = frozenset({
    0x21000010, 0x22000010, 0x21000020, 0x21000040,
    0x24000008, 0x25000008, 0x26000008, 0x27000008, 0x28000008})


def contents(view: BufferView) -> bytes:
    """The view's bytes (iree_hal_buffer_view_byte_length from the buffer's start)."""
    return view.buffer.read(0, view.byte_length)


def elements(view: BufferView) -> np.ndarray:
    """The view's elements, flat, in their numpy dtype."""
    return np.frombuffer(contents(view), dtype=et.to_dtype(view.element_type))


def require_type(view: BufferView, accepted: frozenset) -> None:
    if view.element_type not in accepted:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"unsupported element type {et.name(view.element_type)}")


def equal_contents(lhs: BufferView, rhs: BufferView) -> bool:
    """EqByteSpan: same byte length and same bytes."""
    return contents(lhs) == contents(rhs)


def first_zero(view: BufferView) -> int | None:
    """The index of the first element equal to 0 (-0.0 included), or None."""
    require_type(view, ALL_TRUE_TYPES)
    zeros = np.flatnonzero(elements(view) == 0)
    return int(zeros[0]) if len(zeros) else None


def as_double(view: BufferView) -> np.ndarray:
    """The elements as IREE's FloatTypeInfo loads them, widened to double."""
    require_type(view, ALMOST_EQ_TYPES)
    return elements(view).astype(np.float64)


def fuzzy_equal(actual: np.ndarray, expected: np.ndarray, atol: float,
                rtol: float) -> np.ndarray:
    """iree_math_fuzzy_compare_f64 elementwise: equal, both NaN, or a finite expected
    value with |actual - expected| <= atol + rtol * |expected| (in double)."""
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(actual - expected) <= atol + rtol * np.abs(expected)
        return ((actual == expected) | (np.isnan(actual) & np.isnan(expected))
                | (np.isfinite(expected) & near))


def first_mismatch(lhs: BufferView, rhs: BufferView, atol: float,
                   rtol: float) -> tuple[int, float, float] | None:
    """(index, lhs value, rhs value) of the first element pair not fuzzy-equal, or None.
    The rhs is the expected value. Shapes and element types must already match."""
    actual, expected = as_double(lhs), as_double(rhs)
    bad = np.flatnonzero(~fuzzy_equal(actual, expected, atol, rtol))
    if not len(bad):
        return None
    index = int(bad[0])
    return index, float(actual[index]), float(expected[index])
