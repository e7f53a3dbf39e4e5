"""A pre-norm transformer encoder block (ViT-Tiny's widths: 50 tokens of 192, 3 heads,
MLP 768) as torch.onnx exports one: LayerNormalization, Q/K/V projections, heads split by
Reshape/Transpose, scaled QK^T, Softmax, attention times V, output projection, residual
adds, and an MLP with exact GELU, x·(1 + erf(x/√2))/2 (an Erf node). IREE fuses the bias
and the GELU into the first MLP matmul's dispatch; every dispatch runs on the NPU and
the block matches onnxruntime. Quantized by onnxruntime's quantize_static (QDQ, int8),
the block runs on the NPU too, with stock llvm-cpu's bits on the same MLIR."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output
from tests.real_models.quantized import Calibration, import_mlir, run_stock

TOKENS, WIDTH, HEADS, HIDDEN = 50, 192, 3, 768
HEAD = WIDTH // HEADS


def _block(rng) -> tuple[list, dict]:
    N = helper.make_node
    weights = {}

    def w(name, shape, scale=0.05):
        weights[name] = rng.normal(0, scale, shape).astype(np.float32)
        return name

    def const(name, value):
        weights[name] = np.asarray(value)
        return name

    heads = const("heads", np.array([1, TOKENS, HEADS, HEAD], np.int64))
    nodes = [N("LayerNormalization", ["x", w("g1", WIDTH, 1), w("b1", WIDTH)], ["n1"], axis=-1)]
    for name in "qkv":
        nodes += [N("MatMul", ["n1", w(f"w{name}", (WIDTH, WIDTH))], [f"{name}0"]),
                  N("Add", [f"{name}0", w(f"b{name}", WIDTH)], [f"{name}1"]),
                  N("Reshape", [f"{name}1", heads], [f"{name}2"]),
                  N("Transpose", [f"{name}2"], [name],
                    perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [
        N("MatMul", ["q", "k"], ["s0"]),
        N("Mul", ["s0", const("scale", np.float32(HEAD ** -0.5))], ["s"]),
        N("Softmax", ["s"], ["p"], axis=-1), N("MatMul", ["p", "v"], ["a0"]),
        N("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
        N("Reshape", ["a1", const("tokens", np.array([1, TOKENS, WIDTH], np.int64))], ["a2"]),
        N("MatMul", ["a2", w("wo", (WIDTH, WIDTH))], ["o0"]),
        N("Add", ["o0", w("bo", WIDTH)], ["o1"]), N("Add", ["x", "o1"], ["r"]),
        N("LayerNormalization", ["r", w("g2", WIDTH, 1), w("b2", WIDTH)], ["n2"], axis=-1),
        N("MatMul", ["n2", w("w1", (WIDTH, HIDDEN))], ["h0"]),
        N("Add", ["h0", w("c1", HIDDEN)], ["h"]),
        N("Div", ["h", const("root2", np.float32(np.sqrt(2)))], ["e0"]), N("Erf", ["e0"], ["e1"]),
        N("Add", ["e1", const("one", np.float32(1))], ["e2"]), N("Mul", ["h", "e2"], ["e3"]),
        N("Mul", ["e3", const("half", np.float32(0.5))], ["gelu"]),
        N("MatMul", ["gelu", w("w2", (HIDDEN, WIDTH))], ["m0"]),
        N("Add", ["m0", w("c2", WIDTH)], ["m"]), N("Add", ["r", "m"], ["y"])]
    return nodes, weights


SHAPE = (1, TOKENS, WIDTH)


def _block_model(tmp_path, rng):
    nodes, weights = _block(rng)
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
        [numpy_helper.from_array(value, name) for name, value in weights.items()])
    path = tmp_path / "block.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def test_transformer_block_runs_on_the_npu_and_matches_onnxruntime(tmp_path):
    rng = np.random.default_rng(11)
    path = _block_model(tmp_path, rng)
    x = rng.normal(0, 1, SHAPE).astype(np.float32)
    call = call_on_npu(path, "block", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 8, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-4,
                               atol=1e-5)


def test_int8_transformer_block_has_stock_bits_on_the_npu(tmp_path):
    rng = np.random.default_rng(12)
    path, quantized = _block_model(tmp_path, rng), tmp_path / "block.int8.onnx"
    quantize_static(str(path), str(quantized), Calibration("x", SHAPE),
                    quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    mlir = import_mlir(quantized, tmp_path)
    x = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    call = call_on_npu(mlir, "block", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 8, call.report
    [stock] = run_stock(mlir, x, "block")
    np.testing.assert_array_equal(call.output, stock)
