"""Test models and their dispatches at the executable-sources phase.

ONNX models are built with onnx.helper, imported with iree-import-onnx and compiled by the
stock iree-compile to executable-sources (llvm-cpu surrogate, one executable per
dispatch); MLIR sources go straight to iree-compile. The hal.executable ops are then
analysed in one shared context."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from compiler_target.codegen.analysis import Analysis, analyse
from iree.compiler import ir

from . import numpy_reference

BIN = Path(sys.executable).parent
# executable-sources: one hal.executable per dispatch (the linker runs in the hal phase).
COMPILE_FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                 "--compile-to=executable-sources"]
RNG = np.random.default_rng(7)


def _context() -> ir.Context:
    context = ir.Context()
    context.allow_unregistered_dialects = True
    context.load_all_available_dialects()
    return context


CONTEXT = _context()


def random(*shape) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def value_info(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def onnx_model(nodes, inputs: dict[str, tuple], initializers: dict[str, np.ndarray] = {}):
    """A model computing `nodes` (the last one's output is the model output) with float
    inputs of the given shapes; the output shape comes from ONNX shape inference."""
    graph = helper.make_graph(nodes, "g", [value_info(n, s) for n, s in inputs.items()], [],
                              [numpy_helper.from_array(a, n) for n, a in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inferred = {v.name: v for v in shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.append(inferred[nodes[-1].output[0]])
    return model


def onnx_reference(model, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ReferenceEvaluator(model).run(None, feeds)[0]


def executable_sources(tmp: Path, model=None, mlir: str | None = None) -> str:
    source = tmp / "model.mlir"
    if model is not None:
        onnx.save(model, tmp / "model.onnx")
        _run([sys.executable, "-m", "iree.compiler.tools.import_onnx", str(tmp / "model.onnx"),
              "-o", str(source)])
    else:
        source.write_text(mlir)
    target = tmp / "model.es.mlir"
    _run([str(BIN / "iree-compile"), *COMPILE_FLAGS, str(source), "-o", str(target)])
    return target.read_text()


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr


def executables(text: str) -> tuple[ir.Module, list]:
    """The parsed module (which owns them) and its hal.executable ops."""
    with CONTEXT:
        module = ir.Module.parse(text)
    return module, [op.operation for op in module.body.operations
                    if op.operation.name == "hal.executable"]


def analyses(tmp: Path, model=None, mlir: str | None = None) -> list[Analysis]:
    module, ops = executables(executable_sources(tmp, model, mlir))
    return [analyse(op) for op in ops]


def run_dispatch(analysis: Analysis, inputs: list[np.ndarray], fill: float = 0.0) -> np.ndarray:
    """Runs the analysed f32 op with its read-only bindings fed from `inputs` (in binding
    order, flattened, each filling its binding) and returns its output binding, which
    starts filled with `fill`."""
    (output,) = run_dispatch_outputs(analysis, inputs, fill)
    return output


def run_dispatch_outputs(analysis: Analysis, inputs: list[np.ndarray],
                         fill: float = 0.0) -> list[np.ndarray]:
    """run_dispatch for dispatches with several output bindings: each, in binding order."""
    assert analysis.op is not None, analysis.problem
    buffers, outputs = {}, []
    feeds = iter(inputs)
    for binding in analysis.bindings:
        count = binding.size_bytes // 4
        if binding.read_only:
            data = np.asarray(next(feeds), np.float32).reshape(-1)
            assert data.size == count, f"binding {binding.index}: {data.size} != {count}"
            buffers[binding.index] = data.copy()
        else:
            buffers[binding.index] = np.full(count, fill, np.float32)
            outputs.append(binding.index)
    assert next(feeds, None) is None, "more inputs than read-only bindings"
    numpy_reference.run(analysis.op, buffers)
    return [buffers[index] for index in outputs]
