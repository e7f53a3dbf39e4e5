"""The npu-sim device queue: a worker thread that runs submissions in order.

Each submission waits for its wait timepoints, runs its operation, then signals its
signal timepoints. If a wait semaphore failed or the operation raised, the signal
semaphores fail with that status instead, so failure propagates to every waiter
downstream. Submissions are executed strictly in submission order.
"""
import collections
import threading
from dataclasses import dataclass
from typing import Callable

from hal_driver.device.semaphore import Timepoint, notify_waiters, wait_all
from hal_driver.status import StatusCode, StatusError


@dataclass
class Submission:
    waits: list[Timepoint]
    signals: list[Timepoint]
    operation: Callable[[], None]


class Queue:
    def __init__(self, name: str):
        self._pending: collections.deque[Submission] = collections.deque()
        self._ready = threading.Condition()
        self._closing = False
        self._worker = threading.Thread(target=self._run, name=f"{name}-queue", daemon=True)
        self._worker.start()

    def submit(self, waits: list[Timepoint], signals: list[Timepoint],
               operation: Callable[[], None]) -> None:
        with self._ready:
            if self._closing:
                raise StatusError(StatusCode.FAILED_PRECONDITION, "device queue is shut down")
            self._pending.append(Submission(list(waits), list(signals), operation))
            self._ready.notify()

    def close(self) -> None:
        """Stops the worker; pending submissions fail with CANCELLED."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        notify_waiters()
        if threading.current_thread() is not self._worker:
            self._worker.join()

    def _next(self) -> Submission | None:
        with self._ready:
            while not self._pending and not self._closing:
                self._ready.wait()
            return self._pending.popleft() if self._pending else None

    def _run(self) -> None:
        while True:
            submission = self._next()
            if submission is None:
                return
            self._execute(submission)
            del submission   # release its buffers while the queue is idle

    def _execute(self, submission: Submission) -> None:
        try:
            wait_all(submission.waits, cancelled=lambda: self._closing)
            submission.operation()
        except StatusError as status:
            _fail(submission.signals, status)
            return
        except Exception as error:  # an internal bug must not hang the waiters
            _fail(submission.signals,
                  StatusError(StatusCode.INTERNAL, f"queue operation crashed: {error!r}"))
            return
        for semaphore, value in submission.signals:
            try:
                semaphore.signal(value)
            except StatusError as status:
                semaphore.fail(status)


def _fail(signals: list[Timepoint], status: StatusError) -> None:
    for semaphore, _ in signals:
        semaphore.fail(status)
