"""Runs one ONNX conformance case through stock IREE (llvm-cpu on local-task) and
through the npu target on npu-sim, and compares each with onnx's expected outputs."""
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .cases import Case

ROOT = Path(__file__).resolve().parents[2]
# Both sides compile host code for this machine's CPU: host fallback dispatches are then
# stock's own code, and behaviour LLVM leaves undefined (a shift by the bit width or
# more) resolves the same way on both.
HOST_CPU_FLAG = "--iree-llvmcpu-target-cpu=host"


@dataclass
class Outcome:
    passed: bool
    error: str = ""
    compiled: bool = True
    npu_dispatches: int = 0
    host_dispatches: int = 0
    report: list[str] = field(default_factory=list)


def import_onnx(case: Case) -> str:
    """The case's model as MLIR, through the ONNX importer shipped in iree-base-compiler."""
    from iree.compiler.extras import onnx_importer
    from iree.compiler.ir import Context
    context = Context()
    info = onnx_importer.ModelInfo(case.model)
    module = info.create_module(context=context).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    return module.get_asm()


def mismatch(actual: list, expected: list[np.ndarray], rtol: float, atol: float) -> str:
    """Empty when every output matches (numpy.testing semantics), else why not."""
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"output {k}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
        if not np.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))
            return f"output {k}: max abs error {worst:g}"
    return ""


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def _outputs(result) -> list:
    if isinstance(result, (list, tuple)):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def run_stock(case: Case, mlir: str) -> Outcome:
    import iree.compiler as ireec
    import iree.runtime as ireert
    try:
        vmfb = ireec.compile_str(mlir, target_backends=["llvm-cpu"],
                                 extra_args=[HOST_CPU_FLAG])
    except Exception as error:
        return Outcome(False, "compile: " + _first_line(error), compiled=False)
    try:
        module = ireert.load_vm_flatbuffer(vmfb, driver="local-task")
        result = getattr(module, case.model.graph.name)(*case.inputs)
        outputs = [r.to_host() if hasattr(r, "to_host") else r for r in
                   (result if isinstance(result, (list, tuple)) else [result])]
    except Exception as error:  # a stock failure is a table entry, not a test error
        return Outcome(False, _first_line(error))
    why = mismatch(_outputs(outputs), case.outputs, case.rtol, case.atol)
    return Outcome(not why, why)


def _compile_npu_in_process(mlir: str, report_path: Path) -> bytes:
    from compiler_target import compile_str
    return compile_str(mlir, target_backends=["npu"],
                       extra_args=[HOST_CPU_FLAG, f"--iree-npu-dispatch-report={report_path}"])


def _compile_npu_isolated(mlir: str, report_path: Path) -> bytes:
    """Through bin/iree-compile in a child process: for inputs the stock compiler
    itself fails on, where the compiler may abort the whole process."""
    source, vmfb = report_path.parent / "model.mlir", report_path.parent / "model.vmfb"
    source.write_text(mlir)
    result = subprocess.run([str(ROOT / "bin" / "iree-compile"), "--iree-hal-target-backends=npu",
                             HOST_CPU_FLAG, str(source), "-o", str(vmfb),
                             f"--iree-npu-dispatch-report={report_path}"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError((result.stderr.strip() or f"exit {result.returncode}").splitlines()[0])
    return vmfb.read_bytes()


def run_npu(case: Case, mlir: str, isolated: bool = False) -> Outcome:
    from hal_driver import runtime as rt
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.txt"
        compile_npu = _compile_npu_isolated if isolated else _compile_npu_in_process
        try:
            vmfb = compile_npu(mlir, report_path)
        except Exception as error:
            return Outcome(False, "compile: " + _first_line(error), compiled=False)
        report = [line for line in report_path.read_text().splitlines()
                  if line.startswith("Dispatch #")]
    outcome = Outcome(False, report=report,
                      npu_dispatches=sum("-> npu" in line for line in report),
                      host_dispatches=sum("-> host" in line for line in report))
    try:
        module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
        result = getattr(module, case.model.graph.name)(*case.inputs)
    except Exception as error:
        outcome.error = "run: " + _first_line(error)
        return outcome
    outcome.error = mismatch(_outputs(result), case.outputs, case.rtol, case.atol)
    outcome.passed = not outcome.error
    return outcome
