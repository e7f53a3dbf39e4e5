"""Vector-engine instructions over SRAM operands: a buffer, an element offset and one
element stride per box dimension (0 broadcasts)."""
from dataclasses import dataclass

from executable_format.isa import Flag, f32_bits

from .npu_ir import DTYPES, Buffer, Instr, dtype_bytes


@dataclass(frozen=True)
class Operand:
    buffer: Buffer
    strides: tuple[int, int, int]
    elem_offset: int = 0

    @classmethod
    def flat(cls, buffer: Buffer) -> "Operand":
        return cls(buffer, (0, 0, 1))


def _addr(operand: Operand) -> int:
    return operand.buffer.addr + operand.elem_offset * dtype_bytes(operand.buffer.dtype)


def _box(fields: dict, box) -> None:
    fields.update({f"n{i}": n for i, n in enumerate(box)})


def binary(op, dtype, dst: Operand, lhs: Operand, rhs: Operand, box, note,
           flags: int = 0) -> Instr:
    fields = {"dst": _addr(dst), "lhs": _addr(lhs), "rhs": _addr(rhs)}
    _box(fields, box)
    for name, operand in (("dst", dst), ("lhs", lhs), ("rhs", rhs)):
        fields.update({f"{name}_s{i}": s for i, s in enumerate(operand.strides)})
    # vfma's addend and vselgt's and vselect's other value are in the destination
    reads = (lhs.buffer, rhs.buffer) + \
        ((dst.buffer,) if op in ("vfma", "vselgt", "vselect") else ())
    return Instr(op, dtype, fields, flags=flags, reads=reads, writes=(dst.buffer,), note=note)


def unary(op, dtype, dst: Operand, src: Operand, box, note, *params, flags: int = 0) -> Instr:
    """A unary op; params are p0, p1 as floats."""
    fields = {"dst": _addr(dst), "src": _addr(src)}
    _box(fields, box)
    fields.update({f"dst_s{i}": s for i, s in enumerate(dst.strides)})
    fields.update({f"src_s{i}": s for i, s in enumerate(src.strides)})
    for i, value in enumerate(params):
        fields[f"p{i}"] = f32_bits(float(value))
    return Instr(op, dtype, fields, flags=flags, reads=(src.buffer,), writes=(dst.buffer,),
                 note=note)


def convert(dst: Operand, src: Operand, box, note, truncate: bool = False) -> Instr:
    """vcvt of a box from src's dtype to dst's (scale 1); to an integer dtype rounded
    half to even, or toward zero with `truncate`."""
    fields = {"dst": _addr(dst), "src": _addr(src)}
    _box(fields, box)
    fields.update({f"dst_s{i}": s for i, s in enumerate(dst.strides)})
    fields.update({f"src_s{i}": s for i, s in enumerate(src.strides)})
    fields["src_dtype"] = int(DTYPES[src.buffer.dtype])
    return Instr("vcvt", dst.buffer.dtype, fields, flags=int(Flag.TRUNCATE) if truncate else 0,
                 reads=(src.buffer,), writes=(dst.buffer,), note=note)
