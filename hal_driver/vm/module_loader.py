"""Reads the bytecode module FlatBuffer into plain Python objects.

Everything is read once, eagerly, with explicit range checks; the generated flatc
readers do not check bounds, so any exception they raise on a corrupted buffer is
turned into a DATA_LOSS StatusError here. Semantic checks (version, features,
descriptor ranges, ordinals) follow the read. Bytecode is verified separately
(verifier.py).
"""
import struct
from dataclasses import dataclass, field

from executable_format.errors import excerpt
from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import opcodes
from hal_driver.vm.container import Archive
from hal_driver.vm.generated import bytecode_module_def_generated as fb

MAX_RWDATA_BYTES = 1 << 28
MAX_GLOBAL_REFS = 1 << 20
I32_REGISTER_MASK = 0x7FFF        # register file limits (IREE's register ordinal masks)
REF_REGISTER_MASK = 0x3FFF
_LOCATION_TABLES = {
    fb.LocationTypeTag.CallSiteLocDef: fb.CallSiteLocDef,
    fb.LocationTypeTag.FileLineColLocDef: fb.FileLineColLocDef,
    fb.LocationTypeTag.FusedLocDef: fb.FusedLocDef,
    fb.LocationTypeTag.NameLocDef: fb.NameLocDef,
}
_MAX_LOCATION_DEPTH = 8


@dataclass(frozen=True)
class Signature:
    cconv: str | None
    attrs: dict


@dataclass(frozen=True)
class ImportDef:
    name: str            # fully qualified, e.g. `hal.buffer.assert`
    signature: Signature
    optional: bool


@dataclass(frozen=True)
class ExportDef:
    name: str
    internal_ordinal: int


@dataclass(frozen=True)
class FunctionDescriptor:
    bytecode_offset: int
    bytecode_length: int
    requirements: int
    block_count: int
    i32_register_count: int
    ref_register_count: int

    @property
    def i32_registers(self) -> int:
        """The i32 register file IREE allocates and verifies against: the declared count
        rounded up to a power of two, at least 1 (a body that never reads its argument
        declares 0 registers)."""
        return _register_file(self.i32_register_count)

    @property
    def ref_registers(self) -> int:
        return _register_file(self.ref_register_count)


def _register_file(count: int) -> int:
    return 1 << max(0, count - 1).bit_length()


@dataclass(frozen=True)
class Dependency:
    name: str
    minimum_version: int
    optional: bool


@dataclass
class DebugInfo:
    function_names: list = field(default_factory=list)   # per internal function, or None
    locations: list = field(default_factory=list)        # per function: sorted [(offset, text)]


@dataclass
class ModuleDef:
    name: str
    version: int
    requirements: int
    attrs: dict
    types: list            # type names as declared, e.g. `i32`, `!hal.buffer`
    dependencies: list
    imports: list
    exports: list
    signatures: list       # per internal function
    descriptors: list
    rodata: list           # memoryview per segment (read-only, zero-copy)
    global_bytes: int
    global_ref_count: int
    bytecode_version: int  # (major << 16) | minor
    bytecode: memoryview
    debug: DebugInfo


def _data_loss(message: str) -> StatusError:
    return StatusError(StatusCode.DATA_LOSS, f"malformed bytecode module: {message}")


def _invalid(message: str) -> StatusError:
    return StatusError(StatusCode.INVALID_ARGUMENT, f"bytecode module: {message}")


def _str(value) -> str | None:
    """Debug information, only ever shown (through excerpt()): decoded leniently."""
    return None if value is None else bytes(value).decode("utf-8", errors="replace")


def _text(value, what: str) -> str | None:
    """A name, attribute or calling convention: printable UTF-8, else the module is
    corrupt (a damaged string length reads into the bytes that follow)."""
    if value is None:
        return None
    raw = bytes(value)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _data_loss(f"{what} `{excerpt(raw)}` is not valid UTF-8") from None
    if not text.isprintable():
        raise _data_loss(f"{what} `{excerpt(text)}` has unprintable characters")
    return text


def _items(getter, length: int, buffer_length: int) -> list:
    """Reads `length` vector elements; a length the buffer cannot hold is corruption."""
    if length < 0 or length * 4 > buffer_length:
        raise _data_loss(f"vector length {length} exceeds the buffer")
    return [getter(i) for i in range(length)]


