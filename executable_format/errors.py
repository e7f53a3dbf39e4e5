"""The one error type of executable_format, and how messages quote strings read from files."""

EXCERPT_CHARS = 128


class FormatError(ValueError):
    """An npu-fb buffer or assembly text is malformed; str(e) is one line naming the problem."""


def excerpt(text: str | bytes) -> str:
    """`text` read from an untrusted file (a name, a key), for a one-line message: characters
    that are not printable escaped (\\x00, \\u202e; bytes that are not UTF-8 as \\xff), at
    most EXCERPT_CHARS characters shown, and the full length when cut."""
    length = f"{len(text)} {'bytes' if isinstance(text, bytes) else 'characters'}"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "backslashreplace")
    pieces, size = [], 0
    for char in text:
        piece = char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        if size + len(piece) > EXCERPT_CHARS:
            return f"{''.join(pieces)}... ({length})"
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces)
