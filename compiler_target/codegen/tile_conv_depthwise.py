"""Depthwise Conv2D (groups == C == F) on the vector engine.

On the MAC array a depthwise convolution has one output channel and kh·kw reduction
elements per group, so every output element costs ceil(1/mac_cols)·ceil(kh·kw/k_lanes)
cycles and the array idles almost entirely (MAC utilization ~0.02). The vector engine
does better: per kernel tap, one `vmul` of the shifted input window (strides sh·wi, sw)
by the per-channel tap weight (stride 0 along rows and cols) and one `vadd` into the
accumulator tile, i.e. 2·kh·kw - 1 passes over the output tile at 32 f32 lanes per cycle.

Tiles are channel blocks x output rows (x cols) with the same padded-window loads as the
direct convolution; the weights [c][kh·kw] stay resident in SRAM. tile_conv picks this
strategy when its estimate is lower.
"""
from dataclasses import dataclass

from .epilogue import EpilogueInputs, OutputStage, without_batch
from .npu_ir import Instr, dtype_bytes
from .tile import (Dim, Pipeline, Slots, Sram, Streamed, TiledProgram, ceil_div, dma_instrs,
                   fitting, footprint, load_window, split_candidates)
from .tiler import Candidate
from .vector import Operand, binary


@dataclass(frozen=True)
class DepthwiseTiling:
    cb: int
    rows: int
    cols: int


def applies(job) -> bool:
    s = job.s
    return s.groups == s.c == s.f and job.dtype == "f32"


class DepthwiseTiler:
    """The depthwise strategy (tiler.Tiler): estimated cycles over the tilings that fit;
    `job` is tile_conv.ConvJob."""

    def __init__(self, job):
        self.job, self.s, self.m = job, job.s, job.m
        self.e = dtype_bytes(job.dtype)

    def estimate(self, t: DepthwiseTiling) -> int:
        s, m = self.s, self.m
        tiles = s.n * ceil_div(s.c, t.cb) * ceil_div(s.ho, t.rows) * ceil_div(s.wo, t.cols)
        out_elems = t.cb * t.rows * t.cols
        per_op = m.vector_latency_cycles + ceil_div(out_elems * 4, m.vector_bytes_per_cycle)
        vector = (2 * s.kh * s.kw - 1 + self.job.epilogue_ops()) * per_op
        load = self.job.transfers.input(t.cb, t.rows, t.cols)
        store = self.job.transfers.store(t.cb, t.rows, t.cols)
        return max(tiles * vector, tiles * load, tiles * store) + load + vector + store

    def fits(self, t: DepthwiseTiling) -> bool:
        return footprint(lambda sram: DepthwiseEmitter(self.job, t, sram)) <= self.m.sram_bytes

    def candidates(self) -> list[Candidate]:
        s = self.s
        candidates = []
        for cb in split_candidates(s.c, 16):
            for cols in [s.wo] + [c for c in split_candidates(s.wo) if c != s.wo]:
                for rows in fitting(split_candidates(s.ho),
                                    lambda rows: self.fits(DepthwiseTiling(cb, rows, cols))):
                    candidates.append(Candidate(DepthwiseTiling(cb, rows, cols), cb * rows * cols))
                if candidates:
                    break
        return candidates

    def emit(self, t: DepthwiseTiling) -> TiledProgram:
        return DepthwiseEmitter(self.job, t, Sram(self.m.sram_bytes)).run()


class DepthwiseEmitter:
    def __init__(self, job, t: DepthwiseTiling, sram: Sram):
        s = job.s
        self.job, self.s, self.t, self.sram = job, s, t, sram
        self.tensors = job.lowered.tensors
        self.dtype = job.dtype
        out_elems = t.cb * t.rows * t.cols
        self.inputs = Slots(sram, "in", self.dtype, (t.cb * s.in_rows(t.rows) * s.in_cols(t.cols),))
        self.weights = sram.alloc("w", self.dtype, (s.c * s.kh * s.kw,))
        self.outs = Slots(sram, "acc", job.acc_dtype, (out_elems,))
        self.product = sram.alloc("tap", job.acc_dtype, (out_elems,))
        tile = [1, t.cb, t.rows, t.cols]
        self.bias = None if job.bias_index is None else Streamed(
            sram, self.tensors[f"epilogue.{job.bias_index}"], tile, compute_dtype=job.acc_dtype)
        self.epi = EpilogueInputs(sram, self.tensors, job.inputs_used,
                                  len(job.lowered.op.epilogue_inputs), tile, job.acc_dtype)
        self.output = OutputStage(sram, job.expr, job.acc_dtype, self.tensors["out"], out_elems)

    def run(self) -> TiledProgram:
        s, t = self.s, self.t
        w = self.tensors["weight"]
        sf, _, sy, sx = w.strides
        kk = s.kh * s.kw
        setup = self.output.setup + dma_instrs(
            "dma.load", w, 0, self.weights, 0,
            [Dim(s.c, sf, kk), Dim(s.kh, sy, s.kw), Dim(s.kw, sx, 1)], "weights")
        pipeline = Pipeline(setup)
        for n in range(s.n):
            for c0 in range(0, s.c, t.cb):
                for y0 in range(0, s.ho, t.rows):
                    for x0 in range(0, s.wo, t.cols):
                        pipeline.add(*self._tile(n, c0, min(t.cb, s.c - c0), y0,
                                                 min(t.rows, s.ho - y0), x0,
                                                 min(t.cols, s.wo - x0)))
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {t.cb}x{t.rows}x{t.cols} (channels x rows x cols), "
                            "depthwise on the vector engine", 2)

    def _tile(self, n, c0, cb, y0, rows, x0, cols) -> tuple[list[Instr], list[Instr]]:
        s = self.s
        note = f"n{n} c{c0}+{cb} y{y0}+{rows} x{x0}+{cols}"
        src, _ = self.inputs.acquire(None)
        hi, wi = s.in_rows(rows), s.in_cols(cols)
        front, _ = load_window(self.tensors["input"], src, n, c0, cb, y0 * s.sh - s.pt,
                               x0 * s.sw - s.pl, hi, wi, 0, note + " input")
        tile_starts, tile_counts = [n, c0, y0, x0], [1, cb, rows, cols]
        loads, inputs = self.epi.load(tile_starts, tile_counts, note, without_batch)
        front += loads
        bias = None
        if self.bias is not None:
            buf, strides, loads = self.bias.load(tile_starts, tile_counts, note)
            front += loads
            bias = Operand(buf, tuple(strides[1:]))
        out, _ = self.outs.acquire(None)
        box = (cb, rows, cols)
        dense = (rows * cols, cols, 1)
        acc, product = Operand(out, dense), Operand(self.product, dense)
        kk = s.kh * s.kw
        back = []
        for ky in range(s.kh):
            for kx in range(s.kw):
                tap = ky * s.kw + kx
                window = Operand(src, (hi * wi, s.sh * wi, s.sw), ky * s.dh * wi + kx * s.dw)
                weight = Operand(self.weights, (kk, 0, 0), c0 * kk + tap)
                first = tap == 0 and bias is None
                back.append(binary("vmul", self.dtype, acc if first else product, window,
                                   weight, box, note + f" tap {ky},{kx}"))
                if not first:
                    back.append(binary("vadd", self.dtype, acc, bias if tap == 0 else acc,
                                       product, box, note + f" tap {ky},{kx}"))
        back += self.output.emit(box, acc, inputs, tile_starts, tile_counts, [0, *dense], note)
        return front, back
