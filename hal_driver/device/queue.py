"""The npu-sim device queue: runs submissions strictly in submission order.

Each submission waits for its wait timepoints, runs its operation, then signals its
signal timepoints. If a wait semaphore failed or the operation raised, the signal
semaphores fail with that status instead, so failure propagates to every waiter
downstream.

A submission runs inline on the submitting thread when the queue is idle (nothing
pending, nothing running) and its waits are already settled (reached or failed), as
IREE's local-sync device does: that saves the handoff to the worker thread. Any other
submission goes to the worker thread. One `busy` flag, under the queue lock, makes
sure at most one submission runs at a time, so later submissions queue behind an
inline one and order is kept.
"""
import collections
import threading
from dataclasses import dataclass
from typing import Callable

from hal_driver.device.semaphore import Timepoint, all_settled, notify_waiters, wait_all
from hal_driver.status import StatusCode, StatusError


@dataclass
class Submission:
    waits: list[Timepoint]
    signals: list[Timepoint]
    operation: Callable[[], None]


class Queue:
    def __init__(self, name: str):
        self._pending: collections.deque[Submission] = collections.deque()
        # `with self._lock` (a Lock's own enter and exit) where no wait or notify follows
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._busy = False      # a submission is running (inline or on the worker)
        self._closing = False
        self._worker = threading.Thread(target=self._run, name=f"{name}-queue", daemon=True)
        self._worker.start()

    def submit(self, waits: list[Timepoint], signals: list[Timepoint],
               operation: Callable[[], None]) -> None:
        submission = Submission(list(waits), list(signals), operation)
        settled = not waits or all_settled(submission.waits)   # monotonic: stays true once true
        with self._lock:
            if self._closing:
                raise StatusError(StatusCode.FAILED_PRECONDITION, "device queue is shut down")
            if not settled or self._busy or self._pending:
                self._pending.append(submission)
                self._ready.notify()
                return
            self._busy = True
        self._run_inline(submission)

    def close(self) -> None:
        """Stops the worker; pending submissions fail with CANCELLED."""
        with self._ready:
            self._closing = True
            self._ready.notify()
        notify_waiters()
        if threading.current_thread() is not self._worker:
            self._worker.join()

    def _run_inline(self, submission: Submission) -> None:
        try:
            self._execute(submission, settled=True)
        finally:
            self._finish()

    def _finish(self) -> None:
        """Marks the queue idle; wakes the worker only if it has something to do (work
        queued up meanwhile, or closing): waking it for nothing would cost the thread
        handoff that inline execution avoids."""
        with self._lock:
            self._busy = False
            if self._pending or self._closing:
                self._ready.notify()

    def _next(self) -> Submission | None:
        """The next submission, once nothing else runs; None when closing and drained."""
        with self._ready:
            while self._busy or (not self._pending and not self._closing):
                self._ready.wait()
            if not self._pending:
                return None
            self._busy = True
            return self._pending.popleft()

    def _run(self) -> None:
        while True:
            submission = self._next()
            if submission is None:
                return
            self._execute(submission)
            del submission   # release its buffers while the queue is idle
            self._finish()

    def _execute(self, submission: Submission, settled: bool = False) -> None:
        """Waits, runs, signals. `settled`: every wait timepoint is known to be reached
        or failed (an inline submission), so waiting is only raising the first
        failure, as wait_all would at once."""
        try:
            if settled:
                for semaphore, _ in submission.waits:
                    if semaphore.failure:
                        raise semaphore.failure
            elif submission.waits:
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
