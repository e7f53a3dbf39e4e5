"""The `check` module and iree-check-module on npu-sim, through modules compiled for npu:
checks that must hold, checks that must fail (wrong value, shape and element type,
tolerance edges, NaN and infinity, booleans, element types a check does not accept) with
IREE's messages, googletest's report and exit status, and modules the tool must refuse
(a check import it does not provide would be skipped silently)."""
import pathlib
import re
import subprocess
import sys

import pytest

from compiler_target import compile_str
from hal_driver.tools import check_module

PASSING = """
func.func @test_floats() {
  %a = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = util.unfoldable_constant dense<[0.5, 0.5, 0.5, 0.5]> : tensor<4xf32>
  %c = arith.addf %a, %b : tensor<4xf32>
  check.expect_almost_eq_const(%c, dense<[1.5, 2.5, 3.5, 4.5]> : tensor<4xf32>) : tensor<4xf32>
  check.expect_eq_const(%c, dense<[1.5, 2.5, 3.5, 4.5]> : tensor<4xf32>) : tensor<4xf32>
  return
}
func.func @test_integers() {
  %a = util.unfoldable_constant dense<[1, 2]> : tensor<2xi32>
  %c = arith.addi %a, %a : tensor<2xi32>
  check.expect_eq_const(%c, dense<[2, 4]> : tensor<2xi32>) : tensor<2xi32>
  check.expect_all_true(%c) : tensor<2xi32>
  %t = util.unfoldable_constant 7 : i32
  check.expect_true(%t) : i32
  %f = util.unfoldable_constant 0 : i32
  check.expect_false(%f) : i32
  return
}
func.func @test_tolerance_edges() {
  %a = util.unfoldable_constant dense<[3.0, 0x7FC00000, 0x7F800000, -0.0]> : tensor<4xf32>
  %b = util.unfoldable_constant dense<[4.0, 0x7FC00000, 0x7F800000, 0.0]> : tensor<4xf32>
  check.expect_almost_eq(%a, %b, atol 0.0, rtol 0.25) : tensor<4xf32>
  %c = util.unfoldable_constant dense<[5.0]> : tensor<1xf32>
  %d = util.unfoldable_constant dense<[4.0]> : tensor<1xf32>
  check.expect_almost_eq(%c, %d, atol 0.5, rtol 0.125) : tensor<1xf32>
  return
}
func.func @test_small_floats() {
  %h = util.unfoldable_constant dense<[0.0, 100.0]> : tensor<2xf16>
  check.expect_almost_eq_const(%h, dense<[0.009, 99.0]> : tensor<2xf16>, atol 1.5e-2, rtol 1.5e-2) : tensor<2xf16>
  %b = util.unfoldable_constant dense<[0.0, 100.0]> : tensor<2xbf16>
  check.expect_almost_eq_const(%b, dense<[0.009, 99.0]> : tensor<2xbf16>, atol 1.5e-2, rtol 1.5e-2) : tensor<2xbf16>
  %e = util.unfoldable_constant dense<[0.0, 100.0]> : tensor<2xf8E4M3FN>
  check.expect_almost_eq_const(%e, dense<[0.2, 80.0]> : tensor<2xf8E4M3FN>, atol 0.3, rtol 0.3) : tensor<2xf8E4M3FN>
  return
}"""

