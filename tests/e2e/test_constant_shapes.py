"""A shape computed from constants, as tf2onnx writes a Keras Dense layer on a 4-D tensor
(Tensordot: Shape, Cast to int32, Gather, ReduceProd, Concat, Cast to int64 into a
Reshape's target): IREE's const-eval computes it into an immutable global, and read back
with util.global.load it left the Reshape and its MatMul dynamic, with extents the host
program reads from a device buffer; the npu target could not evaluate them and the MatMul
ran on the host. compiler_target.constant_globals reads such small integer globals as
constants where global optimization ends, so the MatMul is static and on the NPU."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import (call_on_npu, onnx_file, onnxruntime_output,
                                  quantized_static, stock_llvm_cpu)


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


def _reshaped_weight_gemm(tmp_path):
    """A Gemm whose weight is reshaped by a shape computed from the weight's own (Shape,
    Gather, ReduceProd, Concat, as tf2onnx writes an einsum), quantized with
    onnxruntime's quantize_static, which quantizes the reshaped weight as an activation."""
    rng = np.random.default_rng(0)
    initializers = [
        numpy_helper.from_array(rng.normal(0, 0.2, (1, 1, 128, 8, 16)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([3, 4], np.int64), "inner_dims"),
        numpy_helper.from_array(np.array([128], np.int64), "rows")]
    node = helper.make_node
    nodes = [node("Shape", ["w"], ["shape"]), node("Gather", ["shape", "inner_dims"], ["inner"]),
             node("ReduceProd", ["inner"], ["cols"], keepdims=1),
             node("Concat", ["rows", "cols"], ["target"], axis=0),
             node("Reshape", ["w", "target"], ["w2"]), node("Gemm", ["x", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (96, 128))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    f32 = tmp_path / "gemm.onnx"        # the output's shape as shape inference finds it
    onnx.save(onnx.shape_inference.infer_shapes(model, data_prop=True), f32)
    samples = np.random.default_rng(1).uniform(-1, 1, (4, 96, 128)).astype(np.float32)
    return quantized_static(f32, tmp_path / "gemm_int8.onnx", [{"x": x} for x in samples])


def test_a_quantized_weight_reshaped_by_a_computed_shape_compiles_and_runs_on_the_npu(tmp_path):
    """With the computed shape inlined as a constant, IREE 3.13 folded it into the
    weight's quantize_affine output and not its input, which then failed verification
    (stock compiles it): the npu target compiles such a module again without inlining,
    and the MatMul's extents, read from integer globals by the probe evaluator, put it
    on the NPU. Bit for bit against stock IREE llvm-cpu."""
    path = _reshaped_weight_gemm(tmp_path)
    x = np.random.default_rng(2).uniform(-1, 1, (96, 128)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert "matmul_like_96xDx128_i8xi8xi32" in call.report
    assert "matmul_like_96xDx128_i8xi8xi32: linalg.generic 96x? i32 -> npu" in call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))


def test_a_computed_reshape_target_with_minus_one_compiles_as_stock_does(tmp_path):
    """Reshape to (rows, -1, 16), rows computed from the input's shape (tf2onnx's einsum,
    a G2P BERT's attention): IREE 3.13's importer passes the -1 on to tensor.reshape, so
    const-eval's global holds it, and inlined as a constant it made the flow and stream
    passes compute a negative resource size ('invalid Read access range [0 to -1536]').
    Globals with negative values stay loads: the module compiles, as for stock."""
    from compiler_target import compile_file
    initializers = [numpy_helper.from_array(np.array([0, 1], np.int64), "lead"),
                    numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
                    numpy_helper.from_array(np.array([16], np.int64), "sixteen"),
                    numpy_helper.from_array(np.ones((16, 24), np.float32), "w")]
    node = helper.make_node
    nodes = [node("Shape", ["x"], ["shape"]), node("Gather", ["shape", "lead"], ["lead_dims"]),
             node("ReduceProd", ["lead_dims"], ["rows"], keepdims=1),
             node("Concat", ["rows", "minus_one", "sixteen"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["x3"]), node("MatMul", ["x3", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (3, 8, 32, 16))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "minus_one.onnx"
    onnx.save(onnx.shape_inference.infer_shapes(model, data_prop=True), path)
    assert compile_file(str(path), target_backends=["npu"])
