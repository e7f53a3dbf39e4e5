"""The analysis's one exception."""


class NotSupported(Exception):
    """The dispatch cannot be described as an NpuOp; the message says why."""
