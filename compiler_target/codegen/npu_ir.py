"""The NPU IR: buffers, instructions, and their printing as MLIR generic form.

Every stage of NPU code generation works on these two records:

- `Buffer`: a tensor in a memory scope. DRAM buffers are the dispatch's bindings (or
  the executable's constant pool) seen through element strides; SRAM buffers are dense
  tiles at a fixed byte address of the scratchpad.
- `Instr`: one NPU instruction (an `executable_format.isa` opcode with named fields)
  plus the buffers it reads and writes, which is what scheduling needs to order engines.

The printed form is MLIR generic syntax with unregistered `npu.*` ops, so any MLIR
parser with unregistered dialects allowed can read it:

    "npu.dispatch"() ({
    ^bb0(%input: memref<1x3x500x500xf32, strided<[750000, 250000, 500, 1]>, #npu.mem<dram>>, ...):
      %in.0 = "npu.alloc"() {sram_range = array<i64: 0, 60000>} : () -> memref<3x10x500xf32, #npu.mem<sram>>
      "npu.dma.load"(%input, %in.0) {binding = 0 : i64, ...} : (memref<...>, memref<...>) -> ()
    }) {sym_name = "dispatch_0"} : () -> ()
"""
from dataclasses import dataclass, field

from executable_format.isa import DTYPE_BYTES, DTYPES_BY_NAME, Engine, ENGINE_NAMES, OPCODES_BY_NAME, Flag
from executable_format.cost import instruction_cycles
from executable_format.scalars import encode_value

DTYPES = DTYPES_BY_NAME


FLOATS = ("f32", "f16", "bf16")
MAC_DTYPES = ("f32", "f16", "bf16", "i8", "u8")


def mac_operands_supported(a_dtype: str, b_dtype: str) -> bool:
    """Whether the MAC array multiplies these operand dtypes: equal ones, i8 with u8, or
    an f32 A with an f16 B (fp16-stored weights)."""
    return a_dtype in MAC_DTYPES and (b_dtype == a_dtype or {a_dtype, b_dtype} == {"i8", "u8"}
                                      or (a_dtype, b_dtype) == ("f32", "f16"))


def mac_flags(a_dtype: str, b_dtype: str, narrow_sum: bool) -> int:
    """The operand flags of a MAC instruction whose dtype field is a's: HALF_B when B (the
    weights) is an f32 instruction's f16, MIXED_SIGN when it has the other byte
    signedness, NARROW_SUM when the sum is in the f16 or bf16 operand dtype."""
    operands = Flag.HALF_B if (a_dtype, b_dtype) == ("f32", "f16") else \
        Flag.MIXED_SIGN if a_dtype != b_dtype else 0
    return int(operands) | (int(Flag.NARROW_SUM) if narrow_sum else 0)


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES[DTYPES[dtype]]


def value_bits(dtype: str, value: float) -> int:
    """`value`'s bit pattern in `dtype` (a fill instruction's value field)."""
    return encode_value(DTYPES[dtype], value)


