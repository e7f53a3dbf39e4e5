"""The npu-sim device's NPU core: native/npu_core.c behind cffi.

`NpuCore(machine).execute(program, bindings, ...)` runs one NPU program (the bytes of
an export's `program.instructions`) over the dispatch's bound buffer ranges and returns
the dispatch's cycle-model statistics. Faults raise `StatusError` with the core's
message (`instruction 7 (dma.load): DRAM range [1024, 9216) exceeds binding 1 length
8192`): OUT_OF_RANGE for accesses outside a binding, the constant pool or SRAM,
INVALID_ARGUMENT for malformed programs. docs/npu-architecture.md defines the semantics.

Bounded runs: a run that takes longer than the core's `timeout_ms` of wall-clock time
(default DEFAULT_DISPATCH_TIMEOUT_MS; 0: none) stops with DEADLINE_EXCEEDED; `cancel()`
from another thread stops the running execute with CANCELLED. While SIGINT's Python
handler is the default one (KeyboardInterrupt), a SIGINT also stops the run, within
milliseconds and on every worker thread: the core installs its own SIGINT handler (at
the first such run; it stays), which counts the signal and calls Python's, so the main
thread still gets its KeyboardInterrupt (at once if it waits elsewhere, e.g. on a fence
while the queue's worker runs the dispatch; right after the call returns if the
dispatch runs inline on it, since cffi calls hold no GIL but Python runs signal
handlers only between bytecodes of the main thread).
"""
import _signal
import signal
import struct
import threading
from dataclasses import dataclass
from typing import Sequence

from executable_format import isa
from executable_format.cost import TimelineStats
from executable_format.machine import MachineConfig
from hal_driver.status import StatusCode, StatusError
from native._npu_core import ffi, lib

ERROR_CAPACITY = 512
ENGINE_NAMES = tuple(isa.ENGINE_NAMES[e] for e in (isa.Engine.DMA_IN, isa.Engine.DMA_OUT,
                                                  isa.Engine.MAC, isa.Engine.VECTOR))
DMA_IN, DMA_OUT, MAC, VECTOR = ENGINE_NAMES
# No honest dispatch comes near it: the slowest dispatch of the real models
# (tests/real_models, int8 included) takes about 25 ms here (docs/runtime.md).
DEFAULT_DISPATCH_TIMEOUT_MS = 60_000

_STATUS = {lib.NPU_STATUS_INVALID_ARGUMENT: StatusCode.INVALID_ARGUMENT,
           lib.NPU_STATUS_CANCELLED: StatusCode.CANCELLED,
           lib.NPU_STATUS_DEADLINE_EXCEEDED: StatusCode.DEADLINE_EXCEEDED,
           lib.NPU_STATUS_OUT_OF_RANGE: StatusCode.OUT_OF_RANGE,
           lib.NPU_STATUS_RESOURCE_EXHAUSTED: StatusCode.RESOURCE_EXHAUSTED}


@dataclass
class DispatchStats(TimelineStats):
    """The cycle model's statistics of one dispatch (executable_format.cost.TimelineStats:
    cycles, engine busy and stall cycles, DRAM bytes, executed MACs, traced events) and
    what the device adds: the SRAM high-water mark and the export's true roofline
    (executable_format.cost.Roofline), when recorded."""
    sram_peak_bytes: int = 0
    useful_macs: int = 0
    roofline_cycles: float = 0.0
    roofline_bound: str = ""            # "MACs" or "DRAM" (Roofline.bound)

    def transfer_bound_cycles(self, machine: MachineConfig, dtype: str) -> float:
        """Lower bound on total_cycles from the work this program did (its MACs at peak,
        the bytes it moved in each DMA direction); not the dispatch's roofline, which
        counts only the work any program must do (`roofline_cycles`)."""
        return max(self.macs / machine.peak_macs_per_cycle(dtype),
                   self.dram_read_bytes / machine.dram_bytes_per_cycle,
                   self.dram_write_bytes / machine.dram_bytes_per_cycle)

    def utilization(self, machine: MachineConfig, dtype: str) -> float:
        """MAC utilization: MACs / (cycles * peak MACs per cycle)."""
        if self.total_cycles == 0:
            return 0.0
        return self.macs / (self.total_cycles * machine.peak_macs_per_cycle(dtype))

    def seconds(self, machine: MachineConfig) -> float:
        return self.total_cycles / machine.clock_hz


