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
        self._error = ffi.new("char[]", ERROR_CAPACITY)
        self._bindings = ffi.new("npu_binding_t[]", 8)
        self._trace = ffi.NULL
        self._trace_capacity = 0

    def execute(self, program: bytes, bindings: Sequence, constants: Sequence[int] = (),
                const_pool: bytes = b"", trace: bool = False) -> DispatchStats:
        """Runs `program` over `bindings` (writable buffers, each the bound range).

        Raises StatusError on any fault; buffers may have been partially written then.
        """
        program_buf = ffi.from_buffer(program)
        pool_buf = ffi.from_buffer(const_pool) if len(const_pool) else ffi.NULL
        try:
            buffers = [ffi.from_buffer(b, require_writable=True) for b in bindings]
        except (TypeError, BufferError):
            buffers = [self._writable(b, i) for i, b in enumerate(bindings)]   # which one
        constants_buf = ffi.new("uint32_t[]", list(constants)) if constants else ffi.NULL
        with self._lock:
            if len(buffers) > len(self._bindings):
                self._bindings = ffi.new("npu_binding_t[]", len(buffers))
            for slot, buf in zip(self._bindings, buffers):
                slot.data = buf
                slot.length = len(buf)
            trace_capacity = 0
            if trace:
                trace_capacity = len(program_buf) // lib.NPU_INSTRUCTION_BYTES
                if trace_capacity > self._trace_capacity:
                    self._trace = ffi.new("npu_trace_event_t[]", trace_capacity)
                    self._trace_capacity = trace_capacity
            # _signal's getsignal: signal.getsignal's enum conversion costs microseconds
            watch = _signal.getsignal(signal.SIGINT) is signal.default_int_handler
            if watch != self._watch_sigint:
                self._limits.stop_on_sigint = self._watch_sigint = watch
            status = lib.npu_core_execute(
                self._core, program_buf, len(program_buf), self._bindings, len(buffers),
                pool_buf, len(const_pool), constants_buf, len(constants), self._limits,
                self._stats,
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
        s = self._stats
        stats = DispatchStats(
            total_cycles=s.total_cycles,
            busy_cycles=dict(zip(ENGINE_NAMES, s.busy_cycles)),
            stall_cycles=dict(zip(ENGINE_NAMES, s.stall_cycles)),
            dram_read_bytes=s.dram_read_bytes, dram_write_bytes=s.dram_write_bytes,
            macs=s.macs, sram_peak_bytes=s.sram_peak_bytes)
        if trace:
            stats.events = [(ENGINE_NAMES[e.engine], e.start, e.end, isa.OPCODES[e.opcode].name,
                             e.index) for e in self._trace[0:s.trace_count]]
        return stats
