"""Conv2D with few output channels as a matmul over pixels (im2col in SRAM).

With the output channels on the MAC array's `mac_cols` columns, a convolution with
F < mac_cols leaves lanes idle (the seed 3->8 channel conv uses 8 of 32); conv2d's
`pixel_columns` mapping avoids that without copies (tile_conv). This strategy is the
other way, kept where it is cheaper: a per-channel affine epilogue (BatchNormalization)
folded into W, and row tiles ramped from one row. Transposed, the convolution is a
matmul whose N dimension is the tile's pixels: out[f][p] = Σ_k W[f][k] · X[k][p] with k = (c, ky, kx). The vector engine
builds X from the padded input tile with one strided `vcopy` per (c, ky) covering all kx (im2col
inside SRAM, so DRAM traffic stays that of the input), while the MAC multiplies the
previous tile. A per-channel bias becomes an extra K row: X gets a constant row of ones
(filled once per buffer) and W the bias as its last column.

The output tile [f][pixels] is the direct strategy's [f][rows][cols]; epilogue and
store are shared with it. tile_conv picks whichever strategy its estimate prefers.
"""
from collections import Counter
from dataclasses import dataclass

from executable_format.isa import f32_bits

from .affine_fold import AffineFold
from .epilogue import EpilogueInputs, OutputStage, without_batch
from .vector import Operand
from .npu_ir import Instr, dtype_bytes, mac_flags
from .tile import (Dim, Pipeline, Slots, Sram, TiledProgram, ceil_div, dma_instrs,
                   fill_instrs, fitting, footprint, load_window, ramp_blocks,
                   split_candidates)
from .tiler import Candidate


@dataclass(frozen=True)
class Im2colTiling:
    rows: int
    cols: int

    @property
    def pixels(self) -> int:
        return self.rows * self.cols


def bias_row(job) -> bool:
    """Whether X has a ones row: a bias (or a folded affine epilogue's offset) to add."""
    return job.bias_index is not None or bool(job.affine)


def k_rows(job) -> int:
    """Rows of X: C·KH·KW, plus the ones row carrying a folded bias."""
    s = job.s
    return s.c * s.kh * s.kw + (1 if bias_row(job) else 0)


def ramp_rows(rows: int, growth: float) -> tuple[list[int], list[int]]:
    """The rows of the first and of the last tiles: from 1, each tile `growth` times the
    previous (at least one row more) while below `rows`, and the same down to 1.
    `growth` is how much more a tile's matmul takes than the other engines' work on a
    tile, so the next tile's im2col copies fit in the previous tile's matmul (and the
    previous tile's epilogue and store in the next one's)."""
    up = [1]
    while max(up[-1] + 1, int(up[-1] * growth)) < rows:
        up.append(max(up[-1] + 1, int(up[-1] * growth)))
    return up, up[::-1]


