"""A small CNN: (Conv3x3 -> BatchNormalization -> Relu -> MaxPool2x2) x 3,
GlobalAveragePool, Flatten, Gemm. Input 1x3x64x64, 10 classes.

    python samples/small_cnn/make_model.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sample_common import initializer, make_model, rng, save  # noqa: E402


def conv_block(r, k: int, cin: int, cout: int, nodes: list, inits: list, x: str) -> str:
    p = f"b{k}_"
    inits += [initializer(p + "w", r.standard_normal((cout, cin, 3, 3)) * (2.0 / (9 * cin)) ** 0.5),
              initializer(p + "b", r.standard_normal(cout) * 0.1),
              initializer(p + "scale", 1.0 + 0.1 * r.standard_normal(cout)),
              initializer(p + "shift", 0.1 * r.standard_normal(cout)),
              initializer(p + "mean", 0.1 * r.standard_normal(cout)),
              initializer(p + "var", 1.0 + 0.1 * np.abs(r.standard_normal(cout)))]
    nodes += [
        helper.make_node("Conv", [x, p + "w", p + "b"], [p + "conv"], kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         [p + "conv", p + "scale", p + "shift", p + "mean", p + "var"],
                         [p + "bn"], epsilon=1e-5),
        helper.make_node("Relu", [p + "bn"], [p + "relu"]),
        helper.make_node("MaxPool", [p + "relu"], [p + "pool"], kernel_shape=[2, 2],
                         strides=[2, 2]),
    ]
    return p + "pool"


def build():
    r = rng()
    nodes, inits = [], []
    x = "input"
    for k, (cin, cout) in enumerate([(3, 16), (16, 32), (32, 64)]):
        x = conv_block(r, k, cin, cout, nodes, inits, x)
    inits += [initializer("fc_w", r.standard_normal((64, 10)) * 0.1),
              initializer("fc_b", r.standard_normal(10) * 0.1)]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"])]
    graph = helper.make_graph(
        nodes, "SmallCNN",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    return make_model(graph), {"input": r.standard_normal((1, 3, 64, 64), dtype=np.float32)}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    model, inputs = build()
    save(model, out, "small_cnn", inputs)
