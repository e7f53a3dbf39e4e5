"""A small ONNX graph called once on npu-sim (compiled by the npu target, with its
dispatch report), on onnxruntime and on stock IREE llvm-cpu, for the end-to-end tests
of single ops."""
import subprocess
from contextlib import chdir, contextmanager
from dataclasses import dataclass
from pathlib import Path

import iree.runtime
import numpy as np
import onnxruntime
from iree.compiler import compile_file as stock_compile_file
from onnx import helper

from compiler_target import compile_file
from hal_driver import runtime as rt
from tests.e2e.conftest import STOCK_CPU_FLAGS, VENV_BIN


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
    with loaded_on_npu(source, f"--iree-npu-dispatch-report={report}", *dumps) as module:
        result = getattr(module, function)(*inputs)
        stats = module.last_call_stats
    first = result[0] if isinstance(result, (tuple, list)) else result
    return NpuCall(np.asarray(first), stats, report.read_text())


@contextmanager
def loaded_on_npu(source: Path, *compile_args: str):
    """`source` (.onnx or imported MLIR) compiled for the npu target and loaded on
    npu-sim, for several calls (a dynamic-shape build at several sizes); closed after."""
    vmfb = compile_file(str(source), target_backends=["npu"], extra_args=list(compile_args))
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        yield module
    finally:
        module.close()


def on_npu_and_onnxruntime(source: Path, function: str, feeds: list[dict]):
    """`source` (.onnx) compiled once for the npu target (a dynamic-shape build) and
    called with each of `feeds`, its inputs in the function's order: yields (npu-sim's
    first result, onnxruntime's) per feed, each call's dispatches checked to have all
    run on the NPU."""
    with loaded_on_npu(source) as module:
        for feed in feeds:
            got = np.asarray(getattr(module, function)(*feed.values()))
            assert module.last_call_stats.host_dispatches == 0, \
                [value.shape for value in feed.values()]
            yield got, onnxruntime_output(source, feed)


def onnx_file(graph, path: Path, opset: int = 17) -> Path:
    """`graph` (onnx.GraphProto) saved as a model of the default domain's `opset`."""
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
                     .SerializeToString())
    return path


def onnxruntime_output(path: Path, feeds: dict) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def stock_llvm_cpu(path: Path, cpu_flags=STOCK_CPU_FLAGS):
    """Stock IREE llvm-cpu's `g` on the ONNX model, imported as the npu target imports it
    (by default for the generic x86-64 CPU, conftest.STOCK_CPU_FLAGS)."""
    mlir = path.with_suffix(".mlir")
    subprocess.run([VENV_BIN / "iree-import-onnx", path, "-o", mlir], check=True)
    vmfb = stock_compile_file(str(mlir), target_backends=["llvm-cpu"], extra_args=cpu_flags)
    return iree.runtime.load_vm_flatbuffer(vmfb, driver="local-task").g


def quantized_static(f32: Path, path: Path, feeds: list[dict], activations: str = "QInt8",
                     quant_format: str = "QDQ") -> Path:
    """`f32` quantized as a user quantizes a network: onnxruntime's `quantize_static`,
    `quant_format` (QDQ or QOperator), QInt8 weights, per-tensor, `activations` (QInt8 or
    QUInt8), calibrated on `feeds`; in `path`'s directory (the QOperator quantizer leaves
    files in the working directory)."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Feeds(CalibrationDataReader):
        def __init__(self):
            self.remaining = list(feeds)

        def get_next(self):
            return self.remaining.pop(0) if self.remaining else None

    with chdir(path.parent):
        quantize_static(str(f32), str(path), Feeds(), quant_format=QuantFormat[quant_format],
                        activation_type=QuantType[activations], weight_type=QuantType.QInt8)
    return path