FAILING = """
func.func @test_wrong_value() {
  %a = util.unfoldable_constant dense<[1, 2, 3]> : tensor<3xi32>
  check.expect_eq_const(%a, dense<[1, 5, 3]> : tensor<3xi32>) : tensor<3xi32>
  return
}
func.func @test_tolerance_scales_with_rhs() {
  %a = util.unfoldable_constant dense<[3.0, 3.0, 4.0]> : tensor<3xf32>
  %b = util.unfoldable_constant dense<[3.0, 4.0, 3.0]> : tensor<3xf32>
  check.expect_almost_eq(%a, %b, atol 0.0, rtol 0.25) : tensor<3xf32>
  return
}
func.func @test_just_outside_tolerance() {
  %a = util.unfoldable_constant dense<[5.0]> : tensor<1xf32>
  %b = util.unfoldable_constant dense<[4.0]> : tensor<1xf32>
  check.expect_almost_eq(%a, %b, atol 0.4999, rtol 0.125) : tensor<1xf32>
  return
}
func.func @test_nan_and_infinity() {
  %a = util.unfoldable_constant dense<[0x7FC00000, 1.0e+30]> : tensor<2xf32>
  %b = util.unfoldable_constant dense<[0x7FC00000, 0x7F800000]> : tensor<2xf32>
  check.expect_almost_eq(%a, %b, atol 1.0e+38, rtol 0.0) : tensor<2xf32>
  return
}
func.func @test_booleans() {
  %z = util.unfoldable_constant 0 : i32
  check.expect_true(%z) : i32
  %o = util.unfoldable_constant 3 : i32
  check.expect_false(%o) : i32
  %a = util.unfoldable_constant dense<[1, 0, 2]> : tensor<3xi32>
  check.expect_all_true(%a) : tensor<3xi32>
  return
}
func.func @test_wrong_shape() {
  %c0 = arith.constant 0 : index
  %device = hal.devices.get %c0 : !hal.device
  %a = util.unfoldable_constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %b = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %va = hal.tensor.export %a : tensor<1x2xf32> -> !hal.buffer_view
  %vb = hal.tensor.export %b : tensor<2xf32> -> !hal.buffer_view
  check.expect_eq<%device>(%va, %vb) : !hal.buffer_view
  return
}
func.func @test_wrong_type() {
  %c0 = arith.constant 0 : index
  %device = hal.devices.get %c0 : !hal.device
  %f = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf32>
  %i = util.unfoldable_constant dense<[1, 2]> : tensor<2xi32>
  %vf = hal.tensor.export %f : tensor<2xf32> -> !hal.buffer_view
  %vi = hal.tensor.export %i : tensor<2xi32> -> !hal.buffer_view
  check.expect_almost_eq<%device>(%vf, %vi) : !hal.buffer_view
  return
}
func.func @test_unsupported_type() {
  %c0 = arith.constant 0 : index
  %device = hal.devices.get %c0 : !hal.device
  %i = util.unfoldable_constant dense<[1, 2]> : tensor<2xi32>
  %vi = hal.tensor.export %i : tensor<2xi32> -> !hal.buffer_view
  check.expect_almost_eq<%device>(%vi, %vi) : !hal.buffer_view
  return
}
func.func @test_all_true_of_i1() {
  %b = util.unfoldable_constant dense<[true, true]> : tensor<2xi1>
  check.expect_all_true(%b) : tensor<2xi1>
  return
}"""

ONE_FAILURE = """
func.func @test_one() {
  %z = util.unfoldable_constant 0 : i32
  check.expect_true(%z) : i32
  return
}
"""

WITH_ARGUMENTS = """
func.func @test_argument(%a: tensor<2xf32>) -> tensor<2xf32> {
  return %a : tensor<2xf32>
}
"""

# Check imports the check module does not provide (an unknown name, a known name with
# another calling convention), called only when resolved, as the compiler calls optional
# imports: without the refusal the test would pass with nothing checked.
UNKNOWN_CHECK = """
vm.module @module {
  vm.import private optional @check.expect_bogus(%operand : i32)
  vm.func @test_skipped() {
    %c0 = vm.const.i32 0
    %resolved = vm.import.resolved @check.expect_bogus : i32
    vm.cond_br %resolved, ^call, ^done
  ^call:
    vm.call @check.expect_bogus(%c0) : (i32) -> ()
    vm.br ^done
  ^done:
    vm.return
  }
  vm.export @test_skipped
}
"""

