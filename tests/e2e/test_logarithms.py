"""Logarithms on the vector unit (vlog) against onnxruntime, every dispatch on the NPU:
LogSoftmax, the last layer of CTC text recognizers, x - max - log(Σ exp(x - max)).
(vlog1p, in softplus: tests/e2e/test_activations.py.)"""
import numpy as np
from onnx import TensorProto, helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

SHAPE = (6, 40, 97)       # batch, time steps, classes


def test_log_softmax_runs_on_the_npu_and_matches_onnxruntime(tmp_path):
    node = helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)
    graph = helper.make_graph([node], "logsoftmax",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)])
    path = tmp_path / "logsoftmax.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = np.random.default_rng(5).normal(0, 4, SHAPE).astype(np.float32)
    call = call_on_npu(path, "logsoftmax", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-5,
                               atol=2e-6)

