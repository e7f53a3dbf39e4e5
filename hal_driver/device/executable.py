"""hal.executable: npu-fb programs run by the NPU core, host-fallback libraries run on the CPU.

Both kinds answer `lookup_function(name) -> ordinal`, check a dispatch when it is
recorded (`check_dispatch`) and run it (`run`) with bindings given as hal buffers.
"""
from typing import Sequence

import numpy as np

from executable_format.errors import excerpt
from executable_format.version import FORMAT_NAME as NPU_FORMAT
from hal_driver.device.buffer import Buffer, aligned_bytes
from hal_driver.device.executable_specialiser import Specialisations
from hal_driver.device.memory import ALIGNMENT, MemoryAccess
from hal_driver.status import StatusCode, StatusError



def _signature_mismatch(export: str, constants: int, bindings: int, given_constants: int,
                        given_bindings: int) -> StatusError:
    return StatusError(StatusCode.INVALID_ARGUMENT,
                       f"{export} takes {constants} constants and {bindings} bindings; dispatch "
                       f"provides {given_constants} constants and {given_bindings} bindings")

class Executable:
    format = ""
    export_names: list[str] = []

    def lookup_function(self, name: str) -> int:
        try:
            return self.export_names.index(name)
        except ValueError:
            raise StatusError(StatusCode.NOT_FOUND,
                              f"executable ({self.format}) has no export named "
                              f"'{excerpt(name)}'") from None

    def dispatch(self, device, ordinal: int, workgroup_count, constants: Sequence[int],
                 bindings: Sequence[Buffer]) -> None:
        """Runs export `ordinal` on `device` (its NPU core or its CPU), over the grid
        `workgroup_count`, and records it in the device's statistics and trace."""
        raise NotImplementedError

    def check_dispatch(self, ordinal: int, constant_count: int, binding_count: int) -> None:
        if not 0 <= ordinal < len(self.export_names):
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"executable ({self.format}) export ordinal {ordinal} out of range "
                              f"(has {len(self.export_names)} exports)")


class NpuExecutable(Executable):
    format = NPU_FORMAT

    def __init__(self, data: bytes, machine):
        from executable_format.errors import FormatError
        from executable_format.reader import read_executable
        try:
            self.program = read_executable(bytes(data))
        except FormatError as error:   # "npu-fb verification failed: ..." (verify())
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"executable {error}") from None
        check_machine(self.program.machine, machine)
        self.exports = sorted(self.program.exports, key=lambda e: e.ordinal)
        self.export_names = [e.name for e in self.exports]
        self.specialisations = Specialisations(machine)
        self.rooflines = [_roofline(export, machine) for export in self.exports]

    def check_dispatch(self, ordinal: int, constant_count: int, binding_count: int) -> None:
        super().check_dispatch(ordinal, constant_count, binding_count)
        export = self.exports[ordinal]
        if constant_count != export.constant_count or binding_count < export.binding_count:
            raise _signature_mismatch(f"npu-fb export '{export.name}'", export.constant_count,
                                      export.binding_count, constant_count, binding_count)

    def dispatch(self, device, ordinal: int, workgroup_count, constants: Sequence[int],
                 bindings: Sequence[Buffer]) -> None:
        trace = device.trace is not None
        stats = self.run(device.core, ordinal, constants, bindings, trace)
        name = self.export_names[ordinal]
        device.statistics.record_npu_dispatch(name, stats)
        if trace:
            device.trace.add_dispatch(name, stats)

    def run(self, core, ordinal: int, constants: Sequence[int], bindings: Sequence[Buffer],
            trace: bool):
        """Runs the export's program once over the bindings; the program covers the
        whole dispatch, so the host program's workgroup grid is not looped. A parametric
        export runs the program specialised for the extents in `constants`."""
        program, export, roofline = self.program, self.exports[ordinal], self.rooflines[ordinal]
        if export.parametric is not None:
            program, export = self.specialisations.program(
                export, constants, [buffer.byte_length for buffer in bindings])
            roofline = _roofline(export, core.machine)
        for index, (binding, buffer) in enumerate(zip(export.bindings, bindings)):
            if buffer.byte_length < binding.min_size:
                raise StatusError(
                    StatusCode.INVALID_ARGUMENT,
                    f"npu-fb export '{export.name}' binding {index} needs at least "
                    f"{binding.min_size} bytes but is bound to {buffer.byte_length}")
        windows = _view_windows(export, constants, bindings) if export.views else ()
        staged = [_staged_binding(buffer, binding.read_only)
                  for binding, buffer in zip(export.bindings, bindings)]
        arrays = [array for array, _ in staged]
        arrays += [arrays[view.binding][start:end]
                   for view, (start, end) in zip(export.views, windows)]
        stats = core.execute(export.program.instructions, arrays, constants,
                             const_pool=program.constants, trace=trace)
        if roofline is not None:
            stats.useful_macs, stats.roofline_cycles, stats.roofline_bound = roofline
        _write_back(staged)
        return stats


