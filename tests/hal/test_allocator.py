"""DRAM allocation: alignment, accounting, ranges."""
import gc

import pytest

from hal_driver.device.allocator import Allocator
from hal_driver.device.memory import BufferUsage, MemoryType
from hal_driver.device.semaphore import Semaphore
from hal_driver.status import StatusCode, StatusError

USAGE = int(BufferUsage.DEFAULT | BufferUsage.MAPPING)
DEVICE_LOCAL = int(MemoryType.DEVICE_LOCAL)


def test_allocations_are_aligned_and_accounted():
    allocator = Allocator()
    a = allocator.allocate(DEVICE_LOCAL, USAGE, 10)
    b = allocator.allocate(DEVICE_LOCAL, USAGE, 100)
    assert a.view().ctypes.data % 64 == 0 and b.view().ctypes.data % 64 == 0
    assert allocator.bytes_in_use == 64 + 128
    a.allocation.release()
    assert allocator.bytes_in_use == 128
    assert allocator.statistics.bytes_peak == 192
    del b
    gc.collect()
    assert allocator.bytes_in_use == 0
    assert "192B peak" in allocator.format_statistics()


def test_memory_type_includes_device_local_and_host_visible():
    buffer = Allocator().allocate(int(MemoryType.OPTIMAL), USAGE, 4)
    assert buffer.memory_type & DEVICE_LOCAL == DEVICE_LOCAL
    assert buffer.memory_type & MemoryType.HOST_VISIBLE
    assert not buffer.memory_type & MemoryType.OPTIMAL


def test_exhaustion_and_negative_sizes():
    allocator = Allocator(capacity=1024)
    held = allocator.allocate(DEVICE_LOCAL, USAGE, 1000)
    with pytest.raises(StatusError) as e:
        allocator.allocate(DEVICE_LOCAL, USAGE, 64)
    assert e.value.code == StatusCode.RESOURCE_EXHAUSTED and held.byte_length == 1000
    with pytest.raises(StatusError) as e:
        allocator.allocate(DEVICE_LOCAL, USAGE, -1)
    assert e.value.code == StatusCode.INVALID_ARGUMENT


def test_buffer_range_errors():
    buffer = Allocator().allocate(DEVICE_LOCAL, USAGE, 16)
    sub = buffer.subspan(4, 8)
    sub.write(0, b"\x01" * 8)
    assert buffer.read(4, 8) == b"\x01" * 8
    for bad in [lambda: buffer.subspan(8, 9), lambda: sub.read(4, 5), lambda: sub.subspan(-1, 2),
                lambda: buffer.write(15, b"ab")]:
        with pytest.raises(StatusError) as e:
            bad()
        assert e.value.code == StatusCode.OUT_OF_RANGE
    with pytest.raises(StatusError, match="multiple"):
        buffer.fill(0, 6, b"\x00\x00\x00\x00")


def test_queue_alloca_and_dealloca(device):
    s = Semaphore(0)
    buffer = device.queue_alloca([], [(s, 1)], DEVICE_LOCAL, USAGE, 256)
    assert device.allocator.bytes_in_use == 256
    device.queue_dealloca([(s, 1)], [(s, 2)], buffer)
    s.wait(2, timeout=5)
    assert device.allocator.bytes_in_use == 0
    with pytest.raises(StatusError) as e:
        buffer.read()
    assert e.value.code == StatusCode.FAILED_PRECONDITION
