"""The `check` module and iree-check-module on npu-sim: expectations that hold, ones
that must fail (wrong value, shape, element type, tolerance edges, booleans), IREE's
report and exit status, and a module whose check import the module does not provide."""
import re

import numpy as np
import pytest

from compiler_target import compile_str
from hal_driver.check import CheckState, create_check_module
from hal_driver.device.driver import create_device
from hal_driver.runtime import buffer_view_from_array
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
  %a = util.unfoldable_constant dense<[100.0, 0.0, 0x7FC00000]> : tensor<3xf32>
  check.expect_almost_eq(%a, %a, atol 0.0, rtol 0.0) : tensor<3xf32>
  %b = util.unfoldable_constant dense<[101.0, 0.5, 0x7FC00000]> : tensor<3xf32>
  check.expect_almost_eq(%a, %b, atol 0.5, rtol 0.005) : tensor<3xf32>
  return
}
"""

FAILING = """
func.func @test_wrong_value() {
  %a = util.unfoldable_constant dense<[1, 2, 3]> : tensor<3xi32>
  check.expect_eq_const(%a, dense<[1, 5, 3]> : tensor<3xi32>) : tensor<3xi32>
  return
}
func.func @test_just_outside_tolerance() {
  %a = util.unfoldable_constant dense<[100.0, 1.0]> : tensor<2xf32>
  %b = util.unfoldable_constant dense<[101.0, 1.0]> : tensor<2xf32>
  check.expect_almost_eq(%a, %b, atol 0.5, rtol 0.004) : tensor<2xf32>
  return
}
func.func @test_booleans() {
  %z = util.unfoldable_constant 0 : i32
  check.expect_true(%z) : i32
  %o = util.unfoldable_constant 1 : i32
  check.expect_false(%o) : i32
  %a = util.unfoldable_constant dense<[1, 0]> : tensor<2xi32>
  check.expect_all_true(%a) : tensor<2xi32>
  return
}
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    directory = tmp_path_factory.mktemp("check")
    paths = {}
    for name, text in (("passing", PASSING), ("failing", FAILING)):
        paths[name] = directory / f"{name}.vmfb"
        paths[name].write_bytes(compile_str(text, target_backends=["npu"]))
    return paths


def run(capsys, *args) -> tuple[int, str]:
    code = check_module.main(["--device=npu-sim", *args])
    return code, capsys.readouterr().out


def test_expectations_that_hold_pass(capsys, modules):
    code, out = run(capsys, f"--module={modules['passing']}")
    assert code == 0, out
    for name in ("test_floats", "test_integers", "test_tolerance_edges"):
        assert f"[       OK ] module.{name}" in out
    assert "[  PASSED  ] 3 tests." in out


def test_failed_expectations_fail_their_test_with_irees_messages(capsys, modules):
    code, out = run(capsys, f"--module={modules['failing']}")
    assert code == 1
    assert "[  PASSED  ] 0 tests." in out and "3 FAILED TESTS" in out
    assert ("Expected equality of these values. Contents does not match.\n"
            "  lhs:\n    3xi32=1 2 3\n  rhs:\n    3xi32=1 5 3") in out
    assert re.search(r"tolerance parameters atol=0\.5, rtol=0\.004\. The first failure occurs "
                     r"at index 0 as the lhs value 100 differs from the rhs value 101 by "
                     r"1\.000e\+00\.", out)
    assert "Expected 0 to be nonzero." in out and "Expected 1 to be zero." in out
    assert "Expected all elements of 2xi32=1 0 to be nonzero." in out


def test_shape_and_element_type_mismatches():
    """The compiler checks operand types of the tensor forms (and its !hal.buffer_view
    form of expect_almost_eq drops the device argument), so these are called directly."""
    device = create_device()
    try:
        state = CheckState()
        module = create_check_module(state)
        eq, almost = (module.functions[n].fn for n in ("expect_eq", "expect_almost_eq"))
        row = buffer_view_from_array(device, np.float32([[1, 2]]))
        flat = buffer_view_from_array(device, np.float32([1, 2]))
        ints = buffer_view_from_array(device, np.int32([1, 2]))
        almost(device, row, flat, 1e-4, 0.0)
        eq(device, flat, ints)
        eq(device, flat, buffer_view_from_array(device, np.float32([1, 2])))
    finally:
        device.close()
    assert state.failures == [
        "Expected near equality of these values. Shapes do not match.\n"
        "  lhs:\n    1x2xf32=[1 2]\n  rhs:\n    2xf32=1 2",
        "Expected equality of these values. Element types do not match. Contents does not "
        "match.\n  lhs:\n    2xf32=1 2\n  rhs:\n    2xi32=1 2"]


def test_expect_failure_inverts_the_exit_status(capsys, modules):
    assert run(capsys, f"--module={modules['failing']}", "--expect_failure")[0] == 0
    assert run(capsys, f"--module={modules['passing']}", "--expect_failure")[0] == 1


def test_a_check_import_the_module_lacks_is_refused(capsys, modules, monkeypatch):
    monkeypatch.delitem(check_module.EXPORTS, "expect_eq")
    code = check_module.main(["--device=npu-sim", f"--module={modules['failing']}"])
    err = capsys.readouterr().err
    assert code == 1
    assert "NOT_FOUND; module imports `check.expect_eq`, which the check module does not " \
           "provide" in err


def test_other_devices_are_refused(capsys, modules):
    code = check_module.main(["--device=local-task", f"--module={modules['passing']}"])
    assert code == 1
    assert "UNIMPLEMENTED; this iree-check-module runs --device=npu-sim only" in \
        capsys.readouterr().err