class HostExecutable(Executable):
    """A host-CPU library (llvm-cpu output) run through host_library."""

    def __init__(self, format: str, data: bytes, constants: Sequence[int] = ()):
        from hal_driver.device import host_library
        self.format = format
        self.library = host_library.HostLibrary(format, bytes(data), constants)
        self.export_names = list(self.library.export_names)

    def check_dispatch(self, ordinal: int, constant_count: int, binding_count: int) -> None:
        super().check_dispatch(ordinal, constant_count, binding_count)
        info = self.library.export_info(ordinal)
        if constant_count != info.constant_count or binding_count != info.binding_count:
            raise _signature_mismatch(f"host export '{excerpt(info.name)}'", info.constant_count,
                                      info.binding_count, constant_count, binding_count)

    def dispatch(self, device, ordinal: int, workgroup_count, constants: Sequence[int],
                 bindings: Sequence[Buffer]) -> None:
        staged = [_staged_binding(buffer) for buffer in bindings]
        self.library.dispatch(ordinal, tuple(workgroup_count), list(constants),
                              [array for array, _ in staged], device.dispatch_timeout_ms)
        _write_back(staged)
        device.statistics.record_host_dispatch(self.export_names[ordinal])


def _roofline(export, machine) -> tuple[int, float, str] | None:
    """The export's true roofline on `machine` as DispatchStats records it: useful MACs,
    cycles, bound (None: not recorded)."""
    roofline = export.roofline
    if roofline is None:
        return None
    return roofline.useful_macs, roofline.cycles(machine), roofline.bound(machine)


def _view_windows(export, constants: Sequence[int],
                  bindings: Sequence[Buffer]) -> list[tuple[int, int]]:
    """[start, end) of each binding view in its bound buffer range: the start is the
    view's base plus its push constant times its scale; the window must lie inside the
    range."""
    windows = []
    for k, view in enumerate(export.views):
        start = view.offset_base + int(constants[view.offset_constant]) * view.offset_scale
        end = start + view.min_size
        length = bindings[view.binding].byte_length
        if start < 0 or end > length:
            raise StatusError(
                StatusCode.OUT_OF_RANGE,
                f"npu-fb export '{export.name}' view {k}: bytes [{start}, {end}) of binding "
                f"{view.binding} (push constant {view.offset_constant} = "
                f"{constants[view.offset_constant]}, x {view.offset_scale}, "
                f"{view.offset_base:+d}) lie outside its bound range of {length} bytes")
        windows.append((start, end))
    return windows


_WRITE = int(MemoryAccess.WRITE)     # an int: IntFlag's & costs microseconds


def _writable(buffer: Buffer) -> bool:
    return bool(buffer.allowed_access & _WRITE)


def _staged_binding(buffer: Buffer, read_only: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """A writable 64-byte aligned array for the binding, and where to copy it back
    after the dispatch (None: nowhere, it is the buffer's own memory or never written).

    A binding the program never stores to (`read_only`, checked by the npu-fb
    verifier) of an immutable buffer is staged once: the copy is kept on the
    allocation and reused by later dispatches. A binding the dispatch may write whose
    memory is read-only (a constant imported from the module: IREE sorts, scatters and
    accumulates into such constants in place, and a CPU dispatch in the stock runtime
    writes the imported memory) gets storage of its own first (make_writable_copy), so
    the writes reach the buffer as they do in IREE."""
    view = buffer.view()
    if view.flags.writeable and (buffer.allocation.address + buffer.byte_offset) % ALIGNMENT == 0:
        return view, None
    if read_only and not _writable(buffer):
        return _immutable_staging(buffer, view), None
    if not view.flags.writeable:
        buffer.allocation.make_writable_copy()
        view = buffer.view()
        if (buffer.allocation.address + buffer.byte_offset) % ALIGNMENT == 0:
            return view, None
    staging = aligned_bytes(len(view), zeroed=False)
    staging[:] = view
    return staging, view


def _immutable_staging(buffer: Buffer, view: np.ndarray) -> np.ndarray:
    """The allocation's kept aligned copy of the buffer's range (made on first use);
    valid until a dispatch writes the allocation (make_writable_copy drops it)."""
    key = (buffer.byte_offset, buffer.byte_length)
    staging = buffer.allocation.staged_copies.get(key)
    if staging is None:
        staging = aligned_bytes(len(view), zeroed=False)
        staging[:] = view
        buffer.allocation.staged_copies[key] = staging
    return staging


def _write_back(staged: list[tuple[np.ndarray, np.ndarray | None]]) -> None:
    for array, target in staged:
        if target is not None:
            target[...] = array


def check_machine(compiled_for, device_machine) -> None:
    """Rejects a program compiled for another NPU machine configuration."""
    if compiled_for == device_machine:
        return
    theirs, ours = compiled_for.as_dict(), device_machine.as_dict()
    diffs = ", ".join(f"{name}={theirs[name]} (device: {ours.get(name)})"
                      for name in theirs if theirs[name] != ours.get(name))
    raise StatusError(StatusCode.FAILED_PRECONDITION,
                      f"executable npu-fb was compiled for a different NPU machine "
                      f"configuration: {diffs}")
