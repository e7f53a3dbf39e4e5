"""Element types numpy lacks (bfloat16, the fp8 formats) reach npu-sim as ml_dtypes
arrays, as they reach the stock iree.runtime; a bf16 input through a compiled model
matches the stock runtime's result, and a dispatch on fp8 stays on the host with its
reason instead of failing the compile."""
import ml_dtypes
import numpy as np
import pytest

from compiler_target import compile_str
from hal_driver import runtime as rt
from hal_driver.device import element_type
from hal_driver.tools.buffer_view_text import HostTensor, format_tensor

SCALE_BF16 = """
func.func @main(%x: tensor<8xbf16>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<8xbf16>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %f = arith.extf %a : bf16 to f32
    %t = arith.mulf %f, %f : f32
    linalg.yield %t : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""

TO_FP8 = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf8E4M3FNUZ> {
  %e = tensor.empty() : tensor<8xf8E4M3FNUZ>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf8E4M3FNUZ>) {
  ^bb0(%a: f32, %o: f8E4M3FNUZ):
    %t = arith.truncf %a : f32 to f8E4M3FNUZ
    linalg.yield %t : f8E4M3FNUZ
  } -> tensor<8xf8E4M3FNUZ>
  return %r : tensor<8xf8E4M3FNUZ>
}
"""


@pytest.mark.parametrize("dtype, value, name", [
    (ml_dtypes.bfloat16, 0x22000010, "bf16"), (ml_dtypes.float8_e4m3fn, 0x25000008, "f8E4M3FN"),
    (ml_dtypes.float8_e5m2, 0x24000008, "f8E5M2"),
    (ml_dtypes.float8_e4m3fnuz, 0x27000008, "f8E4M3FNUZ")])
def test_ml_dtypes_map_to_iree_element_types(dtype, value, name):
    assert element_type.from_dtype(dtype) == value
    assert element_type.to_dtype(value) == np.dtype(dtype)
    assert element_type.name(value) == name


@pytest.mark.parametrize("array, text", [
    (np.array([0.25, 80, -1.5], ml_dtypes.float8_e5m2), "3xf8E5M2=0.25 80 -1.5"),
    (np.array([0.25, 0], ml_dtypes.float8_e4m3fnuz), "2xf8E4M3FNUZ=0.25 0"),
    (np.array([1 + 2j], np.complex64), "1xcf64=0000803F00000040"),
    (np.array([True, False]), "2xi1=01 00")])
def test_text_form_of_each_element_type(array, text):
    """iree_hal_format_element: f8 types as %G floats, types it has no case for (complex,
    i1) as their bytes in hex."""
    assert format_tensor(HostTensor(array, element_type.from_dtype(array.dtype))) == text


def run_on_npu_sim(mlir: str, x: np.ndarray):
    """The result of `main(x)` of `mlir` compiled for npu, and the call's statistics."""
    module = rt.load_vm_flatbuffer(compile_str(mlir, target_backends=["npu"]), driver="npu-sim")
    try:
        return np.asarray(module.main(x)), module.last_call_stats
    finally:
        module.close()


def test_bf16_input_matches_numpy():
    x = np.linspace(-3, 3, 8).astype(ml_dtypes.bfloat16)
    got, _ = run_on_npu_sim(SCALE_BF16, x)
    np.testing.assert_array_equal(got, x.astype(np.float32) ** 2)


def test_fp8_output_runs_on_the_host_and_matches_ml_dtypes():
    x = np.linspace(-2, 2, 8).astype(np.float32)
    got, stats = run_on_npu_sim(TO_FP8, x)
    assert stats.host_dispatches == 1 and stats.npu_dispatches == 0
    assert got.dtype == np.dtype(ml_dtypes.float8_e4m3fnuz)
    np.testing.assert_array_equal(got.astype(np.float32),
                                  x.astype(ml_dtypes.float8_e4m3fnuz).astype(np.float32))