class Im2colTiler:
    """The im2col strategy (tiler.Tiler): estimated cycles of row/col blocks over those
    that fit; `job` is tile_conv.ConvJob (groups == 1, f32)."""

    def __init__(self, job):
        self.job, self.s, self.m = job, job.s, job.m
        self.e = dtype_bytes(job.dtype)

    def estimate(self, t: Im2colTiling) -> int:
        """Busy cycles of the busiest engine over the ramped tile loop, plus the pipeline
        fill (the first tile's load, operands and MAC) and drain (the last tile's
        epilogue and store)."""
        s = self.s
        tiles = [(rows, min(t.cols, s.wo - x0)) for _, rows in self.row_blocks(t)
                 for x0 in range(0, s.wo, t.cols)]
        shapes = Counter(tiles)     # a big image has thousands of tiles of a few shapes
        costs = {shape: self._tile_costs(*shape) for shape in shapes}
        (load, mac, copy, _, _), (_, _, _, epilogue, store) = costs[tiles[0]], costs[tiles[-1]]
        totals = [s.n * sum(costs[shape][i] * count for shape, count in shapes.items())
                  for i in range(5)]
        busiest = max(totals[0], totals[1], totals[2] + totals[3], totals[4])
        return busiest + load + copy + mac + epilogue + store

    def row_blocks(self, t: Im2colTiling) -> list[tuple[int, int]]:
        """(first row, rows) of the ramped tile loop."""
        load, mac, copy, epilogue, store = self._tile_costs(t.rows, t.cols)
        growth = mac / max(copy + epilogue, load, store)
        return ramp_blocks(self.s.ho, t.rows, *ramp_rows(t.rows, growth))

    def _tile_costs(self, rows: int, cols: int) -> tuple[int, int, int, int, int]:
        """(input load, MAC, im2col copies, epilogue, store) cycles of one tile (copies
        and epilogue share the vector engine)."""
        s, m, pixels = self.s, self.m, rows * cols
        mac = m.mac_latency_cycles + s.f * ceil_div(pixels, m.mac_cols) * \
            ceil_div(k_rows(self.job), m.mac_k_lanes(self.job.dtype))
        copy = s.c * s.kh * (m.vector_latency_cycles + ceil_div(s.kw * pixels * self.e,
                                                                m.vector_bytes_per_cycle))
        epilogue_in, epilogue = self.job.transfers.epilogue(s.f, rows, cols)
        return (self.job.transfers.input(s.c, rows, cols) + epilogue_in, mac, copy, epilogue,
                self.job.transfers.store(s.f, rows, cols))

    def fits(self, t: Im2colTiling) -> bool:
        return footprint(lambda sram: Im2colEmitter(self.job, t, sram)) <= self.m.sram_bytes

    def candidates(self) -> list[Candidate]:
        s = self.s
        candidates = []
        for cols in [s.wo] + [c for c in split_candidates(s.wo) if c != s.wo]:
            for rows in fitting(split_candidates(s.ho),
                                lambda rows: self.fits(Im2colTiling(rows, cols))):
                t = Im2colTiling(rows, cols)
                candidates.append(Candidate(t, t.pixels))
            if candidates:
                break
        return candidates

    def emit(self, t: Im2colTiling) -> TiledProgram:
        return Im2colEmitter(self.job, t, Sram(self.m.sram_bytes)).run()