class _Reader:
    def __init__(self, archive: Archive):
        self.archive = archive
        self.buf = archive.flatbuffer
        self.size = len(archive.flatbuffer)

    def vec(self, table, name: str) -> list:
        return _items(getattr(table, name), getattr(table, name + "Length")(), self.size)

    def attrs(self, table) -> dict:
        if table is None:
            return {}
        return {_text(a.Key(), "attribute name") or "": _text(a.Value(), "attribute value") or ""
                for a in self.vec(table, "Attrs")}

    def signature(self, table) -> Signature:
        if table is None:
            return Signature(None, {})
        return Signature(_text(table.CallingConvention(), "calling convention"),
                         self.attrs(table))

    def byte_vector(self, table, name: str) -> memoryview:
        if getattr(table, name + "IsNone")():
            return memoryview(b"")
        length = getattr(table, name + "Length")()
        if length < 0 or length > self.size:
            raise _data_loss(f"{name} length {length} exceeds the buffer")
        array = getattr(table, name + "AsNumpy")()
        return memoryview(array).toreadonly() if length else memoryview(b"")

    def rodata(self, segment) -> memoryview:
        if segment.CompressionTypeType() not in (fb.CompressionTypeDef.NONE,
                                                 fb.CompressionTypeDef.UncompressedDataDef):
            raise _invalid(f"unsupported rodata compression type {segment.CompressionTypeType()}")
        if not segment.EmbeddedDataIsNone():
            return self.byte_vector(segment, "EmbeddedData")
        offset, length = segment.ExternalDataOffset(), segment.ExternalDataLength()
        start = self.archive.rodata_offset + offset
        if start + length > len(self.archive.data):
            raise _data_loss(f"external rodata [{offset}, +{length}) lies outside the archive "
                             f"({len(self.archive.data)} bytes)")
        return self.archive.data[start:start + length].toreadonly()

    def location_text(self, db, index: int, depth: int = 0) -> str:
        if depth > _MAX_LOCATION_DEPTH or not 0 <= index < db.LocationTableLength():
            return "?"
        tag = db.LocationTableType(index)
        table_type = _LOCATION_TABLES.get(tag)
        if table_type is None:
            return "?"
        entry = table_type()
        entry.Init(self.buf, db.LocationTable(index)._tab.Pos)
        if tag == fb.LocationTypeTag.FileLineColLocDef:
            return f"{excerpt(_str(entry.Filename()) or '')}:{entry.Line()}:{entry.Column()}"
        if tag == fb.LocationTypeTag.NameLocDef:
            child = self.location_text(db, entry.ChildLocation(), depth + 1)
            return f"\"{excerpt(_str(entry.Name()) or '')}\"({child})"
        if tag == fb.LocationTypeTag.CallSiteLocDef:
            return (f"{self.location_text(db, entry.Callee(), depth + 1)} called from "
                    f"{self.location_text(db, entry.Caller(), depth + 1)}")
        children = _items(entry.Locations, entry.LocationsLength(), self.size)
        return "fused[" + ", ".join(self.location_text(db, c, depth + 1) for c in children) + "]"

    def debug(self, db) -> DebugInfo:
        info = DebugInfo()
        if db is None:
            return info
        if db.LocationTableTypeLength() != db.LocationTableLength():
            raise _data_loss("debug location table type/value vectors differ in length")
        for source_map in self.vec(db, "Functions"):
            info.function_names.append(_str(source_map.LocalName()))
            pairs = self.vec(source_map, "Locations")
            info.locations.append(sorted((p.BytecodeOffset(), p.Location()) for p in pairs))
        # Render each referenced location table entry once.
        cache = {}
        for i, pairs in enumerate(info.locations):
            rendered = []
            for offset, index in pairs:
                if index not in cache:
                    cache[index] = self.location_text(db, index)
                rendered.append((offset, cache[index]))
            info.locations[i] = rendered
        return info


