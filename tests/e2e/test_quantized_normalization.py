"""A global mean/variance normalization between convs (OpenVINO's person re-id 0287:
ReduceMean over every axis, Sub, Mul, ReduceMean, Sqrt, Div), quantized with onnxruntime's
`quantize_static`. IREE puts the deviations' dequantization, the sum of their squares
and the division into one dispatch whose first op does not feed the reduction: the walk
made it the dispatch's main op and refused the reduction after it ('a second
computation independent of the reduce'), 14 host dispatches in re-id. It is now walked
where the division reads it, over the reduced tensor's dims. Bit for bit against stock
IREE llvm-cpu for the host CPU, as tests/real_models/quantized.py checks (the NPU fuses
a multiply and add into one rounding, as stock does with FMA; built for `generic`
x86-64, stock rounds 4 of the 65,536 values one quantization step apart)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, quantized_static, stock_llvm_cpu

SHAPE = (1, 32, 64, 32)


def test_a_quantized_global_normalization_runs_on_the_npu(tmp_path):
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.normal(0, 0.3, (32, 32, 1, 1)).astype(np.float32), w)
               for w in ("w1", "w2")] + [numpy_helper.from_array(np.array(1e-3, np.float32), "eps")]
    node, every_axis = helper.make_node, [0, 1, 2, 3]
    nodes = [node("Conv", ["x", "w1"], ["c"]), node("Add", ["c", "x"], ["a"]),
             node("ReduceMean", ["a"], ["mean"], axes=every_axis, keepdims=1),
             node("Sub", ["a", "mean"], ["d"]), node("Mul", ["d", "d"], ["squares"]),
             node("ReduceMean", ["squares"], ["variance"], axes=every_axis, keepdims=1),
             node("Add", ["variance", "eps"], ["v"]), node("Sqrt", ["v"], ["deviation"]),
             node("Div", ["d", "deviation"], ["normalized"]),
             node("Conv", ["normalized", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], weights)
    f32 = onnx_file(graph, tmp_path / "norm.onnx")
    samples = np.random.default_rng(1).uniform(-1, 1, (4, *SHAPE)).astype(np.float32)
    path = quantized_static(f32, tmp_path / "norm_int8.onnx", [{"x": x} for x in samples])
    x = np.random.default_rng(2).uniform(-1, 1, SHAPE).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    stock = stock_llvm_cpu(path, ["--iree-llvmcpu-target-cpu=host"])
    np.testing.assert_array_equal(call.output, np.asarray(stock(x).to_host()))
