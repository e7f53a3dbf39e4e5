"""A Conv whose kernel is as tall as its input (a 2-D conv over a signal's channels, as
EEG and audio models have it): the output height is 1, IREE drops that dim, and the
kernel's rows become a second reduction loop over image and weight beside the input
channels. The two act as one channel loop of C x KH (contiguous in both operands); the
conv ran on the host before. Checked against onnxruntime; a kernel one row shorter (a
windowed height) is the control."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output


@pytest.mark.parametrize("channels, height, kernel_height", [(4, 8, 8), (6, 12, 12), (4, 8, 7)],
                         ids=["4x8_full", "6x12_full", "4x8_one_short"])
def test_conv_with_a_kernel_as_tall_as_its_input_runs_on_the_npu(tmp_path, channels, height,
                                                                 kernel_height):
    rng = np.random.default_rng(12)
    width, filters = 20, 8
    out_height = height - kernel_height + 1
    weights = (rng.standard_normal((filters, channels, kernel_height, 3)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(filters).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[kernel_height, 3],
                          pads=[0, 1, 0, 1])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, channels, height, width))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, filters, out_height, width))],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(bias, "b")])
    path = tmp_path / "conv.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.standard_normal((1, channels, height, width)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    expected = onnxruntime_output(path, {"x": x})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
