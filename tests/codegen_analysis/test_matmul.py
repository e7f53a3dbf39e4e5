"""Matmuls: ONNX MatMul (2-D and batched), Gemm with transA/transB/alpha/beta/bias, and
MLIR linalg.matmul with transposed operands (indexing_maps)."""
import numpy as np
from onnx import helper

from compiler_target.codegen.ops import Elementwise, Matmul

from .models import analyses, onnx_model, onnx_reference, random, run_dispatch


def test_matmul(tmp_path):
    model = onnx_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       {"a": (64, 32), "b": (32, 48)})
    (mm,) = analyses(tmp_path, model)
    assert mm.summary == "linalg.matmul M=64 N=48 K=32 f32"
    op = mm.op
    assert isinstance(op, Matmul)
    assert (op.a.shape, op.a.strides) == ((1, 64, 32), (0, 32, 1))
    assert (op.b.shape, op.b.strides) == ((1, 32, 48), (0, 48, 1))
    assert (op.out.shape, op.out.strides) == ((1, 64, 48), (0, 48, 1))
    assert op.epilogue == [("acc",)]
    a, b = random(64, 32), random(32, 48)
    np.testing.assert_allclose(run_dispatch(mm, [a, b]).reshape(64, 48), a @ b, rtol=1e-5, atol=1e-5)


def test_batch_matmul(tmp_path):
    model = onnx_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       {"a": (4, 16, 8), "b": (4, 8, 12)})
    (mm,) = analyses(tmp_path, model)
    assert mm.summary == "linalg.batch_matmul B=4 M=16 N=12 K=8 f32"
    assert mm.macs == 4 * 16 * 12 * 8
    a, b = random(4, 16, 8), random(4, 8, 12)
    np.testing.assert_allclose(run_dispatch(mm, [a, b]).reshape(4, 16, 12), a @ b,
                               rtol=1e-5, atol=1e-5)


def test_gemm_transposed_with_bias(tmp_path):
    """Gemm transA=1 transB=1 alpha=.5 beta=2: IREE transposes A in a separate dispatch
    (a strided copy); B^T is a strided operand; alpha, beta and bias are the epilogue."""
    c = random(48)
    model = onnx_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1,
                                         alpha=0.5, beta=2.0)],
                       {"a": (32, 64), "b": (48, 32)}, {"c": c})
    transpose, mm = analyses(tmp_path, model)
    assert transpose.summary == "copy 64x32 f32"
    assert isinstance(transpose.op, Elementwise) and transpose.op.inputs[0].strides == (1, 64)
    assert mm.summary == "linalg.matmul M=64 N=48 K=32 b^T f32"
    assert mm.op.b.strides == (0, 1, 32)
    assert mm.op.epilogue == [("acc",), ("const", 0.5), ("mul", (0, 1)), ("input", 0),
                              ("const", 2.0), ("mul", (3, 4)), ("add", (2, 5))]
    a, b = random(32, 64), random(48, 32)
    a_t = run_dispatch(transpose, [a])
    got = run_dispatch(mm, [a_t, b]).reshape(64, 48)
    expected = onnx_reference(model, {"a": a, "b": b})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_gemm_constant_weight(tmp_path):
    b, c = random(32, 48), random(48)
    model = onnx_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"])], {"a": (64, 32)},
                       {"b": b, "c": c})
    (mm,) = analyses(tmp_path, model)
    assert mm.op.epilogue == [("acc",), ("input", 0), ("add", (0, 1))]
    a = random(64, 32)
    expected = onnx_reference(model, {"a": a})
    np.testing.assert_allclose(run_dispatch(mm, [a, b]).reshape(64, 48), expected,
                               rtol=1e-5, atol=1e-5)


TRANSPOSED = """
func.func @main(%a: tensor<32x64xf32>, %b: tensor<48x32xf32>) -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (n, k)>,
                                      affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %b : tensor<32x64xf32>, tensor<48x32xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  return %r : tensor<64x48xf32>
}
"""


def test_linalg_matmul_transposed_operands(tmp_path):
    (mm,) = analyses(tmp_path, mlir=TRANSPOSED)
    assert mm.summary == "linalg.matmul M=64 N=48 K=32 a^T b^T f32"
    assert mm.op.a.strides == (0, 1, 64) and mm.op.b.strides == (0, 1, 32)
    a, b = random(32, 64), random(48, 32)
    np.testing.assert_allclose(run_dispatch(mm, [a, b]).reshape(64, 48), a.T @ b.T,
                               rtol=1e-5, atol=1e-5)
