"""Networks in f16 (onnxruntime's float16 converter, the usual way to halve a model):
IREE sums f16 convolutions and matmuls in f32, truncates the sums to f16, extends them
again for f32 steps (a BatchNorm's folded scale) and computes activations in f16. These
mixed-precision dispatches ran on the host; they now run on the NPU, computing in f32
and rounding each f16 result to f16 (`vnarrow`), as stock's CPU code does.

Elementwise chains have stock's bits. A contraction's f32 sum is added in another order
than stock's, so its f16 result may round to the neighbouring f16 value: those are
checked to one f16 ulp of stock, and against onnxruntime."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.transformers.float16 import convert_float_to_float16

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output, stock_llvm_cpu
from tests.real_models.half import importable

F16 = TensorProto.FLOAT16
# Stock compiled for this CPU: with F16C and FMA, as the vector engine computes (the
# generic x86-64 target converts f16 in software, flushing f16 subnormals, and does not
# fuse a product into its sum).
HOST_CPU = ["--iree-llvmcpu-target-cpu=host"]


def _save(tmp_path, graph) -> object:
    path = tmp_path / "g.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path



def _f16_ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance between a and b in f16 steps (finite values)."""
    def ordered(v):
        bits = v.astype(np.float16).view(np.int16).astype(np.int32)
        return np.where(bits < 0, -(bits & 0x7FFF), bits)
    return int(np.max(np.abs(ordered(a) - ordered(b))))


def test_f16_chain_with_f32_steps_has_stock_bits(tmp_path):
    """x (f16) -> f32 -> x·s + t (f32 per channel) -> f16 -> HardSwish in f16: each f16
    result rounded where the IR rounds it; the f16 value before the activation is a
    second result."""
    rng = np.random.default_rng(3)
    shape = (1, 8, 12, 20)
    scale = rng.uniform(0.5, 2, (1, 8, 1, 1)).astype(np.float32)
    shift = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x32", "s"], ["m"]),
         helper.make_node("Add", ["m", "t"], ["a"]),
         helper.make_node("Cast", ["a"], ["y"], to=F16),
         helper.make_node("HardSwish", ["y"], ["z"])],
        "g", [helper.make_tensor_value_info("x", F16, shape)],
        [helper.make_tensor_value_info("y", F16, shape),
         helper.make_tensor_value_info("z", F16, shape)],
        [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(shift, "t")])
    path = _save(tmp_path, graph)
    x = (rng.standard_normal(shape) * 4).astype(np.float16)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    stock = stock_llvm_cpu(path, HOST_CPU)(x)
    np.testing.assert_array_equal(call.output, np.asarray(stock[0].to_host()))
    assert call.output.dtype == np.float16


def _small_cnn() -> onnx.ModelProto:
    """Conv, BatchNormalization, HardSwish, a depthwise conv, global average pool, Gemm
    and Softmax in f32, as a user exports them, before the f16 conversion."""
    rng = np.random.default_rng(7)

    def weight(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    bn = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("gamma", rng.uniform(0.5, 1.5, 16)), ("beta", rng.standard_normal(16) * 0.1),
        ("mean", rng.standard_normal(16) * 0.1), ("var", rng.uniform(0.5, 2, 16)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4,
                         strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["n1"]),
        helper.make_node("HardSwish", ["n1"], ["h1"]),
        helper.make_node("Conv", ["h1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4,
                         group=16),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["l"], transB=1),
        helper.make_node("Softmax", ["l"], ["y"], axis=1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 32, 48))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 10))],
        [weight("w1", 16, 3, 3, 3), weight("b1", 16), *bn, weight("w2", 16, 1, 3, 3),
         weight("w3", 10, 16), weight("b3", 10)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_network_converted_to_f16_runs_on_the_npu(tmp_path):
    """The small CNN through onnxruntime's float16 converter (f16 inside, f32 input and
    output): every dispatch on the NPU, within one f16 ulp of stock, and the class
    probabilities within f16 precision of onnxruntime's execution of the f16 model."""
    model = importable(convert_float_to_float16(_small_cnn(), keep_io_types=True))
    path = tmp_path / "g.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 48)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    stock = np.asarray(stock_llvm_cpu(path, HOST_CPU)(x).to_host())
    assert _f16_ulps(call.output, stock) <= 1
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), atol=2e-3)


def test_softmax_of_an_f16_tensor_extended_to_f32_runs_on_the_npu(tmp_path):
    """An f16 tensor extended to f32 and reduced along a middle dim (YOLOv8's
    distribution focal loss in an f16 network): the extension is a view of the f16
    tensor, which the reduction loads as f32. It ran on the host ('reduces a computed
    value along dims other than its last ones')."""
    shape = (1, 16, 4, 120)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT),
         helper.make_node("Softmax", ["x32"], ["y"], axis=1)],
        "g", [helper.make_tensor_value_info("x", F16, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    path = _save(tmp_path, graph)
    x = (np.random.default_rng(6).standard_normal(shape) * 3).astype(np.float16)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}),
                               rtol=1e-6, atol=1e-7)


def test_mean_of_an_f16_tensor_extended_to_f32_runs_on_the_npu(tmp_path):
    """The mean of an f16 feature map extended to f32 (a group norm's statistics in an
    f16 network): the extension is a view of the f16 tensor (above), so the reduction
    reads f16 and sums in f32. It ran on the host ('f16 -> f32 reductions are not
    supported'); each loaded tile is now converted to f32 and reduced there."""
    shape = (1, 32, 64, 64)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT),
         helper.make_node("ReduceMean", ["x32", "axes"], ["y"], keepdims=1)],
        "g", [helper.make_tensor_value_info("x", F16, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 32, 1, 1))],
        [numpy_helper.from_array(np.array([2, 3], np.int64), "axes")])
    path = tmp_path / "g.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                     .SerializeToString())
    x = (np.random.default_rng(11).standard_normal(shape) * 2 + 1).astype(np.float16)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}),
                               rtol=1e-5, atol=1e-6)
