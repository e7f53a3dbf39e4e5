"""Tiling of Matmul: blocks of M x N output, K split into chunks the MAC accumulates
(ACCUMULATE), per batch.

Operand tiles are dense in SRAM in whichever orientation keeps the DRAM reads
contiguous: A as [m][k], or [k][m] with TRANSPOSE_A when A's M stride is the unit one;
B as [k][n], or [n][k] with TRANSPOSE_B. The loop order (M blocks outer or N blocks
outer) and the block sizes come from an analytic estimate of the engines' busy time
over the candidates that fit SRAM with double buffering; operand blocks that stay the
same between consecutive tiles are not reloaded. A per-column bias add at the start of
the epilogue becomes the MAC BIAS flag; the rest runs on the vector engine.
"""
from dataclasses import dataclass

from executable_format.isa import Flag
from executable_format.machine import MachineConfig

from .epilogue import OutputStage, accumulator, fold_bias, temp_count, used_inputs
from .lower import Lowered, NotLowerable
from .npu_ir import Instr, dtype_bytes
from .vector import Operand
from .tile import (SRAM_ALIGN, Dim, Pipeline, Slots, Sram, Streamed, TiledProgram, aligned,
                   block_candidates, ceil_div, dma_instrs, pick, prod, split_candidates)

@dataclass(frozen=True)
class MatmulTiling:
    mt: int
    nt: int
    kt: int
    m_outer: bool        # loop over M blocks outside N blocks (A stays resident)


