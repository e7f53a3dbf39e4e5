"""Cast of floats to uint8 (an image or a mask written out as bytes) on the NPU against
onnxruntime, bit for bit. The importer writes ONNX's Cast to uint8 as `arith.fptosi` to
i8, whose result MLIR leaves undefined beyond 127; stock IREE's CPU code keeps the low
bits of the i32 truncation, so 128..255 come out right read as uint8. The NPU did
saturate them to 127 (a probe found it at the end of a public FFT network); it now
keeps the low bits too."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

SHAPE = (4, 96)


def test_cast_to_uint8_keeps_values_above_127(tmp_path):
    scale = numpy_helper.from_array(np.array([2.5], np.float32), "scale")
    nodes = [helper.make_node("Mul", ["x", "scale"], ["scaled"]),
             helper.make_node("Cast", ["scaled"], ["y"], to=TensorProto.UINT8)]
    graph = helper.make_graph(
        nodes, "to_bytes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, SHAPE)], [scale])
    path = tmp_path / "to_bytes.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = np.random.default_rng(51).uniform(0, 102.3, SHAPE).astype(np.float32)   # 0..255.75
    call = call_on_npu(path, "to_bytes", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    expected = onnxruntime_output(path, {"x": x})
    assert (expected > 127).any()
    np.testing.assert_array_equal(np.asarray(call.output).view(np.uint8), expected)
