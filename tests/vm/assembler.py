"""A tiny test-only bytecode assembler: builds .vmfb FlatBuffers by hand so tests can
reach opcodes the compiler never emits and craft malformed modules."""
import struct

import flatbuffers

from hal_driver.vm import opcodes
from hal_driver.vm.generated import bytecode_module_def_generated as fb

REF = 0x8000
MOVE = 0x4000
IMPORT = 0x80000000
VERSION_17_0 = 17 << 16


def ref(index: int, move: bool = False) -> int:
    return REF | (MOVE if move else 0) | index


_OPS = {}
for _prefix, _table in ((None, opcodes.CORE_OPS), (opcodes.PREFIX_EXT_F32, opcodes.EXT_F32_OPS),
                        (opcodes.PREFIX_EXT_F64, opcodes.EXT_F64_OPS)):
    for _code, _info in _table.items():
        _OPS[_info.mnemonic] = (_prefix, _code, _info.fields)


class Function:
    """Bytecode of one function. `op(mnemonic, *fields)` encodes fields in the
    opcodes.py order; branch targets are label names resolved at `bytes()`."""

    def __init__(self):
        self.code = bytearray()
        self.labels = {}
        self.fixups = []

    def block(self, label: str) -> "Function":
        self.labels[label] = len(self.code)
        self.code.append(opcodes.BLOCK_MARKER)
        return self

    def raw(self, data: bytes) -> "Function":
        self.code += data
        return self

    def _align(self):
        if len(self.code) & 1:
            self.code.append(0)

    def _u16_list(self, items):
        self._align()
        self.code += struct.pack(f"<H{len(items)}H", len(items), *items)

    def _target(self, label):
        self.fixups.append((len(self.code), label))
        self.code += b"\0\0\0\0"

    def _remap(self, pairs):
        self._align()
        self.code += struct.pack("<H", len(pairs))
        for src, dst in pairs:
            self.code += struct.pack("<HH", src, dst)

    def op(self, mnemonic: str, *values) -> "Function":
        prefix, code, kinds = _OPS[mnemonic]
        if prefix is not None:
            self.code.append(prefix)
        self.code.append(code)
        assert len(values) == len(kinds), (mnemonic, kinds)
        for kind, value in zip(kinds, values):
            if kind in ("i", "I", "f", "F", "r", "R"):
                self.code += struct.pack("<H", value)
            elif kind in ("g4", "g8", "gr", "ro", "ty", "fn"):
                self.code += struct.pack("<I", value)
            elif kind == "k4":
                self.code += struct.pack("<i", value)
            elif kind == "k8":
                self.code += struct.pack("<q", value)
            elif kind == "kf":
                self.code += struct.pack("<f", value)
            elif kind == "kF":
                self.code += struct.pack("<d", value)
            elif kind == "s":
                self.code += struct.pack("<H", len(value)) + value.encode()
            elif kind.startswith("L"):
                self._u16_list(value)
            elif kind == "b":
                self._target(value)
            elif kind == "m":
                self._remap(value)
            elif kind == "T":
                self.code += struct.pack("<H", len(value))
                for label, pairs in value:
                    self._target(label)
                    self._remap(pairs)
        return self

    def __bytes__(self) -> bytes:
        code = bytearray(self.code)
        for at, label in self.fixups:
            code[at:at + 4] = struct.pack("<I", self.labels.get(label, 0xFFFFFF))
        return bytes(code)


