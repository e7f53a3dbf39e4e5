"""Tiling of Pool2D: channel blocks x output-row blocks (x column blocks) on the vector
engine's `vpool`.

Like convolution, a tile's padded input window is a dense SRAM tile [c][hi][wi]: the
part inside the image is one strided DMA box, the halo is filled with -inf (max) or 0
(avg, sum). The tile's valid region is passed to vpool (pt_pl, vh_vw) so average
pooling without count_include_pad divides by the taps inside the image. Sum pooling is
average pooling counting the padding, scaled by kh·kw. The epilogue runs on the pooled
tile before its store.

A max pool of i8 values (onnxruntime's QOperator format keeps MaxPool on int8 data:
`arith.maxsi`), which vpool does not take, is pooled in f32, where every i8 value and
their maximum are exact: the loaded tile (halo -128) converted to f32, vpool, and the
result converted back to i8 (no epilogue).

Images of a batch whose channels follow on from each other in both tensors (a stride
of n that is c times that of c) are one image of n·c channels: a channel block then
spans images, rather than each image being its own tiles (a TF-exported network's
max pool over 96 images of 10 channels was 96 tiles of 100-cycle DMA latencies).
"""
from dataclasses import dataclass, replace

from executable_format.isa import Flag, pack_pair
from executable_format.machine import MachineConfig

from .epilogue import (EpilogueInputs, OutputStage, bytes_per_element, quantized_output_bytes,
                       used_inputs, without_batch)
from .lower import Lowered, NotLowerable
from .npu_ir import FLOATS, Buffer, Instr, dtype_bytes, value_bits
from .vector import Operand, convert, unary
from .tile import (SRAM_ALIGN, Pipeline, Slots, Sram, TiledProgram, aligned, ceil_div,
                   load_window, split_candidates, window_columns, window_extent)
from .tile_elementwise import view
from .tiler import Candidate


@dataclass(frozen=True)
class PoolTiling:
    cb: int
    rows: int
    cols: int


class PoolGeometry:
    def __init__(self, input: Buffer, out: Buffer, op):
        self.n, self.c, self.h, self.w = input.shape
        _, _, self.ho, self.wo = out.shape
        self.kh, self.kw = op.kernel
        self.sh, self.sw = op.stride
        self.dh, self.dw = op.dilation
        self.pt, self.pl = op.pads[0], op.pads[1]

    def in_rows(self, rows):
        return window_extent(rows, self.sh, self.kh, self.dh)

    def in_cols(self, cols):
        return window_columns(cols, self.wo, self.sw, self.kw, self.dw, self.pl, self.w,
                              self.h)


def batch_as_channels(lowered: Lowered) -> Lowered:
    """The op with its batch folded into the channels (input and output views of one
    image of n·c channels) where both tensors allow it and no epilogue input is read
    per image; else `lowered`."""
    tensors = lowered.tensors
    image_pairs = [tensors[role] for role in ("input", "out")]
    if lowered.op.epilogue_inputs or image_pairs[0].shape[0] == 1 or \
            any(t.strides[0] != t.shape[1] * t.strides[1] for t in image_pairs):
        return lowered
    folded = {role: replace(view(t, (1, t.shape[0] * t.shape[1], *t.shape[2:]), t.strides),
                            view_of=t.view_of or t)
              for role, t in zip(("input", "out"), image_pairs)}
    return replace(lowered, tensors={**tensors, **folded})


