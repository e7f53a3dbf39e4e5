"""Reductions whose reduced dims do not flatten into one in every view, on the NPU
against onnxruntime. They ran on the host ('reduction operand dims cannot be
flattened'); now a row is a box of several dims (Rowwise.row_rank). IREE writes a
normalization over (C, H, W) straight into the next convolution's padded input (a DDPM
UNet's LayerNorm; a re-identification network's whole-tensor RMS scaling, per-channel
affine and ReLU), and fuses a 3-D convolution's global pool with the transpose back
from its depth-stacked result (a video classifier)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, onnxruntime_output


def _checked(tmp_path, name, nodes, inits, shape, out_shape, seed):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    path = onnx_file(graph, tmp_path / f"{name}.onnx", opset=18)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    call = call_on_npu(path, name, x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}),
                               rtol=1e-4, atol=1e-4)
    return call


def test_layer_norm_over_channels_and_pixels_into_a_padded_conv(tmp_path):
    rng = np.random.default_rng(1)
    c, h, w = 32, 16, 16
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=1,
                              epsilon=1e-5),
             helper.make_node("Conv", ["n", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])]
    inits = [numpy_helper.from_array(rng.standard_normal((c, h, w)).astype(np.float32), "g"),
             numpy_helper.from_array(rng.standard_normal((c, h, w)).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((8, c, 3, 3)) * 0.1)
                                     .astype(np.float32), "w")]
    _checked(tmp_path, "layer_norm_chw", nodes, inits, (1, c, h, w), (1, 8, h, w), 2)


@pytest.mark.parametrize("shape", [(1, 8, 16, 12), (1, 32, 128, 64)],
                         ids=["tiles_of_whole_rows", "streamed_row"])
def test_rms_scaling_with_a_channel_affine_into_a_padded_conv(tmp_path, shape):
    """The per-channel scale and shift vary along one of the row's three dims (loaded
    spread over the other two); the larger tensor's one row (1 MiB) is streamed in
    chunks of whole channels."""
    rng = np.random.default_rng(3)
    c = shape[1]
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["me"]),
             helper.make_node("Sqrt", ["me"], ["rt"]),
             helper.make_node("Div", ["x", "rt"], ["n"]),
             helper.make_node("Mul", ["n", "g"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Pad", ["r", "pads"], ["p"]),
             helper.make_node("Conv", ["p", "w"], ["y"], kernel_shape=[2, 2])]
    inits = [numpy_helper.from_array(np.array([1, 2, 3], np.int64), "axes"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps"),
             numpy_helper.from_array(rng.standard_normal((c, 1, 1)).astype(np.float32), "g"),
             numpy_helper.from_array(rng.standard_normal((c, 1, 1)).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((8, c, 2, 2)) * 0.1)
                                     .astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64), "pads")]
    call = _checked(tmp_path, "rms_affine", nodes, inits, shape, (1, 8, *shape[2:]), 4)
    if shape[2] == 128:
        assert "passes over it in chunks" in call.report, call.report


def test_global_pool_of_a_3d_conv(tmp_path):
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((6, 4, 3, 3, 3)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3, 3], pads=[1] * 6),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    _checked(tmp_path, "conv3d_pool", nodes, [numpy_helper.from_array(w, "w")],
             (1, 4, 5, 12, 10), (1, 6, 1, 1, 1), 6)
