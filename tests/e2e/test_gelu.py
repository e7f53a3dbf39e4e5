"""A transformer MLP with PyTorch's exact GELU, x·(1 + erf(x/√2))/2, as torch.onnx exports
it (an Erf node): IREE fuses the bias and the GELU into the first matmul's dispatch, so
a GELU the NPU could not run would send that matmul, and its MACs, to the host. Checked
against onnxruntime, with every dispatch on the NPU."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

TOKENS, WIDTH, HIDDEN = 16, 64, 256


def test_gelu_mlp_runs_on_the_npu_and_matches_onnxruntime(tmp_path):
    rng = np.random.default_rng(11)
    weights = {"w1": rng.normal(0, 0.2, (WIDTH, HIDDEN)), "b1": rng.normal(0, 0.2, HIDDEN),
               "w2": rng.normal(0, 0.1, (HIDDEN, WIDTH)), "b2": rng.normal(0, 0.1, WIDTH),
               "r2": np.sqrt(2), "one": 1.0, "half": 0.5}
    N = helper.make_node
    nodes = [N("MatMul", ["x", "w1"], ["h"]), N("Add", ["h", "b1"], ["hb"]),
             N("Div", ["hb", "r2"], ["d"]), N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["e1"]),
             N("Mul", ["hb", "e1"], ["g"]), N("Mul", ["g", "half"], ["gelu"]),
             N("MatMul", ["gelu", "w2"], ["o"]), N("Add", ["o", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (TOKENS, WIDTH))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (TOKENS, WIDTH))],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in weights.items()])
    path = tmp_path / "mlp.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    x = rng.normal(0, 1, (TOKENS, WIDTH)).astype(np.float32)
    call = call_on_npu(path, "mlp", x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 2, call.report
    np.testing.assert_allclose(call.output, onnxruntime_output(path, {"x": x}), rtol=1e-4,
                               atol=1e-5)
