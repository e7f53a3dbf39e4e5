"""InstanceNormalization over dims of unknown size (a style-transfer or matting network
exported with a dynamic image size, a 1-D normalization over frames), against
onnxruntime. The importer of iree-base-compiler 3.13.0 does not divide the variance's
sum by the count there (outputs off by several units; over one dynamic dim, NaN), for
every target; compiler_target/instance_norms.py rewrites such an op of the imported
module into the ONNX spec's ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Add,
whether the network comes as `.onnx` or as iree-import-onnx's MLIR. One build, several
sizes, every dispatch on the NPU."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import (loaded_on_npu, on_npu_and_onnxruntime, onnx_file,
                                   onnxruntime_output)

C = 16


def instance_norm_model(path, dims, opset, batch=1, epsilon=1e-3):
    """InstanceNormalization of (batch, C, *dims) (epsilon None: the default), then ReLU
    and a 3-wide conv (padded) over the same dims, as an image or frame network has it."""
    rng = np.random.default_rng(len(dims) + opset)
    kernel = [3] * len(dims)
    weights = (rng.standard_normal((8, C, *kernel)) * 0.2).astype(np.float32)
    attributes = {} if epsilon is None else {"epsilon": epsilon}
    graph = helper.make_graph(
        [helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["n"],
                          **attributes),
         helper.make_node("Relu", ["n"], ["r"]),
         helper.make_node("Conv", ["r", "w"], ["y"], kernel_shape=kernel,
                          pads=[1] * (2 * len(dims)))],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (batch, C, *dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (batch, 8, *dims))],
        [numpy_helper.from_array(rng.uniform(0.5, 1.5, C).astype(np.float32), "scale"),
         numpy_helper.from_array(rng.standard_normal(C).astype(np.float32), "bias"),
         numpy_helper.from_array(weights, "w")])
    return onnx_file(graph, path, opset=opset)


@pytest.mark.parametrize("batch, dims, sizes, opset, epsilon", [
    (1, ("h", "w"), [(1, 20, 24), (1, 37, 50)], 17, 1e-3),
    (1, ("h", "w"), [(1, 9, 13)], 18, 1e-3),
    (1, ("t",), [(1, 50), (1, 7)], 17, 1e-3),
    ("n", ("h", "w"), [(2, 13, 17)], 17, None),
], ids=["image", "image_opset18", "frames", "batch_default_epsilon"])
def test_instance_norm_of_unknown_size_matches_onnxruntime(tmp_path, batch, dims, sizes,
                                                           opset, epsilon):
    path = instance_norm_model(tmp_path / "instance_norm.onnx", dims, opset, batch, epsilon)
    rng = np.random.default_rng(5)
    feeds = [{"x": (rng.standard_normal((n, C, *size)) * 3 + 1).astype(np.float32)}
             for n, *size in sizes]
    for got, expected in on_npu_and_onnxruntime(path, "g", feeds):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_instance_norm_of_unknown_size_imported_by_iree_import_onnx(tmp_path):
    path = instance_norm_model(tmp_path / "instance_norm.onnx", ("h", "w"), 17)
    mlir = tmp_path / "instance_norm.mlir"
    subprocess.run([str(Path(sys.executable).with_name("iree-import-onnx")), str(path), "-o",
                    str(mlir)], check=True, capture_output=True)
    x = (np.random.default_rng(6).standard_normal((1, C, 23, 31)) * 3 + 1).astype(np.float32)
    with loaded_on_npu(mlir) as module:
        got = np.asarray(module.g(x))
        assert module.last_call_stats.host_dispatches == 0
    np.testing.assert_allclose(got, onnxruntime_output(path, {"x": x}), rtol=1e-4, atol=1e-4)
