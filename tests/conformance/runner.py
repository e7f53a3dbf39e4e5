"""Runs ONNX conformance cases through stock IREE (llvm-cpu on local-task) and through
the npu target on npu-sim, and compares each with onnx's expected outputs.

A batch of cases (cases.py) is compiled as one module on each side, each case a function
of it, then each function is called. A batch that either side fails to compile or load
is split in halves, down to single cases; a single case is compiled alone, and for the
npu target in a child process when the stock compiler fails on it (the compiler may
abort its whole process)."""
import re
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


def outcomes(case: Case) -> tuple[Outcome, Outcome]:
    """(npu-sim, stock) outcomes of the case, worked out together with the rest of its
    batch the first time one of them is asked for (then kept until asked for)."""
    if case.name not in _finished:
        _finished.update(_run_batch(case.batch or [case]))
    return _finished.pop(case.name)


_finished: dict[str, tuple[Outcome, Outcome]] = {}


def _run_batch(cases: list[Case]) -> dict[str, tuple[Outcome, Outcome]]:
    results, sources = {}, {}
    for case in cases:
        try:
            sources[case.name] = import_onnx(case)
        except Exception as error:  # the importer is stock's: neither side can run the case
            failed = Outcome(False, f"import: {type(error).__name__}: {_first_line(error)}",
                             compiled=False)
            results[case.name] = (failed, failed)
    results.update(_run_together([case for case in cases if case.name in sources], sources))
    return results


def _run_together(cases: list[Case], sources: dict[str, str]):
    if len(cases) == 1:
        [case] = cases
        stock = run_stock(case, sources[case.name])
        return {case.name: (run_npu(case, sources[case.name], isolated=not stock.compiled),
                            stock)}
    mlir = _one_module([sources[case.name] for case in cases])
    try:
        stock_module = _load_stock(_compile_stock(mlir))
        vmfb, report = _compile_npu(mlir, _compile_npu_in_process)
        npu_module = _load_npu(vmfb)
    except Exception:
        half = len(cases) // 2
        return {**_run_together(cases[:half], sources), **_run_together(cases[half:], sources)}
    return {case.name: (_call_npu(case, npu_module, _lines_of(case, report)),
                        _call_stock(case, stock_module))
            for case in cases}


def _one_module(sources: list[str]) -> str:
    """The imported modules' functions in one module (the importer puts nothing else in a
    module, and names each function after its case)."""
    bodies = []
    for source in sources:
        text = source.strip()
        if not (text.startswith("module {") and text.endswith("}")):
            raise ValueError(f"unexpected imported module: {text[:60]!r}")
        bodies.append(text[len("module {"):-1])
    return "module {" + "".join(bodies) + "}\n"


def _lines_of(case: Case, report: list[str]) -> list[str]:
    """The report lines of the case's dispatches ("Dispatch #<k> <name>: ..."; IREE names
    a dispatch after its function: <function>[$async]_dispatch_<n>...)."""
    own = re.compile(rf"Dispatch #\d+ {re.escape(case.model.graph.name)}(\$async)?_dispatch_\d")
    return [line for line in report if own.match(line)]


def run_stock(case: Case, mlir: str) -> Outcome:
    try:
        vmfb = _compile_stock(mlir)
    except Exception as error:
        return Outcome(False, "compile: " + _first_line(error), compiled=False)
    try:
        module = _load_stock(vmfb)
    except Exception as error:  # a stock failure is a table entry, not a test error
        return Outcome(False, _first_line(error))
    return _call_stock(case, module)


def _compile_stock(mlir: str) -> bytes:
    import iree.compiler as ireec
    return ireec.compile_str(mlir, target_backends=["llvm-cpu"], extra_args=[HOST_CPU_FLAG])


def _load_stock(vmfb: bytes):
    import iree.runtime as ireert
    return ireert.load_vm_flatbuffer(vmfb, driver="local-task")


def _call_stock(case: Case, module) -> Outcome:
    try:
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


def _compile_npu(mlir: str, compile_npu) -> tuple[bytes, list[str]]:
    """(vmfb, dispatch report lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.txt"
        vmfb = compile_npu(mlir, report_path)
        return vmfb, [line for line in report_path.read_text().splitlines()
                      if line.startswith("Dispatch #")]


def _load_npu(vmfb: bytes):
    from hal_driver import runtime as rt
    return rt.load_vm_flatbuffer(vmfb, driver="npu-sim")


def run_npu(case: Case, mlir: str, isolated: bool = False) -> Outcome:
    try:
        vmfb, report = _compile_npu(mlir, _compile_npu_isolated if isolated
                                    else _compile_npu_in_process)
    except Exception as error:
        return Outcome(False, "compile: " + _first_line(error), compiled=False)
    try:
        module = _load_npu(vmfb)
    except Exception as error:
        return _compiled(report, error="run: " + _first_line(error))
    return _call_npu(case, module, report)


def _compiled(report: list[str], error: str) -> Outcome:
    """A failed outcome with the dispatches the report lines say were compiled."""
    return Outcome(False, error, report=report,
                   npu_dispatches=sum("-> npu" in line for line in report),
                   host_dispatches=sum("-> host" in line for line in report))


def _call_npu(case: Case, module, report: list[str]) -> Outcome:
    """The case's call on npu-sim, counting the dispatches the call ran (a batch's
    executables are shared: IREE compiles identical dispatches of two functions once)."""
    try:
        result = getattr(module, case.model.graph.name)(*case.inputs)
    except Exception as error:
        return _compiled(report, error="run: " + _first_line(error))
    stats = module.last_call_stats
    why = mismatch(_outputs(result), case.outputs, case.rtol, case.atol)
    return Outcome(not why, why, report=report, npu_dispatches=stats.npu_dispatches,
                   host_dispatches=stats.host_dispatches)
