"""HAL memory bits (iree/hal/buffer.h): memory types, buffer usage, memory access.

The npu-sim DRAM is host-coherent unified memory, so every buffer the device
allocates is device-local and host-visible at once.
"""
import enum

from hal_driver.status import StatusCode, StatusError

ALIGNMENT = 64
WHOLE_BUFFER = -1


class MemoryType(enum.IntFlag):
    NONE = 0
    OPTIMAL = 1 << 0
    HOST_VISIBLE = 1 << 1
    HOST_COHERENT = 1 << 2
    HOST_CACHED = 1 << 3
    HOST_LOCAL = HOST_VISIBLE | HOST_COHERENT | (1 << 6)
    DEVICE_VISIBLE = 1 << 4
    DEVICE_LOCAL = DEVICE_VISIBLE | (1 << 5)


class BufferUsage(enum.IntFlag):
    NONE = 0
    TRANSFER_SOURCE = 1 << 0
    TRANSFER_TARGET = 1 << 1
    TRANSFER = TRANSFER_SOURCE | TRANSFER_TARGET
    DISPATCH_INDIRECT_PARAMETERS = 1 << 8
    DISPATCH_UNIFORM_READ = 1 << 9
    DISPATCH_STORAGE_READ = 1 << 10
    DISPATCH_STORAGE_WRITE = 1 << 11
    DISPATCH_STORAGE = DISPATCH_STORAGE_READ | DISPATCH_STORAGE_WRITE
    DISPATCH_IMAGE_READ = 1 << 12
    DISPATCH_IMAGE_WRITE = 1 << 13
    SHARING_EXPORT = 1 << 16
    SHARING_REPLICATE = 1 << 17
    SHARING_CONCURRENT = 1 << 18
    SHARING_IMMUTABLE = 1 << 19
    MAPPING_SCOPED = 1 << 24
    MAPPING_PERSISTENT = 1 << 25
    MAPPING_OPTIONAL = 1 << 26
    MAPPING_ACCESS_RANDOM = 1 << 27
    MAPPING_ACCESS_SEQUENTIAL_WRITE = 1 << 28
    MAPPING = MAPPING_SCOPED | MAPPING_ACCESS_RANDOM
    DEFAULT = TRANSFER | DISPATCH_STORAGE


class MemoryAccess(enum.IntFlag):
    NONE = 0
    READ = 1 << 0
    WRITE = 1 << 1
    DISCARD = 1 << 2
    MAY_ALIAS = 1 << 3
    UNALIGNED = 1 << 4
    ANY = 1 << 5
    ALL = READ | WRITE | DISCARD


# The memory every npu-sim allocation lives in.
DRAM_MEMORY_TYPE = MemoryType.DEVICE_LOCAL | MemoryType.HOST_VISIBLE | MemoryType.HOST_COHERENT


def format_bits(flag_type: type[enum.IntFlag], value: int) -> str:
    """`A|B` naming the largest named combinations first, as iree_bitfield_format does."""
    if value == 0:
        return "NONE"
    names = []
    remaining = value
    members = sorted((m for m in flag_type if m.value), key=lambda m: -bin(m.value).count("1"))
    for member in members:
        if member.value & remaining == member.value:
            names.append(member.name)
            remaining &= ~member.value
    if remaining:
        names.append(f"{remaining:X}h")
    return "|".join(names)


_REQUESTABLE_BITS = 0x7F & ~int(MemoryType.OPTIMAL)


def resolve_memory_type(requested: int) -> int:
    """The memory type an allocation gets: DRAM plus the host bits that were asked for
    (plain int arithmetic: this runs for every allocation)."""
    return int(DRAM_MEMORY_TYPE) | (requested & _REQUESTABLE_BITS)


def check_usage(allowed: int, required: int, what: str) -> None:
    required = int(required)    # IntFlag operators cost microseconds; this runs per binding
    if allowed & required != required:
        raise StatusError(
            StatusCode.PERMISSION_DENIED,
            f"{what} requires buffer usage {format_bits(BufferUsage, required)} but the "
            f"buffer allows {format_bits(BufferUsage, allowed)}")


def align_up(value: int, alignment: int = ALIGNMENT) -> int:
    return (value + alignment - 1) // alignment * alignment
