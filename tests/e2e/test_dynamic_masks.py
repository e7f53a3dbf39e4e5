"""Attention scores masked by a bool padding mask, compiled once for any batch and
sequence length (an encoder-decoder's cross attention: Where(mask, q K^T, -1e9)). IREE
truncates the mask's i8 bytes to i1 with an `arith.trunci` on the whole tensor; once
specialised, canonicalization left it reading a `tensor.cast` back to the dynamic type,
and the dispatch went to the host ('dynamic shape (tensor<?x1x?xi8>)'). The specialised
dispatch now takes the static shape through such casts."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import on_npu_and_onnxruntime, onnx_file

D = 64


def _masked_scores(tmp_path):
    node = helper.make_node
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), node("MatMul", ["q", "kt"], ["s"]),
             node("Unsqueeze", ["mask", "axis"], ["m3"]), node("Where", ["m3", "s", "neg"], ["y"])]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, ("batch", 1, D)),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, ("batch", "sequence", D)),
              helper.make_tensor_value_info("mask", TensorProto.BOOL, ("batch", "sequence"))]
    graph = helper.make_graph(
        nodes, "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ("batch", 1, "sequence"))],
        [numpy_helper.from_array(np.array(-1e9, np.float32), "neg"),
         numpy_helper.from_array(np.array([1], np.int64), "axis")])
    return onnx_file(graph, tmp_path / "masked.onnx")


def test_a_dynamic_bool_mask_keeps_the_scores_on_the_npu(tmp_path):
    path = _masked_scores(tmp_path)
    rng = np.random.default_rng(3)
    feeds = [{"q": rng.standard_normal((batch, 1, D)).astype(np.float32),
              "k": rng.standard_normal((batch, sequence, D)).astype(np.float32),
              "mask": rng.random((batch, sequence)) < 0.7}
             for batch, sequence in ((1, 10), (4, 25))]
    for got, expected in on_npu_and_onnxruntime(path, "g", feeds):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
