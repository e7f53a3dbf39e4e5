"""A normalization whose rows do not fit SRAM, against onnxruntime, every dispatch on
the NPU: InstanceNormalization over a whole 256 x 384 image (98,304 f32 per channel),
as MODNet (a public wheel's portrait matting network) runs at its wheel's input size.
IREE forms two row-wise dispatches (x - mean, then the variance and the affine), each
now streamed through SRAM one pass per reduction (tile_rowwise, streamed_row)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

C, H, W = 4, 256, 384


def test_instance_norm_over_a_whole_image_runs_on_the_npu(tmp_path):
    rng = np.random.default_rng(3)
    scale = numpy_helper.from_array(rng.uniform(0.5, 1.5, C).astype(np.float32), "scale")
    bias = numpy_helper.from_array(rng.uniform(-1, 1, C).astype(np.float32), "bias")
    graph = helper.make_graph(
        [helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"],
                          epsilon=1e-5)],
        "instance_norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, H, W])], [scale, bias])
    path = tmp_path / "instance_norm.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = (rng.standard_normal((1, C, H, W)) * 3 + 1).astype(np.float32)
    call = call_on_npu(path, "instance_norm", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    expected = onnxruntime_output(path, {"x": x})
    np.testing.assert_allclose(call.output, expected, rtol=1e-4, atol=1e-4)
