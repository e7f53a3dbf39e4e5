"""An MLP: (MatMul -> Add bias -> Relu) x 3 over a batch of 8 vectors of 256.

    python samples/mlp/make_model.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sample_common import initializer, make_model, rng, save  # noqa: E402


def build():
    r = rng()
    nodes, inits = [], []
    x = "x"
    for k, (cin, cout) in enumerate([(256, 512), (512, 256), (256, 128)]):
        inits += [initializer(f"w{k}", r.standard_normal((cin, cout)) * (2.0 / cin) ** 0.5),
                  initializer(f"b{k}", r.standard_normal(cout) * 0.1)]
        nodes += [helper.make_node("MatMul", [x, f"w{k}"], [f"mm{k}"]),
                  helper.make_node("Add", [f"mm{k}", f"b{k}"], [f"add{k}"]),
                  helper.make_node("Relu", [f"add{k}"], [f"h{k}"])]
        x = f"h{k}"
    graph = helper.make_graph(
        nodes, "MLP",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 256])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [8, 128])], inits)
    return make_model(graph), {"x": r.standard_normal((8, 256), dtype=np.float32)}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    model, inputs = build()
    save(model, out, "mlp", inputs)
