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
from hal_driver.device.npu_core import CoreProgram
from hal_driver.status import StatusCode, StatusError
from native._npu_core import ffi as core_ffi



def _signature_mismatch(export: str, constants: int, bindings: int, given_constants: int,
                        given_bindings: int) -> StatusError:
    return StatusError(StatusCode.INVALID_ARGUMENT,
                       f"{export} takes {constants} constants and {bindings} bindings; dispatch "
                       f"provides {given_constants} constants and {given_bindings} bindings")

class Executable:
    format = ""
    export_names: list[str] = []
    _ordinals: dict[str, int] | None = None     # lookup_function's, made at the first lookup

    def lookup_function(self, name: str) -> int:
        """The ordinal of the first export named `name` (programs look their exports up
        on every call: a dict made at the first lookup, export_names being fixed)."""
        if self._ordinals is None:
            self._ordinals = {}
            for ordinal, export_name in enumerate(self.export_names):
                self._ordinals.setdefault(export_name, ordinal)
        ordinal = self._ordinals.get(name)
        if ordinal is None:
            raise StatusError(StatusCode.NOT_FOUND,
                              f"executable ({self.format}) has no export named "
                              f"'{excerpt(name)}'")
        return ordinal

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
        self.prepared = [PreparedExport(export, self.program.constants, machine)
                         for export in self.exports]

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
        prepared = self.prepared[ordinal]
        if prepared.parametric:
            program, export = self.specialisations.program(
                prepared.export, constants, [buffer.byte_length for buffer in bindings])
            prepared = PreparedExport(export, program.constants, core.machine)
        export = prepared.export
        for index, (min_size, buffer) in enumerate(zip(prepared.min_sizes, bindings)):
            if buffer.byte_length < min_size:
                raise StatusError(
                    StatusCode.INVALID_ARGUMENT,
                    f"npu-fb export '{export.name}' binding {index} needs at least "
                    f"{min_size} bytes but is bound to {buffer.byte_length}")
        windows = _view_windows(prepared, constants, bindings) if prepared.views else ()
        ranges, write_backs = _core_bindings(bindings, prepared.read_only)
        if windows:
            ranges += [(ranges[binding][0] + start, length) for binding, start, length in windows]
        stats = core.run(prepared.program, ranges, constants, trace)
        if prepared.roofline is not None:
            stats.useful_macs, stats.roofline_cycles, stats.roofline_bound = prepared.roofline
        if write_backs:
            _write_back(write_backs)
        return stats


class PreparedExport:
    """What each dispatch of an npu-fb export reads, made once when the executable is
    loaded: the program wrapped for the core, the bindings' minimum sizes and
    read-only flags, the true roofline on the device's machine. A parametric export
    gets one for its specialised program at each dispatch."""

    __slots__ = ("export", "parametric", "program", "min_sizes", "read_only", "views",
                 "roofline")

    def __init__(self, export, const_pool: bytes, machine):
        self.export = export
        self.parametric = export.parametric is not None
        self.program = CoreProgram(export.program.instructions, const_pool)
        self.min_sizes = tuple(binding.min_size for binding in export.bindings)
        self.read_only = tuple(binding.read_only for binding in export.bindings)
        # (binding, offset_base, offset_constant, offset_scale, step_constant, step_scale,
        # min_size) per binding view: plain tuples, read by every dispatch.
        self.views = tuple((view.binding, view.offset_base, view.offset_constant,
                            view.offset_scale, view.step_constant, view.step_scale,
                            view.min_size) for view in export.views)
        self.roofline = _roofline(export, machine)


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


def _view_windows(prepared: PreparedExport, constants: Sequence[int],
                  bindings: Sequence[Buffer]) -> list[tuple[int, int, int]]:
    """(binding, start, length) of each binding view's window in its bound buffer
    range: the start is the view's base plus its push constant times its scale (plus its
    step constant times its step, if any); the window [start, start + min_size) must lie
    inside the range."""
    windows = []
    for k, (binding, base, constant, scale, step_constant, step, min_size) in \
            enumerate(prepared.views):
        start = base + int(constants[constant]) * scale
        if step:
            start += int(constants[step_constant]) * step
        end = start + min_size
        length = bindings[binding].byte_length
        if start < 0 or end > length:
            steps = f" + push constant {step_constant} = {constants[step_constant]} x {step}" \
                if step else ""
            raise StatusError(
                StatusCode.OUT_OF_RANGE,
                f"npu-fb export '{prepared.export.name}' view {k}: bytes [{start}, {end}) of "
                f"binding {binding} (push constant {constant} = {constants[constant]}, "
                f"x {scale}{steps}, {base:+d}) lie outside its bound range of {length} bytes")
        windows.append((binding, start, min_size))
    return windows


_WRITE = int(MemoryAccess.WRITE)     # an int: IntFlag's & costs microseconds


def _writable(buffer: Buffer) -> bool:
    return bool(buffer.allowed_access & _WRITE)


def _core_bindings(bindings: Sequence[Buffer], read_only: Sequence[bool]) -> tuple[list, list]:
    """The bindings as the NPU core takes them, (cffi pointer, byte length) each, and
    the staged copies to write back after the run.

    A binding the core can write in place (writable storage, 64-byte aligned) is
    passed as it is. A binding the program never stores to (`read_only`, checked by
    the npu-fb verifier) of an immutable buffer is staged once: the copy is kept on
    the allocation and reused by later dispatches. Any other binding is staged for
    this dispatch (_staged_binding)."""
    ranges, write_backs = [], []
    for buffer, binding_read_only in zip(bindings, read_only):
        pointer = buffer.device_pointer()
        if pointer is None:
            if binding_read_only and not _writable(buffer):
                pointer = _immutable_staging(buffer)
            else:
                array, target = _staged_binding(buffer)
                pointer = core_ffi.from_buffer("uint8_t[]", array, require_writable=True)
                if target is not None:
                    write_backs.append((array, target))
        ranges.append((pointer, buffer.byte_length))
    return ranges, write_backs


def _staged_binding(buffer: Buffer) -> tuple[np.ndarray, np.ndarray | None]:
    """A writable 64-byte aligned array for the binding, and where to copy it back
    after the dispatch (None: nowhere, it is the buffer's own memory).

    A binding whose memory is read-only (a constant imported from the module: IREE
    sorts, scatters and accumulates into such constants in place, and a CPU dispatch
    in the stock runtime writes the imported memory) gets storage of its own first
    (make_writable_copy), so the writes reach the buffer as they do in IREE."""
    view = buffer.view()
    if view.flags.writeable and (buffer.allocation.address + buffer.byte_offset) % ALIGNMENT == 0:
        return view, None
    if not view.flags.writeable:
        buffer.allocation.make_writable_copy()
        view = buffer.view()
        if (buffer.allocation.address + buffer.byte_offset) % ALIGNMENT == 0:
            return view, None
    staging = aligned_bytes(len(view), zeroed=False)
    staging[:] = view
    return staging, view


def _immutable_staging(buffer: Buffer):
    """The core's pointer to the allocation's kept aligned copy of the buffer's range
    (made on first use; the pointer keeps the copy alive); valid until a dispatch
    writes the allocation (make_writable_copy drops it)."""
    key = (buffer.byte_offset, buffer.byte_length)
    pointer = buffer.allocation.staged_copies.get(key)
    if pointer is None:
        view = buffer.view()
        staging = aligned_bytes(len(view), zeroed=False)
        staging[:] = view
        pointer = core_ffi.from_buffer("uint8_t[]", staging, require_writable=True)
        buffer.allocation.staged_copies[key] = pointer
    return pointer


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
