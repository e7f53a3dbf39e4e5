"""Flatbuffer bounds verification of an npu-fb buffer, before any generated accessor reads it.

The Python flatbuffers runtime has no verifier, so this module does what the C++
`flatbuffers::Verifier` does, driven by a small description of schemas/npu_executable.fbs:
every table's vtable, every field, offset, vector, string and nested table must lie inside
the buffer and be aligned, strings must be NUL-terminated, required fields present. The
walk follows the schema (fixed depth), so it cannot recurse without bound. The sizes of
all tables, vectors and strings it reaches must add up to at most the buffer size (they
are disjoint in a well-formed buffer), so neither this walk nor any later reader can be
made to do more than linear work by objects that overlap or are referenced many times.
"""
import struct
from dataclasses import dataclass

from .errors import FormatError
from .version import FILE_IDENTIFIER

MAX_BUFFER_BYTES = 2**31 - 1      # flatbuffers' limit (signed 32-bit offsets)


@dataclass(frozen=True)
class Scalar:
    size: int


@dataclass(frozen=True)
class String:
    pass


@dataclass(frozen=True)
class Vector:
    elem_size: int
    align: int = 4                    # alignment of the element data (force_align)


@dataclass(frozen=True)
class Table:
    name: str
    fields: tuple                     # (name, kind, required) by vtable slot


@dataclass(frozen=True)
class TableVector:
    table: Table


MACHINE_PARAM = Table("MachineParam", (("key", String(), True), ("value", Scalar(8), False)))
BINDING = Table("Binding", (("flags", Scalar(4), False), ("min_size", Scalar(8), False)))
BINDING_VIEW = Table("BindingView", (("binding", Scalar(4), False),
                                     ("offset_constant", Scalar(4), False),
                                     ("min_size", Scalar(8), False),
                                     ("offset_scale", Scalar(8), False),
                                     ("offset_base", Scalar(8), False),
                                     ("step_constant", Scalar(4), False),
                                     ("step_scale", Scalar(8), False)))
ROOFLINE = Table("Roofline", (("useful_macs", Scalar(8), False),
                              ("mac_dtype", Scalar(4), False),
                              ("read_bytes", Scalar(8), False),
                              ("write_bytes", Scalar(8), False)))
PROGRAM = Table("Program", (("instructions", Vector(1, 16), False),
                            ("sram_bytes", Scalar(4), False)))
EXPORT_DEBUG = Table("ExportDebug", (("dispatch_name", String(), False),
                                     ("source_location", String(), False),
                                     ("npu_ir", String(), False)))
PARAMETRIC = Table("Parametric", (("source", String(), True),
                                  ("dim_constants", Vector(4), False)))
EXPORT = Table("Export", (("name", String(), True),
                          ("ordinal", Scalar(4), False),
                          ("bindings", TableVector(BINDING), False),
                          ("constant_count", Scalar(4), False),
                          ("workgroup_count", Vector(4), False),
                          ("program", PROGRAM, True),
                          ("debug", EXPORT_DEBUG, False),
                          ("views", TableVector(BINDING_VIEW), False),
                          ("roofline", ROOFLINE, False),
                          ("parametric", PARAMETRIC, False)))
EXECUTABLE = Table("Executable", (("version_major", Scalar(4), False),
                                  ("version_minor", Scalar(4), False),
                                  ("machine", TableVector(MACHINE_PARAM), False),
                                  ("exports", TableVector(EXPORT), False),
                                  ("constants", Vector(1, 64), False)))


def check_structure(data: bytes) -> None:
    """Raises FormatError unless `data` is a structurally valid npu-fb flatbuffer."""
    if len(data) < 8:
        raise FormatError(f"buffer of {len(data)} bytes is too small for an npu-fb header")
    if len(data) > MAX_BUFFER_BYTES:
        raise FormatError(f"buffer of {len(data)} bytes exceeds the flatbuffer limit")
    identifier = bytes(data[4:8])
    if identifier != FILE_IDENTIFIER:
        raise FormatError(f"file identifier {identifier!r} is not {FILE_IDENTIFIER!r}")
    _Walker(data).table(_read(data, 0, "<I", "root offset"), EXECUTABLE, "root")


