"""Int8 versions of the real networks, made as a user makes them: onnxruntime's
`quantize_static` (QDQ format, QInt8 weights, per-tensor scales, QInt8 activations or
with --uint8 QUInt8 ones) with fixed-seed calibration data, or with --dynamic its
`quantize_dynamic` (QInt8 weights; each Conv and MatMul quantizes its input at run time:
DynamicQuantizeLinear, ConvInteger, MatMulInteger). Each is imported to MLIR once and
that MLIR is compiled for npu and for stock llvm-cpu; npu-sim's outputs are compared
with the stock runtime's (bit for bit: IREE computes a quantized graph in integers and
f32 with exact rounding steps) and with onnxruntime's execution of the quantized model.

    python -m tests.real_models.quantized [--uint8 | --dynamic] [name ...]   # every (or the named) model

The quantized model is cached beside the float one (<name>.int8.onnx, <name>.uint8.onnx,
<name>.dynamic.onnx).
"""
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

from compiler_target import compile_file
from tests.real_models.fetch import cache_dir, prepared_model
from tests.real_models.measure import (ExecutedMacs, compile_npu, executed_macs, model_input,
                                       onnxruntime_outputs, relative_error, run_npu)
from tests.real_models.models import MODELS, RealModel

CALIBRATION_SEED = 0
CALIBRATION_SAMPLES = 4
TARGET_ROOFLINE_CYCLES = 10_000     # issue 14: such dispatches reach 0.85 of the roofline
TARGET_FRACTION = 0.85


@dataclass(frozen=True)
class QuantizedResult:
    name: str
    npu_dispatches: int                 # per call
    host_dispatches: int
    macs: ExecutedMacs                  # integer contraction MACs of the dispatches run
    stock_mismatches: list[int]         # per output: elements that differ from stock llvm-cpu
    stock_relative_errors: list[float]  # per output: max |npu - stock| / max |stock|
    ort_max_abs_errors: list[float]     # per output: against onnxruntime's QDQ execution
    argmax_agreement: float             # of the first output's last axis (the class of an
                                        # image, of each time step of a text line; the
                                        # detection map's channel), against onnxruntime's
    npu_cycles: int
    roofline_fraction: float
    compile_seconds: float
    target_dispatches: tuple[int, int]  # integer MAC dispatches with a true roofline of
                                        # at least TARGET_ROOFLINE_CYCLES: (at >= 0.85, all)
    under_target: dict[str, int]        # the others, by what keeps them under (bound_by)

    @property
    def npu_dispatch_share(self) -> float:
        return self.npu_dispatches / (self.npu_dispatches + self.host_dispatches)


class Calibration(CalibrationDataReader):
    """quantize_static's calibration data: fixed-seed uniform inputs in [-1, 1]."""

    def __init__(self, input_name: str, shape: tuple[int, ...]):
        rng = np.random.default_rng(CALIBRATION_SEED)
        self.batches = [{input_name: rng.uniform(-1, 1, shape).astype(np.float32)}
                        for _ in range(CALIBRATION_SAMPLES)]

    def get_next(self):
        return self.batches.pop(0) if self.batches else None


ACTIVATION_TYPES = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}


def quantized_model(model: RealModel, activations: str = "int8") -> Path:
    """The prepared model with int8 weights and `activations`: "int8" or "uint8" (QDQ,
    calibrated) or "dynamic" (quantized at run time); made once, cached."""
    target = cache_dir() / f"{model.name}.{activations}.onnx"
    if target.exists():
        return target
    source = prepared_model(model)
    partial = target.with_suffix(".partial.onnx")
    if activations == "dynamic":
        quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8)
    else:
        graph = onnx.load(str(source)).graph
        initializers = {i.name for i in graph.initializer}
        [input_name] = [i.name for i in graph.input if i.name not in initializers]
        quantize_static(str(source), str(partial), Calibration(input_name, model.input_shape),
                        quant_format=QuantFormat.QDQ,
                        activation_type=ACTIVATION_TYPES[activations],
                        weight_type=QuantType.QInt8)
    partial.rename(target)
    return target


def import_mlir(onnx_path: Path, work_dir: Path) -> Path:
    """The model as torch-dialect MLIR, imported once by the wheel's iree-import-onnx."""
    mlir = work_dir / f"{onnx_path.stem}.mlir"
    work_dir.mkdir(parents=True, exist_ok=True)
    tool = Path(sys.executable).with_name("iree-import-onnx")
    subprocess.run([str(tool), str(onnx_path), "-o", str(mlir)], check=True,
                   capture_output=True)
    return mlir


def run_stock(mlir: Path, x: np.ndarray, function: str) -> list[np.ndarray]:
    import iree.runtime
    vmfb = compile_file(str(mlir), target_backends=["llvm-cpu"],
                        extra_args=["--iree-llvmcpu-target-cpu=host"])
    module = iree.runtime.load_vm_flatbuffer(vmfb, driver="local-task")
    outputs = getattr(module, function)(x)
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return [np.asarray(o.to_host()) for o in outputs]


