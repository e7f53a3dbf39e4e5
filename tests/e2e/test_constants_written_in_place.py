"""IREE writes some results into the memory of a constant it imported from the module:
an in-place sort (host fallback) or a matvec accumulating into a constant initial value
(NPU). The stock runtime lets the dispatch write the imported memory; npu-sim gives the
allocation storage of its own first, so the result is the written one. Also: loop
position arithmetic wraps as MLIR's i32 does (IREE's rng_uniform hashes positions with
a multiply that overflows). All checked against numpy."""
import numpy as np

from compiler_target import compile_str
from hal_driver import runtime as rt

SORT = """
func.func @main() -> tensor<6xi32> {
  %input = util.unfoldable_constant dense<[5, 3, 9, 1, 4, 2]> : tensor<6xi32>
  %sorted = iree_linalg_ext.sort dimension(0) outs(%input : tensor<6xi32>) {
  ^bb0(%a: i32, %b: i32):
    %lt = arith.cmpi slt, %a, %b : i32
    iree_linalg_ext.yield %lt : i1
  } -> tensor<6xi32>
  return %sorted : tensor<6xi32>
}
"""

MATVEC = """
func.func @main() -> tensor<3xi32> {
  %m = util.unfoldable_constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi32>
  %v = util.unfoldable_constant dense<[7, -8]> : tensor<2xi32>
  %acc = util.unfoldable_constant dense<[100, 200, 300]> : tensor<3xi32>
  %r = linalg.matvec ins(%m, %v : tensor<3x2xi32>, tensor<2xi32>)
                     outs(%acc : tensor<3xi32>) -> tensor<3xi32>
  return %r : tensor<3xi32>
}
"""

HASHED_POSITIONS = """
func.func @main(%scale: tensor<f32>) -> tensor<10xf32> {
  %c = arith.constant 1103515245 : i32
  %k = arith.constant 12345 : i32
  %e = tensor.empty() : tensor<10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
       ins(%scale : tensor<f32>) outs(%e : tensor<10xf32>) {
  ^bb0(%s: f32, %out: f32):
    %i = linalg.index 0 : index
    %x = arith.index_cast %i : index to i32
    %m = arith.muli %x, %c : i32
    %a = arith.addi %m, %k : i32
    %f = arith.uitofp %a : i32 to f32
    %y = arith.mulf %f, %s : f32
    linalg.yield %y : f32
  } -> tensor<10xf32>
  return %r : tensor<10xf32>
}
"""


def run(text: str, *args):
    module = rt.load_vm_flatbuffer(compile_str(text, target_backends=["npu"]), driver="npu-sim")
    try:
        return np.asarray(module.main(*args)), module.last_call_stats
    finally:
        module.close()


def test_sort_of_a_constant_in_place():
    got, stats = run(SORT)
    assert stats.host_dispatches == 1
    np.testing.assert_array_equal(got, [1, 2, 3, 4, 5, 9])


def test_matvec_accumulating_into_a_constant():
    got, _ = run(MATVEC)
    expected = np.array([[1, 2], [3, 4], [5, 6]]) @ np.array([7, -8]) + [100, 200, 300]
    np.testing.assert_array_equal(got, expected)


def test_position_arithmetic_wraps_like_i32():
    got, stats = run(HASHED_POSITIONS, np.array(0.5, np.float32))
    assert stats.npu_dispatches == stats.dispatches == 1
    hashed = (np.arange(10, dtype=np.uint32) * np.uint32(1103515245) + np.uint32(12345))
    np.testing.assert_array_equal(got, hashed.astype(np.float32) * np.float32(0.5))
