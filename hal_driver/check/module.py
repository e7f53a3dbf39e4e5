"""The `check` native module: the five imports the 3.13 compiler emits for IREE's e2e op
tests (runtime/src/iree/modules/check/module.cc; compiler Modules/Check/check.imports.mlir).

  expect_true(operand: i32)                              "0i_v"
  expect_false(operand: i32)                             "0i_v"
  expect_all_true(device, operand)                       "0rr_v"
  expect_eq(device, lhs, rhs)                            "0rrr_v"
  expect_almost_eq(device, lhs, rhs, atol: f32, rtol: f32)  "0rrrff_v"

The compiler lowers `check.expect_eq_const` / `expect_almost_eq_const` to expect_eq /
expect_almost_eq with a constant rhs; `expect_almost_eq` without tolerances passes
atol=1e-4, rtol=0.

As in IREE (googletest's non-fatal EXPECT_*), a check that does not hold does not fail
the call: its failure is recorded in the CheckState and the function goes on, so a test
reports every failed check. A call fails (StatusError) only for what IREE fails it for:
null or mistyped refs, and element types a check does not accept.
"""
from dataclasses import dataclass, field

from hal_driver.check import compare, messages
from hal_driver.device.buffer_view import BufferView
from hal_driver.device.device import Device
from hal_driver.hal.refs import deref
from hal_driver.vm.native_module import NativeModule

MODULE_NAME = "check"
MODULE_VERSION = 0


@dataclass(frozen=True)
class CheckFailure:
    check: str          # the import that recorded it, e.g. `check.expect_eq`
    message: str


@dataclass
class CheckState:
    """The failed checks of one test function, in order."""
    failures: list[CheckFailure] = field(default_factory=list)


def expect_true(operand: int) -> str | None:
    return None if operand else messages.expect_true(operand)


def expect_false(operand: int) -> str | None:
    return messages.expect_false(operand) if operand else None


def expect_all_true(device, operand) -> str | None:
    deref(device, Device)
    view = deref(operand, BufferView)
    index = compare.first_zero(view)
    if index is None:
        return None
    return messages.expect_all_true(compare.elements(view), index)


def expect_eq(device, lhs, rhs) -> str | None:
    deref(device, Device)
    lhs, rhs = deref(lhs, BufferView), deref(rhs, BufferView)
    problems = _type_and_shape_problems(lhs, rhs)
    if not compare.equal_contents(lhs, rhs):
        problems.append("Contents does not match.")
    return messages.expect_eq(problems, lhs, rhs) if problems else None


def expect_almost_eq(device, lhs, rhs, atol: float, rtol: float) -> str | None:
    deref(device, Device)
    lhs, rhs = deref(lhs, BufferView), deref(rhs, BufferView)
    problems = _type_and_shape_problems(lhs, rhs)
    if not problems:      # contents are compared only when they can be
        mismatch = compare.first_mismatch(lhs, rhs, atol, rtol)
        if mismatch is not None:
            problems.append(messages.tolerance_mismatch(atol, rtol, *mismatch))
    return messages.expect_almost_eq(problems, lhs, rhs) if problems else None


def _type_and_shape_problems(lhs: BufferView, rhs: BufferView) -> list[str]:
    problems = []
    if lhs.element_type != rhs.element_type:
        problems.append("Element types do not match.")
    if lhs.shape != rhs.shape:
        problems.append("Shapes do not match.")
    return problems


EXPORTS = {
    "expect_true": ("0i_v", expect_true),
    "expect_false": ("0i_v", expect_false),
    "expect_all_true": ("0rr_v", expect_all_true),
    "expect_eq": ("0rrr_v", expect_eq),
    "expect_almost_eq": ("0rrrff_v", expect_almost_eq),
}


def create_check_module(state: CheckState) -> NativeModule:
    """A `check` module recording into `state` (one per VM context, as IREE's state)."""
    module = NativeModule(MODULE_NAME, MODULE_VERSION)
    for name, (cconv, check) in EXPORTS.items():
        module.add(name, cconv, _recording(state, f"{MODULE_NAME}.{name}", check))
    return module


def _recording(state: CheckState, qualified_name: str, check):
    def call(*args) -> None:
        message = check(*args)
        if message is not None:
            state.failures.append(CheckFailure(qualified_name, message))
    return call
