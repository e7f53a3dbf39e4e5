"""hal.device.* and hal.devices.* imports."""
from hal_driver.device.buffer import Buffer
from hal_driver.device.command_buffer import CommandBuffer
from hal_driver.device.device import Device
from hal_driver.device.fence import Fence
from hal_driver.device.file import File
from hal_driver.hal.refs import deref, deref_or_null, vm_range, vm_string
from hal_driver.status import StatusCode, StatusError


def _timepoints(fence) -> list:
    fence = deref_or_null(fence, Fence)
    return fence.timepoints if fence else []


def allocator(state, device):
    return deref(device, Device).allocator


def query_i64(state, device, category, key):
    """(1, value) if the device answers the key, else (0, 0)."""
    try:
        return 1, deref(device, Device).query_i64(vm_string(category), vm_string(key))
    except StatusError as status:
        if status.code != StatusCode.NOT_FOUND:
            raise
        return 0, 0


def queue_alloca(state, device, queue_affinity, wait, signal, pool, memory_types, usage, size,
                 flags):
    if pool != 0:
        raise StatusError(StatusCode.UNIMPLEMENTED, "VM queue allocation pools are not supported")
    return deref(device, Device).queue_alloca(_timepoints(wait), _timepoints(signal),
                                              memory_types, usage, size)


def queue_dealloca(state, device, queue_affinity, wait, signal, buffer, flags):
    deref(device, Device).queue_dealloca(_timepoints(wait), _timepoints(signal),
                                         deref(buffer, Buffer))


def queue_fill(state, device, queue_affinity, wait, signal, target, offset, length, pattern,
               pattern_length, flags):
    if pattern_length not in (1, 2, 4, 8):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"fill patterns must be 1, 2, 4 or 8 bytes, got {pattern_length}")
    pattern_bytes = (pattern & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")[:pattern_length]
    deref(device, Device).queue_fill(_timepoints(wait), _timepoints(signal),
                                     deref(target, Buffer), offset, length, pattern_bytes)


def queue_update(state, device, queue_affinity, wait, signal, source, source_offset, target,
                 target_offset, length, flags):
    data = bytes(vm_range(source, source_offset, length))
    deref(device, Device).queue_update(_timepoints(wait), _timepoints(signal), data,
                                       deref(target, Buffer), target_offset)


def queue_copy(state, device, queue_affinity, wait, signal, source, source_offset, target,
               target_offset, length, flags):
    deref(device, Device).queue_copy(_timepoints(wait), _timepoints(signal),
                                     deref(source, Buffer), source_offset,
                                     deref(target, Buffer), target_offset, length)


def queue_read(state, device, queue_affinity, wait, signal, file, file_offset, target,
               target_offset, length, flags):
    deref(device, Device).queue_read(_timepoints(wait), _timepoints(signal), deref(file, File),
                                     file_offset, deref(target, Buffer), target_offset, length)


def queue_write(state, device, queue_affinity, wait, signal, source, source_offset, file,
                file_offset, length, flags):
    deref(device, Device).queue_write(_timepoints(wait), _timepoints(signal),
                                      deref(source, Buffer), source_offset, deref(file, File),
                                      file_offset, length)


def queue_barrier(state, device, queue_affinity, wait, signal, flags):
    deref(device, Device).queue_barrier(_timepoints(wait), _timepoints(signal))


def queue_execute(state, device, queue_affinity, wait, signal, command_buffer, flags):
    deref(device, Device).queue_execute(_timepoints(wait), _timepoints(signal),
                                        deref(command_buffer, CommandBuffer))


def queue_execute_indirect(state, device, queue_affinity, wait, signal, command_buffer, flags,
                           bindings):
    table = [(deref_or_null(buffer, Buffer), offset, length) for buffer, offset, length in bindings]
    deref(device, Device).queue_execute(_timepoints(wait), _timepoints(signal),
                                        deref(command_buffer, CommandBuffer), table)


def queue_flush(state, device, queue_affinity):
    deref(device, Device).queue_flush()


def devices_count(state):
    return len(state.devices)


def devices_get(state, index):
    return state.devices[index] if 0 <= index < len(state.devices) else None


EXPORTS = {
    "device.allocator": allocator,
    "device.query.i64": query_i64,
    "device.queue.alloca": queue_alloca,
    "device.queue.dealloca": queue_dealloca,
    "device.queue.fill": queue_fill,
    "device.queue.update": queue_update,
    "device.queue.copy": queue_copy,
    "device.queue.read": queue_read,
    "device.queue.write": queue_write,
    "device.queue.barrier": queue_barrier,
    "device.queue.execute": queue_execute,
    "device.queue.execute.indirect": queue_execute_indirect,
    "device.queue.flush": queue_flush,
    "devices.count": devices_count,
    "devices.get": devices_get,
}
