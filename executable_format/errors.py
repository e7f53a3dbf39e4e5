"""The one error type of executable_format."""


class FormatError(ValueError):
    """An npu-fb buffer or assembly text is malformed; str(e) is one line naming the problem."""
