"""The analysis's one exception, and the word that starts the reason of a dispatch with
no work at the extents it is planned at (a dynamic dispatch's probe: the planner then
tries longer ones)."""

EMPTY = "empty"


class NotSupported(Exception):
    """The dispatch cannot be described as an NpuOp; the message says why."""