class PoolTiler:
    """The tiler (tiler.Tiler) of pool2d dispatches."""

    def __init__(self, lowered: Lowered, m: MachineConfig):
        op = lowered.op
        dtype = op.input.dtype
        if integer_max(op) and (op.out.dtype != dtype or not keeps_bytes(op.epilogue)):
            raise NotLowerable("an i8 max pool with an epilogue or another output dtype")
        if not integer_max(op) and (dtype not in FLOATS or (op.out.dtype != dtype and
                                                          op.out.dtype in FLOATS)):
            raise NotLowerable(f"{dtype} -> {op.out.dtype} pooling is not supported (floats, "
                               "an i8 max, or floats quantized by the epilogue)")
        if op.kind not in ("max", "avg", "sum"):
            raise NotLowerable(f"pooling kind '{op.kind}' is not supported")
        self.lowered, self.m = batch_as_channels(lowered), m
        tensors = self.lowered.tensors
        self.g = PoolGeometry(tensors["input"], tensors["out"], op)
        self.e = dtype_bytes(pooled_dtype(op))
        self.per_out_extra = bytes_per_element(op.epilogue, op.epilogue_inputs, dtype) + \
            quantized_output_bytes(op.out.dtype, dtype)

    def fits(self, t: PoolTiling) -> bool:
        g, e = self.g, self.e
        in_elems = t.cb * g.in_rows(t.rows) * g.in_cols(t.cols)
        out_elems = t.cb * t.rows * t.cols
        need = 2 * aligned(in_elems * e) + 2 * aligned(out_elems * e) + \
            self.per_out_extra * out_elems + 16 * SRAM_ALIGN
        return need <= self.m.sram_bytes

    def candidates(self) -> list[Candidate]:
        g = self.g
        candidates = []
        col_options = [g.wo] + [c for c in split_candidates(g.wo) if c != g.wo]
        for cb in split_candidates(g.c, 16):
            for cols in col_options:
                for rows in split_candidates(g.ho):
                    t = PoolTiling(cb, rows, cols)
                    if self.fits(t):
                        candidates.append(Candidate(t, cb * rows * cols))
                if candidates:
                    break
        if not candidates:
            raise NotLowerable(f"does not fit SRAM even tiled: {g.kh}x{g.kw} pooling window")
        return candidates

    def estimate(self, t: PoolTiling) -> int:
        g, m, e = self.g, self.m, self.e
        in_elems = t.cb * g.in_rows(t.rows) * g.in_cols(t.cols)
        out_elems = t.cb * t.rows * t.cols
        tiles = g.n * ceil_div(g.c, t.cb) * ceil_div(g.ho, t.rows) * ceil_div(g.wo, t.cols)
        load = m.dma_latency_cycles + ceil_div(in_elems * e, m.dram_bytes_per_cycle)
        store = m.dma_latency_cycles + ceil_div(out_elems * e, m.dram_bytes_per_cycle)
        vec = m.vector_latency_cycles + ceil_div(out_elems * g.kh * g.kw * e,
                                                 m.vector_bytes_per_cycle)
        return max(tiles * load, tiles * store, tiles * vec) + load + store + vec

    def emit(self, t: PoolTiling) -> TiledProgram:
        return PoolEmitter(self.lowered, self.g, t, self.m).run()


def integer_max(op) -> bool:
    return op.kind == "max" and op.input.dtype == "i8"


# An i8 max pool's epilogue, from its f32 pool: the value as an integer (exact).
TO_BYTES = [("acc",), ("ftoi", (0,), 8)]


def keeps_bytes(epilogue) -> bool:
    """Whether the epilogue leaves every i8 value as it is: none, or the max with the
    pool's initial value (IREE's fill of -128, or below)."""
    return epilogue == [("acc",)] or len(epilogue) == 3 and epilogue[1][0] == "iconst" and \
        epilogue[1][1] <= -128 and epilogue[2] == ("imax", (0, 1))


def pooled_dtype(op) -> str:
    """The dtype vpool computes the pool in: the input's, f32 for an i8 max."""
    return "f32" if integer_max(op) else op.input.dtype


