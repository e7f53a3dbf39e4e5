"""The seed model, SingleConv: Y = Conv(X[1x3x500x500], W[8x3x3x3], B[8]), pads 0, stride 1.

    python samples/onnx_conv/make_model.py [OUT_DIR]
"""
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sample_common import initializer, make_model, rng, save  # noqa: E402


def build():
    r = rng()
    weight = r.standard_normal((8, 3, 3, 3), dtype=np.float32) * 0.2
    bias = r.standard_normal(8, dtype=np.float32)
    conv = helper.make_node("Conv", ["X", "W", "B"], ["Y"], kernel_shape=[3, 3],
                            pads=[0, 0, 0, 0], strides=[1, 1])
    graph = helper.make_graph(
        [conv], "SingleConv",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 500, 500])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 8, 498, 498])],
        [initializer("W", weight), initializer("B", bias)])
    x = r.standard_normal((1, 3, 500, 500), dtype=np.float32)
    return make_model(graph), {"X": x}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    model, inputs = build()
    save(model, out, "single_conv", inputs)
