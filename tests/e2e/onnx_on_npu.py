"""A small ONNX graph called once on npu-sim (compiled by the npu target, with its
dispatch report) and on onnxruntime, for the end-to-end tests of single ops."""
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime

from compiler_target import compile_file
from hal_driver import runtime as rt


@dataclass
class NpuCall:
    output: np.ndarray        # the first result
    stats: object             # hal_driver.runtime.CallStats
    report: str               # --iree-npu-dispatch-report


def call_on_npu(source: Path, function: str, *inputs: np.ndarray,
                dump_asm: Path | None = None) -> NpuCall:
    """Compiles `source` (.onnx or imported MLIR) and calls `function` once; with
    `dump_asm`, the NPU programs' assembly is written there."""
    report = source.with_suffix(".report.txt")
    dumps = [f"--iree-npu-dump-asm={dump_asm}"] if dump_asm is not None else []
    vmfb = compile_file(str(source), target_backends=["npu"],
                        extra_args=[f"--iree-npu-dispatch-report={report}", *dumps])
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        result = getattr(module, function)(*inputs)
        stats = module.last_call_stats
    finally:
        module.close()
    first = result[0] if isinstance(result, (tuple, list)) else result
    return NpuCall(np.asarray(first), stats, report.read_text())


def onnxruntime_output(path: Path, feeds: dict) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]
