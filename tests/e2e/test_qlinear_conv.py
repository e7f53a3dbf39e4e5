"""QLinearConv, the QOperator form of a quantized conv (onnxruntime's `quantize_static`
with QuantFormat.QOperator): u8 activations with a calibrated zero point, i8 weights and
an i32 bias. The importer gives IREE a `conv_2d_nchw_fchw_q` with constant zero points
into the broadcast bias; IREE then leaves `ext(x) - zx` in the conv's body, which the
NPU's i8 MAC cannot take, so the whole conv ran on the host unless the zero point was
128 (i8 0). zero_point_contractions.py splits it into the i8 conv and a per-filter term
summed into the bias (or into zeros, without one). Checked bit for bit against stock
IREE llvm-cpu."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, stock_llvm_cpu

CHANNELS, FILTERS, SIZE = 24, 48, 16


def _qlinear_conv_model(tmp_path, x_type, x_zero: int, kernel: int, bias: bool):
    rng = np.random.default_rng(kernel + x_zero)
    x_numpy = np.uint8 if x_type == TensorProto.UINT8 else np.int8
    scalars = [("xs", 0.02, np.float32), ("xz", x_zero, x_numpy), ("ws", 0.004, np.float32),
               ("wz", 0, np.int8), ("ys", 0.05, np.float32), ("yz", x_zero, x_numpy)]
    weights = [numpy_helper.from_array(np.array(v, t), n) for n, v, t in scalars] + [
        numpy_helper.from_array(rng.integers(-127, 128, (FILTERS, CHANNELS, kernel, kernel))
                                .astype(np.int8), "wq"),
        numpy_helper.from_array(rng.integers(-2000, 2000, FILTERS).astype(np.int32), "bq")]
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
         helper.make_node("QLinearConv", ["xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz"] +
                          (["bq"] if bias else []),
                          ["yq"], kernel_shape=[kernel, kernel], pads=[kernel // 2] * 4),
         helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, CHANNELS, SIZE, SIZE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, FILTERS, SIZE, SIZE))],
        weights)
    path = tmp_path / "g.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path



@pytest.mark.parametrize("x_type, x_zero, kernel, bias", [
    (TensorProto.UINT8, 124, 3, True), (TensorProto.UINT8, 124, 1, True),
    (TensorProto.INT8, 5, 1, True), (TensorProto.INT8, 5, 3, False),
    (TensorProto.UINT8, 128, 3, True)],
    ids=["u8_zp124_3x3", "u8_zp124_1x1", "i8_zp5_1x1", "i8_zp5_3x3_no_bias", "u8_zp128_3x3"])
def test_qlinear_conv_runs_on_the_npu_with_stock_bits(tmp_path, x_type, x_zero, kernel, bias):
    path = _qlinear_conv_model(tmp_path, x_type, x_zero, kernel, bias)
    x = (np.random.default_rng(2).standard_normal((1, CHANNELS, SIZE, SIZE)) * 1.5).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))