OTHER_CCONV = """
vm.module @module {
  vm.import private optional @check.expect_true(%operand : i64)
  vm.func @test_skipped() {
    %c0 = vm.const.i64 0
    %resolved = vm.import.resolved @check.expect_true : i32
    vm.cond_br %resolved, ^call, ^done
  ^call:
    vm.call @check.expect_true(%c0) : (i64) -> ()
    vm.br ^done
  ^done:
    vm.return
  }
  vm.export @test_skipped
}
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> dict[str, pathlib.Path]:
    directory = tmp_path_factory.mktemp("check")
    paths = {}
    for name, text in (("passing", PASSING), ("failing", FAILING), ("one", ONE_FAILURE),
                       ("arguments", WITH_ARGUMENTS)):
        paths[name] = directory / f"{name}.vmfb"
        paths[name].write_bytes(compile_str(text, target_backends=["npu"]))
    for name, text in (("unknown", UNKNOWN_CHECK), ("cconv", OTHER_CCONV)):
        source, paths[name] = directory / f"{name}.mlir", directory / f"{name}.vmfb"
        source.write_text(text)
        subprocess.run([str(pathlib.Path(sys.executable).parent / "iree-compile"),
                        "--compile-mode=vm", str(source), "-o", str(paths[name])], check=True)
    return paths


def run(capsys, module: pathlib.Path, *flags) -> tuple[int, str, str]:
    code = check_module.main(["--device=npu-sim", f"--module={module}", *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def failure_of(out: str, test: str) -> str:
    """The text between a test's RUN line and its FAILED line."""
    start = out.index(f"[ RUN      ] module.{test}\n") + len(f"[ RUN      ] module.{test}\n")
    return out[start:out.index(f"[  FAILED  ] module.{test},", start)]


def test_checks_that_hold_pass(capsys, modules):
    code, out, _ = run(capsys, modules["passing"])
    assert code == 0, out
    for name in ("test_floats", "test_integers", "test_tolerance_edges", "test_small_floats"):
        assert f"[       OK ] module.{name} (" in out
    assert out.endswith("[  PASSED  ] 4 tests.\n")


def test_wrong_value(capsys, modules):
    out = run(capsys, modules["failing"])[1]
    assert failure_of(out, "test_wrong_value") == (
        "check.expect_eq: Failure\n"
        "Expected equality of these values. Contents does not match.\n"
        "  lhs:\n    3xi32=1 2 3\n  rhs:\n    3xi32=1 5 3\n")


def test_tolerance_edges(capsys, modules):
    """|lhs - rhs| <= atol + rtol * |rhs|: rtol scales with the rhs (3 vs 4 passes at
    equality, 4 vs 3 fails), and an atol just below the difference fails."""
    out = run(capsys, modules["failing"])[1]
    assert ("tolerance parameters atol=0, rtol=0.25. The first failure occurs at index 2 as "
            "the lhs value 4 differs from the rhs value 3 by -1.000e+00.\n  lhs:\n"
            "    3xf32=3 3 4\n  rhs:\n    3xf32=3 4 3\n") in failure_of(out, "test_tolerance_scales_with_rhs")
    assert ("Expected near equality of these values. Contents does not match to tolerance "
            "parameters atol=0.4999, rtol=0.125. The first failure occurs at index 0 as the "
            "lhs value 5 differs from the rhs value 4 by -1.000e+00.") in \
        failure_of(out, "test_just_outside_tolerance")


def test_nan_matches_nan_and_an_infinite_rhs_only_itself(capsys, modules):
    out = run(capsys, modules["failing"])[1]
    assert ("at index 1 as the lhs value 1e+30 differs from the rhs value inf by inf.\n"
            "  lhs:\n    2xf32=NAN 1E+30\n  rhs:\n    2xf32=NAN INF\n") in \
        failure_of(out, "test_nan_and_infinity")


def test_booleans_fail_with_googletest_wording(capsys, modules):
    text = failure_of(run(capsys, modules["failing"])[1], "test_booleans")
    assert ("check.expect_true: Failure\nValue of: operand\n  Actual: false\nExpected: true\n"
            "Expected 0 to be nonzero.\n") in text
    assert ("check.expect_false: Failure\nValue of: operand\n  Actual: true\nExpected: false\n"
            "Expected 3 to be zero.\n") in text
    assert ("check.expect_all_true: Failure\nValue of: ToSpan<T>(bytes)\n"
            "Expected: only contains elements that isn't equal to 0\n"
            "  Actual: { 1, 0, 2 }, whose element #1 doesn't match\n") in text


def test_wrong_shape_and_element_type(capsys, modules):
    """Contents are compared byte for byte by expect_eq whatever the shapes (equal here),
    and by expect_almost_eq only when element types and shapes match."""
    out = run(capsys, modules["failing"])[1]
    assert failure_of(out, "test_wrong_shape") == (
        "check.expect_eq: Failure\nExpected equality of these values. Shapes do not match.\n"
        "  lhs:\n    1x2xf32=[1 2]\n  rhs:\n    2xf32=1 2\n")
    assert failure_of(out, "test_wrong_type") == (
        "check.expect_almost_eq: Failure\n"
        "Expected near equality of these values. Element types do not match.\n"
        "  lhs:\n    2xf32=1 2\n  rhs:\n    2xi32=1 2\n")


