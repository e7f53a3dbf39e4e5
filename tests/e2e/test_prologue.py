"""A dispatch whose elementwise generic before the convolution is read only by the
convolution's epilogue (YOLOv8's quantized residual: the dequantization of the shortcut,
which IREE keeps in the conv's dispatch because another dispatch reads it too). The
analysis walks that generic where the epilogue reads it, in the convolution's index
space (values.Deferred), so both dispatches run on the NPU; checked against numpy."""
import numpy as np

from compiler_target import compile_str
from hal_driver import runtime as rt

RESIDUAL = """
#map = affine_map<(n, c, y, x) -> (n, c, y, x)>
func.func @main(%x: tensor<1x4x10x10xf32>, %w: tensor<4x4x3x3xf32>, %r: tensor<1x4x8x8xi8>)
    -> (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %dq = linalg.generic {indexing_maps = [#map, #map],
                        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%r : tensor<1x4x8x8xi8>) outs(%e : tensor<1x4x8x8xf32>) {
  ^bb0(%in: i8, %out: f32):
    %a = arith.extsi %in : i8 to i32
    %zp = arith.constant 3 : i32
    %b = arith.subi %a, %zp : i32
    %f = arith.sitofp %b : i32 to f32
    %s = arith.constant 0.125 : f32
    %y = arith.mulf %f, %s : f32
    linalg.yield %y : f32
  } -> tensor<1x4x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %conv = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>,
                                    strides = dense<1> : vector<2xi64>}
          ins(%x, %w : tensor<1x4x10x10xf32>, tensor<4x4x3x3xf32>)
          outs(%init : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %sum = linalg.generic {indexing_maps = [#map, #map, #map],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
         ins(%conv, %dq : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>)
         outs(%e : tensor<1x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %y = arith.addf %a, %b : f32
    linalg.yield %y : f32
  } -> tensor<1x4x8x8xf32>
  %square = linalg.generic {indexing_maps = [#map, #map],
                            iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
            ins(%dq : tensor<1x4x8x8xf32>) outs(%e : tensor<1x4x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %y = arith.mulf %a, %a : f32
    linalg.yield %y : f32
  } -> tensor<1x4x8x8xf32>
  return %sum, %square : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>
}
"""


def test_dequantized_shortcut_before_the_convolution_runs_on_the_npu():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 10, 10)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    r = rng.integers(-128, 128, (1, 4, 8, 8)).astype(np.int8)
    module = rt.load_vm_flatbuffer(compile_str(RESIDUAL, target_backends=["npu"]),
                                   driver="npu-sim")
    try:
        total, square = (np.asarray(o) for o in module.main(x, w, r))
        stats = module.last_call_stats
    finally:
        module.close()
    assert (stats.npu_dispatches, stats.host_dispatches) == (2, 0)
    shortcut = (r.astype(np.int32) - 3).astype(np.float32) * np.float32(0.125)
    windows = np.lib.stride_tricks.sliding_window_view(x[0].astype(np.float64), (3, 3),
                                                       axis=(1, 2))
    conv = np.einsum("cyxij,fcij->fyx", windows, w.astype(np.float64))[None]
    np.testing.assert_allclose(total, conv + shortcut, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(square, shortcut * shortcut)
