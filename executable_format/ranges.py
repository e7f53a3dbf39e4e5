"""The memory an instruction touches: its SRAM and DRAM byte ranges.

The one definition of which bytes each operand covers (docs/npu-architecture.md); the
verifier checks these ranges statically and the native core mirrors this function for its
run-time checks. Arithmetic is on unbounded integers (numpy object arrays of Python ints
where a product of two fields may pass 2^63): a C mirror must compute in 64 bits (every
term is a u32 product) and reject overflow.

A strided box with counts n_i and element strides s_i covers `base + Σ i_k·s_k` for
`0 <= i_k < n_k`; its byte extent is `(1 + Σ (n_k - 1)·s_k) · elem_bytes` (0 if any count is 0).

`program_accesses` works on a whole program at once, an opcode at a time, with numpy
(a program has 10^4-10^5 instructions; one at a time in Python was most of the time a
compile and an executable load took); `instruction_accesses` is the same for one.
"""
from typing import NamedTuple

import numpy as np

from .isa import (ACCUMULATOR, DTYPE_BYTES, INSTRUCTION_DTYPE, OPCODES, REQUANT_RECORD_BYTES,
                  DType, Flag, requant_src_dtype)


class Access(NamedTuple):
    operand: str         # the field naming the base address ("sram_addr", "dst", "in", ...)
    memory: str          # "sram" or "dram"
    start: int           # first byte (SRAM address, or DRAM offset in the binding)
    end: int             # one past the last byte
    elem_bytes: int      # element size: `start` must be a multiple of it
    writes: bool
    binding: int = -1    # DRAM: binding index or CONST_POOL


class Accesses(NamedTuple):
    """One operand's ranges over the instructions `rows` (indices into the program), an
    array per field of Access. An operand an instruction lacks (a matmul's bias without
    the bias flag) is the empty range [start, start)."""
    operand: str
    memory: str
    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    elem_bytes: np.ndarray
    writes: np.ndarray
    binding: np.ndarray | None     # DRAM only


# Element bytes by dtype code; 0 for codes that are not a DType.
_ELEM_BYTES = np.zeros(256, dtype=np.int64)
_ACC_BYTES = np.zeros(256, dtype=np.int64)
for _dtype, _bytes in DTYPE_BYTES.items():
    _ELEM_BYTES[_dtype] = _bytes
for _dtype, _acc in ACCUMULATOR.items():
    _ACC_BYTES[_dtype] = DTYPE_BYTES[_acc]


def instruction_accesses(opcode: int, dtype: int, flags: int, a) -> list[Access]:
    """Every SRAM/DRAM range the instruction reads or writes, in operand order. `opcode`
    and `dtype` must be valid (and src_dtype for vcvt); shapes are taken as given."""
    record = np.zeros(1, dtype=INSTRUCTION_DTYPE)
    record["opcode"], record["dtype"], record["flags"] = opcode, dtype, flags
    record["a"][0] = [int(v) for v in a]
    return [Access(x.operand, x.memory, int(x.start[0]), int(x.end[0]), int(x.elem_bytes[0]),
                   bool(x.writes[0]), -1 if x.binding is None else int(x.binding[0]))
            for x in program_accesses(record)
            if len(x.rows) and not (x.operand == "bias" and not flags & Flag.BIAS)]


def program_accesses(records: np.ndarray) -> list[Accesses]:
    """Every operand range of every instruction of `records` (INSTRUCTION_DTYPE), opcode by
    opcode, operands in each opcode's order. Instructions whose opcode or dtype (or vcvt
    src_dtype) is unknown are left out: the verifier rejects them before their ranges."""
    opcodes = records["opcode"]
    found = []
    for code in np.unique(opcodes).tolist():
        info = OPCODES.get(code)
        if info is None or info.layout is None or info.layout in ("signal", "wait"):
            continue
        rows = np.flatnonzero(opcodes == code)
        elem = _ELEM_BYTES[records["dtype"][rows]]
        rows, elem = rows[elem > 0], elem[elem > 0]
        fields = records["a"][rows].astype(np.int64)
        f = {name: fields[:, i] for i, name in enumerate(info.fields)}
        dtype, flags = records["dtype"][rows], records["flags"][rows].astype(np.int64)
        found += _LAYOUTS[info.layout](info.name, rows, f, dtype, flags, elem)
    return found


