"""A feature pyramid's top-down step compiled once for any image size (DBNet's neck: a
lateral 1x1 conv plus the coarser level upsampled by a nearest Resize). IREE fuses the
Resize's gather into the conv's dispatch, whose epilogue the NPU cannot read; a static
build separates it with a barrier (epilogue_barriers). With dynamic H and W the barrier
was left out (its result's extents were lost to the flow phase) and the conv, with its
MACs, ran on the host; the barrier's result is now tied to the operand's extents."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import on_npu_and_onnxruntime, onnx_file


def _top_down_step(tmp_path):
    rng = np.random.default_rng(0)
    initializers = [
        numpy_helper.from_array((0.1 * rng.standard_normal((24, 40, 1, 1))).astype(np.float32), "lateral"),
        numpy_helper.from_array((0.1 * rng.standard_normal((24, 40, 3, 3))).astype(np.float32), "down"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    node = helper.make_node
    nodes = [node("Conv", ["x", "lateral"], ["a"], kernel_shape=[1, 1]),
             node("Conv", ["x", "down"], ["b"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1, 1, 1, 1]),
             node("Resize", ["b", "", "scales"], ["u"], mode="nearest"),
             node("Add", ["a", "u"], ["y"])]
    graph = helper.make_graph(
        nodes, "fpn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 40, "H", "W"))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 24, "H", "W"))], initializers)
    return onnx_file(graph, tmp_path / "fpn.onnx")


def test_dynamic_top_down_step_runs_on_the_npu(tmp_path):
    path = _top_down_step(tmp_path)
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((1, 40, h, w)).astype(np.float32)}
             for h, w in ((32, 48), (64, 40))]
    for got, expected in on_npu_and_onnxruntime(path, "fpn", feeds):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
