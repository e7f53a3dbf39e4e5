import threading
import time

import pytest

from hal_driver.device.fence import Fence
from hal_driver.device.semaphore import Semaphore, wait_all, wait_any
from hal_driver.status import StatusCode, StatusError


def test_signal_query_and_monotonic_values():
    s = Semaphore(3)
    assert s.query() == 3
    s.signal(5)
    assert s.query() == 5
    with pytest.raises(StatusError) as e:
        s.signal(5)
    assert e.value.code == StatusCode.OUT_OF_RANGE


def test_wait_times_out_with_deadline_exceeded():
    s = Semaphore(0)
    start = time.monotonic()
    with pytest.raises(StatusError) as e:
        s.wait(1, timeout=0.05)
    assert e.value.code == StatusCode.DEADLINE_EXCEEDED
    assert 0.04 < time.monotonic() - start < 1
    with pytest.raises(StatusError):
        s.wait(1, timeout=0)


def test_wait_wakes_on_signal_from_another_thread():
    s = Semaphore(0)
    threading.Timer(0.02, s.signal, args=(2,)).start()
    s.wait(2, timeout=5)
    assert s.query() == 2


def test_failure_propagates_to_blocked_waiters():
    s = Semaphore(0)
    errors = []

    def waiter():
        try:
            s.wait(1, timeout=5)
        except StatusError as error:
            errors.append(error)
    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.02)
    s.fail(StatusError(StatusCode.ABORTED, "device fault"))
    for t in threads:
        t.join(5)
    assert [e.code for e in errors] == [StatusCode.ABORTED] * 3
    with pytest.raises(StatusError, match="device fault"):
        s.query()


def test_wait_all_and_wait_any():
    a, b = Semaphore(0), Semaphore(0)
    a.signal(1)
    wait_any([(a, 1), (b, 1)], timeout=0)
    with pytest.raises(StatusError) as e:
        wait_all([(a, 1), (b, 1)], timeout=0.01)
    assert e.value.code == StatusCode.DEADLINE_EXCEEDED
    b.signal(1)
    wait_all([(a, 1), (b, 1)], timeout=0)


def test_fence_joins_by_maximum_and_signals_all():
    a, b = Semaphore(0), Semaphore(0)
    joined = Fence.join([Fence([(a, 1)]), Fence([(a, 3), (b, 2)]), None])
    assert dict(joined.timepoints) == {a: 3, b: 2}
    assert joined.query() is False
    joined.signal()
    assert joined.query() is True and a.query() == 3 and b.query() == 2


def test_failed_fence_query_raises():
    fence = Fence([(Semaphore(0), 1)])
    fence.fail(StatusError(StatusCode.INTERNAL, "boom"))
    with pytest.raises(StatusError, match="boom"):
        fence.query()
