"""Shared by the sample generators: a fixed seed, and writing a model with its inputs
and onnx-reference expected outputs next to it (no downloads)."""
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

OPSET = 17
SEED = 20261122


def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def initializer(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def make_model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="iree-npu-samples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, out_dir: Path, name: str,
         inputs: dict[str, np.ndarray]) -> None:
    """Writes NAME.onnx, input_<k>.npy and expected_<k>.npy (onnx reference evaluator)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(model, out_dir / f"{name}.onnx")
    for k, value in enumerate(inputs.values()):
        np.save(out_dir / f"input_{k}.npy", value)
    outputs = ReferenceEvaluator(model).run(None, inputs)
    for k, value in enumerate(outputs):
        np.save(out_dir / f"expected_{k}.npy", value)
