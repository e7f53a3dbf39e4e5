"""The one error type the npu compiler target raises for user-facing failures."""


class CompileError(Exception):
    """A compile failure with a one-line message (no traceback is shown to users)."""
