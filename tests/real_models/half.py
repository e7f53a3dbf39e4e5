"""f16 versions of the real networks, made as a user makes them: onnxruntime's float16
converter (`convert_float_to_float16`, keep_io_types: f32 input and output), then the
two repairs iree-import-onnx needs (docs/user-guide.md, section 8): the nodes sorted
topologically (the converter appends its input casts after their readers) and every
tensor re-saved as raw data (the converter may store f16 as int32_data, which the
importer cannot read). Each is imported to MLIR once and that MLIR is compiled for npu
and for stock llvm-cpu (this CPU); npu-sim's outputs are compared with the stock
runtime's and with onnxruntime's execution of the f16 model, and onnxruntime's f16
outputs with its f32 ones (how far f16 precision alone moves the network).

    python -m tests.real_models.half [name ...]     # every (or the named) model

The f16 model is cached beside the float one (<name>.f16.onnx).
"""
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.transformers.float16 import convert_float_to_float16

from tests.real_models.fetch import cache_dir, prepared_model
from tests.real_models.measure import (ExecutedMacs, compile_npu, executed_macs, model_input,
                                       onnxruntime_outputs, relative_error, run_npu)
from tests.real_models.models import MODELS, RealModel
from tests.real_models.quantized import function_name, import_mlir, run_stock


@dataclass(frozen=True)
class HalfResult:
    name: str
    npu_dispatches: int
    host_dispatches: int
    macs: ExecutedMacs
    npu_vs_stock: float          # max relative error over the outputs
    npu_vs_ort: float            # ... against onnxruntime's f16 execution
    stock_vs_ort: float
    ort_f16_vs_f32: float        # onnxruntime's f16 outputs against its f32 ones
    argmax_agreement: float      # first output's last axis, npu against onnxruntime f16
    npu_cycles: int


def half_model(model: RealModel) -> Path:
    """The network converted to f16 (cached)."""
    path = cache_dir() / f"{model.name}.f16.onnx"
    if not path.exists():
        converted = convert_float_to_float16(onnx.load(prepared_model(model)),
                                             keep_io_types=True)
        onnx.save(importable(converted), path)
    return path


def importable(model: onnx.ModelProto) -> onnx.ModelProto:
    """The converter's model repaired for iree-import-onnx (in place): nodes sorted
    topologically, tensors stored as raw data."""
    _sort_topologically(model.graph)
    _raw_tensors(model.graph)
    return model


def _sort_topologically(graph: onnx.GraphProto) -> None:
    known = {v.name for v in graph.input} | {t.name for t in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        ready = [node for node in pending if all(name in known for name in node.input)]
        if not ready:
            raise ValueError("the converted graph has a cycle")
        for node in ready:
            ordered.append(node)
            known.update(node.output)
            pending.remove(node)
    del graph.node[:]
    graph.node.extend(ordered)


def _raw_tensors(graph: onnx.GraphProto) -> None:
    """Every initializer and Constant value stored as raw data."""
    def raw(tensor):
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor), tensor.name))
    for tensor in graph.initializer:
        raw(tensor)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                raw(attribute.t)


def measure_half(model: RealModel, work_dir: Path) -> HalfResult:
    onnx_path = half_model(model)
    mlir = import_mlir(onnx_path, work_dir)
    x = model_input(model)
    build = compile_npu(mlir, work_dir / model.name)
    run = run_npu(build.vmfb, x, calls=1)
    outputs = [np.asarray(o) for o in run.outputs]
    stock = run_stock(mlir, x, function_name(build))
    ort = onnxruntime_outputs(onnx_path, x)
    ort_f32 = onnxruntime_outputs(prepared_model(model), x)

    def worst(actual, expected):
        return max(relative_error(np.asarray(a), np.asarray(e)) for a, e in
                   zip(actual, expected, strict=True))
    return HalfResult(
        name=model.name, npu_dispatches=run.stats.npu_dispatches,
        host_dispatches=run.stats.host_dispatches,
        macs=executed_macs(build.tasks, run.stats.device.dispatch_counts),
        npu_vs_stock=worst(outputs, stock), npu_vs_ort=worst(outputs, ort),
        stock_vs_ort=worst(stock, ort), ort_f16_vs_f32=worst(ort, ort_f32),
        argmax_agreement=float(np.mean(np.argmax(outputs[0], axis=-1) ==
                                       np.argmax(ort[0], axis=-1))),
        npu_cycles=run.stats.npu_cycles)


def main(names: list[str]) -> None:
    from tests.bench.measure import host_cpu, host_cpu_line
    print(host_cpu_line(host_cpu()))
    print("| model | npu/host dispatches | NPU MAC share | npu vs stock | npu vs onnxruntime f16 "
          "| stock vs onnxruntime f16 | onnxruntime f16 vs f32 | argmax = onnxruntime's | "
          "simulated NPU cycles |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name in names or MODELS:
            r = measure_half(MODELS[name], Path(work))
            print(f"| {name} | {r.npu_dispatches}/{r.host_dispatches} | {r.macs.npu_share:.4f} | "
                  f"{r.npu_vs_stock:.1e} | {r.npu_vs_ort:.1e} | {r.stock_vs_ort:.1e} | "
                  f"{r.ort_f16_vs_f32:.1e} | {r.argmax_agreement:.3f} | {r.npu_cycles} |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
