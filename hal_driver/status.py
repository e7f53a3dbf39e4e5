"""IREE-style status errors shared by the VM, the `hal` module and the npu-sim device.

A failure is raised as `StatusError(code, message)` and prints the way IREE prints a
status: `INVALID_ARGUMENT; executable npu-fb verification failed: ...`.
"""
import enum


class StatusCode(enum.IntEnum):
    """iree_status_code_t values (runtime/src/iree/base/status.h)."""
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
    DEFERRED = 17
    INCOMPATIBLE = 18


def known_status_code(value: int) -> StatusCode | None:
    """The StatusCode numbered `value`, or None for a number IREE does not define."""
    try:
        return StatusCode(value)
    except ValueError:
        return None


class StatusError(Exception):
    """An error carrying an IREE status code."""

    def __init__(self, code: StatusCode, message: str):
        super().__init__(message)
        self.code = StatusCode(code)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}; {self.message}"

    def annotate(self, context: str) -> "StatusError":
        """Returns the same status with `context` appended, as IREE annotates statuses
        (`iree_status_annotate`: the root cause first, then each caller's context)."""
        return StatusError(self.code, f"{self.message}; {context}")
