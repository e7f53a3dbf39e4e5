"""hal.buffer: a byte range of an allocation in npu-sim DRAM.

An `Allocation` owns 64-byte aligned numpy storage (or aliases imported host
memory); a `Buffer` is a window `[byte_offset, byte_offset + byte_length)` into it.
Subspans share the allocation. All ranges are checked; violations raise
OUT_OF_RANGE the way IREE's buffer range validation does.
"""

import numpy as np

from native._host_dispatch import ffi as _ffi, lib as _memory

from hal_driver.device.memory import ALIGNMENT, WHOLE_BUFFER, MemoryAccess
from hal_driver.status import StatusCode, StatusError


_READ_WRITE = int(MemoryAccess.READ | MemoryAccess.WRITE)
_U8 = np.dtype(np.uint8)    # np.frombuffer converts dtype=np.uint8 at every call


def aligned_bytes(length: int, zeroed: bool = True) -> np.ndarray:
    """uint8 storage whose first byte is 64-byte aligned; uninitialized unless
    `zeroed` (for storage that is overwritten at once).

    The storage is a mapping of its own that ends at a PROT_NONE guard page
    (native/guarded_memory.h): a host-fallback kernel that runs past the end of its
    binding faults, and the fault fails the dispatch, where in the malloc heap it
    would corrupt the process. Released storage is pooled, so this makes no system
    call in the steady state."""
    return _mapped_bytes(length, zeroed)[0]


def _mapped_bytes(length: int, zeroed: bool):
    """aligned_bytes' storage and the cffi `uint8_t *` that owns the mapping (it is
    released when both are gone): a writable pointer to the storage."""
    pointer = _memory.gm_acquire(length, zeroed)
    if pointer == _ffi.NULL:
        raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                          f"mapping {length} bytes of device memory failed")
    owner = _ffi.gc(pointer, lambda p: _memory.gm_release(p, length))
    return np.frombuffer(_ffi.buffer(owner, length), dtype=_U8), owner


def new_allocation(length: int, zeroed: bool, memory_type: int, allowed_usage: int,
                   allowed_access: int, on_release=None) -> "Allocation":
    """An Allocation of new device memory (aligned_bytes), whose address and writable
    pointer are taken from the mapping's pointer rather than worked out again from
    the numpy storage."""
    storage, owner = _mapped_bytes(length, zeroed)
    return Allocation(storage, memory_type, allowed_usage, allowed_access, on_release, owner)


def _address(storage: np.ndarray) -> int:
    """The address of storage[0] (ndarray.ctypes.data costs a few microseconds)."""
    return int(_ffi.cast("uintptr_t", _ffi.from_buffer(storage)))


def resolve_range(byte_length: int, offset: int, length: int) -> tuple[int, int]:
    """Checks `[offset, offset+length)` (length -1: to the end) against a buffer of
    `byte_length` bytes and returns it."""
    if length == WHOLE_BUFFER:
        length = byte_length - offset
    if offset < 0 or length < 0 or offset + length > byte_length:
        raise StatusError(
            StatusCode.OUT_OF_RANGE,
            f"attempted to access an address off the end of the valid buffer range "
            f"(offset={offset}, length={length}, buffer byte_length={byte_length})")
    return offset, length


class Allocation:
    """Storage shared by a buffer and all of its subspans."""

    def __init__(self, storage: np.ndarray, memory_type: int, allowed_usage: int,
                 allowed_access: int, on_release=None, pointer=None):
        """`pointer`: a writable cffi pointer to storage[0], if the caller has one."""
        self.storage = storage
        # of storage[0] (alignment checks)
        self.address = _address(storage) if pointer is None else int(_ffi.cast("uintptr_t", pointer))
        self.memory_type = memory_type
        self.allowed_usage = allowed_usage
        self.allowed_access = allowed_access
        self.released = False
        self.preserve_count = 1
        # (offset, length) -> the NPU core's pointer to an aligned copy (executable.py)
        self.staged_copies: dict[tuple[int, int], object] = {}
        self._on_release = on_release
        self._pointer = pointer  # writable_pointer(): None until made, False: read-only

    def writable_pointer(self):
        """The storage as a cffi `uint8_t[]` for a device that writes it in place, made
        once per storage (ffi.from_buffer costs a microsecond, a dispatch would pay it
        per binding); None if the storage is read-only."""
        if self._pointer is None:
            self._pointer = (_ffi.from_buffer("uint8_t[]", self.storage, require_writable=True)
                             if self.storage.flags.writeable else False)
        return None if self._pointer is False else self._pointer

    def make_writable_copy(self) -> None:
        """Storage of its own for an allocation over read-only memory (a constant
        imported from the module) that a dispatch is about to write; later reads see
        the writes, the module's data stays as it was."""
        copy = aligned_bytes(len(self.storage), zeroed=False)
        copy[:] = self.storage
        self.storage = copy
        self.address = _address(copy)
        self.staged_copies.clear()
        self._pointer = None

    def release(self) -> None:
        """Returns the memory to the allocator (queue dealloca or garbage collection)."""
        self.released = True
        self._refund()

    def __del__(self):
        """Garbage collection returns the memory too (a __del__, not a weakref.finalize,
        which costs a microsecond per allocation)."""
        self._refund()

    def _refund(self) -> None:
        on_release, self._on_release = self._on_release, None
        if on_release:
            on_release()

    def preserve(self) -> None:
        self.preserve_count += 1

    def discard(self) -> bool:
        """Drops one preservation; True if that was the last (the caller may free it)."""
        self.preserve_count -= 1
        return self.preserve_count == 0

    def is_terminal(self) -> bool:
        return self.preserve_count == 1


