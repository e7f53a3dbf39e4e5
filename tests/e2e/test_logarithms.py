"""Logarithms on the vector unit (vlog, vlog1p) against onnxruntime, every dispatch on
the NPU: LogSoftmax, the last layer of CTC text recognizers, x - max - log(Σ exp(x - max)),
and softplus and mish fused into a convolution."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler_target import compile_file
from hal_driver import runtime as rt

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
    [expected] = onnxruntime.InferenceSession(
        str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    report = tmp_path / "report.txt"
    module = rt.load_vm_flatbuffer(
        compile_file(str(path), target_backends=["npu"],
                     extra_args=[f"--iree-npu-dispatch-report={report}"]), driver="npu-sim")
    try:
        got = np.asarray(module.logsoftmax(x))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.host_dispatches == 0 and stats.npu_dispatches >= 1, report.read_text()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=2e-6)


def _conv_then(tmp_path, activation: str):
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(activation, ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, activation.lower(),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 12, 12))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 16, 12, 12))],
        [numpy_helper.from_array(rng.normal(0, 1.5, (16, 8, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.normal(0, 4, 16).astype(np.float32), "b")])
    path = tmp_path / f"{activation}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                     .SerializeToString())
    return path


@pytest.mark.parametrize("activation", ["Softplus", "Mish"])
def test_softplus_and_mish_keep_their_conv_on_the_npu(tmp_path, activation):
    """Softplus as IREE writes it, x > 20 ? x : max(x, 0) + log1p(exp(-|x|)), fused into
    the conv before it (YOLOv4's Mish is x·tanh(softplus(x))): vlog1p and vselgt for the
    threshold. The conv's outputs span about ±60, both sides of the threshold."""
    path = _conv_then(tmp_path, activation)
    x = np.random.default_rng(4).normal(0, 1, (1, 8, 12, 12)).astype(np.float32)
    [expected] = onnxruntime.InferenceSession(
        str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    report = tmp_path / "report.txt"
    module = rt.load_vm_flatbuffer(
        compile_file(str(path), target_backends=["npu"],
                     extra_args=[f"--iree-npu-dispatch-report={report}"]), driver="npu-sim")
    try:
        got = np.asarray(getattr(module, activation.lower())(x))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.host_dispatches == 0 and stats.npu_dispatches >= 1, report.read_text()
    assert np.max(expected) > 20
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)
