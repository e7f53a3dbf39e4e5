"""A tensor read backwards (ONNX Slice with step -1, a VITS flow's channel flip) through a
dispatch shared by two call sites: IREE places the flipped tensor with a push-constant
binding offset, so the program reads it through a binding view, which must start at the
lowest byte the reversed tensor reaches (its last row), not at its first element's
(every row after that was at a negative offset: the dispatch went to the host)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, onnxruntime_output

C, T = 32, 16


def _flip_couplings(tmp_path, layers: int):
    rng = np.random.default_rng(5)
    initializers = [numpy_helper.from_array(np.array([v], np.int64), name) for v, name in
                    ((-1, "start"), (-2 ** 62, "end"), (1, "axis"), (-1, "step"))]
    initializers.append(numpy_helper.from_array(np.array([C // 2, C // 2], np.int64), "halves"))
    nodes, h = [], "x"
    for i in range(layers):
        weight = (0.1 * rng.standard_normal((C // 2, C // 2, 1))).astype(np.float32)
        initializers.append(numpy_helper.from_array(weight, f"w{i}"))
        nodes += [helper.make_node("Slice", [h, "start", "end", "axis", "step"], [f"f{i}"]),
                  helper.make_node("Split", [f"f{i}", "halves"], [f"a{i}", f"b{i}"], axis=1),
                  helper.make_node("Conv", [f"a{i}", f"w{i}"], [f"c{i}"]),
                  helper.make_node("Sub", [f"b{i}", f"c{i}"], [f"d{i}"]),
                  helper.make_node("Concat", [f"a{i}", f"d{i}"], [f"h{i}"], axis=1)]
        h = f"h{i}"
    graph = helper.make_graph(
        nodes, "flips", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, C, T))],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, (1, C, T))], initializers)
    return onnx_file(graph, tmp_path / f"flips{layers}.onnx")


def test_a_flip_shared_by_two_call_sites_runs_on_the_npu(tmp_path):
    path = _flip_couplings(tmp_path, 2)
    x = np.random.default_rng(6).standard_normal((1, C, T)).astype(np.float32)
    call = call_on_npu(path, "flips", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-5,
                               atol=1e-6)
