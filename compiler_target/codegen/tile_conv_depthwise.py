"""Depthwise Conv2D (groups == C == F) on the MAC array's depthwise mode (`dwconv2d`).

As a grouped `conv2d`, a depthwise convolution has one output channel and kh·kw
reduction elements per group, so the array computes one output pixel at a time on one
of its mac_cols columns. `dwconv2d` maps mac_cols consecutive output pixels of one
channel to the columns instead and the kernel taps to the k lanes, with the channel's
weights broadcast: c·ceil(rows·cols / mac_cols)·ceil(kh·kw / k_lanes) cycles per tile
(25 of the 32 lanes of an f32 5x5 filter busy, 9 of 16 for a 3x3).

Tiles are channel blocks x output rows (x cols) with the direct convolution's padded
window loads; the weights [c][kh·kw] and a per-channel bias (the MAC's BIAS flag) stay
resident in SRAM for the whole dispatch, each tile's instruction reading its channels'
part. With f32 operands the epilogue's per-channel affine chain (a bias, then an
imported BatchNormalization's scale and shift) is folded into those weights and that
bias once per dispatch (affine_fold), as the im2col strategy does; else only a bias
add is taken. Whole images of a channel block are one contiguous DMA run in NCHW, so
tiles prefer all rows. An accumulator tile is held from its dwconv2d through the
epilogue to its store: three of them let the MAC start a tile while the vector engine
and the store work on the two before (with two, the MAC waited for the store two tiles
back, a third of the time when the four engines are about equally busy). tile_conv
picks this strategy when its estimate is lowest.
"""
from dataclasses import dataclass

from executable_format.isa import Flag, pack_pair

from .affine_fold import AffineFold
from .epilogue import EpilogueInputs, OutputStage, without_batch
from .npu_ir import Instr, dtype_bytes
from .tile import (RAMP_DEPTHS, Dim, Pipeline, Slots, Sram, Streamed, TiledProgram, ceil_div,
                   dma_instrs, fitting, footprint, load_window, ramp_down_pieces,
                   split_candidates)
from .tiler import Candidate, fastest, pipeline_bound
from .vector import Operand


RAMP_SHRINK = 2.0     # each piece of the last tile's rows half the one before


@dataclass(frozen=True)
class DepthwiseTiling:
    cb: int
    rows: int
    cols: int


def applies(job) -> bool:
    s = job.s
    return s.groups == s.c == s.f


class DepthwiseTiler:
    """The depthwise strategy (tiler.Tiler): estimated cycles over the tilings that fit;
    `job` is tile_conv.ConvJob (tile_conv.affine_job's for f32)."""

    def __init__(self, job):
        self.job, self.s, self.m = job, job.s, job.m

    def mac_cycles(self, t: DepthwiseTiling) -> int:
        s, m = self.s, self.m
        return m.mac_latency_cycles + t.cb * ceil_div(t.rows * t.cols, m.mac_cols) * \
            ceil_div(s.kh * s.kw, m.mac_k_lanes(self.job.dtype))

    def estimate(self, t: DepthwiseTiling) -> int:
        s = self.s
        tiles = s.n * ceil_div(s.c, t.cb) * ceil_div(s.ho, t.rows) * ceil_div(s.wo, t.cols)
        epilogue_in, vector = self.job.transfers.epilogue(t.cb, t.rows, t.cols)
        mac = self.mac_cycles(t)
        load = self.job.transfers.input(t.cb, t.rows, t.cols) + epilogue_in
        store = self.job.transfers.store(t.cb, t.rows, t.cols)
        return pipeline_bound([load, mac, vector, store], tiles)

    def fits(self, t: DepthwiseTiling) -> bool:
        return footprint(lambda sram: DepthwiseEmitter(self.job, t, sram, [])) <= \
            self.m.sram_bytes

    def candidates(self) -> list[Candidate]:
        s = self.s
        candidates = []
        for cb in split_candidates(s.c):
            for cols in [s.wo] + [c for c in split_candidates(s.wo) if c != s.wo]:
                for rows in fitting(split_candidates(s.ho),
                                    lambda rows: self.fits(DepthwiseTiling(cb, rows, cols))):
                    candidates.append(Candidate(DepthwiseTiling(cb, rows, cols), cb * rows * cols))
                if candidates:
                    break
        return candidates

    def emit(self, t: DepthwiseTiling) -> TiledProgram:
        """The program of `t` with the last tile's rows cut into shrinking pieces
        (ramp_down_pieces) where its scheduled program takes fewer cycles."""
        return fastest([DepthwiseEmitter(self.job, t, Sram(self.m.sram_bytes), pieces).run()
                        for pieces in self.ramps(t)], self.m)

    def ramps(self, t: DepthwiseTiling) -> list[list[int]]:
        """The ways to cut the last tile's rows worth trying, [] (no cut) first."""
        last = self.s.ho - (ceil_div(self.s.ho, t.rows) - 1) * t.rows
        return [[]] + [pieces for depth in RAMP_DEPTHS[1:]
                       if (pieces := ramp_down_pieces(last, depth, RAMP_SHRINK, 1))]


