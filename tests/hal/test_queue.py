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


# -- inline execution: an idle queue runs a submission whose waits are settled on the
#    submitting thread; anything else goes to the worker, in submission order.

def _recorder(log, name):
    return lambda: log.append((name, threading.current_thread().name))


def test_idle_queue_runs_a_ready_submission_inline(device):
    log, s = [], Semaphore(0)
    device.queue.submit([], [(s, 1)], _recorder(log, "a"))
    assert log == [("a", threading.current_thread().name)]   # done before submit returned
    assert s.query() == 1
    device.queue.submit([(s, 1)], [(s, 2)], _recorder(log, "b"))
    assert log[-1] == ("b", threading.current_thread().name)
    assert s.query() == 2


def test_submission_with_unmet_waits_goes_to_the_worker(device):
    log, gate, done = [], Semaphore(0), Semaphore(0)
    device.queue.submit([(gate, 1)], [(done, 1)], _recorder(log, "a"))
    assert log == [] and done.query() == 0                   # submit did not block
    gate.signal(1)
    done.wait(1, timeout=5)
    assert log == [("a", "npu-sim-queue")]


def test_ready_submissions_queue_behind_a_waiting_one_and_then_inline_again(device):
    log, gate, s = [], Semaphore(0), Semaphore(0)
    device.queue.submit([(gate, 1)], [], _recorder(log, "first"))
    device.queue.submit([], [(s, 1)], _recorder(log, "second"))   # ready, but queued
    device.queue.submit([], [(s, 2)], _recorder(log, "third"))
    assert log == []
    gate.signal(1)
    s.wait(2, timeout=5)
    assert [name for name, _ in log] == ["first", "second", "third"]
    assert {thread for _, thread in log} == {"npu-sim-queue"}
    for _ in range(500):                                          # the worker goes idle
        if not device.queue._busy:
            break
        threading.Event().wait(0.01)
    device.queue.submit([(s, 2)], [(s, 3)], _recorder(log, "fourth"))
    assert log[-1] == ("fourth", threading.current_thread().name)


def test_no_submission_runs_while_an_inline_one_is_running(device):
    """A submission made while an inline one runs queues behind it, never overlaps."""
    log, running, release, s = [], threading.Event(), threading.Event(), Semaphore(0)

    def slow():
        running.set()
        release.wait(5)
        log.append("inline")
    submitter = threading.Thread(target=device.queue.submit, args=([], [(s, 1)], slow))
    submitter.start()
    assert running.wait(5)
    device.queue.submit([], [(s, 2)], lambda: log.append("next"))
    threading.Event().wait(0.05)
    assert log == []                                              # waits for the inline one
    release.set()
    submitter.join(5)
    s.wait(2, timeout=5)
    assert log == ["inline", "next"]


def test_inline_failure_propagates_to_signals_and_downstream(device):
    first, second = Semaphore(0), Semaphore(0)

    def broken():
        raise StatusError(StatusCode.DATA_LOSS, "inline op failed")
    device.queue.submit([], [(first, 1)], broken)                 # runs inline, must not raise
    with pytest.raises(StatusError, match="inline op failed"):
        first.query()
    ran = []
    device.queue.submit([(first, 1)], [(second, 1)], lambda: ran.append(1))
    with pytest.raises(StatusError, match="inline op failed"):
        second.wait(1, timeout=5)
    assert ran == []


def test_inline_internal_error_becomes_an_internal_status(device):
    s = Semaphore(0)
    device.queue.submit([], [(s, 1)], lambda: 1 / 0)
    with pytest.raises(StatusError) as e:
        s.wait(1, timeout=5)
    assert e.value.code == StatusCode.INTERNAL


def test_closing_while_an_inline_submission_runs_stops_the_worker():
    from hal_driver.device.driver import create_device
    device = create_device()
    running, release, s = threading.Event(), threading.Event(), Semaphore(0)

    def slow():
        running.set()
        release.wait(5)
    submitter = threading.Thread(target=device.queue.submit, args=([], [(s, 1)], slow))
    submitter.start()
    assert running.wait(5)
    closer = threading.Thread(target=device.close)
    closer.start()
    release.set()
    closer.join(5)
    submitter.join(5)
    assert not closer.is_alive() and s.query() == 1
