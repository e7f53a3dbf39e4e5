"""MaxPool and AveragePool between QDQ pairs, as onnxruntime's `quantize_static` leaves
them in an int8 CNN (LPRNet, MediaPipe's face mesh and palm detector, SCRFD). IREE fused
the dequantization into the pooling's dispatch, which the NPU does not pool from (it
pools a tensor it reads as a strided view), and every such pooling ran on the host
('linalg.generic after a elementwise in the same dispatch'): LPRNet had 24 of its 30
dispatches on the NPU. A barrier (compiler_target/epilogue_barriers.py) now keeps the
dequantization a dispatch of its own. Checked against stock IREE llvm-cpu: MaxPool bit for
bit; AveragePool within one quantization step, since an average of values on the
quantization grid often falls on a rounding tie that the last bit of the division decides
(at the padded edges stock divides otherwise than the NPU's correctly rounded sum / count;
stock for the host CPU and onnxruntime disagree with it there as well)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, stock_llvm_cpu

SHAPE = (1, 32, 23, 41)
SCALE = 0.05
POOLS = {   # op, attributes, output rows and columns
    "max_3x3_s2_padded": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2],
                                          pads=[1, 1, 1, 1]), (12, 21)),
    "max_2x2": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2]), (11, 20)),
    "avg_3x3_padded": ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), (23, 41)),
    "avg_5x5_s5": ("AveragePool", dict(kernel_shape=[5, 5], strides=[5, 5]), (4, 8)),
}


@pytest.mark.parametrize("pool", POOLS)
def test_a_pooling_between_qdq_pairs_runs_on_the_npu(tmp_path, pool):
    kind, attributes, out = POOLS[pool]
    node = helper.make_node
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             node(kind, ["xd"], ["p"], **attributes),
             node("QuantizeLinear", ["p", "s", "z"], ["pq"]),
             node("DequantizeLinear", ["pq", "s", "z"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE[:2] + out)],
        [numpy_helper.from_array(np.array(SCALE, np.float32), "s"),
         numpy_helper.from_array(np.array(3, np.int8), "z")])
    path = onnx_file(graph, tmp_path / f"{pool}.onnx")
    x = (np.random.default_rng(0).standard_normal(SHAPE) * 3).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    expected = np.asarray(stock_llvm_cpu(path)(x).to_host())
    if kind == "MaxPool":
        np.testing.assert_array_equal(call.output, expected)
    else:
        np.testing.assert_allclose(call.output, expected, rtol=0, atol=SCALE * 1.001)

