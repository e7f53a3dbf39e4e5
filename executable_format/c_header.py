"""Generates native/npu_isa.h, the NPU core's copy of the ISA, from isa.py (the one
source): opcodes, dtypes and their sizes, engines, flag bits, the opcode table (name,
engine, operand fields read, dtypes, flags) and the per-instruction work bounds.

    python -m executable_format.c_header > native/npu_isa.h

tests/format/test_c_header.py fails when the committed header is stale.
"""
from .isa import (DTYPE_BYTES, DTYPE_NAMES, ELEMENTS_PER_SRAM_BYTE, ENGINE_NAMES,
                  MACS_PER_SRAM_BYTE, OPCODE_FLAGS, OPCODE_LIST, UNUSED_FIELDS, DType, Engine,
                  Flag, OpcodeInfo)

COMMAND = "python -m executable_format.c_header > native/npu_isa.h"


def _c_name(name: str) -> str:
    return name.upper().replace(".", "_")


def _used_fields(info: OpcodeInfo) -> int:
    """Operand fields the opcode reads: its field list less the trailing fields it
    leaves unused (p0/p1 of the unary ops without parameters)."""
    unused = set(UNUSED_FIELDS.get(info.name, ()))
    count = len(info.fields)
    while count and info.fields[count - 1] in unused:
        count -= 1
    if any(field in unused for field in info.fields[:count]):
        raise ValueError(f"{info.name}: unused fields must be the last ones")
    return count


def _dtype_mask(info: OpcodeInfo) -> str:
    return " | ".join(f"DTM(DT_{DTYPE_NAMES[d].upper()})" for d in sorted(info.dtypes))


def _flags(info: OpcodeInfo) -> str:
    return f"0x{sum(int(bit) for bit in OPCODE_FLAGS.get(info.name, {}).values()):x}"


def header() -> str:
    lines = ["/* Generated from executable_format/isa.py: do not edit.",
             f" * Regenerate: {COMMAND} */",
             "#ifndef NPU_ISA_H_", "#define NPU_ISA_H_", "", "#include <stdint.h>", "",
             "enum {"]
    lines += [f"  OP_{_c_name(info.name)} = {info.code}," for info in OPCODE_LIST]
    lines += ["};", "", "enum {"]
    lines += [f"  DT_{DTYPE_NAMES[d].upper()} = {int(d)}," for d in DType]
    lines += [f"  DT_COUNT = {len(DType)},", "};", "", "enum {"]
    lines += [f"  ENGINE_{ENGINE_NAMES[e].upper()} = {int(e)}," for e in Engine if e != Engine.CONTROL]
    lines += [f"  ENGINE_CONTROL = {int(Engine.CONTROL)},", "};", "", "enum {"]
    lines += [f"  FLAG_{name} = {int(bit)}," for name, bit in Flag.__members__.items() if bit]
    lines += ["};", "",
              f"#define ELEMENTS_PER_SRAM_BYTE {ELEMENTS_PER_SRAM_BYTE}",
              f"#define MACS_PER_SRAM_BYTE {MACS_PER_SRAM_BYTE}",
              "#define DTM(d) (1u << (d))", "",
              "typedef struct op_info_t {",
              "  const char* name;      /* NULL: not an opcode */",
              "  uint8_t engine;",
              "  uint8_t used_fields;   /* a[used_fields..14] must be zero */",
              "  uint8_t dtypes;        /* DTM mask */",
              "  uint16_t flags;        /* allowed flag bits */",
              "} op_info_t;", "",
              "static const op_info_t OPS[256] = {"]
    for info in OPCODE_LIST:
        lines.append(f'  [OP_{_c_name(info.name)}] = {{"{info.name}", '
                     f"ENGINE_{ENGINE_NAMES[info.engine].upper()}, {_used_fields(info)},")
        lines.append(f"      {_dtype_mask(info)}, {_flags(info)}}},")
    lines += ["};", "",
              "static const unsigned DTYPE_BYTES[DT_COUNT] = {"
              + ", ".join(str(DTYPE_BYTES[d]) for d in DType) + "};",
              "static const char* const DTYPE_NAMES[DT_COUNT] = {"
              + ", ".join(f'"{DTYPE_NAMES[d]}"' for d in DType) + "};", "",
              "#endif  /* NPU_ISA_H_ */", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(header(), end="")
