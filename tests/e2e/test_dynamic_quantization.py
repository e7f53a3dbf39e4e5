"""onnxruntime's dynamic quantization (MatMulInteger, after DynamicQuantizeLinear) on the
NPU: IREE lowers MatMulInteger to a matmul of i32 operands `ext(x) - ext(zp)` into i64
sums, which compiler_target.zero_point_contractions rewrites as a u8/i8 matmul plus the
zero-point terms. The integer results are checked bit for bit against the ONNX spec in
numpy, the dequantized one against stock IREE llvm-cpu on the same imported MLIR; every
matmul dispatch must run on the NPU."""
import subprocess

import iree.runtime
import numpy as np
import pytest
from iree.compiler import compile_file as stock_compile_file
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.conftest import STOCK_CPU_FLAGS, VENV_BIN
from tests.e2e.onnx_on_npu import call_on_npu

N = helper.make_node
ELEMENT = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _model(tmp_path, nodes, inputs, output, weights=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", *output)], list(weights))
    path = tmp_path / "g.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def _stock_llvm_cpu(path):
    """Stock IREE llvm-cpu's `g` on the ONNX model, imported as the npu target imports it."""
    mlir = path.with_suffix(".mlir")
    subprocess.run([VENV_BIN / "iree-import-onnx", path, "-o", mlir], check=True)
    vmfb = stock_compile_file(str(mlir), target_backends=["llvm-cpu"], extra_args=STOCK_CPU_FLAGS)
    return iree.runtime.load_vm_flatbuffer(vmfb, driver="local-task").g


def _spec(a, a_zero, b, b_zero) -> np.ndarray:
    """MatMulInteger as the ONNX spec says: (a - a_zero) @ (b - b_zero), exact."""
    return ((a.astype(np.int64) - np.int64(a_zero)) @ (b.astype(np.int64) - b_zero)).astype(np.int32)


def _matmul_dispatches_on_npu(report: str) -> int:
    lines = [line for line in report.splitlines() if "matmul" in line and line.startswith("Dispatch")]
    assert lines and all("-> npu" in line for line in lines), report
    return len(lines)


@pytest.mark.parametrize("a_type, b_type, lhs_shape, per_column", [
    (np.uint8, np.int8, (8, 96), False),        # quantize_dynamic's default: u8 x s8
    (np.uint8, np.int8, (2, 12, 96), True),     # batched activations, per-column weights
    (np.int8, np.int8, (8, 96), True),
    (np.uint8, np.uint8, (3, 5, 96), False),
], ids=["u8s8", "u8s8_batched_per_column", "s8s8_per_column", "u8u8_batched"])
def test_matmul_integer_with_constant_weights(tmp_path, a_type, b_type, lhs_shape, per_column):
    rng = np.random.default_rng(7)
    k, n = lhs_shape[-1], 40
    info = np.iinfo(b_type)
    b = rng.integers(info.min, info.max + 1, (k, n)).astype(b_type)
    b_zero = (rng.integers(info.min, info.max + 1, n) if per_column else
              np.array(info.min // 2 + 7)).astype(b_type)
    path = _model(tmp_path, [N("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])],
                  [("a", ELEMENT[a_type], lhs_shape), ("a_zero", ELEMENT[a_type], ())],
                  (TensorProto.INT32, (*lhs_shape[:-1], n)),
                  [numpy_helper.from_array(b, "b"), numpy_helper.from_array(b_zero, "b_zero")])
    info = np.iinfo(a_type)
    a = rng.integers(info.min, info.max + 1, lhs_shape).astype(a_type)
    a_zero = np.array(info.min + 100, a_type)
    call = call_on_npu(path, "g", a, a_zero)
    _matmul_dispatches_on_npu(call.report)
    np.testing.assert_array_equal(call.output, _spec(a, a_zero, b, b_zero))


def test_matmul_integer_of_two_activations(tmp_path):
    """Both operands and both zero points at run time (attention's QK^T, quantized)."""
    rng = np.random.default_rng(8)
    shape_a, shape_b = (2, 16, 32), (2, 32, 24)
    path = _model(tmp_path, [N("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])],
                  [("a", TensorProto.UINT8, shape_a), ("b", TensorProto.UINT8, shape_b),
                   ("a_zero", TensorProto.UINT8, ()), ("b_zero", TensorProto.UINT8, ())],
                  (TensorProto.INT32, (2, 16, 24)))
    a = rng.integers(0, 256, shape_a).astype(np.uint8)
    b = rng.integers(0, 256, shape_b).astype(np.uint8)
    a_zero, b_zero = np.array(131, np.uint8), np.array(77, np.uint8)
    call = call_on_npu(path, "g", a, b, a_zero, b_zero)
    _matmul_dispatches_on_npu(call.report)
    np.testing.assert_array_equal(call.output, _spec(a, a_zero, b, b_zero))


def test_dynamically_quantized_linear_layer_matches_stock(tmp_path):
    """quantize_dynamic's pattern for one MatMul: DynamicQuantizeLinear(x), MatMulInteger
    with the int8 weights, Cast, Mul by both scales."""
    rng = np.random.default_rng(9)
    k, n = 256, 64
    weights = rng.integers(-127, 128, (k, n)).astype(np.int8)
    nodes = [N("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             N("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
             N("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             N("Mul", ["xs", "ws"], ["s"]), N("Mul", ["accf", "s"], ["y"])]
    path = _model(tmp_path, nodes, [("x", TensorProto.FLOAT, (1, 12, k))],
                  (TensorProto.FLOAT, (1, 12, n)),
                  [numpy_helper.from_array(weights, "w"),
                   numpy_helper.from_array(np.array(3, np.int8), "wz"),
                   numpy_helper.from_array(np.array(0.01, np.float32), "ws")])
    x = rng.normal(0.3, 1.0, (1, 12, k)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    _matmul_dispatches_on_npu(call.report)
    stock = _stock_llvm_cpu(path)
    np.testing.assert_array_equal(call.output, np.asarray(stock(x).to_host()))
    scale = (max(0.0, x.max()) - min(0.0, x.min())) / np.float32(255)
    zero = np.clip(np.rint(-min(0.0, x.min()) / scale), 0, 255)
    quantized = np.clip(np.rint(x / scale) + zero, 0, 255)
    spec = _spec(quantized, zero, weights, 3) * (np.float32(scale) * np.float32(0.01))
    np.testing.assert_allclose(call.output, spec, rtol=1e-5, atol=1e-5 * np.abs(spec).max())