class Im2colEmitter:
    def __init__(self, job, t: Im2colTiling, sram: Sram):
        s = job.s
        self.job, self.s, self.t, self.sram = job, s, t, sram
        self.tensors = job.lowered.tensors
        self.dtype = job.dtype
        self.k_rows = k_rows(job)
        self.inputs = Slots(sram, "in", self.dtype, (s.c * s.in_rows(t.rows) * s.in_cols(t.cols),))
        self.cols = Slots(sram, "im2col", self.dtype, (self.k_rows * t.pixels,))
        self.weights = sram.alloc("w", self.dtype, (s.f * self.k_rows,))
        self.outs = Slots(sram, "acc", job.acc_dtype, (s.f * t.pixels,), 3)
        self.epi = EpilogueInputs(sram, self.tensors, job.inputs_used,
                                  len(job.lowered.op.epilogue_inputs), [1, s.f, t.rows, t.cols],
                                  job.acc_dtype, job.m)
        self.output = OutputStage(sram, job.expr, job.acc_dtype, self.tensors["out"],
                                  s.f * t.pixels, job.m, input_dtypes=self.epi.dtypes,
                                  tensors=self.tensors, constants=job.lowered.constants,
                                  tile_counts=[1, s.f, t.rows, t.cols],
                                  extra_outputs=job.lowered.extra_outputs)
        self.epi.keep_only(self.output.tile_inputs)
        self.affine = AffineFold(sram, job.affine, self.tensors, s.f, job.m) if job.affine else None
        self.weight_instrs: list[Instr] = []   # W's load (and fold), in the first tile

    def run(self) -> TiledProgram:
        s, t = self.s, self.t
        setup = self.output.setup + self.epi.setup
        self.weight_instrs = self._load_weights()
        if bias_row(self.job):
            for buf in self.cols.buffers:
                setup += fill_instrs(buf, (self.k_rows - 1) * t.pixels, [(t.pixels, 1)],
                                     f32_bits(1.0), "ones row (bias)")
        pipeline = Pipeline(setup)
        for n in range(s.n):
            for y0, rows in Im2colTiler(self.job).row_blocks(t):
                for x0 in range(0, s.wo, t.cols):
                    pipeline.add(*self._tile(n, y0, rows, x0, min(t.cols, s.wo - x0)))
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {s.f}x{t.rows}x{t.cols} (out channels x rows x cols), "
                            f"im2col matmul K={self.k_rows}", 2)

    def _load_weights(self) -> list[Instr]:
        s, k_rows = self.s, self.k_rows
        w = self.tensors["weight"]
        sf, sc, sy, sx = w.strides
        dims = [Dim(s.f, sf, k_rows), Dim(s.c, sc, s.kh * s.kw), Dim(s.kh, sy, s.kw),
                Dim(s.kw, sx, 1)]
        instrs = dma_instrs("dma.load", w, 0, self.weights, 0, dims, "weights")
        if self.job.bias_index is not None:
            bias = self.tensors[f"epilogue.{self.job.bias_index}"]
            instrs += dma_instrs("dma.load", bias, 0, self.weights, self.k_rows - 1,
                                 [Dim(s.f, bias.strides[1], k_rows)], "bias column")
        if self.affine is not None:
            instrs += self.affine.instrs(Operand(self.weights, (0, 0, k_rows), k_rows - 1),
                                         Operand(self.weights, (0, k_rows, 1)), k_rows - 1)
        return instrs

    def _tile(self, n, y0, rows, x0, cols) -> tuple[list[Instr], list[Instr]]:
        s, t = self.s, self.t
        note = f"n{n} y{y0}+{rows} x{x0}+{cols}"
        src, _ = self.inputs.acquire(None)
        hi, wi = s.in_rows(rows), s.in_cols(cols)
        front, _ = load_window(self.tensors["input"], src, n, 0, s.c, y0 * s.sh - s.pt,
                               x0 * s.sw - s.pl, hi, wi, 0, note + " input")
        x, _ = self.cols.acquire(None)
        e = dtype_bytes(self.dtype)
        for c in range(s.c):
            for ky in range(s.kh):
                k = (c * s.kh + ky) * s.kw
                at = (c * hi + ky * s.dh) * wi
                front.append(Instr("vcopy", self.dtype, {
                    "dst": x.addr + k * t.pixels * e, "src": src.addr + at * e,
                    "n0": s.kw, "n1": rows, "n2": cols, "dst_s0": t.pixels, "dst_s1": cols,
                    "dst_s2": 1, "src_s0": s.dw, "src_s1": s.sh * wi, "src_s2": s.sw},
                    reads=(src,), writes=(x,), note=note + f" im2col c{c} ky{ky}"))
        front += self.weight_instrs
        self.weight_instrs = []
        out, _ = self.outs.acquire(None)
        pixels = rows * cols
        # A is the weights: the instruction's dtype is theirs, the columns are B.
        front.append(Instr("matmul", self.job.weight_dtype, {
            "a": self.weights.addr, "b": x.addr, "out": out.addr, "m": s.f, "n": pixels,
            "k": self.k_rows, "lda": self.k_rows, "ldb": t.pixels, "ldo": pixels},
            mac_flags(self.job.weight_dtype, self.dtype, self.job.lowered.op.narrow_sum),
            reads=(self.weights, x), writes=(out,), note=note))
        dense = (pixels, cols, 1)
        acc = Operand(out, dense)
        loads, inputs = self.epi.load([n, 0, y0, x0], [1, s.f, rows, cols], note, without_batch)
        back = self.output.emit((s.f, rows, cols), acc, inputs, [n, 0, y0, x0],
                                [1, s.f, rows, cols], [0, *dense], note)
        return front, loads + back
