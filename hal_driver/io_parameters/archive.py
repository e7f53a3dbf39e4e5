"""Reading IREE parameter archives (.irpa), the format of
runtime/src/iree/schemas/parameter_archive.h (little-endian, packed structs):

  header prefix  magic 'IRPA', u16 major, u16 minor, u64 header_size, u64 next_header_offset,
                 u64 flags
  header v0      u64 entry_count, then (u64 offset, u64 length) of the entry, metadata and
                 storage segments, each relative to the header
  entry header   u64 entry_size, u32 type, u64 flags, name range, metadata range (both in
                 the metadata segment), u64 minimum_alignment; each entry 16-byte aligned
  entry bodies   SKIP (0) nothing; SPLAT (1) u64 length, 16 pattern bytes, u8 pattern_length;
                 DATA (2) storage range (padded with zeros up to its length);
                 EXTERNAL (3) path range, (u64 offset, u64 length) in that file

Several archives may be chained by `next_header_offset`.
"""
import mmap
import os
import struct
from dataclasses import dataclass

from hal_driver.status import StatusCode, StatusError

MAGIC = 0x41505249
PREFIX = struct.Struct("<IHHQQQ")
HEADER_V0 = struct.Struct("<Q6Q")
ENTRY_HEADER = struct.Struct("<QIQ4QQ")
SPLAT = struct.Struct("<Q16sB")
RANGE = struct.Struct("<QQ")
ENTRY_ALIGNMENT = 16
SKIP, SPLAT_TYPE, DATA, EXTERNAL = 0, 1, 2, 3


@dataclass
class ArchiveEntry:
    """One parameter: its bytes `data` (a memoryview) or a splat `pattern`."""
    key: str
    length: int
    metadata: bytes
    data: memoryview | None = None
    pattern: bytes | None = None


def read_archive(path: str) -> list[ArchiveEntry]:
    """The entries of the archive file at `path` (memory mapped, not copied)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            contents = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)) \
                if size else memoryview(b"")
    except OSError:
        raise StatusError(StatusCode.NOT_FOUND, f"failed to open file '{path}'") from None
    entries, header = [], 0
    while True:
        next_offset = _read_header(contents, header, path, entries)
        if not next_offset:
            return entries
        header += next_offset


def _unpack(layout: struct.Struct, contents: memoryview, offset: int, what: str):
    if offset < 0 or offset + layout.size > len(contents):
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"parameter archive {what} at offset {offset} runs past the end "
                          f"of the file ({len(contents)} bytes)")
    return layout.unpack_from(contents, offset)


def _slice(contents: memoryview, offset: int, length: int, what: str) -> memoryview:
    if offset < 0 or length < 0 or offset + length > len(contents):
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"parameter archive {what} (offset {offset}, length {length}) out of "
                          f"the file's range ({len(contents)} bytes)")
    return contents[offset:offset + length]


def _read_header(contents: memoryview, base: int, path: str, entries: list) -> int:
    magic, major, minor, header_size, next_offset, _ = _unpack(PREFIX, contents, base, "header")
    if magic != MAGIC:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"'{path}' is not an IREE parameter archive: header magic mismatch")
    if major != 0:
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          f"parameter archive version {major}.{minor} is not supported (0.x)")
    count, entry_offset, entry_length, meta_offset, meta_length, storage_offset, _ = \
        _unpack(HEADER_V0, contents, base + PREFIX.size, "header")
    table = _slice(contents, base + entry_offset, entry_length, "entry segment")
    metadata = _slice(contents, base + meta_offset, meta_length, "metadata segment")
    offset = 0
    for _ in range(count):
        entry_size, kind, _flags, name_offset, name_length, meta_off, meta_len, _align = \
            _unpack(ENTRY_HEADER, table, offset, "entry")
        body = offset + ENTRY_HEADER.size
        key = bytes(_slice(metadata, name_offset, name_length, "entry name")).decode()
        meta = bytes(_slice(metadata, meta_off, meta_len, "entry metadata"))
        entry = _read_body(contents, table, body, kind, key, meta, base + storage_offset, path)
        if entry is not None:
            entries.append(entry)
        offset += -(-entry_size // ENTRY_ALIGNMENT) * ENTRY_ALIGNMENT
    return next_offset


def _read_body(contents, table, body, kind, key, meta, storage_base, path):
    if kind == SKIP:
        return None
    if kind == SPLAT_TYPE:
        length, pattern, pattern_length = _unpack(SPLAT, table, body, "splat entry")
        if pattern_length not in (1, 2, 4, 8, 16) or length % pattern_length:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"parameter `{key}`: invalid splat pattern length {pattern_length}")
        return ArchiveEntry(key, length, meta, pattern=pattern[:pattern_length])
    if kind == DATA:
        offset, length = _unpack(RANGE, table, body, "data entry")
        return ArchiveEntry(key, length, meta,
                            data=_slice(contents, storage_base + offset, length, f"`{key}` data"))
    if kind == EXTERNAL:
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          f"parameter `{key}` refers to an external file; only data and splat "
                          f"entries are supported")
    raise StatusError(StatusCode.INVALID_ARGUMENT,
                      f"parameter `{key}` has unknown entry type {kind}")
