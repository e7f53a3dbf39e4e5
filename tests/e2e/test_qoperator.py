"""Int8 graphs in onnxruntime's QOperator format (`quantize_static(...,
quant_format=QuantFormat.QOperator)`: QLinearConv, com.microsoft's QLinearAdd, an int8
MaxPool), as a user quantizes a network: MobileFaceNet's residual add became a
QLinearAdd whose zero points the importer subtracts in i64, and IREE fuses that into the
conv's dispatch (int8 MACs on the host: 'arith.extsi on i64'); a MaxPool on int8 data
is an `arith.maxsi` window. Checked bit for bit against stock IREE llvm-cpu."""
import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from tests.e2e.onnx_on_npu import (call_on_npu, onnx_file, onnxruntime_output, quantized_static,
                                   stock_llvm_cpu)

SHAPE = (1, 64, 28, 28)


def with_value_info(path):
    """The model with a value_info for every node output: onnxruntime's quantizer writes
    none for com.microsoft ops, without which the importer cannot type them."""
    model = onnx.load(str(path))
    known = {v.name for v in [*model.graph.value_info, *model.graph.output, *model.graph.input]}
    names = [o for node in model.graph.node for o in node.output if o not in known]
    probe = onnx.load(str(path))
    probe.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    feeds = {i.name: np.zeros([d.dim_value for d in i.type.tensor_type.shape.dim], np.float32)
             for i in model.graph.input}
    values = onnxruntime.InferenceSession(probe.SerializeToString(),
                                          providers=["CPUExecutionProvider"]).run(names, feeds)
    model.graph.value_info.extend(
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for name, v in zip(names, values))
    onnx.save(model, str(path))
    return path


def test_a_qlinear_add_fused_into_its_conv_runs_on_the_npu(tmp_path):
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.normal(0, 0.1, (64, 64, 1, 1)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.normal(0, 0.1, 64).astype(np.float32), "b")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], weights)
    f32 = onnx_file(graph, tmp_path / "residual.onnx")
    samples = np.random.default_rng(1).uniform(-1, 1, (4, *SHAPE)).astype(np.float32)
    path = quantized_static(f32, tmp_path / "residual_qop.onnx", [{"x": x} for x in samples],
                            quant_format="QOperator")
    assert "QLinearAdd" in {n.op_type for n in onnx.load(str(path)).graph.node}
    with_value_info(path)
    x = np.random.default_rng(2).uniform(-1, 1, SHAPE).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))
    np.testing.assert_array_equal(call.output, onnxruntime_output(path, {"x": x}))


def test_a_max_pool_of_int8_data_runs_on_the_npu(tmp_path):
    """Padded and strided, as ResNet's stem pool: the halo must lose to every byte."""
    scale, zero = (numpy_helper.from_array(np.array(v, dtype), n)
                   for v, dtype, n in ((0.02, np.float32, "s"), (-3, np.int8, "z")))
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("MaxPool", ["q"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                          pads=[1, 1, 1, 1]),
         helper.make_node("DequantizeLinear", ["p", "s", "z"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 16, 33, 40))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 16, 17, 20))], [scale, zero])
    path = onnx_file(graph, tmp_path / "pool.onnx")
    # Mostly below the zero point, so that windows of the border hold only small bytes.
    x = np.random.default_rng(0).uniform(-3, 0.5, (1, 16, 33, 40)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))
    np.testing.assert_array_equal(call.output, onnxruntime_output(path, {"x": x}))
