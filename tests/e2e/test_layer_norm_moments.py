"""A layer norm written with its moments (tf2onnx's, as in the magika wheel's file-type
classifier): mean = Σx/n and std = sqrt(max(Σx²/n - mean², 0) + eps) over a transposed
input. IREE forms one dispatch of the sum of squares whose per-row epilogue stores two
results (the mean and the variance term); the row-wise tiler stores both, so every
dispatch runs on the NPU, and the outputs match onnxruntime."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

ROWS, FEATURES = 48, 40


def test_layer_norm_moments_run_on_the_npu(tmp_path):
    rng = np.random.default_rng(31)

    def constant(name, value):
        return numpy_helper.from_array(np.asarray(value, np.float32), name)

    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
             helper.make_node("Mul", ["xt", "xt"], ["squares"]),
             helper.make_node("ReduceSum", ["squares", "axes"], ["sum_squares"], keepdims=1),
             helper.make_node("ReduceSum", ["xt", "axes"], ["sum"], keepdims=1),
             helper.make_node("Mul", ["sum", "inv_n"], ["mean"]),
             helper.make_node("Mul", ["sum_squares", "inv_n"], ["mean_squares"]),
             helper.make_node("Mul", ["mean", "mean"], ["mean2"]),
             helper.make_node("Sub", ["mean_squares", "mean2"], ["variance"]),
             helper.make_node("Max", ["variance", "zero"], ["clamped"]),
             helper.make_node("Add", ["clamped", "eps"], ["shifted"]),
             helper.make_node("Sqrt", ["shifted"], ["std"]),
             helper.make_node("Reciprocal", ["std"], ["rstd"]),
             helper.make_node("Mul", ["rstd", "gamma"], ["scale"]),
             helper.make_node("Sub", ["xt", "mean"], ["centred"]),
             helper.make_node("Mul", ["centred", "scale"], ["normed"]),
             helper.make_node("Add", ["normed", "beta"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "axes"),
             constant("inv_n", [1.0 / ROWS]), constant("zero", [0.0]), constant("eps", [1e-6]),
             constant("gamma", rng.uniform(0.5, 1.5, (1, ROWS))),
             constant("beta", rng.uniform(-0.5, 0.5, (1, ROWS)))]
    graph = helper.make_graph(
        nodes, "moments", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [FEATURES, ROWS])], inits)
    path = tmp_path / "moments.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.normal(0.5, 2.0, (ROWS, FEATURES)).astype(np.float32)
    call = call_on_npu(path, "moments", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    expected = onnxruntime_output(path, {"x": x})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
