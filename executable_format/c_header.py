"""Generates native/npu_isa.h, the NPU core's copy of the ISA, from isa.py (the one
source): opcodes, dtypes and their sizes, engines and their names, flag bits, the operand
layouts with an index per field (a[MATMUL_LDA]) and the fields' names, the opcode table
(name, engine, operand fields read, dtypes, flags, layout, transcendental) and the
per-instruction work bounds.

    python -m executable_format.c_header > native/npu_isa.h

tests/format/test_c_header.py fails when the committed header is stale.
"""
from .isa import (CONST_POOL, DTYPE_BYTES, DTYPE_NAMES, ELEMENTS_PER_SRAM_BYTE, ENGINE_NAMES,
                  FIELD_LAYOUTS, INSTRUCTION_BYTES, MACS_PER_SRAM_BYTE, OPCODE_FLAGS,
                  REQUANT_RECORD_BYTES, REQUANT_TABLE_MAX,
                  OPCODE_LIST, OPERAND_COUNT, TRANSCENDENTAL, UNUSED_FIELDS, DType, Engine,
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


def _layout(info: OpcodeInfo) -> str:
    return f"LAYOUT_{_c_name(info.layout or 'none')}"


def _layout_lines() -> list[str]:
    """The layout ids, an index per field of each layout (DMA_N0 = 3) and the names of
    each layout's fields."""
    lines = ["enum {", "  LAYOUT_NONE = 0,   /* end, barrier: no operands */"]
    lines += [f"  LAYOUT_{_c_name(name)}," for name in FIELD_LAYOUTS]
    lines += ["  LAYOUT_COUNT,", "};", ""]
    lines.append("enum {  /* operand field indices: a[MATMUL_LDA] */")
    for name, fields in FIELD_LAYOUTS.items():
        lines += [f"  {_c_name(name)}_{_c_name(field)} = {index},"
                  for index, field in enumerate(fields)]
    lines += ["};", "", "/* Field names by layout and index, for messages. */",
              "static const char* const LAYOUT_FIELDS[LAYOUT_COUNT][OPERAND_COUNT] = {"]
    for name, fields in FIELD_LAYOUTS.items():
        lines.append(f"  [LAYOUT_{_c_name(name)}] = {{")
        lines += _wrapped([f'"{f}"' for f in fields], "      ")
        lines.append("  },")
    return lines + ["};", ""]


def _wrapped(items: list[str], indent: str, width: int = 90) -> list[str]:
    """`items` comma-separated over lines of at most `width` characters."""
    lines = [indent]
    for item in items:
        if len(lines[-1]) + len(item) + 2 > width:
            lines.append(indent)
        lines[-1] += item + ", "
    return [line.rstrip() for line in lines]


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
    lines += [f"  ENGINE_CONTROL = {int(Engine.CONTROL)},", "};", "",
              "static const char* const ENGINE_NAMES[ENGINE_CONTROL + 1] = {",
              "  " + ", ".join(f'"{ENGINE_NAMES[e]}"' for e in Engine) + "};", "", "enum {"]
    lines += [f"  FLAG_{name} = {int(bit)}," for name, bit in Flag.__members__.items() if bit]
    lines += ["};", "",
              f"#define INSTRUCTION_BYTES {INSTRUCTION_BYTES}",
              f"#define OPERAND_COUNT {OPERAND_COUNT}",
              f"#define CONST_POOL 0x{CONST_POOL:X}u   /* binding index of the constant pool */",
              f"#define ELEMENTS_PER_SRAM_BYTE {ELEMENTS_PER_SRAM_BYTE}",
              f"#define MACS_PER_SRAM_BYTE {MACS_PER_SRAM_BYTE}",
              f"#define REQUANT_RECORD_BYTES {REQUANT_RECORD_BYTES}   /* vrequant's record */",
              f"#define REQUANT_TABLE_MAX {REQUANT_TABLE_MAX}",
              "#define DTM(d) (1u << (d))", ""]
    lines += _layout_lines()
    lines += ["typedef struct op_info_t {",
              "  const char* name;      /* NULL: not an opcode */",
              "  uint8_t engine;",
              "  uint8_t used_fields;   /* a[used_fields..14] must be zero */",
              "  uint8_t dtypes;        /* DTM mask */",
              "  uint16_t flags;        /* allowed flag bits */",
              "  uint8_t layout;        /* LAYOUT_*: the names of a[] */",
              "  uint8_t transcendental;  /* 1: vector cost times transcendental_factor */",
              "} op_info_t;", "",
              "static const op_info_t OPS[256] = {"]
    for info in OPCODE_LIST:
        lines.append(f'  [OP_{_c_name(info.name)}] = {{"{info.name}", '
                     f"ENGINE_{ENGINE_NAMES[info.engine].upper()}, {_used_fields(info)},")
        lines.append(f"      {_dtype_mask(info)}, {_flags(info)}, {_layout(info)}, "
                     f"{int(info.name in TRANSCENDENTAL)}}},")
    lines += ["};", "",
              "static const unsigned DTYPE_BYTES[DT_COUNT] = {"
              + ", ".join(str(DTYPE_BYTES[d]) for d in DType) + "};",
              "static const char* const DTYPE_NAMES[DT_COUNT] = {"
              + ", ".join(f'"{DTYPE_NAMES[d]}"' for d in DType) + "};", "",
              "#endif  /* NPU_ISA_H_ */", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(header(), end="")