def _big(x: np.ndarray) -> np.ndarray:
    return x.astype(object)


def box_extent(counts: list[np.ndarray], strides: list[np.ndarray], elem) -> np.ndarray:
    empty = np.zeros(len(counts[0]), dtype=bool)
    total = np.ones(len(counts[0]), dtype=np.int64).astype(object)
    for n, s in zip(counts, strides):
        empty |= n == 0
        total = total + _big(n - 1) * s
    return np.where(empty, 0, total * elem)


def _span(operand, memory, rows, start, extent, elem, writes, binding=None) -> Accesses:
    return Accesses(operand, memory, rows, start, _big(start) + extent,
                    np.broadcast_to(elem, rows.shape),
                    np.broadcast_to(np.asarray(writes, dtype=bool), rows.shape), binding)


def _box(rows, f, operand, count, stride, rank, elem, writes) -> Accesses:
    extent = box_extent([f[f"{count}{i}"] for i in range(rank)],
                        [f[f"{stride}{i}"] for i in range(rank)], elem)
    return _span(operand, "sram", rows, f[operand], extent, elem, writes)


def _sram(rows, f, operand, elements, elem, writes) -> Accesses:
    return _span(operand, "sram", rows, f[operand], _big(elements) * elem, elem, writes)


def _matrix(rows, f, operand, m, n, ld, elem, writes) -> Accesses:
    """A row-major [m][n] matrix with row stride f[ld] elements."""
    extent = np.where((m > 0) & (n > 0), (_big(m - 1) * f[ld] + n) * elem, 0)
    return _span(operand, "sram", rows, f[operand], extent, elem, writes)


