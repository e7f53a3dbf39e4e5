"""Graph inputs whose every dim is declared symbolic (RetinaFace's `[batch_size, channel,
height, width]`): the dims the consuming op's static weights fix are cast static in the
imported module (compiler_target/weight_fixed_dims.py). The probe inputs set every
dynamic dim to 64, which contradicts 3-channel weights: the op ran on the host at
every size. Each case below against onnxruntime at two sizes, every dispatch on the
NPU, from `.onnx` and from iree-import-onnx's MLIR."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import (loaded_on_npu, on_npu_and_onnxruntime, onnx_file,
                                  onnxruntime_output)

RNG = np.random.default_rng(7)


def _weight(*shape):
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


CASES = {
    # name: (nodes, weights, input dims, output dims, two input shapes)
    "conv": ([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
             {"w": _weight(8, 3, 3, 3)}, ["N", "C", "H", "W"], ["N", 8, "h", "w"],
             [(1, 3, 32, 24), (2, 3, 20, 36)]),
    "grouped_conv": ([helper.make_node("Conv", ["x", "w"], ["y"], group=2,
                                       kernel_shape=[3, 3])],
                     {"w": _weight(8, 2, 3, 3)}, ["N", "C", "H", "W"], ["N", 8, "h", "w"],
                     [(1, 4, 12, 10), (1, 4, 9, 17)]),
    "conv_transpose": ([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                                         kernel_shape=[2, 2])],
                       {"w": _weight(6, 4, 2, 2)}, ["N", "C", "H", "W"], ["N", 4, "h", "w"],
                       [(1, 6, 8, 10), (1, 6, 5, 7)]),
}


def _model(tmp_path, name) -> Path:
    nodes, weights, x_dims, y_dims, _ = CASES[name]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)],
        [numpy_helper.from_array(w, k) for k, w in weights.items()])
    return onnx_file(graph, tmp_path / f"{name}.onnx")


@pytest.mark.parametrize("name", CASES)
def test_symbolic_dims_the_weights_fix_run_on_the_npu(tmp_path, name):
    feeds = [{"x": RNG.standard_normal(shape).astype(np.float32)} for shape in CASES[name][4]]
    for got, expected in on_npu_and_onnxruntime(_model(tmp_path, name), "g", feeds):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_a_symbolic_channel_imported_by_iree_import_onnx(tmp_path):
    path = _model(tmp_path, "conv")
    mlir = tmp_path / "conv.mlir"
    subprocess.run([str(Path(sys.executable).with_name("iree-import-onnx")), str(path), "-o",
                    str(mlir)], check=True, capture_output=True)
    x = RNG.standard_normal((1, 3, 27, 19)).astype(np.float32)
    with loaded_on_npu(mlir) as module:
        got = np.asarray(module.g(x))
        assert module.last_call_stats.host_dispatches == 0
    np.testing.assert_allclose(got, onnxruntime_output(path, {"x": x}), rtol=1e-4, atol=1e-4)