def build_module(functions, *, name="test", exports=None, imports=(), types=("i32",), rodata=(),
                 global_bytes=0, global_refs=0, requirements=None, version=VERSION_17_0,
                 blocks=None) -> bytes:
    """functions: list of (cconv, Function or bytes, i32 registers, ref registers,
    requirement bits). exports: {name: internal ordinal} (default: each function as
    f<ordinal>). imports: [(full name, cconv)]. Returns a size-prefixed FlatBuffer."""
    b = flatbuffers.Builder(1024)
    codes = [bytes(f[1]) for f in functions]
    data = bytearray()
    offsets = []
    for code in codes:
        offsets.append(len(data))
        data += code + b"\0" * (-len(code) % 8)
    exports = {f"f{i}": i for i in range(len(functions))} if exports is None else exports

    def string(text):
        return b.CreateString(text)

    def vector(start, items):
        start(b, len(items))
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return b.EndVector()

    def signature(cconv):
        s = string(cconv)
        fb.FunctionSignatureDefStart(b)
        fb.FunctionSignatureDefAddCallingConvention(b, s)
        return fb.FunctionSignatureDefEnd(b)

    type_offsets = []
    for t in types:
        s = string(t)
        fb.TypeDefStart(b)
        fb.TypeDefAddFullName(b, s)
        type_offsets.append(fb.TypeDefEnd(b))
    import_offsets = []
    for full_name, cconv in imports:
        s, sig = string(full_name), signature(cconv)
        fb.ImportFunctionDefStart(b)
        fb.ImportFunctionDefAddFullName(b, s)
        fb.ImportFunctionDefAddSignature(b, sig)
        import_offsets.append(fb.ImportFunctionDefEnd(b))
    export_offsets = []
    for export_name, ordinal in exports.items():
        s = string(export_name)
        fb.ExportFunctionDefStart(b)
        fb.ExportFunctionDefAddLocalName(b, s)
        fb.ExportFunctionDefAddInternalOrdinal(b, ordinal)
        export_offsets.append(fb.ExportFunctionDefEnd(b))
    signature_offsets = [signature(f[0]) for f in functions]
    rodata_offsets = []
    for segment in rodata:
        bytes_vector = b.CreateByteVector(segment)
        fb.RodataSegmentDefStart(b)
        fb.RodataSegmentDefAddEmbeddedData(b, bytes_vector)
        rodata_offsets.append(fb.RodataSegmentDefEnd(b))
    fb.ModuleStateDefStart(b)
    fb.ModuleStateDefAddGlobalBytesCapacity(b, global_bytes)
    fb.ModuleStateDefAddGlobalRefCount(b, global_refs)
    state = fb.ModuleStateDefEnd(b)
    bytecode = b.CreateByteVector(bytes(data))
    fb.BytecodeModuleDefStartFunctionDescriptorsVector(b, len(functions))
    for i in reversed(range(len(functions))):
        cconv, _, i32_count, ref_count, *rest = functions[i]
        block_count = (blocks or {}).get(i, max(1, codes[i].count(bytes([opcodes.BLOCK_MARKER])) and
                                                _count_blocks(functions[i][1])))
        fb.CreateFunctionDescriptor(b, offsets[i], len(codes[i]), rest[0] if rest else 0, 0,
                                    block_count, i32_count, ref_count)
    descriptors = b.EndVector()
    name_offset = string(name)
    vectors = {
        "types": vector(fb.BytecodeModuleDefStartTypesVector, type_offsets),
        "imports": vector(fb.BytecodeModuleDefStartImportedFunctionsVector, import_offsets),
        "exports": vector(fb.BytecodeModuleDefStartExportedFunctionsVector, export_offsets),
        "signatures": vector(fb.BytecodeModuleDefStartFunctionSignaturesVector, signature_offsets),
        "rodata": vector(fb.BytecodeModuleDefStartRodataSegmentsVector, rodata_offsets),
    }
    if requirements is None:
        requirements = 0
        for f in functions:
            requirements |= f[4] if len(f) > 4 else 0
    fb.BytecodeModuleDefStart(b)
    fb.BytecodeModuleDefAddName(b, name_offset)
    fb.BytecodeModuleDefAddRequirements(b, requirements)
    fb.BytecodeModuleDefAddTypes(b, vectors["types"])
    fb.BytecodeModuleDefAddImportedFunctions(b, vectors["imports"])
    fb.BytecodeModuleDefAddExportedFunctions(b, vectors["exports"])
    fb.BytecodeModuleDefAddFunctionSignatures(b, vectors["signatures"])
    fb.BytecodeModuleDefAddRodataSegments(b, vectors["rodata"])
    fb.BytecodeModuleDefAddModuleState(b, state)
    fb.BytecodeModuleDefAddFunctionDescriptors(b, descriptors)
    fb.BytecodeModuleDefAddBytecodeVersion(b, version)
    fb.BytecodeModuleDefAddBytecodeData(b, bytecode)
    b.FinishSizePrefixed(fb.BytecodeModuleDefEnd(b), b"IREE")
    return bytes(b.Output())


def _count_blocks(function) -> int:
    return len(function.labels) if isinstance(function, Function) else 1
