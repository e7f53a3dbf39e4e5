"""googletest's console report, as iree-check-module prints it (one test suite named
after the module, one test per exported function, its export ordinal as GetParam()):

    [==========] Running 2 tests from 1 test suite.
    [----------] Global test environment set-up.
    [----------] 2 tests from module
    [ RUN      ] module.test_add
    [       OK ] module.test_add (3 ms)
    [ RUN      ] module.test_sub
    check.expect_eq: Failure
    Expected equality of these values. Contents does not match.
    ...
    [  FAILED  ] module.test_sub, where GetParam() = 1 (2 ms)
    [----------] 2 tests from module (5 ms total)

    [----------] Global test environment tear-down
    [==========] 2 tests from 1 test suite ran. (5 ms total)
    [  PASSED  ] 1 test.
    [  FAILED  ] 1 test, listed below:
    [  FAILED  ] module.test_sub, where GetParam() = 1

     1 FAILED TEST

A failure's location is the check import (or `iree_vm_invoke` for a failed call) where
googletest prints IREE's source file and line.
"""
from dataclasses import dataclass


@dataclass
class TestResult:
    suite: str
    name: str
    ordinal: int
    failures: list[str]       # each a whole failure text (location line and message)
    seconds: float

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def full_name(self) -> str:
        return f"{self.suite}.{self.name}, where GetParam() = {self.ordinal}"


def count(n: int, singular: str, plural: str) -> str:
    """gtest's FormatCountableNoun: `1 test`, `2 tests`."""
    return f"{n} {singular if n == 1 else plural}"


def tests(n: int) -> str:
    return count(n, "test", "tests")


def header(suite: str, test_count: int) -> str:
    return (f"[==========] Running {tests(test_count)} from 1 test suite.\n"
            "[----------] Global test environment set-up.\n"
            f"[----------] {tests(test_count)} from {suite}\n")


def test_start(suite: str, name: str) -> str:
    return f"[ RUN      ] {suite}.{name}\n"


def check_failure(location: str, message: str) -> str:
    return f"{location}: Failure\n{message}\n"


def invoke_failure(status) -> str:
    """IREE_EXPECT_OK(iree_vm_invoke(...)) on a failed call."""
    return check_failure("iree_vm_invoke", f"Value of: iree_vm_invoke(...)\n"
                                           f"Expected: error code OK\n  Actual: {status}")


def test_end(result: TestResult) -> str:
    text = "".join(result.failures)
    if result.passed:
        return text + f"[       OK ] {result.suite}.{result.name} ({_ms(result.seconds)} ms)\n"
    return text + f"[  FAILED  ] {result.full_name} ({_ms(result.seconds)} ms)\n"


def footer(suite: str, results: list[TestResult], seconds: float) -> str:
    failed = [r for r in results if not r.passed]
    text = (f"[----------] {tests(len(results))} from {suite} ({_ms(seconds)} ms total)\n\n"
            "[----------] Global test environment tear-down\n"
            f"[==========] {tests(len(results))} from 1 test suite ran. "
            f"({_ms(seconds)} ms total)\n"
            f"[  PASSED  ] {tests(len(results) - len(failed))}.\n")
    if failed:
        text += f"[  FAILED  ] {tests(len(failed))}, listed below:\n"
        text += "".join(f"[  FAILED  ] {r.full_name}\n" for r in failed)
        text += f"\n{len(failed):2d} FAILED {'TEST' if len(failed) == 1 else 'TESTS'}\n"
    return text


def npu_statistics(result: TestResult, statistics) -> str:
    """--npu_sim_stats: where one test's dispatches ran, and how often each export ran."""
    s = statistics
    ran = ", ".join(f"{name} x{runs}" for name, runs in sorted(s.dispatch_counts.items()))
    return (f"[ npu-sim  ] {result.suite}.{result.name}: "
            f"{count(s.dispatches, 'dispatch', 'dispatches')} (npu: {s.npu_dispatches}, "
            f"host fallback: {s.host_dispatches}), {s.npu_cycles} npu cycles"
            + (f"; ran: {ran}\n" if ran else "\n"))


def _ms(seconds: float) -> int:
    return int(seconds * 1000)
