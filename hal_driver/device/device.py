"""hal.device: the npu-sim device.

Owns the DRAM allocator, the executable cache, one in-order queue and the NPU core.
Queue operations take wait and signal timepoint lists (from fences) and run on the
queue's worker thread; dispatches of npu-fb executables run on the simulated NPU
core, host formats on the CPU as host fallback. A dispatch (NPU or host) that runs
longer than `dispatch_timeout_ms` (wall clock; 0: no deadline) fails with
DEADLINE_EXCEEDED.
"""
import fnmatch
import threading
import weakref
from typing import Optional, Sequence

from executable_format.errors import excerpt
from hal_driver.device.allocator import Allocator
from hal_driver.device.buffer import Buffer, copy_buffer
from hal_driver.device.command_buffer import Binding, CommandBuffer
from hal_driver.device.executable_cache import ExecutableCache
from hal_driver.device.file import File
from hal_driver.device.memory import BufferUsage, check_usage
from hal_driver.device.queue import Queue
from hal_driver.device.semaphore import Semaphore, Timepoint
from hal_driver.device.statistics import StatisticsRecorder
from hal_driver.device.trace import DeviceTrace
from hal_driver.status import StatusCode, StatusError

DEVICE_ID = "npu-sim"


class Device:

    def __init__(self, machine=None, trace: bool = False, dispatch_timeout_ms=None):
        from executable_format.machine import DEFAULT_MACHINE
        from hal_driver.device.npu_core import DEFAULT_DISPATCH_TIMEOUT_MS
        self.id = DEVICE_ID
        self.machine = machine or DEFAULT_MACHINE
        self.allocator = Allocator()
        self.executable_cache = ExecutableCache(self.machine)
        self.statistics = StatisticsRecorder()
        self.trace = DeviceTrace(self.machine.clock_hz) if trace else None
        self.queue = Queue(DEVICE_ID)
        self._closer = weakref.finalize(self, self.queue.close)   # stop the worker with us
        self._core = None
        self._core_lock = threading.Lock()
        self._dispatch_timeout_ms = DEFAULT_DISPATCH_TIMEOUT_MS
        # The failure of the last dispatch stopped at its deadline: hal.fence.await turns
        # a fence failed with DEADLINE_EXCEEDED into a timeout code, which loses it.
        self.deadline_failure = None
        if dispatch_timeout_ms is not None:
            self.dispatch_timeout_ms = dispatch_timeout_ms

    @property
    def dispatch_timeout_ms(self) -> float:
        """The deadline of each dispatch (NPU or host) in wall-clock milliseconds (0: none)."""
        return self._dispatch_timeout_ms

    @dispatch_timeout_ms.setter
    def dispatch_timeout_ms(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"dispatch timeout must be a non-negative number of "
                              f"milliseconds, got {value!r}")
        with self._core_lock:
            self._dispatch_timeout_ms = value
            if self._core is not None:
                self._core.timeout_ms = value

    def close(self) -> None:
        self._closer()

    # -- queries ---------------------------------------------------------------------
    def query_i64(self, category: str, key: str) -> int:
        """iree_hal_device_query_i64; unknown keys raise NOT_FOUND."""
        if category == "hal.device.id":
            return int(fnmatch.fnmatchcase(self.id, key))
        if category == "hal.executable.format":
            return int(self.executable_cache.can_prepare(key))
        if category in ("hal.device", "hal.dispatch") and key == "concurrency":
            return 1
        if category == "hal.npu" and key in self.machine.as_dict():
            return self.machine.as_dict()[key]
        raise StatusError(StatusCode.NOT_FOUND,
                          f"unknown device configuration key value "
                          f"'{excerpt(category)} :: {excerpt(key)}'")

    # -- object creation -------------------------------------------------------------
    def create_semaphore(self, initial_value: int = 0) -> Semaphore:
        return Semaphore(initial_value)

    def create_command_buffer(self, mode: int, categories: int,
                              binding_capacity: int) -> CommandBuffer:
        return CommandBuffer(mode, categories, binding_capacity)

    # -- execution (queue worker thread) ---------------------------------------------
    @property
    def core(self):
        if self._core is not None:      # made once; the lock is for making it
            return self._core
        with self._core_lock:
            if self._core is None:
                from hal_driver.device.npu_core import NpuCore
                self._core = NpuCore(self.machine, timeout_ms=self._dispatch_timeout_ms)
            return self._core

    def dispatch(self, executable, ordinal: int, workgroup_count, constants: Sequence[int],
                 bindings: Sequence[Buffer]) -> None:
        try:
            executable.dispatch(self, ordinal, workgroup_count, constants, bindings)
        except StatusError as status:
            if status.code != StatusCode.DEADLINE_EXCEEDED:
                raise
            failure = StatusError(status.code, f"npu-sim dispatch of export "
                                  f"'{excerpt(executable.export_names[ordinal])}' exceeded "
                                  f"its deadline of {self._dispatch_timeout_ms:g} ms "
                                  f"(--npu_sim_dispatch_timeout_ms); "
                                  f"{getattr(status, 'stopped_at', status.message)}")
            self.deadline_failure = failure     # for runtime.ModuleFunction's message
            raise failure from None

    # -- queue operations ------------------------------------------------------------
    def queue_alloca(self, waits: list[Timepoint], signals: list[Timepoint], memory_type: int,
                     usage: int, size: int) -> Buffer:
        buffer = self.allocator.allocate(memory_type, usage, size)
        self._submit("queue.alloca", waits, signals, lambda: None)
        return buffer

    def queue_dealloca(self, waits, signals, buffer: Buffer) -> None:
        self._submit("queue.dealloca", waits, signals, buffer.allocation.release)

    def queue_barrier(self, waits, signals) -> None:
        self._submit("queue.barrier", waits, signals, lambda: None)

    def queue_fill(self, waits, signals, target: Buffer, offset: int, length: int,
                   pattern: bytes) -> None:
        target.resolve_range(offset, length)
        check_usage(target.allowed_usage, BufferUsage.TRANSFER_TARGET, "queue fill")
        self._submit("queue.fill", waits, signals, lambda: target.fill(offset, length, pattern))

    def queue_update(self, waits, signals, data: bytes, target: Buffer, offset: int) -> None:
        target.resolve_range(offset, len(data))
        check_usage(target.allowed_usage, BufferUsage.TRANSFER_TARGET, "queue update")
        data = bytes(data)
        self._submit("queue.update", waits, signals, lambda: target.write(offset, data))

    def queue_copy(self, waits, signals, source: Buffer, source_offset: int, target: Buffer,
                   target_offset: int, length: int) -> None:
        source.resolve_range(source_offset, length)
        target.resolve_range(target_offset, length)
        check_usage(source.allowed_usage, BufferUsage.TRANSFER_SOURCE, "queue copy source")
        check_usage(target.allowed_usage, BufferUsage.TRANSFER_TARGET, "queue copy target")
        self._submit("queue.copy", waits, signals, lambda: copy_buffer(
            source, source_offset, target, target_offset, length))

    def queue_read(self, waits, signals, file: File, file_offset: int, target: Buffer,
                   offset: int, length: int) -> None:
        target.resolve_range(offset, length)
        self._submit("queue.read", waits, signals, lambda: file.read_into(file_offset, target, offset, length))

    def queue_write(self, waits, signals, source: Buffer, offset: int, file: File,
                    file_offset: int, length: int) -> None:
        source.resolve_range(offset, length)
        self._submit("queue.write", waits, signals, lambda: file.write_from(source, offset, file_offset, length))

    def queue_execute(self, waits, signals, command_buffer: Optional[CommandBuffer],
                      binding_table: Sequence[Binding] = ()) -> None:
        """Runs `command_buffer` (None: a barrier) with `binding_table` for indirect slots."""
        if command_buffer is None:
            return self.queue_barrier(waits, signals)
        command_buffer.check_submittable(binding_table)
        table = list(binding_table)
        self._submit("queue.execute", waits, signals,
                     lambda: command_buffer.execute(self, table))

    def _submit(self, name: str, waits, signals, operation) -> None:
        if self.trace is not None:
            operation = self.trace.traced(name, operation)
        self.queue.submit(waits, signals, operation)

    def queue_flush(self) -> None:
        """Submissions start as soon as they are queued; nothing to flush."""
