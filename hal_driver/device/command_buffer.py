"""hal.command_buffer: recorded transfer and dispatch commands replayed by the queue.

A command buffer is created recording, finalized once, then submitted. One-shot
command buffers may be submitted once; reusable ones any number of times. Buffer
references are either direct (a buffer) or indirect (a binding-table slot resolved
at submission, queue.execute.indirect). The queue executes commands in order, so
execution barriers only need to be recorded.
"""
import enum
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from hal_driver.device.buffer import Buffer, copy_buffer
from hal_driver.device.memory import BufferUsage, check_usage
from hal_driver.status import StatusCode, StatusError


class CommandBufferMode(enum.IntFlag):
    DEFAULT = 0
    ONE_SHOT = 1 << 0
    ALLOW_INLINE_EXECUTION = 1 << 4
    UNVALIDATED = 1 << 5


Binding = tuple[Optional[Buffer], int, int]   # (buffer, offset, length) of a binding table


class BufferRef(NamedTuple):
    """A direct buffer range, or a binding-table slot plus a range within it (a named
    tuple: made for every binding of every recorded dispatch)."""
    buffer: Optional[Buffer]
    slot: int
    offset: int
    length: int

    def resolve(self, binding_table: Sequence[Binding]) -> Buffer:
        if self.buffer is not None:
            return self.buffer.subspan(self.offset, self.length)
        if self.slot >= len(binding_table):
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"binding table slot {self.slot} out of range "
                              f"(table has {len(binding_table)} entries)")
        buffer, offset, length = binding_table[self.slot]
        if buffer is None:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"binding table slot {self.slot} has no buffer")
        return buffer.nested_subspan(offset, length, self.offset, self.length)


_STORAGE_READ = int(BufferUsage.DISPATCH_STORAGE_READ)


class DispatchCommand:
    """A recorded dispatch. `buffers` holds each direct binding's buffer range, resolved
    once when recorded (CommandBuffer.dispatch), and None for a binding-table slot,
    resolved at each execution."""

    def __init__(self, executable, ordinal: int,
                 workgroup_count: Optional[tuple[int, int, int]],
                 workgroup_count_ref: Optional[BufferRef], constants: tuple[int, ...],
                 bindings: tuple[BufferRef, ...], buffers: tuple[Optional[Buffer], ...]):
        self.executable = executable
        self.ordinal = ordinal
        self.workgroup_count = workgroup_count
        self.workgroup_count_ref = workgroup_count_ref
        self.constants = constants
        self.bindings = bindings
        self.buffers = buffers
        self.indirect = None in buffers
        # An allocation's allowed usage never changes: if every binding is direct and
        # allows dispatch, executions need not check again (else they check them all).
        self.usage_allowed = not self.indirect
        if not self.indirect:
            for buffer in buffers:
                if buffer.allocation.allowed_usage & _STORAGE_READ != _STORAGE_READ:
                    self.usage_allowed = False
                    break

    def execute(self, device, table: Sequence[Binding]) -> None:
        count = self.workgroup_count
        if self.workgroup_count_ref is not None:
            raw = self.workgroup_count_ref.resolve(table).view(0, 12)
            count = tuple(int(v) for v in raw.view(np.uint32))
        buffers = self.buffers
        if self.indirect:
            buffers = [ref.resolve(table) if buffer is None else buffer
                       for ref, buffer in zip(self.bindings, buffers)]
        if not self.usage_allowed:
            for buffer in buffers:
                check_usage(buffer.allocation.allowed_usage, _STORAGE_READ, "dispatch binding")
        device.dispatch(self.executable, self.ordinal, count, self.constants, buffers)


