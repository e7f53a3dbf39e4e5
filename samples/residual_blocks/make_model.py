"""Three identical residual blocks (Conv3x3 -> Relu -> Conv3x3 -> Add(skip) -> Relu),
16 channels at 32x32, as in ResNet-style
networks. IREE deduplicates the blocks' identical dispatches and passes each call
site's binding offsets (its weights, its activations) as push constants, which the NPU
program reads through npu-fb binding views.

    python samples/residual_blocks/make_model.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sample_common import initializer, make_model, rng, save  # noqa: E402

CHANNELS, SIZE, BLOCKS = 16, 32, 3


def conv(r, p: str, x: str, nodes: list, inits: list) -> str:
    c = CHANNELS
    inits.append(initializer(p + "w", r.standard_normal((c, c, 3, 3)) * (2.0 / (9 * c)) ** 0.5))
    nodes.append(helper.make_node("Conv", [x, p + "w"], [p + "conv"],
                                  kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    return p + "conv"


def block(r, k: int, x: str, nodes: list, inits: list) -> str:
    p = f"block{k}_"
    h = conv(r, p + "a_", x, nodes, inits)
    nodes.append(helper.make_node("Relu", [h], [p + "relu_a"]))
    h = conv(r, p + "b_", p + "relu_a", nodes, inits)
    nodes += [helper.make_node("Add", [h, x], [p + "sum"]),
              helper.make_node("Relu", [p + "sum"], [p + "out"])]
    return p + "out"


def build():
    r = rng()
    nodes, inits = [], []
    x = "input"
    for k in range(BLOCKS):
        x = block(r, k, x, nodes, inits)
    shape = [1, CHANNELS, SIZE, SIZE]
    graph = helper.make_graph(
        nodes, "ResidualBlocks", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    return make_model(graph), {"input": r.standard_normal(shape, dtype=np.float32)}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    model, inputs = build()
    save(model, out, "residual_blocks", inputs)
