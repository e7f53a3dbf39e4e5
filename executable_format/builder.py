"""Building npu-fb executables: ProgramBuilder (instructions) and ExecutableBuilder.

    p = ProgramBuilder()
    p.emit("dma.load", dtype="f32", binding=0, dram_offset=0, sram_addr=0, n0=1, ...)
    p.end()
    b = ExecutableBuilder(machine=MachineConfig())
    b.add_export("conv", bindings=[(READ_ONLY, 4096), (0, 4096)], program=p)
    data = b.finish()            # verified npu-fb bytes

The bytes are a function of what was added (the machine, the constant pool, the exports
in order), not of the order of the calls, so asm(disasm(x)) rebuilds x exactly.
"""
from dataclasses import dataclass, field

import flatbuffers
import numpy as np

from .cost import Roofline
from .errors import FormatError
from .generated import npu_executable_generated as fb
from .isa import (CONST_POOL, DTYPE_NAMES, DTYPES_BY_NAME, ENGINE_NAMES, F32_FIELDS,
                  INSTRUCTION_DTYPE, OPCODE_FLAGS, OPCODES, OPCODES_BY_NAME, OPERAND_COUNT,
                  PAIR_FIELDS, UNUSED_FIELDS, DType, f32_bits, pack_pair)
from .machine import DEFAULT_MACHINE, MachineConfig
from .ranges import instruction_accesses, program_accesses
from .scalars import encode_value
from .verifier import verify
from .version import FILE_IDENTIFIER, VERSION_MAJOR, VERSION_MINOR

READ_ONLY = fb.BindingFlags.ReadOnly          # binding flag: the program never stores to it
CONSTANT_ALIGNMENT = 64                       # add_constants offsets are multiples of this
INSTRUCTION_ALIGNMENT = 16                    # the schema's force_align of instructions
DEBUG_KEYS = ("dispatch_name", "source_location", "npu_ir")
# Fields emit() fills with 0 when not given: bias (used only with the bias flag) and
# vcvt's scale (0 means 1.0). Every other field the opcode reads must be given.
OPTIONAL_FIELDS = frozenset({"bias", "scale"})
_ENGINES_BY_NAME = {name: engine for engine, name in ENGINE_NAMES.items()}


# An instruction's operand past 32 bits (a DRAM offset past 4 GiB, a count past 2^32): a
# record cannot hold it.
RECORD_OVERFLOW = "operands do not fit the record"