@dataclass(eq=False)
class Buffer:
    """A tensor in DRAM (binding + byte offset + element strides) or SRAM (dense at
    byte address `addr`). Identity matters: two Buffer objects are two buffers."""
    name: str
    dtype: str
    shape: tuple[int, ...]
    scope: str                                  # "dram" or "sram"
    addr: int = 0                               # sram: byte address
    binding: int = 0                            # dram: binding index or isa.CONST_POOL
    offset: int = 0                             # dram: byte offset
    strides: tuple[int, ...] = ()               # dram: element strides
    view_of: "Buffer | None" = None             # dram: the tensor this is a reshaped view of

    @property
    def size_bytes(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count * dtype_bytes(self.dtype)

    def mlir_type(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        element = f"{dims}x{self.dtype}" if self.shape else self.dtype
        if self.scope == "sram":
            return f"memref<{element}, #npu.mem<sram>>"
        strides = ", ".join(str(s) for s in self.strides)
        offset = self.offset // dtype_bytes(self.dtype)
        layout = f"strided<[{strides}], offset: {offset}>" if self.shape else \
            f"strided<[], offset: {offset}>"
        return f"memref<{element}, {layout}, #npu.mem<dram>>"


@dataclass(eq=False)
class Instr:
    """One NPU instruction: opcode name (isa.OPCODES_BY_NAME), dtype, flags and named
    operand fields, with the buffers it reads and writes. `note` says which tile it
    belongs to; it is printed, never encoded."""
    op: str
    dtype: str = "f32"
    fields: dict[str, int] = field(default_factory=dict)
    flags: int = 0
    reads: tuple[Buffer, ...] = ()
    writes: tuple[Buffer, ...] = ()
    note: str = ""

    @property
    def engine(self) -> Engine:
        info = OPCODES_BY_NAME[self.op]
        if info.engine == Engine.CONTROL and "engine" in self.fields:
            return Engine(self.fields["engine"])
        return info.engine

    @property
    def engine_name(self) -> str:
        return ENGINE_NAMES[self.engine]


def encode(instr: Instr) -> tuple[int, int, int, list[int]]:
    """The isa record (opcode, dtype, flags, a[15]) of an instruction."""
    info = OPCODES_BY_NAME[instr.op]
    unknown = set(instr.fields) - set(info.fields)
    if unknown:
        raise ValueError(f"{instr.op} has no fields {sorted(unknown)}")
    a = [int(instr.fields.get(name, 0)) for name in info.fields]
    return info.code, int(DTYPES[instr.dtype]), int(instr.flags), a + [0] * (15 - len(a))


def records(instrs: list[Instr]) -> list[tuple[int, int, int, list[int]]]:
    """The program's isa records, END appended."""
    return [encode(instr) for instr in instrs + [Instr("end")]]


def busy_cycles(machine, instrs: list[Instr]) -> int:
    """Cycles the instructions occupy their engines (the cost model's per-instruction cost)."""
    total = 0
    for instr in instrs:
        opcode, dtype, flags, a = encode(instr)
        total += instruction_cycles(machine, opcode, dtype, a, flags)
    return total


# ----------------------------------------------------------------------------- printing

def ssa(buffer: Buffer) -> str:
    return "%" + buffer.name


def attr_value(value) -> str:
    """A Python value as an MLIR attribute: ints i64, floats f64, strings, lists of ints
    as dense arrays, lists of other things as array attributes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    if isinstance(value, float):
        return f"{value!r} : f64" if value == value and abs(value) != float("inf") else \
            f"\"{value}\""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return "array<i64" + "".join(f", {v}" if i else f": {v}"
                                          for i, v in enumerate(value)) + ">"
        return "[" + ", ".join(attr_value(v) for v in value) + "]"
    raise TypeError(f"no MLIR attribute for {value!r}")


def attr_dict(attrs: dict) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{key} = {attr_value(value)}" for key, value in attrs.items()) + "}"


def op_line(name: str, operands: list[Buffer], attrs: dict, result: Buffer | None = None,
            indent: str = "  ") -> str:
    """`%r = "npu.name"(%a, %b) {attrs} : (types) -> type` in MLIR generic form."""
    head = f"{ssa(result)} = " if result is not None else ""
    args = ", ".join(ssa(b) for b in operands)
    types = ", ".join(b.mlir_type() for b in operands)
    out = result.mlir_type() if result is not None else "()"
    return f"{indent}{head}\"npu.{name}\"({args}){attr_dict(attrs)} : ({types}) -> {out}"


def instr_attrs(instr: Instr) -> dict:
    attrs = {} if instr.engine_name == "control" or instr.op in ("signal", "wait") else \
        {"dtype": instr.dtype}
    if instr.flags:
        attrs["flags"] = instr.flags
    attrs.update(instr.fields)
    if instr.note:
        attrs["tile"] = instr.note
    return attrs


def instr_line(instr: Instr, extra: dict | None = None) -> str:
    operands = list(dict.fromkeys(b.view_of or b for b in instr.reads + instr.writes))
    attrs = instr_attrs(instr)
    if extra:
        attrs = {**extra, **{k: v for k, v in attrs.items() if k not in extra}}
    return op_line(instr.op, operands, attrs)


def alloc_line(buffer: Buffer) -> str:
    return op_line("alloc", [], {"sram_range": [buffer.addr, buffer.addr + buffer.size_bytes]},
                   result=buffer)


def dispatch_text(name: str, arguments: list[Buffer], body: list[str], attrs: dict) -> str:
    """Wraps body lines in `"npu.dispatch"` whose block arguments are the DRAM tensors."""
    args = ", ".join(f"{ssa(b)}: {b.mlir_type()}" for b in arguments)
    lines = ['"npu.dispatch"() ({', f"^bb0({args}):", *body,
             f"}}){attr_dict({'sym_name': name, **attrs})} : () -> ()"]
    return "\n".join(lines) + "\n"
