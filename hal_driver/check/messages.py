"""The texts of failed checks, as IREE's check module words them through googletest
(runtime/src/iree/modules/check/module.cc; gtest's EXPECT_TRUE/EXPECT_THAT wording).

    Value of: operand
      Actual: false
    Expected: true
    Expected 0 to be nonzero.

    Expected near equality of these values. Contents does not match to tolerance
    parameters atol=0.0001, rtol=0. The first failure occurs at index 0 as the lhs value
    1 differs from the rhs value 0.999 by -1.000e-03.
      lhs:
        5xf32=1 2 3 4 5
      rhs:
        5xf32=0.999 2 3 4 5

Numbers are printed as C++ streams print them: `%g` with 6 digits, `-nan` for a negative
NaN; the difference with `%.3e`. Operands are printed as iree_hal_buffer_view_format
does, at most 1024 elements.
"""
import math

import numpy as np

from hal_driver.device.buffer_view import BufferView
from hal_driver.tools.buffer_view_text import HostTensor, format_tensor

MAX_ELEMENT_COUNT = 1024      # BufferViewToString's limit
GTEST_MAX_PRINTED = 32        # gtest prints at most this many container elements


def cxx_number(value: float) -> str:
    """`os << value` with the stream defaults (precision 6, general format)."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return f"{value:g}"


def cxx_scientific(value: float) -> str:
    """`os << std::scientific << std::setprecision(3) << value`."""
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    return f"{value:.3e}"


def expect_true(operand: int) -> str:
    return f"Value of: operand\n  Actual: false\nExpected: true\nExpected {operand} to be nonzero."


def expect_false(operand: int) -> str:
    return f"Value of: operand\n  Actual: true\nExpected: false\nExpected {operand} to be zero."


def expect_all_true(values: np.ndarray, index: int) -> str:
    """EXPECT_THAT(ToSpan<T>(bytes), Each(Not(T(0)))) failing at element `index`."""
    return ("Value of: ToSpan<T>(bytes)\n"
            "Expected: only contains elements that isn't equal to 0\n"
            f"  Actual: {_gtest_container(values)}, whose element #{index} doesn't match")


def expect_eq(problems: list[str], lhs: BufferView, rhs: BufferView) -> str:
    return _with_operands("Expected equality of these values.", problems, lhs, rhs)


def expect_almost_eq(problems: list[str], lhs: BufferView, rhs: BufferView) -> str:
    return _with_operands("Expected near equality of these values.", problems, lhs, rhs)


def tolerance_mismatch(atol: float, rtol: float, index: int, lhs_value: float,
                       rhs_value: float) -> str:
    return (f"Contents does not match to tolerance parameters atol={cxx_number(atol)}, "
            f"rtol={cxx_number(rtol)}. The first failure occurs at index {index} as the lhs "
            f"value {cxx_number(lhs_value)} differs from the rhs value {cxx_number(rhs_value)} "
            f"by {cxx_scientific(rhs_value - lhs_value)}.")


def buffer_view_text(view: BufferView) -> str:
    """iree_hal_buffer_view_format with BufferViewToString's element limit."""
    return format_tensor(HostTensor(view.to_numpy(), view.element_type), MAX_ELEMENT_COUNT)


def _with_operands(what: str, problems: list[str], lhs: BufferView, rhs: BufferView) -> str:
    return (f"{' '.join([what] + problems)}\n"
            f"  lhs:\n    {buffer_view_text(lhs)}\n"
            f"  rhs:\n    {buffer_view_text(rhs)}")


def _gtest_container(values: np.ndarray) -> str:
    """gtest's container printing: `{ 1, 0 }`, cut after 32 elements with `...`."""
    shown = [_gtest_element(v) for v in values[:GTEST_MAX_PRINTED]]
    if len(values) > GTEST_MAX_PRINTED:
        shown.append("...")
    return "{ " + ", ".join(shown) + " }" if shown else "{}"


def _gtest_element(value) -> str:
    if isinstance(value, np.floating):
        return _gtest_float(value)
    return str(int(value))


def _gtest_float(value: np.floating) -> str:
    """The shortest of 6 significant digits (digits10) or the round-trip width that reads
    back as the same value (gtest's AppropriateResolution)."""
    short = f"{float(value):.{np.finfo(value.dtype).precision}g}"
    if type(value)(short) == value or np.isnan(value):
        return short
    return f"{float(value):.{17 if value.dtype == np.float64 else 9}g}"