class ProgramBuilder:
    """A program: 64-byte instruction records in program order, ending with end()."""

    def __init__(self, sram_bytes: int | None = None):
        # None: the program declares the highest SRAM byte its instructions touch.
        self.sram_bytes = sram_bytes
        self._records: list[bytes] = []

    @property
    def instruction_count(self) -> int:
        return len(self._records)

    def emit(self, opcode: str, dtype: str | int = "f32", flags: int | str = 0,
             **fields) -> int:
        """Appends one instruction with operands by field name (isa.OPCODES); returns its
        index. dtype by name; flags as bits or names ("accumulate|bias"); pairs as (low,
        high); p0/p1/scale as numbers; fill's value as a number of the dtype; binding as
        an index or "const"; engine and src_dtype by name or value."""
        info = OPCODES_BY_NAME.get(opcode)
        if info is None:
            raise FormatError(f"unknown opcode {opcode!r}")
        dtype_code = _dtype(dtype)
        a = [0] * OPERAND_COUNT
        unused = UNUSED_FIELDS.get(opcode, ())
        for name in fields:
            if name not in info.fields or name in unused:
                raise FormatError(f"{opcode} has no field {name!r}")
        for slot, name in enumerate(info.fields):
            if name in fields:
                a[slot] = _field_value(opcode, name, fields[name], dtype_code)
            elif name not in unused and name not in OPTIONAL_FIELDS:
                raise FormatError(f"{opcode} needs field {name!r}")
        return self.emit_raw(info.code, dtype_code, _flags(opcode, flags), a)

    def emit_raw(self, opcode: int, dtype: int, flags: int, a) -> int:
        """Appends one record as given (operands a[0..14], missing ones zero)."""
        if opcode not in OPCODES or dtype not in DTYPE_NAMES:
            raise FormatError(f"cannot encode opcode {opcode} dtype {dtype}")
        values = list(a) + [0] * (OPERAND_COUNT - len(a))
        if len(values) != OPERAND_COUNT or not 0 <= flags < 1 << 16 or \
                not all(0 <= v < 1 << 32 for v in values):
            raise FormatError(f"{OPCODES[opcode].name}: {RECORD_OVERFLOW}")
        record = _record(opcode, dtype, flags, values)
        self._records.append(record)
        return len(self._records) - 1

    def append_records(self, records: np.ndarray) -> None:
        """Appends whole isa.INSTRUCTION_DTYPE records (another program's, relocated: the
        compiler's linker). Their fields are checked when finish() verifies the executable,
        not one by one as emit_raw does."""
        if records.dtype != INSTRUCTION_DTYPE:
            raise FormatError("records are not isa.INSTRUCTION_DTYPE")
        data = records.tobytes()
        size = INSTRUCTION_DTYPE.itemsize
        self._records += [data[i:i + size] for i in range(0, len(data), size)]

    def end(self) -> int:
        return self.emit("end")

    def instructions(self) -> bytes:
        return b"".join(self._records)

    def declared_sram_bytes(self) -> int:
        """sram_bytes if given, else the highest SRAM byte the instructions touch, which
        must fit the schema's uint (FormatError naming the instruction otherwise)."""
        if self.sram_bytes is not None:
            return self.sram_bytes
        records = np.frombuffer(self.instructions(), dtype=INSTRUCTION_DTYPE)
        sram = [x for x in program_accesses(records) if x.memory == "sram" and len(x.rows)]
        highest = max((int(x.end.max()) for x in sram), default=0)
        if highest < 1 << 32:
            return highest
        index = min(int(x.rows[np.asarray(x.end >= 1 << 32, dtype=bool)].min())
                    for x in sram if x.end.max() >= 1 << 32)
        opcode, dtype, flags, a = (int(records["opcode"][index]), int(records["dtype"][index]),
                                   int(records["flags"][index]), records["a"][index].tolist())
        access = next(x for x in instruction_accesses(opcode, dtype, flags, a)
                      if x.memory == "sram" and x.end >= 1 << 32)
        raise FormatError(f"instruction {index} ({OPCODES[opcode].name}): SRAM range "
                          f"[{access.start}, {access.end}) of {access.operand} exceeds the "
                          "32-bit SRAM address space")


def _record(opcode: int, dtype: int, flags: int, a: list[int]) -> bytes:
    record = np.zeros(1, dtype=INSTRUCTION_DTYPE)
    record["opcode"], record["dtype"], record["flags"] = opcode, dtype, flags
    record["a"][0] = a
    return record.tobytes()


def _dtype(dtype) -> int:
    if isinstance(dtype, str):
        if dtype not in DTYPES_BY_NAME:
            raise FormatError(f"unknown dtype {dtype!r}")
        return int(DTYPES_BY_NAME[dtype])
    return int(dtype)


def _flags(opcode: str, flags) -> int:
    if not isinstance(flags, str):
        return int(flags)
    names = OPCODE_FLAGS.get(opcode, {})
    bits = 0
    for name in filter(None, flags.split("|")):
        if name.strip() not in names:
            raise FormatError(f"{opcode} has no flag {name.strip()!r}")
        bits |= names[name.strip()]
    return bits


def _field_value(opcode: str, name: str, value, dtype: int) -> int:
    if name in PAIR_FIELDS and isinstance(value, tuple):
        return pack_pair(*value)
    if name in F32_FIELDS:
        return f32_bits(value)
    if opcode == "fill" and name == "value":
        return encode_value(DType(dtype), value)
    if name == "binding" and value == "const":
        return CONST_POOL
    if name == "engine" and isinstance(value, str):
        if value not in _ENGINES_BY_NAME:
            raise FormatError(f"unknown engine {value!r}")
        return int(_ENGINES_BY_NAME[value])
    if name == "src_dtype" and isinstance(value, str):
        return _dtype(value)
    return int(value)


@dataclass
class _Export:
    name: str
    bindings: list[tuple[int, int]]
    constant_count: int
    program: ProgramBuilder
    workgroup_count: tuple[int, int, int]
    debug: dict = field(default_factory=dict)
    views: list[tuple[int, int, int, int, int, int, int]] = field(default_factory=list)
    roofline: Roofline | None = None
    parametric: tuple[str, tuple[int, ...]] | None = None


