"""Logarithms on the vector unit (vlog) against onnxruntime, every dispatch on the NPU:
LogSoftmax, the last layer of CTC text recognizers, x - max - log(Σ exp(x - max)).
(vlog1p, in softplus: tests/e2e/test_activations.py.)"""
import numpy as np
import onnxruntime
from onnx import TensorProto, helper

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

