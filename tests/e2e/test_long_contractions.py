"""A pointwise convolution over 360x640 pixels whose epilogue computes its per-channel
scale and shift from per-channel inputs (CSRNet's retouching layer: the Gemm bias adds
IREE fuses in, `c * (g + gb) + (b + bb) + c`, then Relu). Its accumulator tiles with
the epilogue's temporaries fit SRAM only below about 3,600 pixels, and the M blocks
tried were 230,400 / k for k <= 64 (at least 3,600) and 1..8: it ran 8 pixels a tile,
28,800 tiles, 20x stock's compile time and a 35 MB vmfb. Blocks of powers of two
between are tried too."""
import re

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, onnxruntime_output

C, H, W = 64, 360, 640


def _retouching_layer(tmp_path):
    rng = np.random.default_rng(0)
    initializers = [numpy_helper.from_array(v.astype(np.float32), name) for name, v in (
        ("w", 0.1 * rng.standard_normal((C, C, 1, 1))), ("bias", 0.1 * rng.standard_normal(C)),
        ("gb", 0.1 * rng.standard_normal(C)), ("bb", 0.1 * rng.standard_normal(C)))]
    initializers.append(numpy_helper.from_array(np.array([1, C, 1, 1], np.int64), "shape"))
    node = helper.make_node
    nodes = [node("Conv", ["x", "w", "bias"], ["c"], kernel_shape=[1, 1]),
             node("Add", ["g_in", "gb"], ["g"]), node("Add", ["b_in", "bb"], ["b"]),
             node("Reshape", ["g", "shape"], ["gamma"]), node("Reshape", ["b", "shape"], ["beta"]),
             node("Mul", ["c", "gamma"], ["m"]), node("Add", ["m", "beta"], ["a0"]),
             node("Add", ["a0", "c"], ["a"]), node("Relu", ["a"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, H, W)),
              helper.make_tensor_value_info("g_in", TensorProto.FLOAT, (1, C)),
              helper.make_tensor_value_info("b_in", TensorProto.FLOAT, (1, C))]
    graph = helper.make_graph(nodes, "retouch", inputs, [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, (1, C, H, W))], initializers)
    return onnx_file(graph, tmp_path / "retouch.onnx")


def test_long_matmul_with_a_heavy_epilogue_takes_blocks_of_many_pixels(tmp_path):
    path = _retouching_layer(tmp_path)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    g, b = rng.standard_normal((1, C)).astype(np.float32), rng.standard_normal((1, C)).astype(np.float32)
    call = call_on_npu(path, "retouch", x, g, b)
    assert call.stats.host_dispatches == 0, call.report
    pixels_per_tile = int(re.search(r"tiles (\d+)x", call.report).group(1))
    assert pixels_per_tile >= 256, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x, "g_in": g, "b_in": b}),
                               rtol=1e-4, atol=1e-4)