def measure_quantized(model: RealModel, work_dir: Path,
                      activations: str = "int8") -> QuantizedResult:
    onnx_path = quantized_model(model, activations)
    mlir = import_mlir(onnx_path, work_dir)
    x = model_input(model)
    start = time.perf_counter()
    build = compile_npu(mlir, work_dir / model.name)
    compile_seconds = time.perf_counter() - start
    run = run_npu(build.vmfb, x, calls=1)
    outputs = [np.asarray(o) for o in run.outputs]
    stock = run_stock(mlir, x, function_name(build))
    ort = onnxruntime_outputs(onnx_path, x)
    stats = run.stats
    return QuantizedResult(
        name=model.name, npu_dispatches=stats.npu_dispatches,
        host_dispatches=stats.host_dispatches,
        macs=executed_macs(build.tasks, stats.device.dispatch_counts),
        stock_mismatches=[int(np.sum(a != s)) for a, s in zip(outputs, stock, strict=True)],
        stock_relative_errors=[relative_error(a, s) for a, s in zip(outputs, stock)],
        ort_max_abs_errors=[float(np.max(np.abs(a.astype(np.float64) - o)))
                            for a, o in zip(outputs, ort, strict=True)],
        argmax_agreement=float(np.mean(np.argmax(outputs[0], axis=-1) ==
                                       np.argmax(ort[0], axis=-1))),
        npu_cycles=stats.npu_cycles,
        roofline_fraction=stats.device.roofline_cycles / stats.npu_cycles
        if stats.npu_cycles else 0.0,
        compile_seconds=compile_seconds, target_dispatches=target_dispatches(build.tasks),
        under_target=dict(Counter(bound_by(task) for task in target_tasks(build.tasks)
                                  if fraction(task) < TARGET_FRACTION)))


def target_tasks(tasks: list[dict]) -> list[dict]:
    """The NPU dispatches with integer MACs and a true roofline of at least
    TARGET_ROOFLINE_CYCLES."""
    return [task for task in tasks if task["target"] == "npu" and task["macs"] and
            task["mac_dtype"] in ("i8", "u8") and
            task["roofline_cycles"] >= TARGET_ROOFLINE_CYCLES]


def fraction(task: dict) -> float:
    """Of the true roofline, by the compiler's estimate (the simulator's cycles;
    tests/codegen_lowering checks they are equal)."""
    return task["roofline_cycles"] / task["estimated_cycles"]


def target_dispatches(tasks: list[dict]) -> tuple[int, int]:
    """(reaching TARGET_FRACTION, all) of the target_tasks."""
    fractions = [fraction(task) for task in target_tasks(tasks)]
    return sum(f >= TARGET_FRACTION for f in fractions), len(fractions)


def bound_by(task: dict) -> str:
    """What keeps a dispatch under TARGET_FRACTION: the first engine (MAC, vector,
    DMA-in, DMA-out) whose instructions alone take longer than roofline / fraction, or
    "fill/drain" (the first loads and the last epilogue and store) when none does."""
    limit = task["roofline_cycles"] / TARGET_FRACTION
    busy = task["engine_busy_cycles"]
    return next((engine for engine in ("mac", "vector", "dma_in", "dma_out")
                 if busy[engine] > limit), "fill/drain")


def function_name(build) -> str:
    """The synchronous entry point: the graph's name (the dispatch names start with it)."""
    return build.tasks[0]["name"].split("$")[0]


def main(args: list[str]) -> None:
    import tempfile

    from tests.bench.measure import host_cpu, host_cpu_line
    activations = "uint8" if "--uint8" in args else "dynamic" if "--dynamic" in args else "int8"
    names = [a for a in args if a not in ("--uint8", "--dynamic")]
    print(host_cpu_line(host_cpu()))
    print(f"activations: {activations}, weights: int8 " +
          ("(quantize_dynamic)" if activations == "dynamic" else "(quantize_static, QDQ)"))
    print("| model | npu/host dispatches | NPU share of integer MACs | elements != stock "
          "(max rel err) | "
          "max abs err vs onnxruntime | argmax = onnxruntime's | simulated NPU cycles | "
          "true roofline fraction | "
          f"integer MAC dispatches >= {TARGET_ROOFLINE_CYCLES} roofline cycles at >= "
          f"{TARGET_FRACTION} | the others, by what keeps them under |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        for name in names or MODELS:
            r = measure_quantized(MODELS[name], Path(work), activations)
            print(f"| {name} | {r.npu_dispatches}/{r.host_dispatches} | {r.macs.npu_share:.4f} | "
                  f"{sum(r.stock_mismatches)} ({max(r.stock_relative_errors):.1e}) | "
                  f"{max(r.ort_max_abs_errors):.2e} | "
                  f"{r.argmax_agreement:.3f} | {r.npu_cycles} | {r.roofline_fraction:.2f} | "
                  f"{r.target_dispatches[0]} of {r.target_dispatches[1]} | "
                  f"{', '.join(f'{k} {v}' for k, v in sorted(r.under_target.items()))} |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
