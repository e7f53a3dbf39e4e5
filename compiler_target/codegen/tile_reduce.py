"""Tiling of Reduce: blocks of output rows on the vector engine's `vreduce`.

A tile holds `ot` rows of the (O, I) input, dense [o][i] in SRAM. When the input's
reduced dimension is not the contiguous one (channels-last global pooling: O stride 1),
the tile is loaded [i][o] so the DMA reads whole runs, and a vcopy relayouts it to
[o][i] in SRAM. When even one row does not fit, I is split into chunks whose partial
results are combined with vadd / vmax (mean divides by I at the end with vscale).
An f16 input with an f32 result (IREE's sum of extended values: a mean or a group
norm's statistics in an f16 network) reduces in f32: each loaded tile is converted, and
relayouted in the same vcvt.
"""
from executable_format.isa import Flag
from executable_format.machine import MachineConfig

from .epilogue import (EpilogueInputs, OutputStage, bytes_per_element, quantized_output_bytes,
                       used_inputs)
from .legalize import REDUCE_KINDS
from .lower import Lowered, NotLowerable
from .npu_ir import FLOATS, Buffer, Instr, dtype_bytes
from .vector import Operand, binary, convert, unary
from .tile import SRAM_ALIGN, Dim, Pipeline, Slots, Sram, TiledProgram, ceil_div, dma_instrs
from .tiler import Candidate, pipelined_cycles

MIN_TILE_BYTES = 32 * 1024
PIPELINE_TILES = 8
MIN_CHUNK = 64        # of I, loaded [i][o]