class MatmulPlanner:
    def __init__(self, lowered: Lowered, m: MachineConfig, expr, bias_index, used, acc_dtype):
        op = lowered.op
        self.batch, self.M, self.K = op.a.shape
        _, _, self.N = op.b.shape
        self.m, self.dtype = m, op.a.dtype
        self.e = dtype_bytes(self.dtype)
        self.acc_e = dtype_bytes(acc_dtype)
        # Streamed epilogue tensors (the bias included): their strides, and the bytes per
        # element of their SRAM tiles (a converted copy when the dtype differs).
        self.streamed = [(lowered.tensors[f"epilogue.{k}"], acc_dtype)
                         for k in used + ([bias_index] if bias_index is not None else [])]
        self.cast_e = dtype_bytes(op.out.dtype) if op.out.dtype != acc_dtype else 0
        self.temps = temp_count(expr)
        self.consts = sum(1 for node in expr if node[0] == "const")

    def counts(self, t: MatmulTiling):
        return ceil_div(self.M, t.mt), ceil_div(self.N, t.nt), ceil_div(self.K, t.kt)

    def slots(self, t: MatmulTiling) -> tuple[int, int]:
        nm, nn, nk = self.counts(t)
        a_single = self.batch == 1 and nm * nk == 1
        b_single = self.batch == 1 and nn * nk == 1
        return (1 if a_single else 2), (1 if b_single else 2)

    def footprint(self, t: MatmulTiling) -> int:
        """The SRAM MatmulEmitter allocates (slots are 64-byte aligned)."""
        a_slots, b_slots = self.slots(t)
        out = t.mt * t.nt
        total = a_slots * aligned(t.mt * t.kt * self.e) + b_slots * aligned(t.kt * t.nt * self.e)
        total += (2 + self.temps) * aligned(out * self.acc_e) + 2 * aligned(out * self.cast_e)
        for dram, compute in self.streamed:
            live = prod(n for n, st in zip((1, t.mt, t.nt), dram.strides) if st)
            total += 2 * aligned(live * dtype_bytes(dram.dtype))
            if dram.dtype != compute:
                total += 2 * aligned(live * dtype_bytes(compute))
        return total + (self.consts + 1) * SRAM_ALIGN

    def _dma(self, nbytes: int, run: int) -> int:
        m = self.m
        burst = m.dma_burst_bytes
        moved = max(1, nbytes // run) * ceil_div(run, burst) * burst
        return m.dma_latency_cycles + ceil_div(moved, m.dram_bytes_per_cycle)

    def mac_cycles(self, t: MatmulTiling) -> int:
        m = self.m
        return m.mac_latency_cycles + t.mt * ceil_div(t.nt, m.mac_cols) * \
            ceil_div(t.kt, m.mac_k_lanes(self.dtype))

    def estimate(self, t: MatmulTiling) -> int:
        nm, nn, nk = self.counts(t)
        tiles = self.batch * nm * nn
        load_a = self._dma(t.mt * t.kt * self.e, t.kt * self.e)
        load_b = self._dma(t.kt * t.nt * self.e, t.nt * self.e)
        a_loads = tiles * nk if not (t.m_outer and nk <= 2) else self.batch * nm * nk
        b_loads = tiles * nk if not (not t.m_outer and nk <= 2) else self.batch * nn * nk
        store = self._dma(t.mt * t.nt * 4, t.nt * 4)
        mac = tiles * nk * self.mac_cycles(t)
        return max(mac, a_loads * load_a + b_loads * load_b, tiles * store) + \
            load_a + load_b + store + self.mac_cycles(t)

    def choose(self) -> MatmulTiling:
        m = self.m
        candidates = []
        for nt in block_candidates(self.N, m.mac_cols):
            for kt in block_candidates(self.K, m.mac_k_lanes(self.dtype)):
                for mt in split_candidates(self.M):
                    for m_outer in (True, False):
                        t = MatmulTiling(mt, nt, kt, m_outer)
                        if self.footprint(t) > m.sram_bytes:
                            continue
                        candidates.append((self.estimate(t), mt * nt * kt, t))
        chosen = pick(candidates)
        if chosen is None:
            raise NotLowerable(f"does not fit SRAM even tiled: matmul {self.M}x{self.N}x{self.K}")
        return chosen[1]


def tile_matmul(lowered: Lowered, m: MachineConfig) -> TiledProgram:
    op = lowered.op
    dtype = op.a.dtype
    if op.dims != (1, 1, 1, 1):
        raise NotLowerable(f"contraction with {op.dims} batch/M/N/K dims")
    if dtype not in ("f32", "f16", "bf16", "i8") or op.b.dtype != dtype:
        raise NotLowerable(f"matmul operand dtypes {dtype}/{op.b.dtype} not supported")
    acc_dtype = accumulator(dtype)
    if op.a.shape[0] != op.out.shape[0] or op.b.shape[0] != op.out.shape[0]:
        raise NotLowerable("matmul batch sizes differ")
    bias_index, expr = fold_bias(op.epilogue, op.epilogue_inputs, 2, acc_dtype)
    used = used_inputs(expr)
    planner = MatmulPlanner(lowered, m, expr, bias_index, used, acc_dtype)
    t = planner.choose()
    return MatmulEmitter(lowered, planner, t, expr, bias_index, used, acc_dtype).run()


class MatmulEmitter:
    def __init__(self, lowered, planner: MatmulPlanner, t: MatmulTiling, expr, bias_index,
                 used, acc_dtype):
        self.p, self.t, self.tensors = planner, t, lowered.tensors
        self.n_epi = len(lowered.op.epilogue_inputs)
        a, b = self.tensors["a"], self.tensors["b"]
        self.a_transposed = abs(a.strides[1]) < abs(a.strides[2])     # stored [k][m]
        self.b_transposed = abs(b.strides[1]) < abs(b.strides[2])     # stored [n][k]
        sram = Sram(planner.m.sram_bytes)
        self.sram = sram
        a_slots, b_slots = planner.slots(t)
        self.a_slots = Slots(sram, "a", planner.dtype, (t.mt * t.kt,), a_slots)
        self.b_slots = Slots(sram, "b", planner.dtype, (t.kt * t.nt,), b_slots)
        self.outs = Slots(sram, "acc", acc_dtype, (t.mt * t.nt,))
        self.bias = Streamed(sram, self.tensors[f"epilogue.{bias_index}"], [1, t.mt, t.nt],
                             compute_dtype=acc_dtype) if bias_index is not None else None
        self.epi = {k: Streamed(sram, self.tensors[f"epilogue.{k}"], [1, t.mt, t.nt],
                                compute_dtype=acc_dtype) for k in used}
        self.output = OutputStage(sram, expr, acc_dtype, self.tensors["out"], t.mt * t.nt)

    def run(self) -> TiledProgram:
        p, t = self.p, self.t
        nm, nn, nk = p.counts(t)
        pipeline = Pipeline(self.output.setup)
        for b in range(p.batch):
            pairs = [(mi, ni) for mi in range(nm) for ni in range(nn)] if t.m_outer else \
                [(mi, ni) for ni in range(nn) for mi in range(nm)]
            for mi, ni in pairs:
                pipeline.add(*self._tile(b, mi, ni, nk))
        order = "M-outer" if t.m_outer else "N-outer"
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {t.mt}x{t.nt}x{t.kt} (MxNxK, {order})", 2)

    def _tile(self, b, mi, ni, nk) -> tuple[list[Instr], list[Instr]]:
        p, t = self.p, self.t
        m0, n0 = mi * t.mt, ni * t.nt
        mt, nt = min(t.mt, p.M - m0), min(t.nt, p.N - n0)
        note = f"b{b} m{m0}+{mt} n{n0}+{nt}"
        out, _ = self.outs.acquire(None)
        front: list[Instr] = []
        bias_reads, flags, bias_addr = (), Flag.NONE, 0
        if self.bias is not None:
            buf, _, loads = self.bias.load([b, m0, n0], [1, mt, nt], note)
            front += loads
            bias_reads, flags, bias_addr = (buf,), Flag.BIAS, buf.addr
        for ki in range(nk):
            k0 = ki * t.kt
            kt = min(t.kt, p.K - k0)
            a_buf = self._load_a(front, b, m0, mt, k0, kt, note)
            b_buf = self._load_b(front, b, k0, kt, n0, nt, note)
            kflags = (Flag.ACCUMULATE if ki else flags) | \
                (Flag.TRANSPOSE_A if self.a_transposed else 0) | \
                (Flag.TRANSPOSE_B if self.b_transposed else 0)
            fields = {"a": a_buf.addr, "b": b_buf.addr, "out": out.addr, "m": mt, "n": nt,
                      "k": kt, "lda": mt if self.a_transposed else kt,
                      "ldb": kt if self.b_transposed else nt, "ldo": nt,
                      "bias": 0 if ki else bias_addr}
            reads = (a_buf, b_buf) + ((out,) if ki else bias_reads)
            front.append(Instr("matmul", p.dtype, fields, int(kflags), reads=reads,
                               writes=(out,), note=note + f" k{k0}+{kt}"))
        acc = Operand(out, (0, nt, 1))
        operands = {}
        for k, stream in self.epi.items():
            buf, strides, loads = stream.load([b, m0, n0], [1, mt, nt], note)
            front += loads
            operands[k] = Operand(buf, tuple(strides))
        inputs = [operands.get(k) for k in range(self.n_epi)]
        back = self.output.emit((1, mt, nt), acc, inputs, [b, m0, n0], [1, mt, nt],
                                [0, nt, 1], note)
        return front, back

    def _load_a(self, front, b, m0, mt, k0, kt, note):
        buf, fresh = self.a_slots.acquire((b * (self.tensors["a"].strides[0] != 0), m0, k0))
        if fresh:
            a = self.tensors["a"]
            sb, sm, sk = a.strides
            dims = [Dim(mt, sm, 1 if self.a_transposed else kt),
                    Dim(kt, sk, mt if self.a_transposed else 1)]
            front += dma_instrs("dma.load", a, b * sb + m0 * sm + k0 * sk, buf, 0, dims,
                                note + f" A k{k0}+{kt}")
        return buf

    def _load_b(self, front, b, k0, kt, n0, nt, note):
        buf, fresh = self.b_slots.acquire((b * (self.tensors["b"].strides[0] != 0), k0, n0))
        if fresh:
            w = self.tensors["b"]
            sb, sk, sn = w.strides
            dims = [Dim(kt, sk, 1 if self.b_transposed else nt),
                    Dim(nt, sn, kt if self.b_transposed else 1)]
            front += dma_instrs("dma.load", w, b * sb + k0 * sk + n0 * sn, buf, 0, dims,
                                note + f" B k{k0}+{kt}")
        return buf
