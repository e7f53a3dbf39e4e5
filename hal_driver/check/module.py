"""The `check` native module: the imports the 3.13 compiler emits for IREE's e2e op
tests (runtime/src/iree/modules/check/module.cc), over npu-sim buffer views.

  expect_true(i32)  expect_false(i32)             "0i_v"
  expect_all_true(device, view)                   "0rr_v"
  expect_eq(device, lhs, rhs)                     "0rrr_v"
  expect_almost_eq(device, lhs, rhs, atol, rtol)  "0rrrff_v"

As in IREE, a failed expectation does not fail the call: it is recorded (the test
fails at its end, with every failure's message) and the function goes on. Messages
are IREE's: "Expected equality of these values. Contents does not match." followed by
both operands in iree-run-module's text form. expect_almost_eq compares floats
elementwise with IREE's rule: equal, both NaN, or |lhs - rhs| <= atol + rtol·|rhs| for a
finite rhs.
"""
from dataclasses import dataclass, field

import numpy as np

from hal_driver.device import element_type as et
from hal_driver.device.buffer_view import BufferView
from hal_driver.device.device import Device
from hal_driver.hal.refs import deref
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools.buffer_view_text import HostTensor, format_tensor
from hal_driver.vm.native_module import NativeModule

MODULE_NAME = "check"
EXPORTS = {"expect_true": "0i_v", "expect_false": "0i_v", "expect_all_true": "0rr_v",
           "expect_eq": "0rrr_v", "expect_almost_eq": "0rrrff_v"}
_FLOAT_TYPES = ("f16", "bf16", "f32", "f64")


@dataclass
class CheckState:
    """The failed expectations of one test function, in order."""
    failures: list[str] = field(default_factory=list)


def create_check_module(state: CheckState) -> NativeModule:
    module = NativeModule(MODULE_NAME)
    checks = {"expect_true": _expect_true, "expect_false": _expect_false,
              "expect_all_true": _expect_all_true, "expect_eq": _expect_eq,
              "expect_almost_eq": _expect_almost_eq}
    for name, check in checks.items():
        module.add(name, EXPORTS[name],
                   lambda *args, check=check: _record(state, check(*args)))
    return module


def _record(state: CheckState, failure: str | None) -> None:
    if failure:
        state.failures.append(failure)


def _expect_true(operand: int) -> str | None:
    return None if operand else f"Expected {operand} to be nonzero."


def _expect_false(operand: int) -> str | None:
    return f"Expected {operand} to be zero." if operand else None


def _expect_all_true(device, view) -> str | None:
    array = _contents(device, view)
    values = array.view(np.uint8) if array.dtype == np.bool_ else array
    if np.all(values != 0):
        return None
    return f"Expected all elements of {_text(view, array)} to be nonzero."


def _expect_eq(device, lhs, rhs) -> str | None:
    a, b = _contents(device, lhs), _contents(device, rhs)
    problems = _type_and_shape(lhs, rhs)
    if a.tobytes() != b.tobytes():
        problems.append("Contents does not match.")
    return _failure("Expected equality of these values.", problems, lhs, a, rhs, b)


def _expect_almost_eq(device, lhs, rhs, atol: float, rtol: float) -> str | None:
    a, b = _contents(device, lhs), _contents(device, rhs)
    problems = _type_and_shape(lhs, rhs)
    if not problems:
        name = et.name(deref(lhs, BufferView).element_type)
        if name not in _FLOAT_TYPES:
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"unsupported element type {name}")
        index = _first_mismatch(a.astype(np.float64).ravel(), b.astype(np.float64).ravel(),
                                atol, rtol)
        if index is not None:
            x, y = float(a.ravel()[index]), float(b.ravel()[index])
            problems.append(
                f"Contents does not match to tolerance parameters atol={atol:g}, "
                f"rtol={rtol:g}. The first failure occurs at index {index} as the lhs value "
                f"{x:g} differs from the rhs value {y:g} by {y - x:.3e}.")
    return _failure("Expected near equality of these values.", problems, lhs, a, rhs, b)


def _first_mismatch(a: np.ndarray, b: np.ndarray, atol: float, rtol: float) -> int | None:
    """iree_math_fuzzy_compare_f64 elementwise: the first index where it fails."""
    with np.errstate(invalid="ignore", over="ignore"):
        close = (a == b) | (np.isnan(a) & np.isnan(b)) | (
            np.isfinite(b) & (np.abs(a - b) <= atol + rtol * np.abs(b)))
    bad = np.flatnonzero(~close)
    return int(bad[0]) if len(bad) else None


def _type_and_shape(lhs, rhs) -> list[str]:
    lhs, rhs = deref(lhs, BufferView), deref(rhs, BufferView)
    problems = []
    if lhs.element_type != rhs.element_type:
        problems.append("Element types do not match.")
    if lhs.shape != rhs.shape:
        problems.append("Shapes do not match.")
    return problems


def _failure(what: str, problems: list[str], lhs, a, rhs, b) -> str | None:
    if not problems:
        return None
    return (f"{what} {' '.join(problems)}\n  lhs:\n    {_text(lhs, a)}\n"
            f"  rhs:\n    {_text(rhs, b)}")


def _contents(device, view) -> np.ndarray:
    deref(device, Device)
    return deref(view, BufferView).to_numpy()


def _text(view, array: np.ndarray) -> str:
    return format_tensor(HostTensor(array, deref(view, BufferView).element_type))