def _read(archive: Archive) -> ModuleDef:
    reader = _Reader(archive)
    if not fb.BytecodeModuleDef.BytecodeModuleDefBufferHasIdentifier(reader.buf, 0):
        raise _invalid("FlatBuffer file identifier is not 'IREE'")
    root = fb.BytecodeModuleDef.GetRootAs(reader.buf, 0)
    name = _text(root.Name(), "module name")
    if not name:
        raise _invalid("module has no name")
    state = root.ModuleState()
    descriptors = [
        FunctionDescriptor(d.BytecodeOffset(), d.BytecodeLength(), d.Requirements(),
                           d.BlockCount(), d.I32RegisterCount(), d.RefRegisterCount())
        for d in reader.vec(root, "FunctionDescriptors")
    ]
    return ModuleDef(
        name=name,
        version=root.Version(),
        requirements=root.Requirements(),
        attrs=reader.attrs(root),
        types=[_text(t.FullName(), f"type {n} name") or ""
               for n, t in enumerate(reader.vec(root, "Types"))],
        dependencies=[Dependency(_text(d.Name(), f"dependency {n} name") or "",
                                 d.MinimumVersion(),
                                 bool(d.Flags() & fb.ModuleDependencyFlagBits.OPTIONAL))
                      for n, d in enumerate(reader.vec(root, "Dependencies"))],
        imports=[ImportDef(_text(i.FullName(), f"import {n} name") or "",
                           reader.signature(i.Signature()),
                           bool(i.Flags() & fb.ImportFlagBits.OPTIONAL))
                 for n, i in enumerate(reader.vec(root, "ImportedFunctions"))],
        exports=[ExportDef(_text(e.LocalName(), f"export {n} name") or "", e.InternalOrdinal())
                 for n, e in enumerate(reader.vec(root, "ExportedFunctions"))],
        signatures=[reader.signature(s) for s in reader.vec(root, "FunctionSignatures")],
        descriptors=descriptors,
        rodata=[reader.rodata(s) for s in reader.vec(root, "RodataSegments")],
        global_bytes=state.GlobalBytesCapacity() if state else 0,
        global_ref_count=state.GlobalRefCount() if state else 0,
        bytecode_version=root.BytecodeVersion(),
        bytecode=reader.byte_vector(root, "BytecodeData"),
        debug=reader.debug(root.DebugDatabase()),
    )


def _check_version(version: int) -> None:
    major, minor = version >> 16, version & 0xFFFF
    if major != opcodes.BYTECODE_VERSION_MAJOR or minor > opcodes.BYTECODE_VERSION_MINOR:
        raise _invalid(f"bytecode version mismatch; runtime supports "
                       f"{opcodes.BYTECODE_VERSION_MAJOR}.{opcodes.BYTECODE_VERSION_MINOR}, "
                       f"module has {major}.{minor}")


def _check_features(what: str, bits: int) -> None:
    if bits & ~opcodes.SUPPORTED_FEATURES:
        raise _invalid(f"{what} requires unsupported features 0x{bits:08X} "
                       f"(runtime has 0x{opcodes.SUPPORTED_FEATURES:08X})")


def _check(module: ModuleDef) -> None:
    _check_features(f"module `{module.name}`", module.requirements)
    if any(not t for t in module.types):
        raise _invalid("type definition has no name")
    if len(module.signatures) != len(module.descriptors):
        raise _invalid(f"{len(module.signatures)} function signatures for "
                       f"{len(module.descriptors)} function descriptors")
    for i, d in enumerate(module.descriptors):
        _check_features(f"function {i}", d.requirements)
        if d.bytecode_offset < 0 or d.bytecode_length < 1 or \
                d.bytecode_offset + d.bytecode_length > len(module.bytecode):
            raise _data_loss(f"function {i} bytecode [{d.bytecode_offset}, +{d.bytecode_length}) "
                             f"outside the {len(module.bytecode)}-byte bytecode data")
        if d.i32_register_count < 0 or d.ref_register_count < 0 or d.block_count < 1 or \
                d.i32_registers > I32_REGISTER_MASK or d.ref_registers > REF_REGISTER_MASK:
            raise _data_loss(f"function {i} has invalid register/block counts")
    for e in module.exports:
        if not 0 <= e.internal_ordinal < len(module.descriptors):
            raise _data_loss(f"export `{e.name}` internal ordinal {e.internal_ordinal} out of range")
        if module.signatures[e.internal_ordinal].cconv is None:
            raise _invalid(f"export `{e.name}` has no calling convention")
    if not 0 <= module.global_bytes <= MAX_RWDATA_BYTES:
        raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                          f"module global storage of {module.global_bytes} bytes is not supported")
    if not 0 <= module.global_ref_count <= MAX_GLOBAL_REFS:
        raise StatusError(StatusCode.RESOURCE_EXHAUSTED,
                          f"module global ref count {module.global_ref_count} is not supported")


def load_module_def(archive: Archive) -> ModuleDef:
    """Reads and checks the module FlatBuffer of `archive`."""
    try:
        module = _read(archive)
    except StatusError:
        raise
    except (IndexError, struct.error, ValueError, TypeError, OverflowError, AttributeError) as e:
        raise _data_loss(f"FlatBuffer read failed ({type(e).__name__}: {e})") from None
    _check_version(module.bytecode_version)
    _check(module)
    return module
