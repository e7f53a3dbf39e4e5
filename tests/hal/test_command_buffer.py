"""Command buffer recording rules, reuse and binding tables."""
import pytest

from hal_driver.device.command_buffer import BufferRef, CommandBufferMode
from hal_driver.device.memory import BufferUsage, MemoryType
from hal_driver.device.semaphore import Semaphore
from hal_driver.status import StatusCode, StatusError

USAGE = int(BufferUsage.DEFAULT | BufferUsage.MAPPING)


def alloc(device, size):
    return device.allocator.allocate(int(MemoryType.DEVICE_LOCAL), USAGE, size)


def run(device, cb, table=()):
    s = Semaphore(0)
    device.queue_execute([], [(s, 1)], cb, table)
    s.wait(1, timeout=5)


def test_reusable_command_buffer_runs_with_different_binding_tables(device):
    cb = device.create_command_buffer(int(CommandBufferMode.DEFAULT), 3, 2)
    cb.fill_buffer(BufferRef(None, 0, 0, 4), b"\xab")
    cb.execution_barrier(0, 0, 0)
    cb.copy_buffer(BufferRef(None, 0, 0, 4), BufferRef(None, 1, 4, 4))
    cb.finalize()
    first, second = [(alloc(device, 8), 0, 8), (alloc(device, 8), 0, 8)], \
                    [(alloc(device, 8), 0, 8), (alloc(device, 16), 8, 8)]
    run(device, cb, first)
    run(device, cb, second)
    run(device, cb, second)
    assert first[1][0].read() == b"\x00" * 4 + b"\xab" * 4
    assert second[1][0].read() == b"\x00" * 12 + b"\xab" * 4


def test_one_shot_command_buffer_cannot_be_resubmitted(device):
    cb = device.create_command_buffer(int(CommandBufferMode.ONE_SHOT), 3, 0)
    cb.update_buffer(b"\x01\x02", BufferRef(alloc(device, 4), 0, 0, 2))
    cb.finalize()
    run(device, cb)
    with pytest.raises(StatusError) as e:
        run(device, cb)
    assert e.value.code == StatusCode.FAILED_PRECONDITION


def test_recording_rules(device):
    cb = device.create_command_buffer(0, 3, 1)
    with pytest.raises(StatusError, match="finalized before submission"):
        run(device, cb)
    with pytest.raises(StatusError, match="binding capacity"):
        cb.fill_buffer(BufferRef(None, 1, 0, 4), b"\x00")
    with pytest.raises(StatusError) as e:
        cb.fill_buffer(BufferRef(alloc(device, 4), 0, 2, 4), b"\x00")
    assert e.value.code == StatusCode.OUT_OF_RANGE
    cb.begin_debug_group("g")
    with pytest.raises(StatusError, match="debug group"):
        cb.finalize()
    cb.end_debug_group()
    cb.finalize()
    with pytest.raises(StatusError, match="finalized"):
        cb.execution_barrier(0, 0, 0)
    with pytest.raises(StatusError, match="binding table has 0 entries"):
        run(device, cb)


def test_transfer_usage_is_checked(device):
    source = device.allocator.allocate(int(MemoryType.DEVICE_LOCAL),
                                       int(BufferUsage.DISPATCH_STORAGE), 8)
    with pytest.raises(StatusError) as e:
        device.queue_fill([], [], source, 0, 8, b"\x00")
    assert e.value.code == StatusCode.PERMISSION_DENIED
