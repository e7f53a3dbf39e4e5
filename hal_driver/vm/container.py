"""The .vmfb container: an uncompressed ZIP whose first member is `module.fb`.

`module.fb` holds a 4-byte little-endian size prefix and then the bytecode module
FlatBuffer (file identifier `IREE`). Rodata segments too large to embed follow the
FlatBuffer: segment bytes start at `align64(flatbuffer_start + flatbuffer_length) +
external_data_offset`, offsets counted from the start of the archive. Like IREE we
only read the first local file header; a buffer without a ZIP header is taken to be
a bare size-prefixed FlatBuffer.
"""
import struct
from dataclasses import dataclass

from hal_driver.status import StatusCode, StatusError

_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_HEADER_SIGNATURE = 0x04034B50
_STORED = 0
EXTERNAL_SEGMENT_ALIGNMENT = 64


@dataclass(frozen=True)
class Archive:
    data: memoryview          # the whole archive
    flatbuffer: memoryview    # the FlatBuffer, without its size prefix
    flatbuffer_offset: int    # where the FlatBuffer starts in the archive
    rodata_offset: int        # archive offset that external rodata offsets are relative to


def _invalid(message: str) -> StatusError:
    return StatusError(StatusCode.INVALID_ARGUMENT, f"vmfb container: {message}")


def _module_member_offset(data: memoryview) -> int:
    if len(data) < _LOCAL_HEADER.size or bytes(data[:4]) != b"PK\x03\x04":
        return 0
    (_, _, _, method, _, _, _, _, _, name_length, extra_length) = _LOCAL_HEADER.unpack_from(data, 0)
    if method != _STORED:
        raise _invalid(f"first member uses compression method {method}; only stored (0) is supported")
    offset = _LOCAL_HEADER.size + name_length + extra_length
    if offset > len(data):
        raise _invalid("archive self-reports as a zip but is too short to contain a module")
    return offset


def parse_archive(data) -> Archive:
    """Locates the FlatBuffer and the external rodata base inside `data`."""
    view = memoryview(data).cast("B")
    start = _module_member_offset(view)
    if len(view) - start < 16:
        raise _invalid(f"FlatBuffer data is not present or less than 16 bytes ({len(view) - start} total)")
    (length,) = struct.unpack_from("<I", view, start)
    available = len(view) - start - 4
    if length > available:
        raise _invalid(f"FlatBuffer length prefix out of bounds (prefix is {length} but only {available} available)")
    fb_start = start + 4
    flatbuffer = view[fb_start:fb_start + length]
    if bytes(flatbuffer[4:8]) != b"IREE":
        raise _invalid(f"expected FlatBuffer file identifier 'IREE', found {bytes(flatbuffer[4:8])!r}")
    align = EXTERNAL_SEGMENT_ALIGNMENT
    rodata_offset = (fb_start + length + align - 1) // align * align
    return Archive(view, flatbuffer, fb_start, rodata_offset)
