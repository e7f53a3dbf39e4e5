"""hal.command_buffer.* imports."""
from hal_driver.device.buffer import Buffer
from hal_driver.device.command_buffer import BufferRef, CommandBuffer
from hal_driver.device.device import Device
from hal_driver.device.executable import Executable
from hal_driver.hal.refs import deref, deref_or_null, vm_range, vm_string
from hal_driver.status import StatusCode, StatusError

MAX_DISPATCH_BINDINGS = 32


def _ref(buffer, slot, offset, length) -> BufferRef:
    return BufferRef(deref_or_null(buffer, Buffer), slot, offset, length)


def create(state, device, modes, categories, queue_affinity, binding_capacity):
    return deref(device, Device).create_command_buffer(modes, categories, binding_capacity)


def finalize(state, command_buffer):
    deref(command_buffer, CommandBuffer).finalize()


def begin_debug_group(state, command_buffer, label):
    deref(command_buffer, CommandBuffer).begin_debug_group(vm_string(label))


def end_debug_group(state, command_buffer):
    deref(command_buffer, CommandBuffer).end_debug_group()


def execution_barrier(state, command_buffer, source_stage, target_stage, flags):
    deref(command_buffer, CommandBuffer).execution_barrier(source_stage, target_stage, flags)


def advise_buffer(state, command_buffer, buffer, flags, arg0, arg1, slot):
    deref(command_buffer, CommandBuffer).check_range(_ref(buffer, slot, 0, -1))


def flush_buffer(state, command_buffer, slot, buffer, offset, length):
    deref(command_buffer, CommandBuffer).check_range(_ref(buffer, slot, offset, length))


def fill_buffer(state, command_buffer, target, offset, length, slot, pattern, pattern_length,
                flags):
    if pattern_length not in (1, 2, 4, 8):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"fill patterns must be 1, 2, 4 or 8 bytes, got {pattern_length}")
    pattern_bytes = (pattern & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")[:pattern_length]
    deref(command_buffer, CommandBuffer).fill_buffer(_ref(target, slot, offset, length),
                                                      pattern_bytes)


def update_buffer(state, command_buffer, source, source_offset, target, target_offset, length,
                  slot, flags):
    data = bytes(vm_range(source, source_offset, length))
    deref(command_buffer, CommandBuffer).update_buffer(
        data, _ref(target, slot, target_offset, len(data)))


def copy_buffer(state, command_buffer, source_slot, target_slot, source, source_offset, target,
                target_offset, length, flags):
    deref(command_buffer, CommandBuffer).copy_buffer(
        _ref(source, source_slot, source_offset, length),
        _ref(target, target_slot, target_offset, length))


def _bindings(bindings) -> list[BufferRef]:
    if len(bindings) > MAX_DISPATCH_BINDINGS:
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"binding count {len(bindings)} > {MAX_DISPATCH_BINDINGS}")
    # _ref, with deref_or_null's common cases inline (run for every recorded binding)
    return [BufferRef(buffer if buffer is None or buffer.__class__ is Buffer
                      else deref(buffer, Buffer), slot, offset, length)
            for _, slot, buffer, offset, length in bindings]


def dispatch(state, command_buffer, executable, function, x, y, z, flags, constants, bindings):
    deref(command_buffer, CommandBuffer).dispatch(
        deref(executable, Executable), function, (x & 0xFFFFFFFF, y & 0xFFFFFFFF, z & 0xFFFFFFFF),
        [c & 0xFFFFFFFF for (c,) in constants], _bindings(bindings))


def dispatch_indirect(state, command_buffer, executable, function, workgroups_slot,
                      workgroups_buffer, workgroups_offset, flags, constants, bindings):
    deref(command_buffer, CommandBuffer).dispatch(
        deref(executable, Executable), function, None,
        [c & 0xFFFFFFFF for (c,) in constants], _bindings(bindings),
        workgroup_count_ref=_ref(workgroups_buffer, workgroups_slot, workgroups_offset, 12))


EXPORTS = {
    "command_buffer.create": create,
    "command_buffer.finalize": finalize,
    "command_buffer.begin_debug_group": begin_debug_group,
    "command_buffer.end_debug_group": end_debug_group,
    "command_buffer.execution_barrier": execution_barrier,
    "command_buffer.advise_buffer": advise_buffer,
    "command_buffer.flush_buffer": flush_buffer,
    "command_buffer.invalidate_buffer": flush_buffer,
    "command_buffer.fill_buffer": fill_buffer,
    "command_buffer.update_buffer": update_buffer,
    "command_buffer.copy_buffer": copy_buffer,
    "command_buffer.dispatch": dispatch,
    "command_buffer.dispatch.indirect": dispatch_indirect,
}
