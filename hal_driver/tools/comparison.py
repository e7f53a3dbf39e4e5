"""--expected_output checks with iree-run-module's rules and messages
(iree/tooling/comparison.cc, buffer_view_matchers.c).

Approximate mode: floats match when |actual - expected| <= atol + rtol * |expected|
(NaN equals NaN); integers compare exactly. Exact mode compares bytes.
"""
from dataclasses import dataclass

import numpy as np

from hal_driver.tools.buffer_view_text import HostTensor, format_element, format_tensor
from hal_driver.vm.ref import ref_type_text

IGNORED = object()   # an `(ignored)` expected output


@dataclass
class Tolerance:
    mode: str = "approximate"
    f16_atol: float = 0.001
    f32_atol: float = 0.0001
    f64_atol: float = 0.0001
    bf16_atol: float = 0.01
    rtol: float = 1e-5

    def atol(self, element_type: int) -> float | None:
        return {0x21000010: self.f16_atol, 0x21000020: self.f32_atol,
                0x21000040: self.f64_atol, 0x22000010: self.bf16_atol}.get(element_type)


def compare_results(expected: list, actual: list, tolerance: Tolerance) -> tuple[bool, str]:
    """(all matched, report text) — the report lists every mismatching result."""
    if len(expected) != len(actual):
        return False, f"[FAILED] expected {len(expected)} list elements but {len(actual)} provided\n"
    report = []
    for index, (want, have) in enumerate(zip(expected, actual)):
        message = _compare_one(index, want, have, tolerance)
        if message:
            report.append(message)
    return not report, "".join(report)


def _compare_one(index: int, want, have, tolerance: Tolerance) -> str:
    if want is IGNORED:
        return ""
    if isinstance(want, HostTensor) and isinstance(have, HostTensor):
        problem = _tensor_mismatch(want, have, tolerance)
        if not problem:
            return ""
        return (f"[FAILED] result[{index}]: {problem}\n  expected:\n{format_tensor(want)}"
                f"\n  actual:\n{format_tensor(have)}\n")
    if isinstance(want, tuple) and isinstance(have, tuple) and want[0] == have[0]:
        (kind, expected_value), (_, actual_value) = want, have
        if expected_value == actual_value:
            return ""
        shown = (lambda v: "%G" % v) if kind in "fF" else str
        return (f"[FAILED] result[{index}]: {_value_type_name(kind)} values differ\n"
                f"  expected: {shown(expected_value)}\n  actual: {shown(actual_value)}\n")
    return (f"[FAILED] result[{index}]: variant types mismatch; expected {_type_name(want)} "
            f"but got {_type_name(have)}\n")


def _tensor_mismatch(want: HostTensor, have: HostTensor, tolerance: Tolerance) -> str:
    described = f"expected that the view is equal to contents of a view of {want.describe()}"
    if want.array.shape != have.array.shape or want.element_type != have.element_type:
        return f"metadata is {have.describe()}; expected that the view matches {want.describe()}; {described}"
    expected, actual = want.array.reshape(-1), have.array.reshape(-1)
    if tolerance.mode == "exact":
        equal = expected.view(np.uint8).reshape(len(expected), -1) == \
            actual.view(np.uint8).reshape(len(actual), -1)
        equal = equal.all(axis=1)
    elif tolerance.atol(want.element_type) is not None:
        e, a = expected.astype(np.float64), actual.astype(np.float64)
        limit = tolerance.atol(want.element_type) + tolerance.rtol * np.abs(e)
        equal = (np.abs(a - e) <= limit) | (np.isnan(a) & np.isnan(e))
    else:
        equal = expected == actual
    if equal.all():
        return ""
    i = int(np.argmin(equal))
    return (f"element at index {i} ({format_element(actual[i], have.element_type)}) does not "
            f"match the expected ({format_element(expected[i], want.element_type)}); {described}")


def _value_type_name(kind: str) -> str:
    return {"i": "i32", "I": "i64", "f": "f32", "F": "f64"}[kind]


def _type_name(value) -> str:
    if value is None:
        return "empty"
    if isinstance(value, HostTensor):
        return "hal.buffer_view"
    if isinstance(value, tuple):
        return _value_type_name(value[0])
    return ref_type_text(value)


__all__ = ["IGNORED", "Tolerance", "compare_results"]
