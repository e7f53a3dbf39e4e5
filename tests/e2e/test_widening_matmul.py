"""f16 and bf16 operands multiplied into f32 results (`extf, extf, mulf, addf` bodies:
IREE's lowering of a bf16 dot with an f32 result) run on the MAC array, which
accumulates half-precision operands in f32; checked against numpy in f32."""
import ml_dtypes
import numpy as np
import pytest

from compiler_target import compile_str
from hal_driver import runtime as rt

MATMUL = """
func.func @main(%a: tensor<24x40x{t}>, %b: tensor<40x16x{t}>) -> tensor<24x16xf32> {{
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<24x16xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<24x16xf32>) -> tensor<24x16xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                        affine_map<(m, n, k) -> (k, n)>,
                                        affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}}
       ins(%a, %b : tensor<24x40x{t}>, tensor<40x16x{t}>) outs(%z : tensor<24x16xf32>) {{
  ^bb0(%x: {t}, %y: {t}, %acc: f32):
    %xe = arith.extf %x : {t} to f32
    %ye = arith.extf %y : {t} to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }} -> tensor<24x16xf32>
  return %r : tensor<24x16xf32>
}}
"""


@pytest.mark.parametrize("element, numpy_type", [("f16", np.float16),
                                                 ("bf16", ml_dtypes.bfloat16)])
def test_half_precision_operands_accumulate_in_f32_on_the_npu(element, numpy_type):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((24, 40)).astype(numpy_type)
    b = rng.standard_normal((40, 16)).astype(numpy_type)
    module = rt.load_vm_flatbuffer(compile_str(MATMUL.format(t=element),
                                               target_backends=["npu"]), driver="npu-sim")
    try:
        got = np.asarray(module.main(a, b))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.npu_dispatches == stats.dispatches == 1
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
