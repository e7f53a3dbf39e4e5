"""A 1x1 conv plus an addend that varies along H but not W (a positional term added to a
text recognizer's feature map, trueocr's): the contraction's M tile is a flattened run
of H x W positions, which such an addend is no single stride over, so the conv ran on
the host. The tile of that addend is now loaded densely (the DMA reads each row's value
again for every column). Checked against onnxruntime; an addend varying along W only is
the other case, a per-channel one the control."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

CHANNELS_IN, CHANNELS, HEIGHT, WIDTH = 32, 8, 12, 40


@pytest.mark.parametrize("addend_shape", [(1, CHANNELS, HEIGHT, 1), (1, CHANNELS, 1, WIDTH),
                                          (1, CHANNELS, 1, 1)], ids=["along_h", "along_w",
                                                                     "per_channel"])
def test_conv_plus_an_addend_broadcast_along_part_of_its_pixels(tmp_path, addend_shape):
    rng = np.random.default_rng(4)
    weights = [numpy_helper.from_array((rng.standard_normal((CHANNELS, CHANNELS_IN, 1, 1)) * 0.2)
                                       .astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(CHANNELS).astype(np.float32), "b")]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Add", ["c", "p"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, CHANNELS_IN, HEIGHT, WIDTH)),
              helper.make_tensor_value_info("p", TensorProto.FLOAT, addend_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, CHANNELS, HEIGHT, WIDTH))], weights)
    path = tmp_path / "g.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.standard_normal((1, CHANNELS_IN, HEIGHT, WIDTH)).astype(np.float32)
    p = rng.standard_normal(addend_shape).astype(np.float32)
    call = call_on_npu(path, "g", x, p)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x, "p": p}),
                               rtol=1e-5, atol=1e-5)
