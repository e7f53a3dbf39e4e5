"""Queue ordering, semaphore waits and failure propagation on the npu-sim device."""
import threading

import numpy as np
import pytest

from hal_driver.device.memory import BufferUsage, MemoryType
from hal_driver.device.semaphore import Semaphore
from hal_driver.status import StatusCode, StatusError

USAGE = int(BufferUsage.DEFAULT | BufferUsage.MAPPING)


def alloc(device, size):
    return device.allocator.allocate(int(MemoryType.DEVICE_LOCAL), USAGE, size)


def test_submissions_run_in_order_even_when_later_ones_have_no_waits(device):
    gate, done = Semaphore(0), Semaphore(0)
    order = []
    device.queue.submit([(gate, 1)], [], lambda: order.append("first"))
    device.queue.submit([], [(done, 1)], lambda: order.append("second"))
    with pytest.raises(StatusError):
        done.wait(1, timeout=0.05)
    assert order == []
    gate.signal(1)
    done.wait(1, timeout=5)
    assert order == ["first", "second"]


def test_transfers_chain_through_semaphores(device):
    a, b = alloc(device, 16), alloc(device, 16)
    s = Semaphore(0)
    device.queue_fill([], [(s, 1)], a, 0, 16, b"\x07")
    device.queue_copy([(s, 1)], [(s, 2)], a, 0, b, 0, 16)
    device.queue_update([(s, 2)], [(s, 3)], b"\x01\x02", b, 4)
    s.wait(3, timeout=5)
    assert b.read() == b"\x07" * 4 + b"\x01\x02" + b"\x07" * 10


def test_failed_wait_semaphore_fails_the_signals_downstream(device):
    upstream, mid, downstream = Semaphore(0), Semaphore(0), Semaphore(0)
    ran = []
    device.queue.submit([(upstream, 1)], [(mid, 1)], lambda: ran.append(1))
    device.queue.submit([(mid, 1)], [(downstream, 1)], lambda: ran.append(2))
    upstream.fail(StatusError(StatusCode.ABORTED, "producer failed"))
    with pytest.raises(StatusError, match="producer failed"):
        downstream.wait(1, timeout=5)
    assert ran == []


def test_operation_error_fails_its_signal_semaphore(device):
    from hal_driver.device.command_buffer import BufferRef
    buffer, s = alloc(device, 8), Semaphore(0)
    cb = device.create_command_buffer(0, 3, 1)
    cb.fill_buffer(BufferRef(None, 0, 4, 8), b"\x00")  # slot 0 is only known at submit
    cb.finalize()
    device.queue_execute([], [(s, 1)], cb, [(buffer, 0, 8)])
    with pytest.raises(StatusError) as e:
        s.wait(1, timeout=5)
    assert e.value.code == StatusCode.OUT_OF_RANGE


def test_concurrent_submitters_from_several_threads(device):
    count, per_thread = 8, 25
    buffers = [alloc(device, per_thread * 4) for _ in range(count)]
    semaphores = [Semaphore(0) for _ in range(count)]

    def submitter(i):
        for j in range(per_thread):
            value = np.array([i * 1000 + j], dtype=np.uint32).tobytes()
            device.queue_update([(semaphores[i], j)] if j else [], [(semaphores[i], j + 1)],
                                value, buffers[i], j * 4)
    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for i in range(count):
        semaphores[i].wait(per_thread, timeout=10)
        got = np.frombuffer(buffers[i].read(), dtype=np.uint32)
        assert list(got) == [i * 1000 + j for j in range(per_thread)]


def test_closing_the_device_cancels_blocked_submissions():
    from hal_driver.device.driver import create_device
    device = create_device()
    gate, s = Semaphore(0), Semaphore(0)
    device.queue_barrier([(gate, 1)], [(s, 1)])
    device.close()
    with pytest.raises(StatusError) as e:
        s.wait(1, timeout=5)
    assert e.value.code == StatusCode.CANCELLED


def test_dropping_a_device_stops_its_worker_thread():
    import gc
    from hal_driver.device.driver import create_device
    before = threading.active_count()
    device = create_device()
    assert threading.active_count() == before + 1
    del device
    gc.collect()
    for _ in range(100):
        if threading.active_count() == before:
            break
        threading.Event().wait(0.01)
    assert threading.active_count() == before
