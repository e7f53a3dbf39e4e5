"""hal.allocator.* imports."""
from hal_driver.device.allocator import Allocator
from hal_driver.device.device import Device
from hal_driver.device.memory import BufferUsage
from hal_driver.hal.refs import deref, vm_bytes
from hal_driver.status import StatusCode, StatusError


def allocate(state, allocator, queue_affinity, memory_types, buffer_usage, size):
    allocator = deref(allocator, Allocator)
    try:
        return allocator.allocate(memory_types, buffer_usage, size)
    except StatusError as status:
        raise status.annotate(f"failed to allocate buffer of length {size}") from None


def import_(state, allocator, is_try, queue_affinity, memory_types, buffer_usage, source,
            offset, length):
    """Wraps a vm.buffer's memory as a hal.buffer; immutable sources need
    SHARING_IMMUTABLE usage. Returns null instead of failing when `is_try`."""
    allocator = deref(allocator, Allocator)
    data = vm_bytes(source)
    if length == -1:
        length = len(data)
    if length < 0 or offset < 0 or offset + length > len(data):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"byte range out of bounds (requested {offset}-{offset + length - 1} "
                          f"of available {len(data)})")
    immutable_usage = bool(buffer_usage & BufferUsage.SHARING_IMMUTABLE)
    if data.readonly and not immutable_usage:
        if is_try:
            return None
        raise StatusError(StatusCode.PERMISSION_DENIED,
                          "source buffer is immutable and can only be imported for constant usage")
    writable = not data.readonly and not immutable_usage
    return allocator.import_host(memory_types, buffer_usage, data[offset:offset + length], writable)


def select(state, memory_types, buffer_usage, flags, devices):
    if not devices:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          "at least one device/queue affinity pair must be provided")
    device, queue_affinity = devices[0]
    return deref(device, Device), queue_affinity


EXPORTS = {
    "allocator.allocate": allocate,
    "allocator.import": import_,
    "allocator.select": select,
}
