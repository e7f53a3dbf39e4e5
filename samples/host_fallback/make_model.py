"""A model with an op the NPU does not run: Gemm + Relu on the NPU, then CumSum, which
stays on the host CPU (llvm-cpu code under the npu-sim device).

    python samples/host_fallback/make_model.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sample_common import initializer, make_model, rng, save  # noqa: E402


def build():
    r = rng()
    inits = [initializer("w", r.standard_normal((64, 32)) * 0.2),
             initializer("b", r.standard_normal(32) * 0.1),
             helper.make_tensor("axis", TensorProto.INT64, [], [1])]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"]),
             helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("CumSum", ["r", "axis"], ["y"])]
    graph = helper.make_graph(
        nodes, "HostFallback",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])], inits)
    return make_model(graph), {"x": r.standard_normal((4, 64), dtype=np.float32)}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    model, inputs = build()
    save(model, out, "host_fallback", inputs)