def _read(data, pos: int, fmt: str, what: str) -> int:
    size = struct.calcsize(fmt)
    if pos < 0 or pos + size > len(data):
        raise FormatError(f"{what} at byte {pos} lies outside the {len(data)}-byte buffer")
    if pos % size:
        raise FormatError(f"{what} at byte {pos} is not {size}-byte aligned")
    return struct.unpack_from(fmt, data, pos)[0]


class _Walker:
    def __init__(self, data):
        self.data = data
        self.budget = len(data)          # bytes of objects still allowed

    def charge(self, size: int, where: str) -> None:
        self.budget -= size
        if self.budget < 0:
            raise FormatError(f"{where}: objects overlap (their sizes add up to more than "
                              f"the {len(self.data)}-byte buffer)")

    def table(self, pos: int, table: Table, where: str) -> None:
        what = f"{where} ({table.name} table)"
        vtable = pos - _read(self.data, pos, "<i", what)
        vtable_size = _read(self.data, vtable, "<H", f"{what} vtable")
        table_size = _read(self.data, vtable + 2, "<H", f"{what} vtable")
        if vtable_size < 4 or vtable_size % 2 or vtable + vtable_size > len(self.data):
            raise FormatError(f"{what} vtable size {vtable_size} is invalid")
        if table_size < 4 or pos + table_size > len(self.data):
            raise FormatError(f"{what} size {table_size} exceeds the buffer")
        self.charge(table_size, what)
        for slot, (name, kind, required) in enumerate(table.fields):
            field_where = f"{where}.{name}"
            voffset = 4 + 2 * slot
            offset = _read(self.data, vtable + voffset, "<H", f"{what} vtable") \
                if voffset < vtable_size else 0
            if offset == 0:
                if required:
                    raise FormatError(f"{field_where} is required but missing")
                continue
            size = kind.size if isinstance(kind, Scalar) else 4
            if offset + size > table_size:
                raise FormatError(f"{field_where} lies outside its table")
            self.field(pos + offset, kind, field_where)

    def field(self, pos: int, kind, where: str) -> None:
        if isinstance(kind, Scalar):
            _read(self.data, pos, "<" + {4: "I", 8: "Q"}[kind.size], where)
            return
        target = self.offset(pos, where)
        if isinstance(kind, Table):
            self.table(target, kind, where)
        elif isinstance(kind, String):
            length = self.vector(target, 1, 1, where)
            if target + 4 + length >= len(self.data) or self.data[target + 4 + length] != 0:
                raise FormatError(f"{where} string is not NUL-terminated inside the buffer")
            self.charge(1, where)
        elif isinstance(kind, Vector):
            self.vector(target, kind.elem_size, kind.align, where)
        else:
            count = self.vector(target, 4, 4, where)
            for index in range(count):
                element = target + 4 + 4 * index
                self.table(self.offset(element, f"{where}[{index}]"), kind.table,
                           f"{where}[{index}]")

    def offset(self, pos: int, where: str) -> int:
        value = _read(self.data, pos, "<I", f"{where} offset")
        if value == 0 or value >= MAX_BUFFER_BYTES or pos + value >= len(self.data):
            raise FormatError(f"{where} offset {value} at byte {pos} points outside the buffer")
        return pos + value

    def vector(self, pos: int, elem_size: int, align: int, where: str) -> int:
        """Checks the vector at `pos` and returns its element count."""
        count = _read(self.data, pos, "<I", f"{where} length")
        if pos + 4 + count * elem_size > len(self.data):
            raise FormatError(f"{where} of {count} elements at byte {pos} exceeds the buffer")
        if count and (pos + 4) % align:
            raise FormatError(f"{where} data at byte {pos + 4} is not {align}-byte aligned")
        self.charge(4 + count * elem_size, where)
        return count