class DepthwiseEmitter:
    def __init__(self, job, t: DepthwiseTiling, sram: Sram, pieces: list[int]):
        s = job.s
        self.job, self.s, self.t, self.sram, self.pieces = job, s, t, sram, pieces
        self.tensors = job.lowered.tensors
        self.dtype = job.dtype
        out_elems = t.cb * t.rows * t.cols
        self.inputs = Slots(sram, "in", self.dtype, (t.cb * s.in_rows(t.rows) * s.in_cols(t.cols),))
        self.weights = sram.alloc("w", self.dtype, (s.c * s.kh * s.kw,))
        self.bias = None if job.bias_index is None else Streamed(
            sram, self.tensors[f"epilogue.{job.bias_index}"], [1, s.c, 1, 1], 1,
            compute_dtype=job.acc_dtype)
        self.affine = AffineFold(sram, job.affine, self.tensors, s.c, job.m) if job.affine else None
        self.folded_bias = sram.alloc("affine.bias", "f32", (s.c,)) if job.affine else None
        self.outs = Slots(sram, "acc", job.acc_dtype, (out_elems,), 3)
        tile = [1, t.cb, t.rows, t.cols]
        self.epi = EpilogueInputs(sram, self.tensors, job.inputs_used,
                                  len(job.lowered.op.epilogue_inputs), tile, job.acc_dtype, job.m)
        self.output = OutputStage(sram, job.expr, job.acc_dtype, self.tensors["out"], out_elems,
                                  job.m,
                                  input_dtypes=self.epi.dtypes, tensors=self.tensors,
                                  constants=job.lowered.constants, tile_counts=tile,
                                  extra_outputs=job.lowered.extra_outputs)
        self.epi.keep_only(self.output.tile_inputs)

    def run(self) -> TiledProgram:
        s, t = self.s, self.t
        w = self.tensors["weight"]
        sf, _, sy, sx = w.strides
        kk = s.kh * s.kw
        setup = self.output.setup + self.epi.setup + dma_instrs(
            "dma.load", w, 0, self.weights, 0,
            [Dim(s.c, sf, kk), Dim(s.kh, sy, s.kw), Dim(s.kw, sx, 1)], "weights")
        bias = None
        if self.bias is not None:
            bias, _, loads = self.bias.load([0, 0, 0, 0], [1, s.c, 1, 1], "bias")
            setup += loads
        if self.affine is not None:
            bias = self.folded_bias
            setup += self.affine.instrs(Operand(bias, (0, 0, 1)),
                                        Operand(self.weights, (0, kk, 1)), kk)
        pipeline = Pipeline(setup)
        tiles = [(n, c0, min(t.cb, s.c - c0), y0, min(t.rows, s.ho - y0), x0,
                  min(t.cols, s.wo - x0))
                 for n in range(s.n) for c0 in range(0, s.c, t.cb)
                 for y0 in range(0, s.ho, t.rows) for x0 in range(0, s.wo, t.cols)]
        if self.pieces:
            n, c0, cb, y0, _, x0, cols = tiles.pop()
            for piece in self.pieces:
                tiles.append((n, c0, cb, y0, piece, x0, cols))
                y0 += piece
        for tile in tiles:
            pipeline.add(*self._tile(bias, *tile))
        ramp = f", last rows in {'+'.join(map(str, self.pieces))}" if self.pieces else ""
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {t.cb}x{t.rows}x{t.cols} (channels x rows x cols{ramp}), "
                            "dwconv2d", 2)

    def _tile(self, bias, n, c0, cb, y0, rows, x0, cols) -> tuple[list[Instr], list[Instr]]:
        s = self.s
        note = f"n{n} c{c0}+{cb} y{y0}+{rows} x{x0}+{cols}"
        src, _ = self.inputs.acquire(None)
        hi, wi = s.in_rows(rows), s.in_cols(cols)
        front, _ = load_window(self.tensors["input"], src, n, c0, cb, y0 * s.sh - s.pt,
                               x0 * s.sw - s.pl, hi, wi, 0, note + " input")
        out, _ = self.outs.acquire(None)
        kk = s.kh * s.kw
        w_offset = c0 * kk * dtype_bytes(self.job.weight_dtype)
        fields = {"in": src.addr, "w": self.weights.addr + w_offset,
                  "out": out.addr, "c": cb, "hi": hi, "wi": wi, "ho": rows, "wo": cols,
                  "kh_kw": pack_pair(s.kh, s.kw), "sh_sw": pack_pair(s.sh, s.sw),
                  "dh_dw": pack_pair(s.dh, s.dw), "bias": 0}
        flags, reads = Flag.NONE, (src, self.weights)
        if bias is not None:
            fields["bias"] = bias.addr + c0 * dtype_bytes(self.job.acc_dtype)
            flags, reads = Flag.BIAS, reads + (bias,)
        front.append(Instr("dwconv2d", self.dtype, fields, int(flags) | self.job.mac_flags,
                           reads=reads,
                           writes=(out,), note=note))
        tile_starts, tile_counts = [n, c0, y0, x0], [1, cb, rows, cols]
        loads, inputs = self.epi.load(tile_starts, tile_counts, note, without_batch)
        dense = (rows * cols, cols, 1)
        back = self.output.emit((cb, rows, cols), Operand(out, dense), inputs, tile_starts,
                                tile_counts, [0, *dense], note)
        return front, loads + back