class ReduceTiler:
    """The tiler (tiler.Tiler) of reduce dispatches: one candidate, (rows per tile, I
    chunk), the rows filling SRAM up to the ~8 tiles of >= 32 KB a pipeline wants."""

    def __init__(self, lowered: Lowered, m: MachineConfig):
        op = lowered.op
        dtype = op.input.dtype
        widened = dtype == "f16" and op.out.dtype == "f32"
        if dtype not in FLOATS or (op.out.dtype != dtype and op.out.dtype in FLOATS and
                                   not widened):
            raise NotLowerable(f"{dtype} -> {op.out.dtype} reductions are not supported "
                               "(floats, or floats quantized by the epilogue)")
        self.compute_dtype = "f32" if widened else dtype
        if op.kind not in REDUCE_KINDS:
            raise NotLowerable(f"reduction kind '{op.kind}' is not supported")
        self.lowered, self.m = lowered, m
        so, si = op.input.strides
        self.transposed = abs(so) < abs(si)           # load [i][o], relayout with vcopy

    def candidates(self) -> list[Candidate]:
        op, m = self.lowered.op, self.m
        outer, inner = op.input.shape
        e_in, e = dtype_bytes(op.input.dtype), dtype_bytes(self.compute_dtype)
        # Per input element: 2 load slots (+1 relayout or conversion buffer); per output
        # element: 2 result slots, a partial, the epilogue's temps and inputs.
        per_in = 2 * e_in + (e if self.transposed or e != e_in else 0)
        per_out = e * 3 + bytes_per_element(op.epilogue, op.epilogue_inputs,
                                            self.compute_dtype) + \
            quantized_output_bytes(op.out.dtype, self.compute_dtype)
        budget = m.sram_bytes - SRAM_ALIGN * 16
        if per_in * min(inner, 64) + per_out > budget:
            raise NotLowerable("does not fit SRAM even tiled")
        if self.transposed:
            return [self._runs_candidate(budget, per_in, per_out)]
        chunk = min(inner, (budget - per_out) // per_in)
        rows_fit = max(1, budget // (per_in * chunk + per_out))
        target = max(ceil_div(outer, PIPELINE_TILES), ceil_div(MIN_TILE_BYTES, chunk * e))
        ot = max(1, min(outer, rows_fit, target))
        return [Candidate((ot, chunk), ot * chunk)]

    def _runs_candidate(self, budget: int, per_in: int, per_out: int) -> Candidate:
        """Loaded [i][o], a DMA run is a tile's rows of one i: as many rows as fit with
        MIN_CHUNK of I (all of a channels-last pooling's channels, whose chunks of I are
        then each one contiguous run), and I in at least PIPELINE_TILES chunks so the
        loads overlap the reductions."""
        outer, inner = self.lowered.op.input.shape
        ot = max(1, min(outer, budget // (per_in * MIN_CHUNK + per_out)))
        fit = (budget - per_out * ot) // (per_in * ot)
        chunk = max(1, min(inner, fit, max(MIN_CHUNK, ceil_div(inner, PIPELINE_TILES))))
        return Candidate((ot, chunk), ot * chunk)

    def estimate(self, tiling: tuple[int, int]) -> int:
        outer, inner = self.lowered.op.input.shape
        ot = tiling[0]
        front, back = self._emitter(tiling).tile(0, min(ot, outer), inner)
        return pipelined_cycles(self.m, front + back, ceil_div(outer, ot))

    def emit(self, tiling: tuple[int, int]) -> TiledProgram:
        return self._emitter(tiling).run()

    def _emitter(self, tiling: tuple[int, int]) -> "ReduceEmitter":
        ot, chunk = tiling
        return ReduceEmitter(self.lowered, self.m, ot, chunk, self.transposed,
                             used_inputs(self.lowered.op.epilogue), self.compute_dtype)


class ReduceEmitter:
    def __init__(self, lowered, m, ot, chunk, transposed, used, dtype):
        self.op, self.tensors = lowered.op, lowered.tensors
        self.ot, self.chunk, self.transposed = ot, chunk, transposed
        self.dtype = dtype
        sram = Sram(m.sram_bytes)
        self.sram = sram
        self.loads = Slots(sram, "in", self.op.input.dtype, (ot * chunk,))
        self.relayout = sram.alloc("in.oi", self.dtype, (ot * chunk,)) \
            if transposed or self.dtype != self.op.input.dtype else None
        self.outs = Slots(sram, "red", self.dtype, (ot,))
        self.partial = sram.alloc("partial", self.dtype, (ot,))
        self.epi = EpilogueInputs(sram, self.tensors, used, len(self.op.epilogue_inputs), [ot],
                                  self.dtype, m)
        self.output = OutputStage(sram, self.op.epilogue, self.dtype, self.tensors["out"], ot,
                                  m, input_dtypes=self.epi.dtypes)

    def run(self) -> TiledProgram:
        outer, inner = self.op.input.shape
        pipeline = Pipeline(self.output.setup + self.epi.setup)
        for o0 in range(0, outer, self.ot):
            pipeline.add(*self.tile(o0, min(self.ot, outer - o0), inner))
        split = f", {ceil_div(inner, self.chunk)} chunks of {self.chunk}" if self.chunk < inner else ""
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {self.ot}x{min(self.chunk, inner)} (rows x reduced){split}", 2)

    def tile(self, o0, ot, inner) -> tuple[list[Instr], list[Instr]]:
        kind = self.op.kind
        note = f"o{o0}+{ot}"
        out, _ = self.outs.acquire(None)
        flat = Operand.flat(out)
        front: list[Instr] = []
        chunks = list(range(0, inner, self.chunk))
        for index, i0 in enumerate(chunks):
            ic = min(self.chunk, inner - i0)
            rows = self._load(front, o0, ot, i0, ic, note)
            if kind == "min":       # -max(-x): vreduce sums and takes maxima
                front.append(unary("vscale", self.dtype, Operand.flat(rows), Operand.flat(rows),
                                   (1, 1, ot * ic), note + " negate", -1.0, 0.0))
            target = out if index == 0 else self.partial
            flags = {"max": Flag.REDUCE_MAX, "min": Flag.REDUCE_MAX, "sum": Flag.NONE,
                     "mean": Flag.REDUCE_MEAN if len(chunks) == 1 else Flag.NONE}[kind]
            front.append(Instr("vreduce", self.dtype,
                               {"dst": target.addr, "src": rows.addr, "outer": ot, "inner": ic},
                               int(flags), reads=(rows,), writes=(target,),
                               note=note + f" i{i0}+{ic}"))
            if index:
                combine = "vmax" if kind in ("max", "min") else "vadd"
                front.append(binary(combine, self.dtype, flat, flat, Operand.flat(self.partial),
                                    (1, 1, ot), note))
        if kind == "mean" and len(chunks) > 1:
            front.append(unary("vscale", self.dtype, flat, flat, (1, 1, ot), note,
                               1.0 / inner, 0.0))
        if kind == "min":
            front.append(unary("vscale", self.dtype, flat, flat, (1, 1, ot), note + " negate",
                               -1.0, 0.0))
        loads, inputs = self.epi.load([o0], [ot], note, lambda _, strides: (0, 0, strides[0]))
        front += loads
        back = self.output.emit((1, 1, ot), flat, inputs, [o0], [ot], [1], note)
        return front, back

    def _load(self, front, o0, ot, i0, ic, note) -> Buffer:
        """The rows [o0, o0+ot) x [i0, i0+ic) as a dense [o][i] SRAM tile."""
        src = self.tensors["input"]
        so, si = src.strides
        buf, _ = self.loads.acquire(None)
        sram_o, sram_i = (1, ot) if self.transposed else (ic, 1)
        dims = [Dim(ot, so, sram_o), Dim(ic, si, sram_i)]
        front += dma_instrs("dma.load", src, o0 * so + i0 * si, buf, 0, dims, note)
        if self.relayout is None:
            return buf
        source = Operand(buf, (0, 1, ot) if self.transposed else (0, ic, 1))
        target = Operand(self.relayout, (0, ic, 1))
        if self.relayout.dtype != buf.dtype:
            front.append(convert(target, source, (1, ot, ic), note + " convert to f32"))
        else:
            front.append(unary("vcopy", self.dtype, target, source, (1, ot, ic),
                               note + " relayout [i][o] -> [o][i]"))
        return self.relayout
