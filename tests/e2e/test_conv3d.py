"""3-D convolutions (a brain segmentation network's dilated Conv3d layers) on the NPU as
2-D ones over depth-stacked input slices (compiler_target/depth_stacked_convs.py),
against onnxruntime. They ran on the host ('convolution with 3 windowed dims')."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, onnxruntime_output, stock_llvm_cpu

CASES = {
    # channels, features, kernel, strides, dilations, pads (begin d h w, end d h w)
    "one_channel_same": (1, 5, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1, 1, 1)),
    "dilated_same": (4, 5, (3, 3, 3), (1, 1, 1), (2, 2, 2), (2, 2, 2, 2, 2, 2)),
    "strided_uneven": (3, 6, (3, 2, 3), (2, 1, 2), (1, 2, 1), (1, 0, 1, 0, 1, 1)),
    "pointwise": (5, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0, 0, 0, 0)),
}


@pytest.mark.parametrize("case", CASES)
def test_conv3d_with_bias_and_relu_runs_on_the_npu(tmp_path, case):
    channels, features, kernel, strides, dilations, pads = CASES[case]
    rng = np.random.default_rng(len(case))
    w = (rng.standard_normal((features, channels, *kernel)) * 0.3).astype(np.float32)
    b = rng.standard_normal(features).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=list(kernel),
                              strides=list(strides), dilations=list(dilations), pads=list(pads)),
             helper.make_node("Relu", ["c"], ["y"])]
    shape = (1, channels, 10, 12, 9)
    out = [(n + p0 + p1 - d * (k - 1) - 1) // s + 1 for n, p0, p1, d, k, s in
           zip(shape[2:], pads[:3], pads[3:], dilations, kernel, strides)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, features, *out))],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = onnx_file(graph, tmp_path / f"{case}.onnx")
    x = rng.standard_normal(shape).astype(np.float32)
    result = call_on_npu(path, "g", x)
    assert result.stats.host_dispatches == 0, result.report
    expected = onnxruntime_output(path, {"x": x})
    np.testing.assert_allclose(result.output, expected, rtol=1e-5, atol=1e-5)


def test_conv_transpose3d_runs_on_the_npu(tmp_path):
    """A 3-D U-Net's upsampling: IREE computes ConvTranspose as a convolution over the
    input spread out with zeros, which the same rewrite takes."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 6, 2, 2, 2)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[2, 2, 2],
                            strides=[2, 2, 2])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 4, 6, 8, 5))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 6, 12, 16, 10))],
        [numpy_helper.from_array(w, "w")])
    path = onnx_file(graph, tmp_path / "conv_transpose3d.onnx")
    x = rng.standard_normal((1, 4, 6, 8, 5)).astype(np.float32)
    result = call_on_npu(path, "g", x)
    assert result.stats.host_dispatches == 0, result.report
    np.testing.assert_allclose(result.output, onnxruntime_output(path, {"x": x}),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("weight_zero", [0, 130], ids=["symmetric", "u8_weights"])
def test_conv_integer_over_depth_runs_on_the_npu_in_i8(tmp_path, weight_zero):
    """A dynamically quantized Conv3d (DynamicQuantizeLinear, then ConvInteger over D, H, W
    of u8 data and weights with zero points) reaches the input phase as
    `conv_3d_ndhwc_dhwcf_q`; its zero points come out (zero_point_contractions.py) and the
    i8 conv is depth-stacked. A video classifier's two such convs were all its MACs, on
    the host. Exact: against stock and onnxruntime bit for bit."""
    rng = np.random.default_rng(3)
    w = rng.integers(0, 256, (6, 3, 3, 3, 3), dtype=np.uint8)
    constants = [numpy_helper.from_array(w, "w"),
                 numpy_helper.from_array(np.array(weight_zero, np.uint8), "wz")]
    graph = helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "xz"]),
         helper.make_node("ConvInteger", ["q", "w", "xz", "wz"], ["y"], kernel_shape=[3, 3, 3],
                          strides=[1, 2, 2], pads=[1, 1, 1, 1, 1, 1])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 5, 16, 12))],
        [helper.make_tensor_value_info("y", TensorProto.INT32, (1, 6, 5, 8, 6))], constants)
    path = onnx_file(graph, tmp_path / "conv_integer_3d.onnx")
    x = rng.uniform(-2, 2.5, (1, 3, 5, 16, 12)).astype(np.float32)
    result = call_on_npu(path, "g", x)
    assert result.stats.host_dispatches == 0, result.report
    assert "i8xi8xi32" in result.report, result.report
    np.testing.assert_array_equal(result.output, onnxruntime_output(path, {"x": x}))
    np.testing.assert_array_equal(result.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))
