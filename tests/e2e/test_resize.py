"""ONNX Resize, nearest, by a whole factor runs on the NPU, against onnxruntime: the
importer computes each source index from the output position with floor, ceil, a
compare and a select (nearest_mode round_prefer_floor); evaluated at compile time over
the positions (expressions.index_arithmetic) the index is the position divided by the
factor, a strided view of the input. Indices that are not (a rounding of y / 3) and a
bilinear Resize, whose four taps' weights vary with the position, still run on the host
(the test says so, so that a change is seen)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output


def _resize(tmp_path, mode: str, out_hw: tuple[int, int], nearest_mode: str):
    scales = numpy_helper.from_array(np.array([1, 1, out_hw[0] / 10, out_hw[1] / 10],
                                              np.float32), "scales")
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode,
                            coordinate_transformation_mode="asymmetric", nearest_mode=nearest_mode)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 10, 10))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 16) + out_hw)], [scales])
    path = tmp_path / f"resize_{mode}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


@pytest.mark.parametrize("mode, out_hw, nearest_mode, on_npu", [
    ("nearest", (20, 20), "round_prefer_floor", True),    # y / 2 rounded down at .5: y // 2
    ("nearest", (40, 30), "floor", True),                 # y // 4, x // 3
    ("nearest", (30, 30), "round_prefer_floor", False),   # round(y / 3): not a strided view
    ("linear", (20, 20), "round_prefer_floor", False)])
def test_resize_by_a_whole_factor(tmp_path, mode, out_hw, nearest_mode, on_npu):
    path = _resize(tmp_path, mode, out_hw, nearest_mode)
    x = np.random.default_rng(2).standard_normal((1, 16, 10, 10)).astype(np.float32)
    call = call_on_npu(path, "resize", x)
    assert (call.stats.host_dispatches == 0) == on_npu, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-6,
                               atol=1e-6)
