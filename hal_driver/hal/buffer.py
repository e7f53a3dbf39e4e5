"""hal.buffer.* imports."""
from executable_format.errors import excerpt
from hal_driver.device.allocator import Allocator
from hal_driver.device.buffer import Buffer
from hal_driver.device.memory import BufferUsage, MemoryAccess, MemoryType, format_bits
from hal_driver.hal.refs import deref, vm_string
from hal_driver.status import StatusCode, StatusError


def assert_(state, buffer, message, allocator, minimum_length, memory_types, buffer_usage):
    """IREE's buffer checks (modules/hal/utils/buffer_diagnostics.c) and messages."""
    buffer = deref(buffer, Buffer)
    deref(allocator, Allocator)
    try:
        _check_buffer(buffer, minimum_length, memory_types, buffer_usage)
    except StatusError as error:     # the message is read only on failure (hot path)
        raise StatusError(error.code, f"{excerpt(vm_string(message))} {error.message}") from None


def _check_buffer(buffer: Buffer, minimum_length: int, memory_types: int,
                  buffer_usage: int) -> None:
    if buffer.byte_length < minimum_length:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"buffer byte length {buffer.byte_length} less than "
                          f"expected minimum {minimum_length}")
    if buffer.memory_type & memory_types != memory_types:
        raise StatusError(
            StatusCode.PERMISSION_DENIED,
            f"buffer memory type is not compatible; buffer has "
            f"{format_bits(MemoryType, buffer.memory_type)}, operation requires "
            f"{format_bits(MemoryType, memory_types)}")
    if buffer.allowed_usage & buffer_usage != buffer_usage:
        raise StatusError(
            StatusCode.PERMISSION_DENIED,
            f"requested usage was not specified when the buffer was allocated; "
            f"buffer allows {format_bits(BufferUsage, buffer.allowed_usage)}, operation "
            f"requires {format_bits(BufferUsage, buffer_usage)}")


def allocation_preserve(state, buffer):
    deref(buffer, Buffer).allocation.preserve()


def allocation_discard(state, buffer):
    return int(deref(buffer, Buffer).allocation.discard())


def allocation_is_terminal(state, buffer):
    return int(deref(buffer, Buffer).allocation.is_terminal())


def subspan(state, buffer, offset, length):
    try:
        return deref(buffer, Buffer).subspan(offset, length)
    except StatusError as status:
        raise status.annotate(f"invalid subspan of an existing buffer "
                              f"(source_offset={offset}, length={length})") from None


def length(state, buffer):
    return deref(buffer, Buffer).byte_length


def load(state, buffer, offset, length):
    buffer = deref(buffer, Buffer)
    if length > 4:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"load length byte count {length} exceeds max")
    value = int.from_bytes(buffer.map(offset, length).tobytes(), "little")
    return value - (1 << 32) if value >= 1 << 31 else value


def store(state, value, buffer, offset, length):
    buffer = deref(buffer, Buffer)
    if length > 4:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"store length byte count {length} exceeds max")
    if offset + length > buffer.byte_length:
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"store out of bounds (target_offset={offset}, length={length} "
                          f"into max {buffer.byte_length})")
    data = (value & 0xFFFFFFFF).to_bytes(4, "little")[:length]
    buffer.map(offset, length, MemoryAccess.WRITE)[:] = bytearray(data)


EXPORTS = {
    "buffer.assert": assert_,
    "buffer.allocation.preserve": allocation_preserve,
    "buffer.allocation.discard": allocation_discard,
    "buffer.allocation.is_terminal": allocation_is_terminal,
    "buffer.subspan": subspan,
    "buffer.length": length,
    "buffer.load": load,
    "buffer.store": store,
}
