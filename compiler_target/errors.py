"""The one error type the npu compiler target raises for user-facing failures."""
import contextlib


class CompileError(Exception):
    """A compile failure with a one-line message (no traceback is shown to users)."""


@contextlib.contextmanager
def writing(what: str, path: str):
    """Turns a file-system error while writing `path` into a one-line CompileError."""
    try:
        yield
    except OSError as e:
        raise CompileError(f"cannot write {what} '{path}': {e.strerror or e}") from None
