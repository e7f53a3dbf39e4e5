"""Contractions that sum in f16 or bf16 (a linalg.matmul or conv with an f16 result:
`mulf`, `addf` in f16) run on the MAC array with NARROW_SUM, which rounds every product
and every running sum to the operand type in k order as the IR says: the bits of a
sequential f16 or bf16 loop (ml_dtypes' arithmetic) and, for an f16 matmul, of stock IREE
llvm-cpu on the same MLIR. Stock sums an f16 conv in f16 in another order of its
reduction loops (same error, other bits), and a bf16 matmul partly in f32 on this
machine, so there it is compared by error, not bits.
Summing in f32 instead gives 20.48 where the IR's sum of 2048 x 0.01 is 20.28 (IREE's
large_linalg_matmul e2e test)."""
import iree.runtime
import ml_dtypes
import numpy as np
import pytest
from iree.compiler import compile_str as stock_compile_str

from compiler_target import compile_str
from hal_driver import runtime as rt

TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}

MATMUL = """
func.func @main(%a: tensor<{m}x{k}x{t}>, %b: tensor<{k}x{n}x{t}>) -> tensor<{m}x{n}x{t}> {{
  %c0 = arith.constant 0.0 : {t}
  %e = tensor.empty() : tensor<{m}x{n}x{t}>
  %z = linalg.fill ins(%c0 : {t}) outs(%e : tensor<{m}x{n}x{t}>) -> tensor<{m}x{n}x{t}>
  %r = linalg.matmul ins(%a, %b : tensor<{m}x{k}x{t}>, tensor<{k}x{n}x{t}>)
                     outs(%z : tensor<{m}x{n}x{t}>) -> tensor<{m}x{n}x{t}>
  return %r : tensor<{m}x{n}x{t}>
}}
"""

CONV = """
func.func @main(%x: tensor<1x24x18x18xf16>, %w: tensor<16x24x3x3xf16>) -> tensor<1x16x16x16xf16> {
  %c0 = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<1x16x16x16xf16>
  %z = linalg.fill ins(%c0 : f16) outs(%e : tensor<1x16x16x16xf16>) -> tensor<1x16x16x16xf16>
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x24x18x18xf16>, tensor<16x24x3x3xf16>)
       outs(%z : tensor<1x16x16x16xf16>) -> tensor<1x16x16x16xf16>
  return %r : tensor<1x16x16x16xf16>
}
"""


def _npu_sim(source: str, *inputs) -> np.ndarray:
    module = rt.load_vm_flatbuffer(compile_str(source, target_backends=["npu"]),
                                   driver="npu-sim")
    try:
        result = np.asarray(module.main(*inputs))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.npu_dispatches == stats.dispatches == 1
    return result


def _stock(source: str, *inputs) -> np.ndarray:
    vmfb = stock_compile_str(source, target_backends=["llvm-cpu"],
                             extra_args=["--iree-llvmcpu-target-cpu=host"])
    config = iree.runtime.Config("local-task")
    context = iree.runtime.SystemContext(config=config)
    context.add_vm_module(iree.runtime.VmModule.copy_buffer(config.vm_instance, vmfb))
    return context.modules.module.main(*inputs).to_host()


def _sequential(a, b, element):
    total = np.zeros((a.shape[0], b.shape[1]), element)
    for kk in range(a.shape[1]):
        total = total + np.outer(a[:, kk], b[kk])
    return total


def test_the_e2e_tests_sum_of_2048_hundredths():
    a = np.ones((8, 2048), np.float16)
    b = np.full((2048, 8), 0.01, np.float16)
    got = _npu_sim(MATMUL.format(m=8, n=8, k=2048, t="f16"), a, b)
    np.testing.assert_array_equal(got, np.full((8, 8), 20.28, np.float16))


def _operands(element, *shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(TYPES[element]) for shape in shapes]


def test_f16_matmul_has_stock_bits():
    a, b = _operands("f16", (13, 300), (300, 37), seed=11)
    source = MATMUL.format(m=13, n=37, k=300, t="f16")
    got = _npu_sim(source, a, b)
    np.testing.assert_array_equal(got, _sequential(a, b, np.float16))
    np.testing.assert_array_equal(got, _stock(source, a, b))


def test_bf16_matmul_sums_in_bf16():
    a, b = _operands("bf16", (13, 300), (300, 37), seed=11)
    got = _npu_sim(MATMUL.format(m=13, n=37, k=300, t="bf16"), a, b)
    np.testing.assert_array_equal(got, _sequential(a, b, ml_dtypes.bfloat16))


def test_f16_conv_sums_in_f16_in_channel_then_tap_order():
    x, w = _operands("f16", (1, 24, 18, 18), (16, 24, 3, 3), seed=12)
    got = _npu_sim(CONV, x, w)[0].reshape(16, -1)
    expected = np.zeros((16, 256), np.float16)
    exact = np.zeros((16, 256))
    for ci in range(24):
        for ky in range(3):
            for kx in range(3):
                tap = x[0, ci, ky:ky + 16, kx:kx + 16].reshape(-1)
                expected = expected + np.outer(w[:, ci, ky, kx], tap)
                exact += np.outer(w[:, ci, ky, kx].astype(np.float64), tap.astype(np.float64))
    np.testing.assert_array_equal(got, expected)
    # Stock's f16 sums, in its own loop order, are as far from the exact sum as ours;
    # sums in f32 rounded once would be about ten times nearer.
    ours = np.abs(got - exact).mean()
    stock = np.abs(_stock(CONV, x, w)[0].reshape(16, -1) - exact).mean()
    assert 0.7 < ours / stock < 1.4, (ours, stock)


MATMUL_BIAS = """
func.func @main(%a: tensor<13x300xf16>, %b: tensor<300x37xf16>, %c: tensor<37xf16>) -> tensor<13x37xf16> {
  %c0 = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<13x37xf16>
  %z = linalg.fill ins(%c0 : f16) outs(%e : tensor<13x37xf16>) -> tensor<13x37xf16>
  %r = linalg.matmul ins(%a, %b : tensor<13x300xf16>, tensor<300x37xf16>)
                     outs(%z : tensor<13x37xf16>) -> tensor<13x37xf16>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%r, %c : tensor<13x37xf16>, tensor<37xf16>) outs(%e : tensor<13x37xf16>) {
  ^bb0(%x: f16, %y: f16, %o: f16):
    %t = arith.addf %x, %y : f16
    linalg.yield %t : f16
  } -> tensor<13x37xf16>
  return %s : tensor<13x37xf16>
}
"""


def test_f16_matmul_adds_its_bias_after_the_sum():
    """The bias is added to the f16 sum, not summed into it from the start (the BIAS
    flag): stock's bits."""
    a, b = _operands("f16", (13, 300), (300, 37), seed=13)
    c = np.random.default_rng(14).standard_normal(37).astype(np.float16) * 30
    got = _npu_sim(MATMUL_BIAS, a, b, c)
    np.testing.assert_array_equal(got, _sequential(a, b, np.float16) + c)
    np.testing.assert_array_equal(got, _stock(MATMUL_BIAS, a, b, c))
