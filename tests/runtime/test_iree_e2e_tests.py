"""The e2e driver (tests/runtime/iree_e2e_tests.py) on a test file of our own in IREE's
layout: it compiles for llvm-cpu and npu, runs iree-check-module and reads back the
tests passed and failed, the dispatch report and which dispatches ran."""
import pathlib

from tests.runtime import iree_e2e_tests

OPS = """
func.func @test_add() {
  %a = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %b = arith.addf %a, %a : tensor<4xf32>
  check.expect_almost_eq_const(%b, dense<[2.0, 4.0, 6.0, 8.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}
func.func @test_wrong() {
  %a = util.unfoldable_constant dense<[1, 2]> : tensor<2xi32>
  check.expect_eq_const(%a, dense<[1, 3]> : tensor<2xi32>) : tensor<2xi32>
  return
}
"""


def test_a_file_is_compiled_run_and_read_back(tmp_path: pathlib.Path, capsys):
    source = tmp_path / "suite" / "ops" / "add.mlir"
    source.parent.mkdir(parents=True)
    source.write_text(OPS)
    result = iree_e2e_tests.run_file(source, tmp_path)
    assert result["status"] == "ran", result
    assert result["passed"] == 1 and result["failed"] == ["module.test_wrong"]
    [(name, target, _)] = result["dispatches"]
    assert target == "npu" and "elementwise_4_f32" in name
    assert result["ran"][name] == 1
    assert iree_e2e_tests.claimed_kinds([result]) == 0
    assert "1 on the NPU, 0 on the host not claimed" in capsys.readouterr().out


def test_a_claimed_dispatch_that_never_ran_is_a_problem(capsys):
    result = {"file": "ops/x.mlir", "status": "ran",
              "dispatches": [("_x_dispatch_0_matmul_4x4x4_f32", "npu", None),
                             ("_x_dispatch_1_conv_2x2_f32", "host", "not lowerable on npu: ..."),
                             ("_x_dispatch_2_elementwise_4_f32", "host",
                              "not supported on npu: math.sin ...")],
              "ran": {}}
    assert iree_e2e_tests.claimed_kinds([result]) == 2
    out = capsys.readouterr().out
    assert "NEVER RAN ops/x.mlir: _x_dispatch_0_matmul_4x4x4_f32" in out
    assert "HOST ops/x.mlir: _x_dispatch_1_conv_2x2_f32: not lowerable on npu" in out
    assert "1 not claimed: math.sin ..." in out
