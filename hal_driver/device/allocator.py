"""hal.allocator: allocates npu-sim DRAM and accounts for it.

Every allocation is 64-byte aligned numpy storage. Statistics follow
iree_hal_allocator_statistics_t (peak / allocated / freed / live), per memory heap.
"""
import functools
import threading
from dataclasses import dataclass

import numpy as np

from hal_driver.device.buffer import Allocation, Buffer, new_allocation
from hal_driver.device.memory import MemoryAccess, MemoryType, align_up, resolve_memory_type
from hal_driver.status import StatusCode, StatusError

DEFAULT_DRAM_BYTES = 4 << 30
_ALL_ACCESS = int(MemoryAccess.ALL)     # an int: converting the IntFlag costs per allocation


@dataclass
class AllocatorStatistics:
    bytes_allocated: int = 0
    bytes_freed: int = 0
    bytes_peak: int = 0

    @property
    def bytes_live(self) -> int:
        return self.bytes_allocated - self.bytes_freed


class Allocator:

    def __init__(self, capacity: int = DEFAULT_DRAM_BYTES):
        self.capacity = capacity
        self.statistics = AllocatorStatistics()
        self._lock = threading.Lock()

    @property
    def bytes_in_use(self) -> int:
        return self.statistics.bytes_live

    def allocate(self, memory_type: int, usage: int, size: int, zeroed: bool = True) -> Buffer:
        """A new buffer; `zeroed=False` leaves the storage uninitialized (for callers
        that overwrite it at once)."""
        if size < 0:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"allocation size must be non-negative, got {size}")
        charged = align_up(size)
        self._charge(charged)
        allocation = new_allocation(size, zeroed, resolve_memory_type(memory_type), usage,
                                    _ALL_ACCESS, functools.partial(self._refund, charged))
        return Buffer(allocation, 0, size)

    def import_host(self, memory_type: int, usage: int, data: memoryview,
                    writable: bool) -> Buffer:
        """Wraps host memory without copying (allocator.import)."""
        storage = np.frombuffer(data, dtype=np.uint8)
        access = MemoryAccess.ALL if writable else MemoryAccess.READ
        memory = resolve_memory_type(memory_type) | MemoryType.HOST_LOCAL
        return Buffer(Allocation(storage, int(memory), usage, int(access)), 0, len(storage))

    def _charge(self, size: int) -> None:
        statistics = self.statistics
        with self._lock:
            live = statistics.bytes_allocated - statistics.bytes_freed     # bytes_live
            if live + size > self.capacity:
                raise StatusError(
                    StatusCode.RESOURCE_EXHAUSTED,
                    f"npu-sim DRAM exhausted: {size} bytes requested with "
                    f"{live} of {self.capacity} bytes in use")
            statistics.bytes_allocated += size
            if live + size > statistics.bytes_peak:
                statistics.bytes_peak = live + size

    def _refund(self, size: int) -> None:
        with self._lock:
            self.statistics.bytes_freed += size

    def format_statistics(self) -> str:
        """Text in the layout of iree_hal_allocator_statistics_fprint."""
        s = self.statistics
        return ("[[ iree_hal_allocator_t memory statistics ]]\n"
                f"{'DEVICE_LOCAL':>12}: {s.bytes_peak:>12}B peak / {s.bytes_allocated:>12}B allocated / "
                f"{s.bytes_freed:>12}B freed / {s.bytes_live:>12}B live\n")
