"""Host-CPU fallback executables: llvm-cpu output run by native/host_dispatch.c.

A `HostLibrary` loads an executable library produced by the stock llvm-cpu backend
(the bytes `hal.executable.create` receives) with native/elf_loader.c, which checks the
whole ELF before it maps and relocates it and never runs its initialisers, and runs
dispatches of its exports on the calling thread under native/fault_guard.c: a fault or
a deadline fails the dispatch, not the process. See docs/host-fallback.md for the formats, flags and ABI.
"""
import dataclasses
import operator
import signal
from typing import Sequence

from executable_format.errors import excerpt
from hal_driver.status import StatusCode, StatusError
from native._host_dispatch import ffi, lib

SUPPORTED_FORMATS = ("embedded-elf-x86_64", "system-elf-x86_64")

# Kernels use aligned vector loads; the device keeps binding offsets this aligned.
BINDING_ALIGNMENT = 64

_MAX_WORKGROUP_COUNT = (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFF)


@dataclasses.dataclass(frozen=True)
class ExportInfo:
    """What the library declares about one export."""
    name: str
    binding_count: int
    constant_count: int
    workgroup_size: tuple[int, int, int]
    local_memory_pages: int
    flags: int


def _as_int(value) -> int | None:
    """`value` as an int if it is an integer (Python or numpy), else None."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def _library_string(raw, what: str) -> str:
    """A name the library declares (a C string); not UTF-8 means the library is corrupt."""
    data = ffi.string(raw)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StatusError(StatusCode.DATA_LOSS,
                          f"malformed host executable: {what} `{excerpt(data)}` is not "
                          f"valid UTF-8") from None


def _pack_u32(values: Sequence[int], what: str):
    """Returns a uint32_t[] holding `values`; accepts int32 and uint32 values."""
    packed = []
    for i, value in enumerate(values):
        number = _as_int(value)
        if number is None or not -(1 << 31) <= number < (1 << 32):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{what} {i} is {value!r}; expected a 32-bit integer")
        packed.append(number & 0xFFFFFFFF)
    return ffi.new("uint32_t[]", packed) if packed else ffi.NULL


class HostLibrary:
    """One loaded llvm-cpu executable library."""

    _library = ffi.NULL

    def __init__(self, format: str, data: bytes, constants: Sequence[int] = ()):
        """Loads `data` (the executable library bytes of `format`).

        `constants` are the executable-level constants from `hal.executable.create`;
        their count must match what the library declares (normally none).
        """
        if format not in SUPPORTED_FORMATS:
            raise StatusError(StatusCode.UNIMPLEMENTED,
                              f"host executable format `{format}` is not supported; "
                              f"supported formats: {', '.join(SUPPORTED_FORMATS)}")
        data = bytes(data)
        self.format = format
        self._library = self._load(data, _pack_u32(constants, "executable constant"),
                                   len(constants))
        self.name = _library_string(lib.hd_library_name(self._library), "library name")
        self._exports = [self._read_export(i)
                         for i in range(lib.hd_library_export_count(self._library))]
        self.export_names = [info.name for info in self._exports]
        # each dispatch's error context, quoted once (excerpt walks the name's characters)
        self._dispatch_contexts = [f"dispatch of `{excerpt(name)}`" for name in self.export_names]

    @staticmethod
    def _load(data: bytes, constants, constant_count: int):
        out = ffi.new("hd_library**")
        error = ffi.new("char[]", lib.HD_ERROR_CAPACITY)
        code = lib.hd_library_load(data, len(data), constants, constant_count, out, error)
        if code != 0:
            message = ffi.string(error).decode(errors="replace")
            raise StatusError(code, f"loading host executable: {message}")
        return out[0]

    def _read_export(self, ordinal: int) -> ExportInfo:
        info = ffi.new("hd_export_info*")
        lib.hd_library_export_info(self._library, ordinal, info)
        return ExportInfo(
            name=_library_string(info.name, f"export {ordinal} name"),
            binding_count=info.binding_count,
            constant_count=info.constant_count,
            workgroup_size=tuple(info.workgroup_size),
            local_memory_pages=info.local_memory_pages,
            flags=info.flags,
        )

    def _check_open(self) -> None:
        if self._library == ffi.NULL:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              "host executable has been closed")

    def lookup(self, name: str) -> int:
        """Returns the export ordinal of `name` (hal.executable.lookup.function)."""
        self._check_open()
        try:
            return self.export_names.index(name)
        except ValueError:
            raise StatusError(StatusCode.NOT_FOUND,
                              f"executable `{excerpt(self.name)}` has no export named "
                              f"`{excerpt(name)}`") from None

    def export_info(self, ordinal: int) -> ExportInfo:
        self._check_open()
        index = _as_int(ordinal)
        if index is None or not 0 <= index < len(self._exports):
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"export ordinal {ordinal} out of range; executable "
                              f"`{excerpt(self.name)}` has {len(self._exports)} exports")
        return self._exports[index]

    def dispatch(self, ordinal: int, workgroup_count: tuple[int, int, int],
                 constants: Sequence[int], bindings: Sequence, timeout_ms: float = 0) -> None:
        """Runs every workgroup of export `ordinal` over the given grid.

        `constants` are the dispatch's 32-bit push constants; `bindings` are writable
        contiguous buffer-protocol objects (already offset), 64-byte aligned. A
        workgroup that faults fails the dispatch with INTERNAL; one still running
        `timeout_ms` after the start (0: no deadline) with DEADLINE_EXCEEDED.
        """
        info = self.export_info(ordinal)
        ordinal = operator.index(ordinal)
        where = self._dispatch_contexts[ordinal]
        count = self._check_workgroup_count(workgroup_count, where)
        if len(constants) != info.constant_count:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{where}: {len(constants)} constants provided; "
                              f"export takes {info.constant_count}")
        if len(bindings) != info.binding_count:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{where}: {len(bindings)} bindings provided; "
                              f"export takes {info.binding_count}")
        packed_constants = _pack_u32(constants, f"{where}: constant")
        buffers = [self._binding_buffer(b, i, where) for i, b in enumerate(bindings)]
        if 0 in count:
            return
        failure = ffi.new("hd_dispatch_failure*")
        status = lib.hd_dispatch(
            self._library, ordinal, *count, packed_constants, len(constants),
            ffi.new("void*[]", buffers) if buffers else ffi.NULL,
            ffi.new("size_t[]", [len(b) for b in buffers]) if buffers else ffi.NULL,
            len(buffers), min(round(timeout_ms * 1e6), 2**64 - 1), failure)
        self._check_dispatch_status(status, failure, where, timeout_ms)

    @staticmethod
    def _check_workgroup_count(workgroup_count, where: str) -> tuple[int, int, int]:
        count = tuple(_as_int(c) for c in workgroup_count)
        if len(count) != 3 or not all(
                c is not None and 0 <= c <= limit
                for c, limit in zip(count, _MAX_WORKGROUP_COUNT)):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{where}: workgroup count {workgroup_count!r} invalid; "
                              f"expected (x, y, z) with x, y < 2^32 and z < 2^16")
        return count

    @staticmethod
    def _binding_buffer(binding, index: int, where: str):
        try:
            buffer = ffi.from_buffer(binding, require_writable=True)
        except (TypeError, BufferError, ValueError) as e:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{where}: binding {index} is not a writable contiguous "
                              f"buffer: {e}") from None
        address = int(ffi.cast("uintptr_t", buffer))
        if len(buffer) and address % BINDING_ALIGNMENT:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{where}: binding {index} address {address:#x} is not "
                              f"{BINDING_ALIGNMENT}-byte aligned")
        return buffer

    @staticmethod
    def _check_dispatch_status(status: int, failure, where: str, timeout_ms: float) -> None:
        wg = tuple(failure.workgroup_id)
        if status == lib.HD_DISPATCH_WORKGROUP_FAILED:
            raise StatusError(StatusCode.INTERNAL,
                              f"{where}: workgroup {wg} returned {failure.result}")
        if status == lib.HD_DISPATCH_FAULTED:
            name = signal.Signals(failure.signal).name
            raise StatusError(StatusCode.INTERNAL,
                              f"{where}: workgroup {wg} raised {name} at address "
                              f"{failure.address:#x}; the executable is corrupt or "
                              f"accessed memory outside its bindings")
        if status == lib.HD_DISPATCH_DEADLINE_EXCEEDED:
            raise StatusError(StatusCode.DEADLINE_EXCEEDED,
                              f"{where}: deadline of {timeout_ms:g} ms exceeded in "
                              f"workgroup {wg}")
        if status == lib.HD_DISPATCH_GUARD_FAILED:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                              f"{where}: could not set up the fault guard (signal "
                              f"handlers, timer)")
        if status == lib.HD_DISPATCH_OUT_OF_MEMORY:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                              f"{where}: mapping the memory of the call failed")

    def close(self) -> None:
        """Unloads the library; the executable cannot be used afterwards."""
        if self._library != ffi.NULL:
            lib.hd_library_free(self._library)
            self._library = ffi.NULL

    def __enter__(self) -> "HostLibrary":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
