"""The cffi declarations (cdef) of a C header, so that a build script declares its API
once, in the header: the header less its comments and preprocessor lines, keeping each
`#define NAME VALUE` (cffi takes integer constants from them). cffi then checks the
declarations against the header when it compiles the extension.
"""
import pathlib
import re

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_CONSTANT = re.compile(r"#\s*define\s+\w+\s+\S")     # a define with a value (not a guard)


def cdef_from_header(header: pathlib.Path) -> str:
    lines = []
    for line in _COMMENT.sub("", header.read_text()).splitlines():
        if line.lstrip().startswith("#") and not _CONSTANT.match(line.lstrip()):
            continue
        lines.append(line.rstrip())
    return "\n".join(line for line in lines if line) + "\n"