class PoolEmitter:
    def __init__(self, lowered, g: PoolGeometry, t: PoolTiling, m: MachineConfig):
        self.op, self.g, self.t, self.tensors = lowered.op, g, t, lowered.tensors
        sram = Sram(m.sram_bytes)
        self.sram = sram
        self.dtype = pooled_dtype(self.op)
        in_elems = t.cb * g.in_rows(t.rows) * g.in_cols(t.cols)
        self.loaded = Slots(sram, "in.i8", "i8", (in_elems,)) if integer_max(self.op) else None
        self.inputs = Slots(sram, "in", self.dtype, (in_elems,))
        self.outs = Slots(sram, "pool", self.dtype, (t.cb * t.rows * t.cols,))
        self.epi = EpilogueInputs(sram, self.tensors, used_inputs(self.op.epilogue),
                                  len(self.op.epilogue_inputs), [1, t.cb, t.rows, t.cols],
                                  self.dtype, m)
        epilogue = TO_BYTES if integer_max(self.op) else self.op.epilogue
        self.output = OutputStage(sram, epilogue, self.dtype, self.tensors["out"],
                                  t.cb * t.rows * t.cols, m,
                                  input_dtypes=self.epi.dtypes)
        self.pad_bits = 0                     # the halo: a max's loses to every value
        if self.op.kind == "max":
            self.pad_bits = value_bits("i8", -128) if self.loaded is not None else \
                value_bits(self.dtype, float("-inf"))

    def run(self) -> TiledProgram:
        g, t = self.g, self.t
        pipeline = Pipeline(self.output.setup + self.epi.setup)
        for n in range(g.n):
            for c0 in range(0, g.c, t.cb):
                for y0 in range(0, g.ho, t.rows):
                    for x0 in range(0, g.wo, t.cols):
                        pipeline.add(*self._tile(n, c0, min(t.cb, g.c - c0), y0,
                                                 min(t.rows, g.ho - y0), x0,
                                                 min(t.cols, g.wo - x0)))
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {t.cb}x{t.rows}x{t.cols} (channels x rows x cols)", 2)

    def _tile(self, n, c0, cb, y0, rows, x0, cols) -> tuple[list[Instr], list[Instr]]:
        g = self.g
        note = f"n{n} c{c0}+{cb} y{y0}+{rows} x{x0}+{cols}"
        src, _ = self.inputs.acquire(None)
        loaded = self.loaded.acquire(None)[0] if self.loaded is not None else src
        hi, wi = g.in_rows(rows), g.in_cols(cols)
        front, (r0, r1, q0, q1) = load_window(
            self.tensors["input"], loaded, n, c0, cb, y0 * g.sh - g.pt, x0 * g.sw - g.pl, hi,
            wi, self.pad_bits, note + " input")
        if loaded is not src:
            front.append(convert(Operand.flat(src), Operand.flat(loaded), (1, 1, cb * hi * wi),
                                 note + " to f32"))
        loads, inputs = self.epi.load([n, c0, y0, x0], [1, cb, rows, cols], note, without_batch)
        front += loads
        dst, _ = self.outs.acquire(None)
        flags = {"max": Flag.NONE, "avg": Flag.POOL_AVG,
                 "sum": Flag.POOL_AVG | Flag.COUNT_INCLUDE_PAD}[self.op.kind]
        if self.op.kind == "avg" and self.op.count_include_pad:
            flags |= Flag.COUNT_INCLUDE_PAD
        fields = {"dst": dst.addr, "src": src.addr, "c": cb, "hi": hi, "wi": wi, "ho": rows,
                  "wo": cols, "kh_kw": pack_pair(g.kh, g.kw), "sh_sw": pack_pair(g.sh, g.sw),
                  "dh_dw": pack_pair(g.dh, g.dw), "pt_pl": pack_pair(r0, q0),
                  "vh_vw": pack_pair(max(0, r1 - r0), max(0, q1 - q0))}
        back = [Instr("vpool", self.dtype, fields, int(flags), reads=(src,), writes=(dst,),
                      note=note)]
        dense = (rows * cols, cols, 1)
        box = (cb, rows, cols)
        pooled = Operand(dst, dense)
        if self.op.kind == "sum":
            back.append(unary("vscale", self.dtype, pooled, pooled, box, note,
                              float(g.kh * g.kw), 0.0))
        back += self.output.emit(box, pooled, inputs, [n, c0, y0, x0], [1, cb, rows, cols],
                                 [0, *dense], note)
        return front, back
