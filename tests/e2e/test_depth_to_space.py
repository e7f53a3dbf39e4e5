"""DepthToSpace after a conv, as a PixelShuffle upsampling head has it (a text
detector's), in both modes: CRD (PyTorch's PixelShuffle) and DCR (the default); and
SpaceToDepth, which has the modes since opset 28. The importer of iree-base-compiler
3.13.0 lowers CRD wrongly, for every target; onnx_import rewrites CRD into Reshape,
Transpose, Reshape before importing. Checked against onnxruntime, with static shapes, a
dynamic batch, height and width (DepthToSpace then takes H and W from a Shape of the
input), and in the branches of an If."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output


def conv_then(path, op, mode, blocksize, filters, dims, out_shape, opset):
    """Conv 3x3 (pad 1) of 6 channels to `filters`, then `op` (DepthToSpace or
    SpaceToDepth); `dims` the input's (N, H, W), symbolic names for dynamic ones."""
    rng = np.random.default_rng(7)
    weights = (rng.standard_normal((filters, 6, 3, 3)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(filters).astype(np.float32)
    n, h, w = dims
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["features"], kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1]),
         helper.make_node(op, ["features"], ["y"], blocksize=blocksize, mode=mode,
                          name="shuffle")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (n, 6, h, w))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(bias, "b")])
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
                     .SerializeToString())


def check_on_npu(path, shape):
    x = np.random.default_rng(3).standard_normal((shape[0], 6, *shape[1:])).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    expected = onnxruntime_output(path, {"x": x})
    assert call.output.shape == expected.shape
    np.testing.assert_allclose(call.output, expected, rtol=1e-5,
                               atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
@pytest.mark.parametrize("blocksize, channels, dims, shape", [
    (2, 3, (1, 10, 12), (1, 10, 12)),
    (3, 2, (2, 5, 7), (2, 5, 7)),
    (2, 3, ("n", "h", "w"), (2, 6, 10)),
], ids=["b2_static", "b3_batch2", "b2_dynamic"])
def test_depth_to_space_matches_onnxruntime(tmp_path, mode, blocksize, channels, dims, shape):
    """A PixelShuffle head: the conv makes channels * blocksize^2 channels."""
    n, h, w = dims
    scaled = [d * blocksize if isinstance(d, int) else None for d in (h, w)]
    path = tmp_path / f"d2s_{mode}.onnx"
    conv_then(path, "DepthToSpace", mode, blocksize, channels * blocksize * blocksize, dims,
              (n, channels, *scaled), opset=17)
    check_on_npu(path, shape)


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
@pytest.mark.parametrize("blocksize, dims, shape", [
    (2, (1, 10, 12), (1, 10, 12)),
    (3, (2, 6, 9), (2, 6, 9)),
    (2, ("n", 10, 12), (3, 10, 12)),
], ids=["b2_static", "b3_batch2", "b2_dynamic_batch"])
def test_space_to_depth_matches_onnxruntime(tmp_path, mode, blocksize, dims, shape):
    """SpaceToDepth of a conv's 5 channels (opset 28, the first with mode)."""
    n, h, w = dims
    path = tmp_path / f"s2d_{mode}.onnx"
    conv_then(path, "SpaceToDepth", mode, blocksize, 5, dims,
              (n, 5 * blocksize * blocksize, h // blocksize, w // blocksize), opset=28)
    check_on_npu(path, shape)


def test_depth_to_space_in_if_branches_matches_onnxruntime(tmp_path):
    """A CRD node in a subgraph is rewritten too: an If whose then branch is CRD and
    whose else branch is DCR, of the same input."""
    def branch(name, mode):
        return helper.make_graph(
            [helper.make_node("DepthToSpace", ["x"], [name], blocksize=2, mode=mode)], name, [],
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, (2, 3, 6, 10))])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=branch("crd", "CRD"),
                          else_branch=branch("dcr", "DCR"))],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 12, 3, 5)),
              helper.make_tensor_value_info("cond", TensorProto.BOOL, ())],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 3, 6, 10))])
    path = tmp_path / "d2s_if.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = np.random.default_rng(5).standard_normal((2, 12, 3, 5)).astype(np.float32)
    for cond in (True, False):
        call = call_on_npu(path, "g", x, np.array(cond))
        expected = onnxruntime_output(path, {"x": x, "cond": np.array(cond)})
        np.testing.assert_array_equal(call.output, expected, err_msg=f"cond={cond}")
