"""ReduceMin (and DynamicQuantizeLinear's min over a whole activation) on the NPU as a
tiled Reduce, -max(-x) chunk by chunk like a ReduceMax: it was a Rowwise expression,
which holds a whole row in SRAM, so a min over more than ~200k elements went to the
host. Exact against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output


@pytest.mark.parametrize("shape, axes", [((262144,), None), ((2, 262144), [1])],
                         ids=["vector_262144", "two_rows_of_262144"])
def test_reduce_min_of_long_rows_runs_on_the_npu(tmp_path, shape, axes):
    inputs = ["x"] + (["axes"] if axes else [])
    out_shape = () if axes is None else shape[:1]
    initializers = [helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes)] if axes else []
    graph = helper.make_graph(
        [helper.make_node("ReduceMin", inputs, ["y"], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], initializers)
    path = tmp_path / "reduce_min.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                     .SerializeToString())
    x = np.random.default_rng(13).standard_normal(shape).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, onnxruntime_output(path, {"x": x}))
