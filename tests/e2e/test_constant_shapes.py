"""A shape computed from constants, as tf2onnx writes a Keras Dense layer on a 4-D tensor
(Tensordot: Shape, Cast to int32, Gather, ReduceProd, Concat, Cast to int64 into a
Reshape's target): IREE's const-eval computes it into an immutable global, and read back
with util.global.load it left the Reshape and its MatMul dynamic, with extents the host
program reads from a device buffer; the npu target could not evaluate them and the MatMul
ran on the host. compiler_target.constant_globals reads such small integer globals as
constants where global optimization ends, so the MatMul is static and on the NPU."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, onnxruntime_output


def _tensordot(tmp_path):
    weight = (0.25 * np.random.default_rng(0).standard_normal((16, 48))).astype(np.float32)
    initializers = [numpy_helper.from_array(weight, "w"),
                    numpy_helper.from_array(np.array([0, 1, 2], np.int64), "lead_dims"),
                    numpy_helper.from_array(np.array([3], np.int64), "last_dim")]
    node = helper.make_node
    nodes = [node("Transpose", ["x"], ["xt"], perm=[0, 2, 3, 1]),
             node("Shape", ["xt"], ["shape64"]),
             node("Cast", ["shape64"], ["shape32"], to=TensorProto.INT32),
             node("Gather", ["shape32", "lead_dims"], ["lead"], axis=0),
             node("ReduceProd", ["lead"], ["rows"], axes=[0], keepdims=1),
             node("Gather", ["shape32", "last_dim"], ["last"], axis=0),
             node("ReduceProd", ["last"], ["cols"], axes=[0], keepdims=1),
             node("Concat", ["rows", "cols"], ["target32"], axis=0),
             node("Cast", ["target32"], ["target"], to=TensorProto.INT64),
             node("Reshape", ["xt", "target"], ["x2"]),
             node("MatMul", ["x2", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "tensordot", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 30, 40))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ("N", 48))], initializers)
    return onnx_file(graph, tmp_path / "tensordot.onnx")


def test_tensordot_reshape_is_static_and_its_matmul_on_the_npu(tmp_path):
    path = _tensordot(tmp_path)
    x = np.random.default_rng(1).standard_normal((1, 16, 30, 40)).astype(np.float32)
    call = call_on_npu(path, "tensordot", x)
    assert call.stats.host_dispatches == 0, call.report
    assert "matmul_1200x48x16" in call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-5,
                               atol=1e-5)
