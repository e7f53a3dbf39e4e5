"""Measures one real model: compiles the prepared .onnx for npu, runs it on npu-sim,
compares its outputs with onnxruntime's (CPU provider) and counts where the work ran.

The NPU MAC share weighs each dispatch by the contraction MACs the compiler computed
for it (the `macs` of its task in --iree-npu-dump-json) and by how often it ran in the
call (DeviceStatistics.dispatch_counts): NPU MACs / all MACs of the executed dispatches.
The model's own Conv/ConvTranspose/MatMul/Gemm MACs, counted from the ONNX graph, are
kept next to that total for comparison (ops such as LSTM are not in the graph count).
"""
import json
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime

from compiler_target import compile_file
from hal_driver import runtime as rt
from tests.bench.measure import entry_function
from tests.real_models.fetch import prepared_model
from tests.real_models.models import RealModel

INPUT_RANGE = (-1.0, 1.0)   # a normalized image


@dataclass(frozen=True)
class NpuBuild:
    vmfb: bytes
    tasks: list[dict]       # --iree-npu-dump-json tasks: one per dispatch call site


@dataclass(frozen=True)
class ExecutedMacs:
    npu: int                # contraction MACs of the NPU dispatches that ran
    total: int              # ... of all dispatches that ran (NPU and host)

    @property
    def npu_share(self) -> float:
        return self.npu / self.total


@dataclass(frozen=True)
class Result:
    name: str
    input_shape: tuple[int, ...]
    npu_dispatches: int                 # per call
    host_dispatches: int
    macs: ExecutedMacs
    onnx_macs: int                      # Conv/ConvTranspose/MatMul/Gemm MACs of the graph
    relative_errors: list[float]        # per output: max |npu - ort| / max |ort|
    simulated_seconds: float            # NPU cycles / clock, per call
    roofline_fraction: float            # true roofline cycles / NPU cycles of the call
    wall_seconds: float                 # npu-sim wall time per call (median)

    @property
    def npu_dispatch_share(self) -> float:
        return self.npu_dispatches / (self.npu_dispatches + self.host_dispatches)

    @property
    def max_relative_error(self) -> float:
        return max(self.relative_errors)


def model_input(model: RealModel) -> np.ndarray:
    rng = np.random.default_rng(model.seed)
    return rng.uniform(*INPUT_RANGE, size=model.input_shape).astype(np.float32)


def onnxruntime_outputs(onnx_path: Path, x: np.ndarray) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    [graph_input] = session.get_inputs()
    return session.run(None, {graph_input.name: x})


def compile_npu(onnx_path: Path, dump_dir: Path) -> NpuBuild:
    vmfb = compile_file(str(onnx_path), target_backends=["npu"],
                        extra_args=[f"--iree-npu-dump-json={dump_dir}"])
    tasks = json.loads((dump_dir / f"{onnx_path.stem}.npu.json").read_text())["tasks"]
    return NpuBuild(vmfb, tasks)


@dataclass(frozen=True)
class NpuRun:
    outputs: list[np.ndarray]           # of the last call
    stats: object                       # hal_driver.runtime.CallStats of the last call
    wall_seconds: float                 # median per call


def run_npu(vmfb: bytes, x: np.ndarray, calls: int) -> NpuRun:
    """Calls the model's function (named after the ONNX graph) `calls` times on npu-sim."""
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        function = module.lookup(entry_function(module.function_names))
        walls = []
        for _ in range(calls):
            start = time.perf_counter()
            outputs = function(x)
            walls.append(time.perf_counter() - start)
        outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
        return NpuRun(outputs, module.last_call_stats, statistics.median(walls))
    finally:
        module.close()


def executed_macs(tasks: list[dict], dispatch_counts: dict[str, int]) -> ExecutedMacs:
    """MACs of the dispatches that ran, each export counted as often as it ran."""
    by_name = {task["name"]: task for task in tasks}
    npu = total = 0
    for name, count in dispatch_counts.items():
        macs = by_name[name]["macs"] * count
        total += macs
        if by_name[name]["target"] == "npu":
            npu += macs
    return ExecutedMacs(npu, total)


def tensor_shapes(graph: onnx.GraphProto) -> dict[str, list[int]]:
    """Static shapes of the graph's values after shape inference, weights included
    (initializers and Constant nodes)."""
    shapes = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [d.dim_value for d in dims]
    for initializer in graph.initializer:
        shapes[initializer.name] = list(initializer.dims)
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute[0].name == "value":
            shapes[node.output[0]] = list(node.attribute[0].t.dims)
    return shapes


def node_macs(node: onnx.NodeProto, shapes: dict[str, list[int]]) -> int:
    """Multiply-accumulates of a Conv, ConvTranspose, MatMul or Gemm node; 0 otherwise."""
    if node.op_type == "Conv":        # each output element: C/group x kernel
        return math.prod(shapes[node.output[0]]) * math.prod(shapes[node.input[1]][1:])
    if node.op_type == "ConvTranspose":   # each input element: M/group x kernel
        return math.prod(shapes[node.input[0]]) * math.prod(shapes[node.input[1]][1:])
    if node.op_type == "MatMul":
        return math.prod(shapes[node.output[0]]) * shapes[node.input[0]][-1]
    if node.op_type == "Gemm":
        trans_a = any(a.name == "transA" and a.i for a in node.attribute)
        k = shapes[node.input[0]][0 if trans_a else 1]
        return math.prod(shapes[node.output[0]]) * k
    return 0


def onnx_contraction_macs(onnx_path: Path) -> int:
    graph = onnx.load(onnx_path).graph
    shapes = tensor_shapes(graph)
    return sum(node_macs(node, shapes) for node in graph.node)


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|; infinite when the shapes differ; 0 for
    equal arrays (an all-zero output included)."""
    if actual.shape != expected.shape:
        return math.inf
    actual, expected = actual.astype(np.float64), expected.astype(np.float64)
    difference = float(np.max(np.abs(actual - expected), initial=0.0))
    return difference / float(np.max(np.abs(expected))) if difference else 0.0


def measure_model(model: RealModel, work_dir: Path, calls: int = 1) -> Result:
    """Fetches (once), compiles, runs `calls` times and compares `model`."""
    onnx_path = prepared_model(model)
    x = model_input(model)
    build = compile_npu(onnx_path, work_dir / model.name)
    run = run_npu(build.vmfb, x, calls)
    expected = onnxruntime_outputs(onnx_path, x)
    return Result(
        name=model.name, input_shape=model.input_shape,
        npu_dispatches=run.stats.npu_dispatches, host_dispatches=run.stats.host_dispatches,
        macs=executed_macs(build.tasks, run.stats.device.dispatch_counts),
        onnx_macs=onnx_contraction_macs(onnx_path),
        relative_errors=[relative_error(a, e) for a, e in zip(run.outputs, expected, strict=True)],
        simulated_seconds=run.stats.simulated_seconds,
        roofline_fraction=run.stats.device.roofline_cycles / run.stats.npu_cycles
        if run.stats.npu_cycles else 0.0,
        wall_seconds=run.wall_seconds)
