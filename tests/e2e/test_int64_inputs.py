"""i64 inputs converted to f32 on the NPU (dma.load.i64, vcvt from i64: npu-fb 2.10),
against onnxruntime, every dispatch on the NPU.

A public wheel's T5 decoder (traceforge-title-model) builds its attention bias once from
an int64 mask, (1 - Cast(mask)) * finfo.min, and every layer adds it to its scores:
IREE fuses the cast into the first layer's Q K^T dispatch, which stores the bias beside
the scores, and the i64 epilogue input sent that matmul to the host. And a plain Cast of
int64 ids to float: beyond 2^24 it rounds, once, as arith.sitofp does."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

HEADS, QUERIES, KEYS, DEPTH = 6, 8, 64, 64


def save(graph, path):
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def test_attention_bias_from_an_int64_mask_keeps_its_matmul_on_the_npu(tmp_path):
    def floats(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    scores = [1, HEADS, QUERIES, KEYS]
    nodes = [helper.make_node("Unsqueeze", ["mask", "axes"], ["mask4"]),
             helper.make_node("Cast", ["mask4"], ["maskf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "maskf"], ["masked"]),
             helper.make_node("Mul", ["masked", "lowest"], ["bias1"]),
             helper.make_node("ConstantOfShape", ["shape"], ["zeros"],
                              value=numpy_helper.from_array(np.zeros(1, np.float32))),
             helper.make_node("Add", ["zeros", "bias1"], ["bias"])]
    for layer in (1, 2):        # two layers read the bias: IREE materializes it
        nodes += [helper.make_node("MatMul", [f"q{layer}", f"k{layer}"], [f"s{layer}"]),
                  helper.make_node("Add", [f"s{layer}", "bias"], [f"a{layer}"]),
                  helper.make_node("Softmax", [f"a{layer}"], [f"p{layer}"], axis=-1)]
    graph = helper.make_graph(
        nodes, "masked_attention",
        [floats("q1", [1, HEADS, QUERIES, DEPTH]), floats("k1", [1, HEADS, DEPTH, KEYS]),
         floats("q2", [1, HEADS, QUERIES, DEPTH]), floats("k2", [1, HEADS, DEPTH, KEYS]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, [1, KEYS])],
        [floats("p1", scores), floats("p2", scores)],
        [numpy_helper.from_array(np.array(1, np.float32), "one"),
         numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "lowest"),
         numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
         numpy_helper.from_array(np.array(scores, np.int64), "shape")])
    path = save(graph, tmp_path / "masked_attention.onnx")
    rng = np.random.default_rng(5)
    q1, q2 = (rng.uniform(-1, 1, (1, HEADS, QUERIES, DEPTH)).astype(np.float32) for _ in "qq")
    k1, k2 = (rng.uniform(-1, 1, (1, HEADS, DEPTH, KEYS)).astype(np.float32) for _ in "kk")
    mask = (rng.random((1, KEYS)) < 0.8).astype(np.int64)
    call = call_on_npu(path, "masked_attention", q1, k1, q2, k2, mask)
    assert call.stats.host_dispatches == 0, call.report
    expected = onnxruntime_output(path, {"q1": q1, "k1": k1, "q2": q2, "k2": k2, "mask": mask})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scaled", [False, True])
def test_int64_ids_cast_to_float_round_once(tmp_path, scaled):
    """The Cast alone is a copy between dtypes (tile_elementwise), scaled an expression."""
    cast = helper.make_node("Cast", ["ids"], ["f" if scaled else "y"], to=TensorProto.FLOAT)
    graph = helper.make_graph(
        [cast] + ([helper.make_node("Mul", ["f", "half"], ["y"])] if scaled else []),
        "ids_to_float", [helper.make_tensor_value_info("ids", TensorProto.INT64, [4, 300])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 300])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")] if scaled else [])
    path = save(graph, tmp_path / "ids_to_float.onnx")
    rng = np.random.default_rng(6)
    ids = np.concatenate([rng.integers(0, 30000, 600), rng.integers(-2**62, 2**62, 600)]) \
        .astype(np.int64).reshape(4, 300)
    call = call_on_npu(path, "ids_to_float", ids)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, onnxruntime_output(path, {"ids": ids}))
