"""disassemble(data): npu-fb bytes as canonical assembly text (asm.assemble reads it back).

The buffer is verified first. Each instruction line ends with a comment giving its index
(as verifier messages count), its engine and its cycles from cost.py.
"""
from .cost import instruction_cycles
from .isa import (CONST_POOL, DTYPE_NAMES, ENGINE_NAMES, F32_FIELDS, OPCODE_FLAGS, OPCODES,
                  PAIR_FIELDS, SRAM_ADDRESS_FIELDS, DType, Engine, unpack_pair, used_fields)
from .machine import DEFAULT_MACHINE, MachineConfig
from .reader import Export, read_executable
from .scalars import decode_value, format_float
from .syntax import (BINDING_FLAG_NAMES, COMMENT, CONSTANTS_PER_LINE, DEBUG_DIRECTIVES,
                     INDENT, format_name, quote)

_FLAG_NAME_OF_BITS = {bits: name for name, bits in BINDING_FLAG_NAMES.items()}
_FLOAT_DTYPES = (DType.F32, DType.F16, DType.BF16)


def disassemble(data) -> str:
    exe = read_executable(data)
    lines = [f".version {exe.version[0]}.{exe.version[1]}"]
    changed = [f"{key}={value}" for key, value in exe.machine.as_dict().items()
               if value != getattr(DEFAULT_MACHINE, key)]
    if changed:
        lines.append(".machine " + ", ".join(changed))
    for start in range(0, len(exe.constants), CONSTANTS_PER_LINE):
        lines.append(".constants hex " + exe.constants[start:start + CONSTANTS_PER_LINE].hex())
    for export in exe.exports:
        lines.append("")
        lines.extend(_export_lines(export, exe.machine))
    return "\n".join(lines) + "\n"


def _export_lines(export: Export, machine: MachineConfig) -> list[str]:
    bindings = ",".join(f"{_FLAG_NAME_OF_BITS[b.flags]}:{b.min_size}" for b in export.bindings)
    x, y, z = export.workgroup_count
    views = ",".join(f"{v.binding}+pc{v.offset_constant}"
                     f"{'' if v.offset_scale == 1 else f'*{v.offset_scale}'}"
                     f"{f'+pc{v.step_constant}*{v.step_scale}' if v.step_scale else ''}"
                     f"{f'{v.offset_base:+d}' if v.offset_base else ''}:{v.min_size}"
                     for v in export.views)
    lines = [f".export {format_name(export.name)} bindings=[{bindings}] "
             + (f"views=[{views}] " if views else "") +
             f"constant_count={export.constant_count} workgroup_count={x}x{y}x{z}"]
    if export.debug is not None:
        for key in DEBUG_DIRECTIVES:
            value = getattr(export.debug, key)
            if value is not None:
                lines.append(f".{key} {quote(value)}")
    if export.roofline is not None:
        r = export.roofline
        lines.append(f".roofline macs={r.useful_macs}, dtype={r.mac_dtype}, "
                     f"read={r.read_bytes}, write={r.write_bytes}")
    if export.parametric is not None:
        dims = ",".join(f"pc{ordinal}" for ordinal in export.parametric.dim_constants)
        lines.append(f".parametric dims={dims} {quote(export.parametric.source)}")
    lines.append(f".sram_bytes {export.program.sram_bytes}")
    records = export.program.records()
    for index, (opcode, dtype, flags, a) in enumerate(zip(
            records["opcode"].tolist(), records["dtype"].tolist(),
            records["flags"].tolist(), records["a"].tolist())):
        lines.append(f"{INDENT}{format_instruction(opcode, dtype, flags, a)}  {COMMENT} "
                     f"[{index}] {_annotation(machine, opcode, dtype, flags, a)}")
    return lines


def format_instruction(opcode: int, dtype: int, flags: int, a: list[int]) -> str:
    """One verified instruction record in canonical assembly (without comment)."""
    info = OPCODES[opcode]
    mnemonic = info.name
    if info.engine != Engine.CONTROL or dtype != DType.F32:
        mnemonic += "." + DTYPE_NAMES[DType(dtype)]
    operands = []
    if flags:
        names = [name for name, bit in OPCODE_FLAGS[info.name].items() if flags & bit]
        operands.append("flags=" + "|".join(names))
    values = dict(zip(info.fields, a))
    for name in used_fields(info.name):
        operands.append(f"{name}={_format_field(info.name, name, values[name], DType(dtype))}")
    return f"{mnemonic} {', '.join(operands)}" if operands else mnemonic


def _format_field(opcode: str, name: str, value: int, dtype: DType) -> str:
    if name == "binding":
        return "const" if value == CONST_POOL else str(value)
    if name == "engine" and opcode in ("signal", "wait"):
        return ENGINE_NAMES[Engine(value)]
    if name == "src_dtype":
        return DTYPE_NAMES[DType(value)]
    if name in PAIR_FIELDS:
        return "{}x{}".format(*unpack_pair(value))
    if name in F32_FIELDS:
        return format_float(DType.F32, value) or f"0x{value:x}"
    if opcode == "fill" and name == "value":
        if dtype in _FLOAT_DTYPES:
            return format_float(dtype, value) or f"0x{value:x}"
        return str(decode_value(dtype, value))
    if name in SRAM_ADDRESS_FIELDS:
        return f"0x{value:x}"
    return str(value)


def _annotation(machine: MachineConfig, opcode: int, dtype: int, flags: int,
                a: list[int]) -> str:
    info = OPCODES[opcode]
    if info.engine == Engine.CONTROL:
        return "control"
    cycles = instruction_cycles(machine, opcode, dtype, a, flags)
    return f"{ENGINE_NAMES[info.engine]}, {cycles} cycles"
