"""Integer compares (arith.cmpi, vcmp in i32) on the NPU against onnxruntime: a one-hot of
integer ids, Equal against a range then Cast to float, as the magika wheel's file-type
classifier encodes its input bytes, multiplied by an embedding; and a Where on a signed
Less of ids. Every dispatch runs on the NPU."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

IDS, CLASSES, WIDTH = 96, 40, 16


def test_one_hot_and_signed_select_run_on_the_npu(tmp_path):
    rng = np.random.default_rng(41)
    inits = [numpy_helper.from_array(np.arange(CLASSES, dtype=np.int32)[None, :], "classes"),
             numpy_helper.from_array(rng.standard_normal((CLASSES, WIDTH)).astype(np.float32),
                                     "embedding"),
             numpy_helper.from_array(np.array([[-3]], np.int32), "threshold")]
    nodes = [helper.make_node("Equal", ["ids", "classes"], ["hot"]),
             helper.make_node("Cast", ["hot"], ["one_hot"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["one_hot", "embedding"], ["embedded"]),
             helper.make_node("Less", ["ids", "threshold"], ["low"]),
             helper.make_node("Neg", ["embedded"], ["negated"]),
             helper.make_node("Where", ["low", "negated", "embedded"], ["y"])]
    graph = helper.make_graph(
        nodes, "onehot", [helper.make_tensor_value_info("ids", TensorProto.INT32, [IDS, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [IDS, WIDTH])], inits)
    path = tmp_path / "onehot.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    ids = rng.integers(-8, CLASSES + 4, (IDS, 1)).astype(np.int32)  # some match no class
    call = call_on_npu(path, "onehot", ids)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"ids": ids}), rtol=1e-6,
                               atol=1e-6)
