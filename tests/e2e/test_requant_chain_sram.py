"""A 1x1 int8 conv over 180x320 pixels whose epilogue requantizes a FiLM step (y·a + c +
y, ReLU; a and c computed per channel by two Gemms) into an int8 graph output, made by
onnxruntime's `quantize_static` (CSRNet's retouching layer). The contraction tiler's
footprint formula leaves out the SRAM the requantization plans for itself, so its
chosen tile failed to allocate and the whole conv ran on the host ('does not fit SRAM:
after.0 needs ...'); the next candidate with smaller tiles is now emitted. Checked bit
for bit against stock IREE llvm-cpu for the host CPU, as tests/real_models/quantized.py
does (stock built for `generic` x86-64, without FMA, rounds 5 of the 3.7 M int8 values of
this chain one step apart)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, quantized_static, stock_llvm_cpu

H, W = 180, 320


def _film_graph():
    rng = np.random.default_rng(0)
    weights = {"w": rng.normal(0, 0.5, (64, 3, 1, 1)), "b": rng.normal(0, 0.1, 64),
               "ga": rng.normal(0, 0.2, (64, 32)), "gc": rng.normal(0, 0.2, (64, 32))}
    initializers = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    initializers.append(numpy_helper.from_array(np.array([1, 64, 1, 1], np.int64), "shape"))
    node = helper.make_node
    nodes = [node("Gemm", ["z", "ga"], ["za"], transB=1), node("Reshape", ["za", "shape"], ["a"]),
             node("Gemm", ["z", "gc"], ["zc"], transB=1), node("Reshape", ["zc", "shape"], ["c"]),
             node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1]),
             node("Mul", ["y", "a"], ["ya"]), node("Add", ["ya", "c"], ["yac"]),
             node("Add", ["yac", "y"], ["s"]), node("Relu", ["s"], ["out"])]
    return helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, H, W)),
                     helper.make_tensor_value_info("z", TensorProto.FLOAT, (1, 32))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, (1, 64, H, W))], initializers)


def _int8_output_model(tmp_path):
    """The QDQ model with its last DequantizeLinear removed: an int8 graph output."""
    import onnx
    f32 = onnx_file(_film_graph(), tmp_path / "film.onnx")
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.uniform(0, 1, (1, 3, H, W)).astype(np.float32),
              "z": rng.uniform(-1, 1, (1, 32)).astype(np.float32)} for _ in range(4)]
    quantized = quantized_static(f32, tmp_path / "film_int8.onnx", feeds)
    model = onnx.load(quantized)
    last = model.graph.node[-1]
    assert last.op_type == "DequantizeLinear"
    model.graph.node.remove(last)
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info(last.input[0], TensorProto.INT8,
                                                            (1, 64, H, W)))
    onnx.save(model, quantized)
    return quantized


def test_an_int8_requant_chain_past_the_footprint_takes_a_smaller_tile(tmp_path):
    path = _int8_output_model(tmp_path)
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (1, 3, H, W)).astype(np.float32)
    z = rng.uniform(-1, 1, (1, 32)).astype(np.float32)
    call = call_on_npu(path, "g", x, z)
    assert call.stats.host_dispatches == 0, call.report
    stock = stock_llvm_cpu(path, ["--iree-llvmcpu-target-cpu=host"])
    expected = np.asarray(stock(x, z).to_host())
    np.testing.assert_array_equal(call.output, expected)
