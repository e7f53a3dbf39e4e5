"""A depthwise-separable block: depthwise Conv3x3 stride 2 (group = 32 channels),
pointwise Conv1x1 32 -> 64, Clip(0, 6) (relu6). Input 1x32x56x56.

    python samples/depthwise_separable/make_model.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sample_common import initializer, make_model, rng, save  # noqa: E402


def build():
    r = rng()
    inits = [initializer("dw_w", r.standard_normal((32, 1, 3, 3)) * 0.3),
             initializer("dw_b", r.standard_normal(32) * 0.1),
             initializer("pw_w", r.standard_normal((64, 32, 1, 1)) * 0.25),
             initializer("pw_b", r.standard_normal(64) * 0.1),
             initializer("lo", np.array(0.0)), initializer("hi", np.array(6.0))]
    nodes = [helper.make_node("Conv", ["x", "dw_w", "dw_b"], ["dw"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], strides=[2, 2], group=32),
             helper.make_node("Conv", ["dw", "pw_w", "pw_b"], ["pw"], kernel_shape=[1, 1]),
             helper.make_node("Clip", ["pw", "lo", "hi"], ["y"])]
    graph = helper.make_graph(
        nodes, "DepthwiseSeparable",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 56, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 28, 28])], inits)
    return make_model(graph), {"x": r.standard_normal((1, 32, 56, 56), dtype=np.float32)}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    model, inputs = build()
    save(model, out, "depthwise_separable", inputs)
