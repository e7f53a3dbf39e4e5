"""LocalResponseNormalization (AlexNet, GoogLeNet, ZFNet) on the NPU, against onnxruntime
and stock IREE llvm-cpu on the same MLIR: IREE turns it into a product and a windowed
average of squares over the channels, then x / (bias + alpha · average)^beta; with
beta = 0.75, the usual, the power is x^(1/2) · x^(1/4) (two square roots and a product).
(onnx's ReferenceEvaluator is not the reference here: its LRN is off by up to 1e-2 from
the operator's definition, which onnxruntime and stock follow to 1e-6.)"""
import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output
from tests.real_models.quantized import import_mlir, run_stock

SHAPE = (1, 24, 9, 11)


@pytest.mark.parametrize("size,alpha,beta,bias", [(5, 1e-4, 0.75, 1.0), (3, 0.02, 0.75, 2.0)])
def test_lrn_matches_onnxruntime_and_stock_on_the_npu(tmp_path, size, alpha, beta, bias):
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)
    graph = helper.make_graph([node], "lrn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "lrn.onnx"
    path.write_bytes(model.SerializeToString())
    mlir = import_mlir(path, tmp_path)
    x = np.random.default_rng(3).uniform(-4, 4, SHAPE).astype(np.float32)
    call = call_on_npu(mlir, "lrn", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    [stock] = run_stock(mlir, x, "lrn")
    np.testing.assert_allclose(call.output, stock, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=2e-6,
                               atol=1e-7)
