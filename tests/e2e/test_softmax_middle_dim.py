"""A softmax over a middle dim runs on the NPU, against onnxruntime: YOLOv8's
distribution focal loss head (nudenet, and other YOLOv8 exports) views its 64 box
channels as 4 x 16 bins, softmaxes over the bins and takes their expectation with a
1x1 conv of weights 0..15. IREE's softmax reduces the middle dim of a 4 x 16 x anchors
tensor; the kept dims around it (4 and the anchors) do not flatten into one, which sent
the dispatch to the host: the Rowwise op now has a batch dim, B rows of O."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

ANCHORS = 300


def _dfl(tmp_path):
    N = helper.make_node
    weights = [numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "w"),
               numpy_helper.from_array(np.array([1, 4, 16, ANCHORS], np.int64), "bins"),
               numpy_helper.from_array(np.array([1, 4, ANCHORS], np.int64), "boxes")]
    nodes = [N("Reshape", ["x", "bins"], ["b"]), N("Transpose", ["b"], ["t"], perm=[0, 2, 1, 3]),
             N("Softmax", ["t"], ["p"], axis=1), N("Conv", ["p", "w"], ["e"]),
             N("Reshape", ["e", "boxes"], ["y"])]
    graph = helper.make_graph(
        nodes, "dfl", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 64, ANCHORS))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, ANCHORS))], weights)
    path = tmp_path / "dfl.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def test_distribution_focal_loss_softmax_runs_on_the_npu(tmp_path):
    path = _dfl(tmp_path)
    x = (np.random.default_rng(1).standard_normal((1, 64, ANCHORS)) * 3).astype(np.float32)
    call = call_on_npu(path, "dfl", x)
    assert call.stats.host_dispatches == 0, call.report
    assert "rowwise" in call.report, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-5,
                               atol=1e-5)