class ExecutableBuilder:
    """Collects the machine, the constant pool and the exports; finish() serializes."""

    def __init__(self, machine: MachineConfig = DEFAULT_MACHINE,
                 version: tuple[int, int] = (VERSION_MAJOR, VERSION_MINOR)):
        self.machine = machine
        self.version = version
        self._constants = bytearray()
        self._exports: list[_Export] = []

    def add_constants(self, data: bytes) -> int:
        """Appends `data` to the constant pool at a 64-byte aligned offset; returns it."""
        offset = -(-len(self._constants) // CONSTANT_ALIGNMENT) * CONSTANT_ALIGNMENT
        self._constants.extend(bytes(offset - len(self._constants)))
        self._constants.extend(data)
        return offset

    def add_export(self, name: str, bindings, constant_count: int = 0,
                   program: ProgramBuilder | None = None, workgroup_count=(1, 1, 1),
                   debug: dict | None = None, views=(), roofline: Roofline | None = None,
                   parametric: tuple[str, tuple[int, ...]] | None = None) -> int:
        """Adds an export; `bindings` is [(flags, min_size)]; returns its ordinal. `debug`
        may hold dispatch_name, source_location, npu_ir strings. `views` is
        [(binding, offset_constant, min_size[, offset_scale[, offset_base[, step_constant,
        step_scale]]])]: windows of the bindings at byte offset_base (default 0) + push
        constant x offset_scale (default 1) + push constant step_constant x step_scale
        (default none), which instructions name as binding len(bindings) + k. `roofline`:
        the dispatch's true roofline (cost.Roofline), which the device reports cycles
        against. `parametric`: (source, dim_constants) of a dispatch the device
        specialises for its extents at dispatch time; its program is a lone `end`."""
        if program is None:
            raise FormatError(f"export {name!r} needs a program")
        debug = {key: value for key, value in (debug or {}).items() if value is not None}
        for key in debug:
            if key not in DEBUG_KEYS:
                raise FormatError(f"unknown debug field {key!r} (known: {', '.join(DEBUG_KEYS)})")
        self._exports.append(_Export(name, [(int(f), int(s)) for f, s in bindings],
                                     int(constant_count), program,
                                     tuple(int(n) for n in workgroup_count), debug,
                                     [_view(*view) for view in views], roofline,
                                     _parametric(parametric)))
        return len(self._exports) - 1

    def finish(self, verify_output: bool = True) -> bytes:
        """The npu-fb bytes, verified (verify_output=False only for tests that need
        malformed buffers)."""
        builder = flatbuffers.Builder(4096)
        constants = _aligned_bytes(builder, bytes(self._constants), CONSTANT_ALIGNMENT)
        exports = [_build_export(builder, ordinal, export)
                   for ordinal, export in enumerate(self._exports)]
        params = [_build_param(builder, key, value)
                  for key, value in self.machine.as_dict().items()]
        machine = _table_vector(builder, params)
        export_vector = _table_vector(builder, exports)
        fb.ExecutableStart(builder)
        fb.ExecutableAddVersionMajor(builder, self.version[0])
        fb.ExecutableAddVersionMinor(builder, self.version[1])
        fb.ExecutableAddMachine(builder, machine)
        fb.ExecutableAddExports(builder, export_vector)
        fb.ExecutableAddConstants(builder, constants)
        builder.Finish(fb.ExecutableEnd(builder), file_identifier=FILE_IDENTIFIER)
        data = bytes(builder.Output())
        if verify_output:
            verify(data)
        return data


def _aligned_bytes(builder, data: bytes, alignment: int) -> int:
    """A [ubyte] vector whose data starts at a multiple of `alignment` (force_align)."""
    builder.StartVector(1, len(data), alignment)
    builder.head -= len(data)
    builder.Bytes[builder.head:builder.head + len(data)] = data
    return builder.EndVector()


def _uint_vector(builder, values) -> int:
    builder.StartVector(4, len(values), 4)
    for value in reversed(values):
        builder.PrependUint32(value)
    return builder.EndVector()


def _table_vector(builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _build_param(builder, key: str, value: int) -> int:
    key_offset = builder.CreateString(key)
    fb.MachineParamStart(builder)
    fb.MachineParamAddKey(builder, key_offset)
    fb.MachineParamAddValue(builder, value)
    return fb.MachineParamEnd(builder)


def _build_export(builder, ordinal: int, export: _Export) -> int:
    name = builder.CreateString(export.name)
    bindings = []
    for flags, min_size in export.bindings:
        fb.BindingStart(builder)
        fb.BindingAddFlags(builder, flags)
        fb.BindingAddMinSize(builder, min_size)
        bindings.append(fb.BindingEnd(builder))
    binding_vector = _table_vector(builder, bindings)
    view_vector = _build_views(builder, export.views) if export.views else None
    roofline = _build_roofline(builder, export.roofline) if export.roofline else None
    parametric = _build_parametric(builder, *export.parametric) if export.parametric else None
    workgroups = _uint_vector(builder, export.workgroup_count)
    program = _build_program(builder, ordinal, export.program)
    debug = _build_debug(builder, export.debug) if export.debug else None
    fb.ExportStart(builder)
    fb.ExportAddName(builder, name)
    fb.ExportAddOrdinal(builder, ordinal)
    fb.ExportAddBindings(builder, binding_vector)
    fb.ExportAddConstantCount(builder, export.constant_count)
    fb.ExportAddWorkgroupCount(builder, workgroups)
    fb.ExportAddProgram(builder, program)
    if debug is not None:
        fb.ExportAddDebug(builder, debug)
    if view_vector is not None:
        fb.ExportAddViews(builder, view_vector)
    if roofline is not None:
        fb.ExportAddRoofline(builder, roofline)
    if parametric is not None:
        fb.ExportAddParametric(builder, parametric)
    return fb.ExportEnd(builder)


def _parametric(parametric) -> tuple[str, tuple[int, ...]] | None:
    if parametric is None:
        return None
    source, dim_constants = parametric
    return str(source), tuple(int(c) for c in dim_constants)


def _build_parametric(builder, source: str, dim_constants: tuple[int, ...]) -> int:
    source_offset = builder.CreateString(source)
    constants = _uint_vector(builder, dim_constants)
    fb.ParametricStart(builder)
    fb.ParametricAddSource(builder, source_offset)
    fb.ParametricAddDimConstants(builder, constants)
    return fb.ParametricEnd(builder)


def _build_roofline(builder, roofline: Roofline) -> int:
    fb.RooflineStart(builder)
    fb.RooflineAddUsefulMacs(builder, roofline.useful_macs)
    fb.RooflineAddMacDtype(builder, _dtype(roofline.mac_dtype))
    fb.RooflineAddReadBytes(builder, roofline.read_bytes)
    fb.RooflineAddWriteBytes(builder, roofline.write_bytes)
    return fb.RooflineEnd(builder)


def _view(binding, offset_constant, min_size, offset_scale=1, offset_base=0, step_constant=0,
          step_scale=0) -> tuple[int, int, int, int, int, int, int]:
    return (int(binding), int(offset_constant), int(min_size), int(offset_scale),
            int(offset_base), int(step_constant), int(step_scale))


def _build_views(builder, views: list[tuple[int, int, int, int, int, int, int]]) -> int:
    tables = []
    for (binding, offset_constant, min_size, offset_scale, offset_base, step_constant,
         step_scale) in views:
        fb.BindingViewStart(builder)
        fb.BindingViewAddBinding(builder, binding)
        fb.BindingViewAddOffsetConstant(builder, offset_constant)
        fb.BindingViewAddMinSize(builder, min_size)
        if offset_scale != 1:
            fb.BindingViewAddOffsetScale(builder, offset_scale)
        if offset_base:
            fb.BindingViewAddOffsetBase(builder, offset_base)
        if step_scale:
            fb.BindingViewAddStepConstant(builder, step_constant)
            fb.BindingViewAddStepScale(builder, step_scale)
        tables.append(fb.BindingViewEnd(builder))
    return _table_vector(builder, tables)


def _build_program(builder, ordinal: int, program: ProgramBuilder) -> int:
    try:
        sram_bytes = program.declared_sram_bytes()
    except FormatError as error:
        raise FormatError(f"export {ordinal} {error}") from None
    instructions = _aligned_bytes(builder, program.instructions(), INSTRUCTION_ALIGNMENT)
    fb.ProgramStart(builder)
    fb.ProgramAddInstructions(builder, instructions)
    fb.ProgramAddSramBytes(builder, sram_bytes)
    return fb.ProgramEnd(builder)


def _build_debug(builder, debug: dict) -> int:
    strings = {key: builder.CreateString(debug[key]) for key in DEBUG_KEYS if key in debug}
    fb.ExportDebugStart(builder)
    if "dispatch_name" in strings:
        fb.ExportDebugAddDispatchName(builder, strings["dispatch_name"])
    if "source_location" in strings:
        fb.ExportDebugAddSourceLocation(builder, strings["source_location"])
    if "npu_ir" in strings:
        fb.ExportDebugAddNpuIr(builder, strings["npu_ir"])
    return fb.ExportDebugEnd(builder)