def test_element_types_a_check_does_not_accept_fail_the_call(capsys, modules):
    out = run(capsys, modules["failing"])[1]
    assert ("iree_vm_invoke: Failure\nValue of: iree_vm_invoke(...)\nExpected: error code OK\n"
            "  Actual: INVALID_ARGUMENT; unsupported element type i32; while invoking native "
            "function check.expect_almost_eq") in failure_of(out, "test_unsupported_type")
    assert "INVALID_ARGUMENT; unsupported element type i1; while invoking native function " \
           "check.expect_all_true" in failure_of(out, "test_all_true_of_i1")


def test_report_and_exit_status_of_a_failing_run(capsys, modules):
    code, out, _ = run(capsys, modules["failing"])
    assert code == 1
    assert out.startswith("[==========] Running 9 tests from 1 test suite.\n"
                          "[----------] Global test environment set-up.\n"
                          "[----------] 9 tests from module\n[ RUN      ] module.test_wrong_value\n")
    assert "[  PASSED  ] 0 tests.\n[  FAILED  ] 9 tests, listed below:\n" \
           "[  FAILED  ] module.test_wrong_value, where GetParam() = 0\n" in out
    assert out.endswith("[  FAILED  ] module.test_all_true_of_i1, where GetParam() = 8\n\n"
                        " 9 FAILED TESTS\nTest failed\nOK\n")


def test_singular_counts(capsys, modules):
    code, out, _ = run(capsys, modules["one"])
    assert code == 1
    assert "[==========] Running 1 test from 1 test suite." in out
    assert "[----------] 1 test from module (" in out
    assert "[  FAILED  ] 1 test, listed below:" in out and "\n 1 FAILED TEST\n" in out


def test_expect_failure_inverts_the_outcome(capsys, modules):
    code, out, _ = run(capsys, modules["failing"], "--expect_failure")
    assert code == 0 and out.endswith("Test failed as expected\n")
    code, out, _ = run(capsys, modules["passing"], "--expect_failure")
    assert code == 1 and out.endswith("Test passed but expected failure\n")


def test_npu_sim_stats_show_where_dispatches_ran(capsys, modules):
    code, _, err = run(capsys, modules["passing"], "--npu_sim_stats")
    assert code == 0
    line = next(line for line in err.splitlines() if "module.test_floats:" in line)
    assert line.startswith("[ npu-sim  ] module.test_floats: 1 dispatch (npu: 1, host "
                           "fallback: 0), ")
    assert re.search(r"; ran: \S*test_floats\S*elementwise\S* x1$", line), line


@pytest.mark.parametrize("name, error", [
    ("unknown", "NOT_FOUND; module `module` imports `check.expect_bogus`, which the check "
                "module does not provide"),
    ("cconv", "INVALID_ARGUMENT; module `module` imports `check.expect_true` with calling "
              "convention `0I_v` but the check module's is `0i_v`"),
])
def test_a_check_the_module_does_not_provide_is_refused(capsys, modules, name, error):
    code, out, _ = run(capsys, modules[name])
    assert code == 1
    assert out.startswith(f"Test failed\n{error}")
    assert "RUN" not in out


def test_the_refused_module_would_otherwise_pass_unchecked(capsys, modules):
    """The same module under iree-run-module (no check module): the call is skipped."""
    from hal_driver.tools import run_module
    code = run_module.main(["--device=npu-sim", f"--module={modules['unknown']}"])
    assert code == 0 and "EXEC @test_skipped" in capsys.readouterr().out


def test_a_test_function_with_arguments_is_an_error(capsys, modules):
    code, out, _ = run(capsys, modules["arguments"])
    assert code == 1
    assert out.startswith("Test failed\nINVALID_ARGUMENT; expected function with no inputs or "
                          "outputs, but export 'test_argument' has signature '0r_r'")


def test_other_devices_are_refused(capsys, modules):
    code = check_module.main(["--device=local-task", f"--module={modules['passing']}"])
    assert code == 1
    assert "UNIMPLEMENTED; this iree-check-module runs --device=npu-sim only" in \
        capsys.readouterr().err
