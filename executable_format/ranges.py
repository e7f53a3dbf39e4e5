"""The memory an instruction touches: its SRAM and DRAM byte ranges.

The one definition of which bytes each operand covers (docs/npu-architecture.md); the
verifier checks these ranges statically and the native core mirrors this function for its
run-time checks. Arithmetic is on unbounded integers: a C mirror must compute in 64 bits
(every term is a u32 product) and reject overflow.

A strided box with counts n_i and element strides s_i covers `base + Σ i_k·s_k` for
`0 <= i_k < n_k`; its byte extent is `(1 + Σ (n_k - 1)·s_k) · elem_bytes` (0 if any count is 0).
"""
from dataclasses import dataclass

from .isa import (ACCUMULATOR, DTYPE_BYTES, OPCODES, REQUANT_RECORD_BYTES, DType, Flag,
                  unpack_pair)


@dataclass(frozen=True)
class Access:
    operand: str         # the field naming the base address ("sram_addr", "dst", "in", ...)
    memory: str          # "sram" or "dram"
    start: int           # first byte (SRAM address, or DRAM offset in the binding)
    end: int             # one past the last byte
    elem_bytes: int      # element size: `start` must be a multiple of it
    writes: bool
    binding: int = -1    # DRAM: binding index or CONST_POOL


def box_extent(counts, strides, elem_bytes: int) -> int:
    if any(n == 0 for n in counts):
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(counts, strides))) * elem_bytes


def instruction_accesses(opcode: int, dtype: int, flags: int, a) -> list[Access]:
    """Every SRAM/DRAM range the instruction reads or writes. `opcode` and `dtype` must be
    valid (and src_dtype for vcvt); shapes are taken as given."""
    info = OPCODES[opcode]
    f = dict(zip(info.fields, (int(v) for v in a)))
    elem = DTYPE_BYTES[DType(dtype)]
    name = info.name
    if name in ("dma.load", "dma.store"):
        return _dma(f, elem, name == "dma.load")
    if name == "fill":
        return [_box(f, "sram_addr", "n", "s", 4, elem, True)]
    if name == "matmul":
        return _matmul(f, flags, DType(dtype))
    if name == "conv2d":
        return _conv2d(f, flags, DType(dtype))
    if name == "dwconv2d":
        return _dwconv2d(f, flags, DType(dtype))
    if name == "vpool":
        return [_sram(f, "src", f["c"] * f["hi"] * f["wi"], elem, False),
                _sram(f, "dst", f["c"] * f["ho"] * f["wo"], elem, True)]
    if name == "vreduce":
        return [_sram(f, "src", f["outer"] * f["inner"], elem, False),
                _sram(f, "dst", f["outer"], elem, True)]
    if name == "vrequant":
        params = box_extent([f[f"n{i}"] for i in range(3)],
                            [f[f"par_s{i}"] for i in range(3)], REQUANT_RECORD_BYTES)
        return [_box(f, "src", "n", "src_s", 3, DTYPE_BYTES[DType.I32], False),
                Access("params", "sram", f["params"], f["params"] + params, 4, False),
                _box(f, "dst", "n", "dst_s", 3, elem, True)]
    if "lhs" in f:
        return [_box(f, "lhs", "n", "lhs_s", 3, elem, False),
                _box(f, "rhs", "n", "rhs_s", 3, elem, False),
                _box(f, "dst", "n", "dst_s", 3, elem, True)]
    if "src" in f:
        src_elem = DTYPE_BYTES[DType(f["src_dtype"])] if name == "vcvt" else elem
        return [_box(f, "src", "n", "src_s", 3, src_elem, False),
                _box(f, "dst", "n", "dst_s", 3, elem, True)]
    return []                                           # control instructions


def _sram(f, operand: str, elements: int, elem: int, writes: bool) -> Access:
    return Access(operand, "sram", f[operand], f[operand] + elements * elem, elem, writes)


def _box(f, operand: str, count: str, stride: str, rank: int, elem: int,
         writes: bool) -> Access:
    extent = box_extent([f[f"{count}{i}"] for i in range(rank)],
                        [f[f"{stride}{i}"] for i in range(rank)], elem)
    return Access(operand, "sram", f[operand], f[operand] + extent, elem, writes)


def _dma(f, elem: int, load: bool) -> list[Access]:
    counts = [f[f"n{i}"] for i in range(4)]
    dram_extent = box_extent(counts, [f[f"dram_s{i}"] for i in range(4)], elem)
    sram_extent = box_extent(counts, [f[f"sram_s{i}"] for i in range(4)], elem)
    return [Access("dram_offset", "dram", f["dram_offset"], f["dram_offset"] + dram_extent,
                   elem, not load, f["binding"]),
            Access("sram_addr", "sram", f["sram_addr"], f["sram_addr"] + sram_extent,
                   elem, load)]


def _matrix(f, operand: str, rows: int, cols: int, ld: str, elem: int, writes: bool) -> Access:
    """A row-major [rows][cols] matrix with row stride f[ld] elements."""
    extent = ((rows - 1) * f[ld] + cols) * elem if rows and cols else 0
    return Access(operand, "sram", f[operand], f[operand] + extent, elem, writes)


def _accumulator_bytes(dtype: DType) -> int:
    return DTYPE_BYTES[ACCUMULATOR[dtype]]


def _matmul(f, flags: int, dtype: DType) -> list[Access]:
    m, n, k = f["m"], f["n"], f["k"]
    elem, acc = DTYPE_BYTES[dtype], _accumulator_bytes(dtype)
    a_shape = (k, m) if flags & Flag.TRANSPOSE_A else (m, k)
    b_shape = (n, k) if flags & Flag.TRANSPOSE_B else (k, n)
    accesses = [_matrix(f, "a", *a_shape, "lda", elem, False),
                _matrix(f, "b", *b_shape, "ldb", elem, False)]
    if flags & Flag.BIAS:
        accesses.append(_sram(f, "bias", n, acc, False))
    accesses.append(_matrix(f, "out", m, n, "ldo", acc, True))
    return accesses


def _conv2d(f, flags: int, dtype: DType) -> list[Access]:
    elem, acc = DTYPE_BYTES[dtype], _accumulator_bytes(dtype)
    kh, kw = unpack_pair(f["kh_kw"])
    channels_per_group = f["c"] // f["groups"] if f["groups"] else 0
    accesses = [_sram(f, "in", f["c"] * f["hi"] * f["wi"], elem, False),
                _sram(f, "w", f["f"] * channels_per_group * kh * kw, elem, False)]
    if flags & Flag.BIAS:
        accesses.append(_sram(f, "bias", f["f"], acc, False))
    accesses.append(_sram(f, "out", f["f"] * f["ho"] * f["wo"], acc, True))
    return accesses


def _dwconv2d(f, flags: int, dtype: DType) -> list[Access]:
    elem, acc = DTYPE_BYTES[dtype], _accumulator_bytes(dtype)
    kh, kw = unpack_pair(f["kh_kw"])
    accesses = [_sram(f, "in", f["c"] * f["hi"] * f["wi"], elem, False),
                _sram(f, "w", f["c"] * kh * kw, elem, False)]
    if flags & Flag.BIAS:
        accesses.append(_sram(f, "bias", f["c"], acc, False))
    accesses.append(_sram(f, "out", f["c"] * f["ho"] * f["wo"], acc, True))
    return accesses
