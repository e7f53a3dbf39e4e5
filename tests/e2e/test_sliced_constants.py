"""A dispatch that slices an inlined constant, against onnxruntime, every dispatch on the
NPU. A public wheel's pitch tracker (swift-f0) ends a residual block with Conv, Add,
Relu and a Slice of the rows before the next, padded Conv: IREE computes the conv
without its bias and forms a dispatch of the bias add, the residual add and the relu,
whose bias is a `tensor.extract_slice` of a 1 x C constant (analysis/walk.py,
constant_slice)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

C, H, W, ROWS = 12, 32, 16, 24


def test_residual_block_sliced_before_a_padded_conv_runs_on_the_npu(tmp_path):
    rng = np.random.default_rng(0)

    def tensor(name, array):
        return numpy_helper.from_array(np.asarray(array), name)

    initializers = [
        tensor("w1", rng.uniform(-0.1, 0.1, (C, C, 3, 3)).astype(np.float32)),
        tensor("b1", rng.uniform(-1, 1, (C,)).astype(np.float32)),
        tensor("w2", rng.uniform(-0.1, 0.1, (4, C, 3, 3)).astype(np.float32)),
        tensor("b2", rng.uniform(-1, 1, (4,)).astype(np.float32)),
        tensor("starts", np.array([0], np.int64)), tensor("ends", np.array([ROWS], np.int64)),
        tensor("axes", np.array([2], np.int64))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["x", "conv"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["relu"]),
             helper.make_node("Slice", ["relu", "starts", "ends", "axes"], ["rows"]),
             helper.make_node("Conv", ["rows", "w2", "b2"], ["y"], pads=[1, 1, 0, 1])]
    graph = helper.make_graph(
        nodes, "residual_slice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, ROWS - 1, W])],
        initializers)
    path = tmp_path / "residual_slice.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.uniform(-1, 1, (1, C, H, W)).astype(np.float32)
    call = call_on_npu(path, "residual_slice", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 3, call.report
    expected = onnxruntime_output(path, {"x": x})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5,
                               atol=1e-5 * np.abs(expected).max())