def _pair(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return value & 0xFFFF, value >> 16


def _bias(rows, f, flags, count, acc) -> Accesses:
    """The bias vector (acc dtype), or the empty range where the bias flag is clear."""
    extent = np.where(flags & Flag.BIAS, _big(count) * acc, 0)
    return _span("bias", "sram", rows, f["bias"], extent, acc, False)


def _dma(name, rows, f, dtype, flags, elem):
    load = name == "dma.load"
    counts = [f[f"n{i}"] for i in range(4)]
    dram = box_extent(counts, [f[f"dram_s{i}"] for i in range(4)], elem)
    sram = box_extent(counts, [f[f"sram_s{i}"] for i in range(4)], elem)
    return [_span("dram_offset", "dram", rows, f["dram_offset"], dram, elem, not load,
                  f["binding"]),
            _span("sram_addr", "sram", rows, f["sram_addr"], sram, elem, load)]


def _fill(name, rows, f, dtype, flags, elem):
    return [_box(rows, f, "sram_addr", "n", "s", 4, elem, True)]


def _matmul(name, rows, f, dtype, flags, elem):
    m, n, k = f["m"], f["n"], f["k"]
    acc = _ACC_BYTES[dtype]
    transpose_a, transpose_b = (flags & Flag.TRANSPOSE_A) > 0, (flags & Flag.TRANSPOSE_B) > 0
    return [_matrix(rows, f, "a", np.where(transpose_a, k, m), np.where(transpose_a, m, k),
                    "lda", elem, False),
            _matrix(rows, f, "b", np.where(transpose_b, n, k), np.where(transpose_b, k, n),
                    "ldb", _b_elem(flags, elem), False),
            _bias(rows, f, flags, n, acc),
            _matrix(rows, f, "out", m, n, "ldo", acc, True)]


def _b_elem(flags, elem):
    """Bytes per element of a MAC instruction's B or weights: f16's with HALF_B."""
    return np.where(flags & Flag.HALF_B, 2, elem)


def _conv2d(name, rows, f, dtype, flags, elem):
    acc = _ACC_BYTES[dtype]
    kh, kw = _pair(f["kh_kw"])
    groups = f["groups"]
    per_group = np.where(groups > 0, f["c"] // np.maximum(groups, 1), 0)
    return [_sram(rows, f, "in", _big(f["c"]) * f["hi"] * f["wi"], elem, False),
            _sram(rows, f, "w", _big(f["f"]) * per_group * kh * kw, _b_elem(flags, elem),
                  False),
            _bias(rows, f, flags, f["f"], acc),
            _sram(rows, f, "out", _big(f["f"]) * f["ho"] * f["wo"], acc, True)]


def _dwconv2d(name, rows, f, dtype, flags, elem):
    acc = _ACC_BYTES[dtype]
    kh, kw = _pair(f["kh_kw"])
    return [_sram(rows, f, "in", _big(f["c"]) * f["hi"] * f["wi"], elem, False),
            _sram(rows, f, "w", _big(f["c"]) * kh * kw, _b_elem(flags, elem), False),
            _bias(rows, f, flags, f["c"], acc),
            _sram(rows, f, "out", _big(f["c"]) * f["ho"] * f["wo"], acc, True)]


def _vpool(name, rows, f, dtype, flags, elem):
    return [_sram(rows, f, "src", _big(f["c"]) * f["hi"] * f["wi"], elem, False),
            _sram(rows, f, "dst", _big(f["c"]) * f["ho"] * f["wo"], elem, True)]


def _vreduce(name, rows, f, dtype, flags, elem):
    return [_sram(rows, f, "src", _big(f["outer"]) * f["inner"], elem, False),
            _sram(rows, f, "dst", f["outer"], elem, True)]


def _vrequant(name, rows, f, dtype, flags, elem):
    params = box_extent([f[f"n{i}"] for i in range(3)], [f[f"par_s{i}"] for i in range(3)],
                        REQUANT_RECORD_BYTES)
    src_elem = np.array([DTYPE_BYTES[requant_src_dtype(f)] for f in flags], np.int64)
    return [_box(rows, f, "src", "n", "src_s", 3, src_elem, False),
            _span("params", "sram", rows, f["params"], params, 4, False),
            _box(rows, f, "dst", "n", "dst_s", 3, elem, True)]


def _binary(name, rows, f, dtype, flags, elem):
    return [_box(rows, f, "lhs", "n", "lhs_s", 3, elem, False),
            _box(rows, f, "rhs", "n", "rhs_s", 3, elem, False),
            _box(rows, f, "dst", "n", "dst_s", 3, elem, True)]


def _unary(name, rows, f, dtype, flags, elem):
    return [_box(rows, f, "src", "n", "src_s", 3, elem, False),
            _box(rows, f, "dst", "n", "dst_s", 3, elem, True)]


def _vcvt(name, rows, f, dtype, flags, elem):
    src_dtype = f["src_dtype"]
    src_elem = _ELEM_BYTES[np.clip(src_dtype, 0, 255)]
    known = (src_dtype < 256) & (src_elem > 0)
    if not known.all():
        rows, elem, src_elem = rows[known], elem[known], src_elem[known]
        f = {name: column[known] for name, column in f.items()}
    return [_box(rows, f, "src", "n", "src_s", 3, src_elem, False),
            _box(rows, f, "dst", "n", "dst_s", 3, elem, True)]


_LAYOUTS = {"dma": _dma, "fill": _fill, "matmul": _matmul, "conv2d": _conv2d,
            "dwconv2d": _dwconv2d, "vpool": _vpool, "vreduce": _vreduce,
            "vrequant": _vrequant, "binary": _binary, "unary": _unary, "vcvt": _vcvt}
