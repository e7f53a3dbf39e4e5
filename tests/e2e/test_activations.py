"""Activations fused into the convolution before them stay on the NPU with it, against
onnxruntime: the ones IREE writes with math.log1p (softplus, mish: vlog1p), with a select
that keeps a compared value (softplus's threshold x > 20 ? x : ..., PReLU's
x < 0 ? x·slope : x, ELU, ThresholdedRelu: vselgt) and with math.erf (GELU: verf).
A function the vector unit lacked sent the conv, and its MACs, to the host. The conv's
outputs span about ±60, both sides of softplus's threshold."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

ACTIVATIONS = {
    "Softplus": {}, "Mish": {}, "PRelu": {}, "Elu": {"alpha": 0.7},
    "ThresholdedRelu": {"alpha": 0.5}, "Gelu": {},
}


def _conv_then(tmp_path, activation: str):
    rng = np.random.default_rng(9)
    inputs = ["c", "slope"] if activation == "PRelu" else ["c"]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(activation, inputs, ["y"], **ACTIVATIONS[activation])]
    weights = [numpy_helper.from_array(rng.normal(0, 1.5, (16, 8, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.normal(0, 4, 16).astype(np.float32), "b")]
    if activation == "PRelu":
        weights.append(numpy_helper.from_array(
            rng.uniform(0.05, 0.3, (16, 1, 1)).astype(np.float32), "slope"))
    graph = helper.make_graph(
        nodes, activation.lower(),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 12, 12))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 16, 12, 12))], weights)
    path = tmp_path / f"{activation}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
                     .SerializeToString())
    return path


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_activation_keeps_its_conv_on_the_npu(tmp_path, activation):
    path = _conv_then(tmp_path, activation)
    x = np.random.default_rng(4).normal(0, 1, (1, 8, 12, 12)).astype(np.float32)
    call = call_on_npu(path, activation.lower(), x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=2e-5,
                               atol=2e-5)