class Buffer:
    # Slots: a buffer (a subspan, a binding's range) is made several times per dispatch.
    __slots__ = ("allocation", "byte_offset", "byte_length")

    def __init__(self, allocation: Allocation, byte_offset: int, byte_length: int):
        self.allocation = allocation
        self.byte_offset = byte_offset
        self.byte_length = byte_length

    @property
    def memory_type(self) -> int:
        return self.allocation.memory_type

    @property
    def allowed_usage(self) -> int:
        return self.allocation.allowed_usage

    @property
    def allowed_access(self) -> int:
        return self.allocation.allowed_access

    def resolve_range(self, offset: int, length: int) -> tuple[int, int]:
        """Checks `[offset, offset+length)` (length -1: to the end) and returns it."""
        return resolve_range(self.byte_length, offset, length)

    def subspan(self, offset: int, length: int) -> "Buffer":
        offset, length = resolve_range(self.byte_length, offset, length)
        return Buffer(self.allocation, self.byte_offset + offset, length)

    def nested_subspan(self, offset: int, length: int, inner_offset: int,
                       inner_length: int) -> "Buffer":
        """subspan(offset, length).subspan(inner_offset, inner_length), both ranges
        checked, without making the outer buffer."""
        offset, length = resolve_range(self.byte_length, offset, length)
        inner_offset, inner_length = resolve_range(length, inner_offset, inner_length)
        return Buffer(self.allocation, self.byte_offset + offset + inner_offset, inner_length)

    def view(self, offset: int = 0, length: int = WHOLE_BUFFER) -> np.ndarray:
        """A uint8 numpy view of the range (no copy)."""
        offset, length = resolve_range(self.byte_length, offset, length)
        self._check_live()
        start = self.byte_offset + offset
        return self.allocation.storage[start:start + length]

    def device_pointer(self):
        """A cffi pointer to the range in place for a device that reads and writes it
        (the range is `byte_length` bytes): None if the storage is read-only or the
        range does not start 64-byte aligned, then the device needs a staged copy."""
        allocation = self.allocation
        if allocation.released:
            self._check_live()      # raises
        if (allocation.address + self.byte_offset) % ALIGNMENT:
            return None
        storage = allocation.writable_pointer()
        return None if storage is None else storage + self.byte_offset

    def _check_live(self) -> None:
        if self.allocation.released:
            raise StatusError(StatusCode.FAILED_PRECONDITION,
                              "buffer used after its queue deallocation")

    def map(self, offset: int = 0, length: int = WHOLE_BUFFER,
            access: int = MemoryAccess.READ) -> np.ndarray:
        """Host mapping of the range; checks the allocation allows `access`."""
        if int(access) & ~self.allowed_access & _READ_WRITE:   # int: IntFlag's & is slow
            raise StatusError(StatusCode.PERMISSION_DENIED,
                              "buffer does not allow the requested memory access "
                              f"(allowed {self.allowed_access:#x}, requested {access:#x})")
        return self.view(offset, length)

    def read(self, offset: int = 0, length: int = WHOLE_BUFFER) -> bytes:
        return self.map(offset, length).tobytes()

    def write(self, offset: int, data) -> None:
        source = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        self.map(offset, len(source), MemoryAccess.WRITE)[:] = source

    def fill(self, offset: int, length: int, pattern: bytes) -> None:
        if len(pattern) not in (1, 2, 4, 8):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"fill pattern length must be 1, 2, 4 or 8 bytes, got {len(pattern)}")
        target = self.map(offset, length, MemoryAccess.WRITE)
        if len(target) % len(pattern):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"fill length {len(target)} is not a multiple of the "
                              f"{len(pattern)}-byte pattern")
        # The pattern as one little-endian element filled over the range: numpy's
        # fill of a scalar is a memset-speed loop, a broadcast row copy is 40x slower.
        element = np.dtype(f"<u{len(pattern)}")
        target.view(element).fill(np.frombuffer(pattern, dtype=element)[0])


def copy_buffer(source: Buffer, source_offset: int, target: Buffer, target_offset: int,
                length: int) -> None:
    data = source.map(source_offset, length)
    # numpy's assignment copies through a temporary itself when the ranges overlap
    target.map(target_offset, len(data), MemoryAccess.WRITE)[:] = data
