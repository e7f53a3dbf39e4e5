"""hal.semaphore: timeline semaphores.

A semaphore holds a monotonically increasing 64-bit value or a failure status.
Waiting on a failed semaphore raises its failure; waits past their deadline raise
DEADLINE_EXCEEDED. All semaphores notify one shared condition so that waits on
several semaphores (all or any) need no extra machinery.
"""
import threading
import time
from typing import Callable, Iterable, Optional

from hal_driver.status import StatusCode, StatusError

# One lock for every semaphore, and its condition; `with _lock` rather than `with
# _changed` (Condition's own __enter__ is a Python call), and a notification only when
# someone waits (_waiting: the threads in _changed.wait).
_lock = threading.Lock()
_changed = threading.Condition(_lock)
_waiting = 0

Timepoint = tuple["Semaphore", int]


class Semaphore:

    def __init__(self, initial_value: int = 0):
        self._value = initial_value
        self._failure: Optional[StatusError] = None

    def query(self) -> int:
        """The current value; raises the failure status of a failed semaphore."""
        with _lock:
            if self._failure:
                raise self._failure
            return self._value

    @property
    def failure(self) -> Optional[StatusError]:
        return self._failure

    def signal(self, value: int) -> None:
        with _lock:
            if self._failure:
                raise self._failure
            if value <= self._value:
                raise StatusError(
                    StatusCode.OUT_OF_RANGE,
                    f"semaphore values must be monotonically increasing; current value "
                    f"{self._value}, new value {value}")
            self._value = value
            if _waiting:
                _changed.notify_all()

    def fail(self, status: StatusError) -> None:
        """Puts the semaphore in the failed state; the first failure wins."""
        with _lock:
            if not self._failure:
                self._failure = status
            _changed.notify_all()

    def reached(self, value: int) -> bool:
        """True once `value` is reached; raises if failed (call with `_lock` held)."""
        if self._failure:
            raise self._failure
        return self._value >= value

    def wait(self, value: int, timeout: Optional[float] = None) -> None:
        wait_all([(self, value)], timeout)


def wait_all(timepoints: Iterable[Timepoint], timeout: Optional[float] = None,
             cancelled: Callable[[], bool] = lambda: False) -> None:
    """Blocks until every timepoint is reached (timeout in seconds, None: forever)."""
    timepoints = list(timepoints)
    _wait(lambda: all(s.reached(v) for s, v in timepoints), timeout, cancelled)


def wait_any(timepoints: Iterable[Timepoint], timeout: Optional[float] = None) -> None:
    """Blocks until one timepoint is reached; a failed semaphore raises."""
    timepoints = list(timepoints)
    _wait(lambda: any(s.reached(v) for s, v in timepoints), timeout, lambda: False)


def all_settled(timepoints: Iterable[Timepoint]) -> bool:
    """True when every timepoint is reached or its semaphore failed (waiting on them
    would return or raise at once)."""
    with _lock:
        return all(s.failure or s._value >= v for s, v in timepoints)


def notify_waiters() -> None:
    """Wakes all waiters so they re-check their `cancelled` predicate."""
    with _lock:
        _changed.notify_all()


def _wait(ready: Callable[[], bool], timeout: Optional[float],
          cancelled: Callable[[], bool]) -> None:
    global _waiting
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        while not ready():
            if cancelled():
                raise StatusError(StatusCode.CANCELLED, "wait cancelled: device is shutting down")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise StatusError(StatusCode.DEADLINE_EXCEEDED,
                                  "timed out waiting on semaphores")
            _waiting += 1
            try:
                _changed.wait(remaining)
            finally:
                _waiting -= 1
