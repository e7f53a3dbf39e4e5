"""Real networks compiled once with their dynamic input dims kept, run at several input
sizes on npu-sim, each against onnxruntime and against a static build for that size.

At each size it measures: where the dispatches ran, the NPU's share of the graph's
Conv/ConvTranspose/MatMul/Gemm MACs, the relative error against onnxruntime, and the
simulated NPU cycles of the dynamic build against those of a static build of the same
network prepared for that size (compiled and run the same way).

The NPU MAC share at run time: the useful MACs npu-sim counted for the NPU dispatches
(their true rooflines), over those plus the contraction MACs of the host dispatches that
ran (as the compiler counted them at the probe input: a dynamic dispatch's size is known
only at run time). The graph's own MAC count is printed beside it; the useful MACs can
exceed it (an LSTM's MACs are not in it, reductions computed as matmuls by ones are).

    python -m tests.real_models.dynamic [name ...]     # prints the table
"""
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from tests.bench.measure import host_cpu, host_cpu_line
from tests.real_models.fetch import prepared_model
from tests.real_models.measure import (
    INPUT_RANGE, compile_npu, executed_macs, node_macs, onnxruntime_outputs, relative_error, run_npu,
    tensor_shapes)
from tests.real_models.models import MODELS, RealModel


@dataclass(frozen=True)
class DynamicModel:
    model: RealModel
    input_dims: tuple[int | str, ...]      # str: a dim the build keeps dynamic
    sizes: tuple[tuple[int, ...], ...]     # input shapes it is run at


DYNAMIC_MODELS = {d.model.name: d for d in [
    DynamicModel(MODELS["ppocr_cls"], ("N", 3, 48, 192), ((1, 3, 48, 192), (6, 3, 48, 192))),
    DynamicModel(MODELS["ppocrv4_det"], (1, 3, "H", "W"),
                 ((1, 3, 320, 320), (1, 3, 480, 640), (1, 3, 736, 736))),
    DynamicModel(MODELS["ppocrv4_rec"], (1, 3, 48, "W"),
                 ((1, 3, 48, 160), (1, 3, 48, 320), (1, 3, 48, 640))),
    DynamicModel(MODELS["ddddocr_ocr"], (1, 1, 64, "W"),
                 ((1, 1, 64, 128), (1, 1, 64, 256), (1, 1, 64, 512))),
]}


@dataclass(frozen=True)
class SizeResult:
    shape: tuple[int, ...]
    npu_dispatches: int
    host_dispatches: int
    npu_useful_macs: int
    host_macs: int
    graph_macs: int
    max_relative_error: float
    dynamic_cycles: int
    static_cycles: int | None           # None: no static build compared at this size

    @property
    def mac_share(self) -> float:
        return self.npu_useful_macs / (self.npu_useful_macs + self.host_macs)

    @property
    def cycle_ratio(self) -> float | None:
        return self.dynamic_cycles / self.static_cycles if self.static_cycles else None


def graph_macs(onnx_path: Path, shape: tuple[int, ...]) -> int:
    """Conv/ConvTranspose/MatMul/Gemm MACs of the graph with its input at `shape`."""
    model = onnx.load(onnx_path)
    initializers = {i.name for i in model.graph.initializer}
    [graph_input] = [i for i in model.graph.input if i.name not in initializers]
    for dim, size in zip(graph_input.type.tensor_type.shape.dim, shape):
        dim.Clear()
        dim.dim_value = size
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    shapes = tensor_shapes(model.graph)
    return sum(node_macs(node, shapes) for node in model.graph.node)


def size_input(model: RealModel, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(model.seed)
    return rng.uniform(*INPUT_RANGE, size=shape).astype(np.float32)


def measure_dynamic(dynamic: DynamicModel, work_dir: Path,
                    sizes: tuple[tuple[int, ...], ...] | None = None,
                    static_sizes: tuple[tuple[int, ...], ...] | None = None
                    ) -> list[SizeResult]:
    """Compiles the dynamic build once and runs it at each size (default: all), against
    a static build at each of `static_sizes` (default: every size)."""
    onnx_path = prepared_model(dynamic.model, dynamic.input_dims)
    build = compile_npu(onnx_path, work_dir / "dynamic")
    results = []
    for shape in sizes or dynamic.sizes:
        x = size_input(dynamic.model, shape)
        run = run_npu(build.vmfb, x, calls=1)
        expected = onnxruntime_outputs(onnx_path, x)
        static_cycles = None
        if static_sizes is None or shape in static_sizes:
            static_path = prepared_model(dynamic.model, shape)
            static_build = compile_npu(static_path, work_dir / "x".join(map(str, shape)))
            static_cycles = run_npu(static_build.vmfb, x, calls=1).stats.npu_cycles
        executed = executed_macs(build.tasks, run.stats.device.dispatch_counts)
        results.append(SizeResult(
            shape=shape, npu_dispatches=run.stats.npu_dispatches,
            host_dispatches=run.stats.host_dispatches,
            npu_useful_macs=run.stats.device.useful_macs,
            host_macs=executed.total - executed.npu,
            graph_macs=graph_macs(onnx_path, shape),
            max_relative_error=max(relative_error(a, e)
                                   for a, e in zip(run.outputs, expected, strict=True)),
            dynamic_cycles=run.stats.npu_cycles, static_cycles=static_cycles))
    return results


def main(names: list[str]) -> int:
    print(host_cpu_line(host_cpu()))
    print("| model | input | npu/host dispatches | NPU MAC share (graph MACs) | max rel. "
          "error vs onnxruntime | cycles dynamic / static |")
    print("|---|---|---|---|---|---|")
    for name in names or DYNAMIC_MODELS:
        with tempfile.TemporaryDirectory() as work:
            for r in measure_dynamic(DYNAMIC_MODELS[name], Path(work)):
                print(f"| {name} | {'x'.join(map(str, r.shape))} | {r.npu_dispatches}/"
                      f"{r.host_dispatches} | {r.mac_share:.4f} ({r.graph_macs}) | "
                      f"{r.max_relative_error:.1e} | "
                      f"{r.dynamic_cycles} / {r.static_cycles} = {r.cycle_ratio:.3f} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