def _config(machine: MachineConfig):
    config = ffi.new("npu_machine_config_t*")
    for name, value in machine.as_dict().items():
        if value <= 0:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"NPU machine parameter '{name}' must be positive, got {value}")
        setattr(config, name, value)
    return config


class CoreProgram:
    """An NPU program and its constant pool as the core reads them, wrapped once:
    NpuExecutable keeps one per export, so that a dispatch does not wrap the bytes
    again (ffi.from_buffer keeps `instructions` and `const_pool` alive)."""

    __slots__ = ("instructions_buffer", "instructions_length", "instruction_count",
                 "pool_buffer", "pool_length")

    def __init__(self, instructions: bytes, const_pool: bytes = b""):
        self.instructions_buffer = ffi.from_buffer(instructions)
        self.instructions_length = len(self.instructions_buffer)
        self.instruction_count = self.instructions_length // lib.NPU_INSTRUCTION_BYTES
        self.pool_buffer = ffi.from_buffer(const_pool) if len(const_pool) else ffi.NULL
        self.pool_length = len(const_pool)


class NpuCore:
    """One simulated NPU core with its own SRAM. Thread-safe: executions serialize.

    `timeout_ms`: the deadline of each execute in wall-clock milliseconds (0: none)."""

    def __init__(self, machine: MachineConfig, timeout_ms: float = DEFAULT_DISPATCH_TIMEOUT_MS):
        self.machine = machine
        self._limits = ffi.new("npu_run_limits_t*")
        self._watch_sigint = False
        self.timeout_ms = timeout_ms
        core = lib.npu_core_create(_config(machine))
        if core == ffi.NULL:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                              f"cannot create an NPU core with {machine.sram_bytes} bytes "
                              f"of SRAM and {machine.semaphores} semaphores")
        self._core = ffi.gc(core, lib.npu_core_destroy)
        self._lock = threading.Lock()
        self._stats = ffi.new("npu_stats_t*")
        self._stats_bytes = ffi.buffer(self._stats)
        self._error = ffi.new("char[]", ERROR_CAPACITY)
        self._bindings = ffi.new("npu_binding_t[]", 8)
        self._constants = ffi.new("uint32_t[]", 16)
        self._trace = ffi.NULL
        self._trace_capacity = 0

    def execute(self, program: bytes, bindings: Sequence, constants: Sequence[int] = (),
                const_pool: bytes = b"", trace: bool = False) -> DispatchStats:
        """Runs `program` over `bindings` (writable buffers, each the bound range).

        Raises StatusError on any fault; buffers may have been partially written then.
        """
        try:
            buffers = [ffi.from_buffer(b, require_writable=True) for b in bindings]
        except (TypeError, BufferError):
            buffers = [self._writable(b, i) for i, b in enumerate(bindings)]   # which one
        return self.run(CoreProgram(program, const_pool), [(b, len(b)) for b in buffers],
                        constants, trace)

    def run(self, program: "CoreProgram", bindings: Sequence[tuple], constants: Sequence[int] = (),
            trace: bool = False) -> DispatchStats:
        """`execute` of a program wrapped once (CoreProgram) over bindings given as
        (cffi pointer, length in bytes): writable memory the caller keeps alive for the
        call (hal_driver/device/executable.py makes them from hal buffers)."""
        with self._lock:
            if len(bindings) > len(self._bindings):
                self._bindings = ffi.new("npu_binding_t[]", len(bindings))
            self._bindings[0:len(bindings)] = bindings     # one (pointer, length) per slot
            constants_buf = self._constants_buffer(constants)
            trace_capacity = 0
            if trace:
                trace_capacity = program.instruction_count
                if trace_capacity > self._trace_capacity:
                    self._trace = ffi.new("npu_trace_event_t[]", trace_capacity)
                    self._trace_capacity = trace_capacity
            # _signal's getsignal: signal.getsignal's enum conversion costs microseconds
            watch = _signal.getsignal(signal.SIGINT) is signal.default_int_handler
            if watch != self._watch_sigint:
                self._limits.stop_on_sigint = self._watch_sigint = watch
            status = lib.npu_core_execute(
                self._core, program.instructions_buffer, program.instructions_length,
                self._bindings, len(bindings), program.pool_buffer, program.pool_length,
                constants_buf, len(constants), self._limits, self._stats,
                self._trace if trace else ffi.NULL, trace_capacity, self._error,
                ERROR_CAPACITY)
            if status != lib.NPU_STATUS_OK:
                message = ffi.string(self._error).decode("utf-8", "replace")
                if status == lib.NPU_STATUS_DEADLINE_EXCEEDED:
                    error = StatusError(StatusCode.DEADLINE_EXCEEDED,
                                        f"deadline of {self.timeout_ms:g} ms exceeded; {message}")
                    error.stopped_at = message      # for the device's message
                    raise error
                raise StatusError(_STATUS.get(status, StatusCode.INTERNAL), message)
            return self._collect(trace)

    def _constants_buffer(self, constants: Sequence[int]):
        """The push constants in the core's reused uint32 array (NULL: none); called
        under the lock."""
        if not constants:
            return ffi.NULL
        if len(constants) > len(self._constants):
            self._constants = ffi.new("uint32_t[]", len(constants))
        self._constants[0:len(constants)] = constants
        return self._constants

    @property
    def timeout_ms(self) -> float:
        return self._timeout_ms

    @timeout_ms.setter
    def timeout_ms(self, value: float) -> None:
        if not value >= 0:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"dispatch timeout must be a non-negative number of "
                              f"milliseconds, got {value}")
        self._timeout_ms = value
        self._limits.timeout_ns = min(round(value * 1e6), 2**64 - 1)

    def cancel(self) -> None:
        """Stops the running execute, if any, with CANCELLED (from any thread; the
        execute holds the lock, this does not take it)."""
        lib.npu_core_cancel(self._core)

    @staticmethod
    def _writable(buffer, index: int):
        try:
            return ffi.from_buffer(buffer, require_writable=True)
        except (TypeError, BufferError) as e:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"binding {index} is not a writable contiguous buffer: {e}")

    def _collect(self, trace: bool) -> DispatchStats:
        (total_cycles, busy_dma_in, busy_dma_out, busy_mac, busy_vector, stall_dma_in,
         stall_dma_out, stall_mac, stall_vector, dram_read_bytes, dram_write_bytes, macs,
         sram_peak_bytes, _, trace_count) = _STATS_WORDS.unpack_from(self._stats_bytes)
        stats = DispatchStats(
            total_cycles=total_cycles,
            busy_cycles={DMA_IN: busy_dma_in, DMA_OUT: busy_dma_out, MAC: busy_mac,
                         VECTOR: busy_vector},
            stall_cycles={DMA_IN: stall_dma_in, DMA_OUT: stall_dma_out, MAC: stall_mac,
                          VECTOR: stall_vector},
            dram_read_bytes=dram_read_bytes, dram_write_bytes=dram_write_bytes, macs=macs,
            sram_peak_bytes=sram_peak_bytes)
        if trace:
            stats.events = [(ENGINE_NAMES[e.engine], e.start, e.end, isa.OPCODES[e.opcode].name,
                             e.index) for e in self._trace[0:trace_count]]
        return stats


# _collect reads npu_stats_t in one unpack (reading its fields through cffi one by one
# costs microseconds per dispatch): these are its fields, each uint64 words.
_STATS_WORDS = struct.Struct(f"={ffi.sizeof('npu_stats_t') // 8}Q")
assert [(name, field.offset) for name, field in ffi.typeof("npu_stats_t").fields] == [
    ("total_cycles", 0), ("busy_cycles", 8), ("stall_cycles", 40), ("dram_read_bytes", 72),
    ("dram_write_bytes", 80), ("macs", 88), ("sram_peak_bytes", 96), ("instructions", 104),
    ("trace_count", 112)] and _STATS_WORDS.size == 120, "npu_stats_t changed: update _collect"
