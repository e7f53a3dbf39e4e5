"""The stock IREE compiler (iree-base-compiler) driven phase by phase in this process.

One Session per compile; an Invocation per phase range. Compile-from/compile-to are set
through the C API functions the Python wrapper does not expose. Diagnostics are collected
through the C API callback so failures become one-line CompileErrors.

Process-global LLVM/MLIR flags (those a Session rejects, e.g. --iree-hal-link-executables,
--mlir-print-ir-after-all) can be set only once per process; they are checked in a
forked child first so that an unknown flag becomes an error instead of an exit.
"""
import ctypes
import os

from iree.compiler.api import Output, Session, Source
from iree.compiler.api import ctypes_dl

from compiler_target.errors import CompileError

PHASES = (
    "start", "input", "abi", "preprocessing", "global-optimization", "dispatch-creation",
    "flow", "stream", "executable-sources", "executable-configurations",
    "executable-targets", "hal", "vm", "end",
)

_SEVERITY = {0: "note", 1: "warning", 2: "error", 3: "remark"}
_DIAGNOSTIC_CALLBACK = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p)

_lib = ctypes_dl._dylib
_lib.ireeCompilerInvocationSetCompileFromPhase.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_lib.ireeCompilerInvocationSetCompileToPhase.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_lib.ireeCompilerInvocationEnableCallbackDiagnostics.argtypes = [
    ctypes.c_void_p, ctypes.c_int, _DIAGNOSTIC_CALLBACK, ctypes.c_void_p]

_process_global_flags: tuple[str, ...] | None = None


def phase_index(name: str) -> int:
    if name not in PHASES:
        raise CompileError(f"unknown compilation phase '{name}' (one of: {', '.join(PHASES[1:])})")
    return PHASES.index(name)


def split_session_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """(session flags, process-global flags): a flag a Session rejects is process-global."""
    probe = Session()
    session_flags, global_flags = [], []
    for flag in flags:
        try:
            probe.set_flags(flag)
            session_flags.append(flag)
        except ValueError:
            global_flags.append(flag)
    probe.close()
    return session_flags, global_flags


def set_process_global_flags(flags: list[str], known_valid: list[str]) -> None:
    """Sets LLVM/MLIR command-line flags for this process, once. Unless all of them are
    `known_valid`, they are first parsed in a forked child (about 0.03-0.05 s)."""
    global _process_global_flags
    wanted = tuple(flags)
    if _process_global_flags is None:
        if not set(wanted) <= set(known_valid):
            _check_flags_parse(wanted)
        ctypes_dl._initializeGlobalCL("iree-compile", *wanted)
        _process_global_flags = wanted
    elif wanted != _process_global_flags:
        raise CompileError(
            "process-wide flags differ from the first compile in this process "
            f"({' '.join(_process_global_flags)} vs {' '.join(wanted)}); compile in a new process")


def _check_flags_parse(flags: tuple[str, ...]) -> None:
    """LLVM exits the process on a bad flag, so parse them first in a forked child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.dup2(write_end, 2)
        ctypes_dl._initializeGlobalCL("iree-compile", *flags)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if status != 0:
        lines = [line.removeprefix("iree-compile: ").split("  Try:")[0].strip().rstrip(".")
                 for line in text.splitlines() if line.strip()]
        raise CompileError("; ".join(lines) or "invalid command-line flags")


class StockCompiler:
    """One compile's Session: parse/import a module, run phase ranges, write outputs."""

    def __init__(self, session_flags: list[str]):
        self.session = Session()
        self.context = self.session.context  # dialects load as parsing and passes need them
        try:
            self.session.set_flags(*session_flags)
        except ValueError as e:
            raise CompileError(str(e).replace("\n", " ").replace("  ", " ")) from None
        self._invocations = []  # kept alive: each owns diagnostics state for its module

    def parse_file(self, path: str):
        """Parses an MLIR file (text or bytecode) into a module in this session's context."""
        try:
            source = Source.open_file(self.session, path)
        except ValueError as e:
            raise CompileError(str(e)) from None
        invocation, diagnostics = self._invocation()
        if not invocation.parse_source(source):
            raise CompileError(diagnostics.first_error(f"failed to parse {path}"))
        return invocation.export_module()

    def parse_text(self, text: str, name: str = "source.mlir"):
        source = Source.wrap_buffer(self.session, text.encode() + b"\0", buffer_name=name)
        invocation, diagnostics = self._invocation()
        if not invocation.parse_source(source):
            raise CompileError(diagnostics.first_error(f"failed to parse {name}"))
        return invocation.export_module()

    def run(self, module, from_phase: str, to_phase: str):
        """Runs the stock pipeline over `module` (in place) from one phase to another.
        Returns the invocation, which can then write the module out."""
        invocation, diagnostics = self._invocation()
        invocation.import_module(module)
        _lib.ireeCompilerInvocationSetCompileFromPhase(invocation._inv_p, from_phase.encode())
        _lib.ireeCompilerInvocationSetCompileToPhase(invocation._inv_p, to_phase.encode())
        if not invocation.execute():
            raise CompileError(diagnostics.first_error(
                f"stock compiler failed between phases {from_phase} and {to_phase}"))
        return invocation

    def _invocation(self):
        invocation = self.session.invocation()
        diagnostics = _Diagnostics()
        _lib.ireeCompilerInvocationEnableCallbackDiagnostics(
            invocation._inv_p, 0, diagnostics.callback, None)
        self._invocations.append((invocation, diagnostics))
        return invocation, diagnostics


def vmfb_bytes(invocation) -> bytes:
    output = Output.open_membuffer()
    invocation.output_vm_bytecode(output)
    return bytes(output.map_memory())


def ir_text(invocation) -> bytes:
    output = Output.open_membuffer()
    invocation.output_ir(output)
    return bytes(output.map_memory())


class _Diagnostics:
    """Collects an invocation's diagnostics; warnings and remarks are echoed to stderr."""

    def __init__(self):
        self.errors: list[str] = []
        self.callback = _DIAGNOSTIC_CALLBACK(self._on_diagnostic)

    def _on_diagnostic(self, severity, message, size, _user_data):
        text = ctypes.string_at(message, size).decode(errors="replace")
        kind = _SEVERITY.get(severity, "error")
        if kind == "error":
            self.errors.append(text)
        else:
            os.write(2, f"{kind}: {text}\n".encode())

    def first_error(self, fallback: str) -> str:
        if not self.errors:
            return fallback
        return self.errors[0].split("\n")[0].strip()