class CommandBuffer:

    def __init__(self, mode: int, categories: int, binding_capacity: int):
        self.mode = CommandBufferMode(mode & 0x33)
        # read at each submission: an IntFlag & is several Python calls
        self._one_shot = bool(mode & CommandBufferMode.ONE_SHOT.value)
        self.categories = categories
        self.binding_capacity = binding_capacity
        self.commands: list[Callable] = []
        self.finalized = False
        self.submitted = False
        self._debug_depth = 0

    @property
    def one_shot(self) -> bool:
        return self._one_shot

    def _check_recording(self) -> None:
        if self.finalized:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              "command buffer is finalized and cannot record commands")

    def _record(self, command: Callable) -> None:
        self._check_recording()
        self.commands.append(command)

    def _check_ref(self, ref: BufferRef) -> BufferRef:
        self._checked_buffer(ref)
        return ref

    def _checked_buffer(self, ref: BufferRef) -> Optional[Buffer]:
        """The buffer range of a direct ref (its range checked), None for a binding-table
        slot (checked against the binding capacity; resolved when the command buffer
        runs with a binding table)."""
        if ref.buffer is None:
            if ref.slot >= self.binding_capacity:
                raise StatusError(StatusCode.OUT_OF_RANGE,
                                  f"binding slot {ref.slot} exceeds the command buffer's "
                                  f"binding capacity {self.binding_capacity}")
            return None
        return ref.buffer.subspan(ref.offset, ref.length)

    def execution_barrier(self, source_stage: int, target_stage: int, flags: int) -> None:
        """Commands run in order: nothing to execute."""
        self._check_recording()

    def begin_debug_group(self, label: str) -> None:
        self._check_recording()
        self._debug_depth += 1

    def end_debug_group(self) -> None:
        if self._debug_depth == 0:
            raise StatusError(StatusCode.FAILED_PRECONDITION, "no debug group is open")
        self._check_recording()
        self._debug_depth -= 1

    def fill_buffer(self, target: BufferRef, pattern: bytes) -> None:
        target = self._check_ref(target)

        def fill(device, table):
            buffer = target.resolve(table)
            check_usage(buffer.allowed_usage, BufferUsage.TRANSFER_TARGET, "fill")
            buffer.fill(0, buffer.byte_length, pattern)
        self._record(fill)

    def update_buffer(self, data: bytes, target: BufferRef) -> None:
        target = self._check_ref(target)
        data = bytes(data)

        def update(device, table):
            buffer = target.resolve(table)
            check_usage(buffer.allowed_usage, BufferUsage.TRANSFER_TARGET, "update")
            buffer.write(0, data[:buffer.byte_length])
        self._record(update)

    def copy_buffer(self, source: BufferRef, target: BufferRef) -> None:
        source, target = self._check_ref(source), self._check_ref(target)

        def copy(device, table):
            src, dst = source.resolve(table), target.resolve(table)
            check_usage(src.allowed_usage, BufferUsage.TRANSFER_SOURCE, "copy source")
            check_usage(dst.allowed_usage, BufferUsage.TRANSFER_TARGET, "copy target")
            copy_buffer(src, 0, dst, 0, src.byte_length)
        self._record(copy)

    def check_range(self, ref: BufferRef) -> None:
        """flush/invalidate/advise: memory is coherent, so only the range is checked."""
        ref = self._check_ref(ref)
        self._record(lambda device, table: ref.resolve(table))

    def dispatch(self, executable, ordinal: int, workgroup_count: tuple[int, int, int],
                 constants: Sequence[int], bindings: Sequence[BufferRef],
                 workgroup_count_ref: Optional[BufferRef] = None) -> None:
        executable.check_dispatch(ordinal, len(constants), len(bindings))
        # _checked_buffer, with a direct ref's subspan called here (every binding of
        # every recorded dispatch comes through)
        buffers = tuple([self._checked_buffer(ref) if ref.buffer is None
                         else ref.buffer.subspan(ref.offset, ref.length) for ref in bindings])
        if workgroup_count_ref is not None:
            workgroup_count_ref = self._check_ref(workgroup_count_ref)
        self._record(DispatchCommand(executable, ordinal, workgroup_count, workgroup_count_ref,
                                     tuple(constants), tuple(bindings), buffers).execute)

    def finalize(self) -> None:
        if self.finalized:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              "command buffer is already finalized")
        if self._debug_depth:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              f"{self._debug_depth} debug group(s) left open at finalize")
        self.finalized = True

    def check_submittable(self, binding_table: Sequence[Binding]) -> None:
        """Called at submission: finalized, one-shot reuse, binding table size."""
        if not self.finalized:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              "command buffer must be finalized before submission")
        if self.one_shot and self.submitted:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              "one-shot command buffer has already been submitted")
        if len(binding_table) < self.binding_capacity:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"binding table has {len(binding_table)} entries but the command "
                              f"buffer requires {self.binding_capacity}")
        self.submitted = True

    def execute(self, device, binding_table: Sequence[Binding]) -> None:
        for command in self.commands:
            command(device, binding_table)
