"""hal.fence: a set of semaphore timepoints (semaphore -> value), joined by maximum."""
from typing import Iterable, Optional

from hal_driver.device.semaphore import Semaphore, Timepoint, wait_all
from hal_driver.status import StatusError


class Fence:

    def __init__(self, timepoints: Iterable[Timepoint] = ()):
        self._values: dict[Semaphore, int] = {}
        values = self._values
        for semaphore, value in timepoints:     # insert(), inline
            values[semaphore] = max(value, values.get(semaphore, value))

    @classmethod
    def join(cls, fences: Iterable[Optional["Fence"]]) -> "Fence":
        return cls(tp for fence in fences if fence for tp in fence.timepoints)

    @property
    def timepoints(self) -> list[Timepoint]:
        return list(self._values.items())

    def insert(self, semaphore: Semaphore, value: int) -> None:
        self._values[semaphore] = max(value, self._values.get(semaphore, value))

    def query(self) -> bool:
        """True if every timepoint is reached; raises the failure of a failed semaphore."""
        for semaphore, value in self._values.items():
            if semaphore.failure:
                raise semaphore.failure
        return all(semaphore.query() >= value for semaphore, value in self._values.items())

    def signal(self) -> None:
        for semaphore, value in self._values.items():
            semaphore.signal(value)

    def fail(self, status: StatusError) -> None:
        for semaphore in self._values:
            semaphore.fail(status)

    def wait(self, timeout: Optional[float] = None) -> None:
        wait_all(self.timepoints, timeout)

