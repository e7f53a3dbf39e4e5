"""Tiling of Conv2D: output-channel blocks x output-row blocks (x column blocks), with
the input channels split into chunks accumulated by the MAC (ACCUMULATE) when a tile's
input and weights do not fit otherwise.

A tile is the output box out[n][f0:f0+fb][y0:y0+rows][x0:x0+cols]. Its input is the
padded window in[n][channels][rows·sh + halo][cols·sw + halo] as a dense SRAM tile
[c][hi][wi]: the part inside the image is one strided DMA box (any layout: the box
strides are the tensor's), the part in the padding is zero-filled (`fill` of the
halo bands). Weights are a dense [f][c/groups][kh][kw] SRAM tile, kept resident across
tiles of the same channel block. A per-channel bias add at the start of the epilogue
becomes the MAC BIAS flag; the rest of the epilogue runs on the vector engine over the
output tile before its store.

Tile sizes come from an estimate of each engine's busy time (the cost model's formulas
for the MAC, the cost of the first tile's transfers and epilogue instructions as the
emitters write them) over the candidate tilings whose SRAM allocation (measured by
running the emitter's allocation) fits, double buffering included. Each conv2d puts the
tile's output channels or its pixels (`pixel_columns`) on the MAC columns, whichever
takes fewer steps. Convolutions with few output channels may instead run as an im2col
matmul (tile_conv_im2col), depthwise ones on the MAC array's depthwise mode
(tile_conv_depthwise), whichever strategy's estimate is lowest.
"""
from dataclasses import dataclass, field, replace

from executable_format.cost import conv2d_steps
from executable_format.isa import Flag, pack_pair
from executable_format.machine import MachineConfig

from .affine_fold import AffineFold
from .epilogue import (EpilogueInputs, OutputStage, accumulator, fold_affine, fold_bias,
                       used_inputs, without_batch)
from .lower import Lowered, NotLowerable
from . import tile_conv_depthwise as depthwise
from .tile_conv_im2col import Im2colTiler, ramp_rows
from .vector import Operand, binary
from .npu_ir import (Buffer, Instr, busy_cycles, dtype_bytes, mac_flags,
                     mac_operands_supported)
from .tile import (Dim, Slots, Sram, Streamed, TiledProgram, block_candidates, ceil_div,
                   Pipeline, dma_instrs, fitting, footprint, load_window, ramp_blocks,
                   split_candidates, store_instrs, window_columns,
                   window_extent)
from .tiler import Candidate, Tiler, cheapest


@dataclass(frozen=True)
class ConvShape:
    n: int
    c: int
    h: int
    w: int
    f: int
    cg: int
    kh: int
    kw: int
    ho: int
    wo: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    groups: int

    @property
    def fg(self) -> int:
        return self.f // self.groups

    def in_rows(self, rows: int) -> int:
        return window_extent(rows, self.sh, self.kh, self.dh)

    def in_cols(self, cols: int) -> int:
        return window_columns(cols, self.wo, self.sw, self.kw, self.dw, self.pl, self.w,
                              self.h)


@dataclass(frozen=True)
class ConvTiling:
    fb: int          # output channels per tile: whole groups, or a part of one group
    cb: int          # input channels per MAC instruction: a chunk of C (or of the tile's
    #                  group's channels), or all the channels of the tile's whole groups
    rows: int
    cols: int


def within_group(s: "ConvShape", t: ConvTiling) -> bool:
    """Whether the tiling's MAC instructions are dense (groups 1) convolutions over a
    chunk of one group's input channels: always for groups 1, and for a grouped conv
    whose tile holds part of one group (a group too big for SRAM)."""
    return s.groups == 1 or t.fb < s.fg


def conv_shape(lowered: Lowered) -> ConvShape:
    op = lowered.op
    n, c, h, w = op.input.shape
    f, cg, kh, kw = op.weight.shape
    on, of, ho, wo = op.out.shape
    if c != cg * op.groups or f % op.groups or (on, of) != (n, f):
        raise NotLowerable(f"inconsistent conv shapes: input {op.input.shape}, weight "
                           f"{op.weight.shape}, out {op.out.shape}, groups {op.groups}")
    return ConvShape(n, c, h, w, f, cg, kh, kw, ho, wo, *op.stride, *op.dilation,
                     op.pads[0], op.pads[1], op.groups)


@dataclass
class ConvJob:
    """What is fixed for the dispatch, whatever the tiling."""
    lowered: Lowered
    s: ConvShape
    m: MachineConfig
    dtype: str                 # operand dtype
    acc_dtype: str
    expr: list                 # epilogue, with a folded bias removed
    bias_index: int | None     # epilogue input applied with the MAC BIAS flag
    inputs_used: list[int]     # epilogue inputs the (folded) epilogue reads
    affine: list = field(default_factory=list)  # epilogue.fold_affine steps folded into W

    def __post_init__(self):
        self.transfers = ConvTransfers(self)

    @property
    def weight_dtype(self) -> str:
        return self.lowered.op.weight.dtype

    @property
    def mac_flags(self) -> int:
        """The operand flags of an instruction whose dtype is the input's (conv2d, dwconv2d)."""
        return mac_flags(self.dtype, self.weight_dtype, self.lowered.op.narrow_sum)



class ConvTransfers:
    """Exact cycles of one tile's transfers and epilogue, for the planners' estimates:
    the instructions the emitters write for the first tile (halo fills included),
    costed by the cycle model, cached per block size."""

    def __init__(self, job: "ConvJob"):
        self.job = job
        self.cache: dict = {}
        self.output: OutputStage | None = None

    def _cost(self, key, build) -> int:
        if key not in self.cache:
            self.cache[key] = busy_cycles(self.job.m, build())
        return self.cache[key]

    def _probe(self, dtype: str, elems: int) -> Buffer:
        return Buffer("probe", dtype, (elems,), "sram")

    def input(self, cc: int, rows: int, cols: int) -> int:
        s, tensors = self.job.s, self.job.lowered.tensors
        hi, wi = s.in_rows(rows), s.in_cols(cols)
        probe = self._probe(self.job.dtype, cc * hi * wi)
        return self._cost(("input", cc, rows, cols), lambda: load_window(
            tensors["input"], probe, 0, 0, cc, -s.pt, -s.pl, hi, wi, 0, "")[0])

    def weights(self, fb: int, cc: int) -> int:
        s, w = self.job.s, self.job.lowered.tensors["weight"]
        sf, sc, sy, sx = w.strides
        k = s.kh * s.kw
        dims = [Dim(fb, sf, cc * k), Dim(cc, sc, k), Dim(s.kh, sy, s.kw), Dim(s.kw, sx, 1)]
        probe = self._probe(self.job.dtype, fb * cc * k)
        return self._cost(("weights", fb, cc),
                          lambda: dma_instrs("dma.load", w, 0, probe, 0, dims, ""))

    def weight_fold(self, fb: int, cc: int) -> int:
        """Vector cycles of scaling a block of fb x cc channels of weights by the folded
        affine chain's per-channel scale (ConvEmitter._load_weights)."""
        s = self.job.s
        k = cc * s.kh * s.kw
        probe = self._probe("f32", fb * k)
        return self._cost(("fold", fb, cc), lambda: [binary(
            "vmul", "f32", Operand(probe, (0, k, 1)), Operand(probe, (0, k, 1)),
            Operand(probe, (0, 1, 0)), (1, fb, k), "")])

    def epilogue(self, fb: int, rows: int, cols: int) -> tuple[int, int]:
        """(DMA-in, vector) cycles of the epilogue of a tile of `fb` channels: its inputs'
        loads and its vector instructions as OutputStage writes them (a quantized
        epilogue's vrequant, or each node), the stores excluded."""
        key = ("epilogue", fb, rows, cols)
        if key not in self.cache:
            job, tensors = self.job, self.job.lowered.tensors
            sram, tile, dense = Sram(None), [1, fb, rows, cols], (rows * cols, cols, 1)
            inputs = EpilogueInputs(sram, tensors, job.inputs_used,
                                    len(job.lowered.op.epilogue_inputs), tile, job.acc_dtype,
                                    job.m)
            if self.output is None:     # planned once, for the biggest tile
                s = job.s
                self.output = OutputStage(Sram(None), job.expr, job.acc_dtype, tensors["out"],
                                          s.f * s.ho * s.wo, job.m, input_dtypes=inputs.dtypes,
                                          tensors=tensors, constants=job.lowered.constants,
                                          extra_outputs=job.lowered.extra_outputs)
            inputs.keep_only(self.output.tile_inputs)
            acc = sram.alloc("acc", job.acc_dtype, (fb * rows * cols,))
            loads, operands = inputs.load([0] * 4, tile, "", without_batch)
            instrs = loads + self.output.emit((fb, rows, cols), Operand(acc, dense), operands,
                                              [0] * 4, tile, [0, *dense], "")
            self.cache[key] = tuple(busy_cycles(job.m, [i for i in instrs if i.engine_name == e])
                                    for e in ("dma_in", "vector"))
        return self.cache[key]

    def store(self, fb: int, rows: int, cols: int) -> int:
        """The stores of a tile's results (`out` and each extra output)."""
        lowered = self.job.lowered
        outputs = [lowered.tensors["out"]] + [out for out, _ in lowered.extra_outputs]
        return self._cost(("store", fb, rows, cols), lambda: [
            instr for out in outputs for instr in store_instrs(
                out, [0, 0, 0, 0], [1, fb, rows, cols], self._probe(out.dtype, fb * rows * cols),
                [0, rows * cols, cols, 1], "")])


def conv_job(lowered: Lowered, m: MachineConfig) -> ConvJob:
    op = lowered.op
    dtype = op.input.dtype
    if not mac_operands_supported(dtype, op.weight.dtype):
        raise NotLowerable(f"conv operand dtypes {dtype}/{op.weight.dtype} not supported")
    acc_dtype = accumulator(dtype)
    # A sum in f16 adds its bias after the products, each rounded: no BIAS flag.
    # Nor does an epilogue storing several results: the folds renumber its nodes.
    bias_index, expr = (None, op.epilogue) if op.narrow_sum or op.extra_outputs else \
        fold_bias(op.epilogue, op.epilogue_inputs, {1}, acc_dtype)
    return ConvJob(lowered, conv_shape(lowered), m, dtype, acc_dtype, expr, bias_index,
                   used_inputs(expr))


def affine_job(job: ConvJob) -> ConvJob:
    """The job with the epilogue's per-channel affine chain (bias, BatchNormalization)
    folded into the weights and bias (im2col, f32 depthwise), or `job` when the chain is at
    most the bias fold_bias already takes."""
    op = job.lowered.op
    if op.extra_outputs or job.weight_dtype != job.dtype:   # the fold renumbers the nodes
        return job          # they store; it scales the weights in their own dtype
    steps, expr = fold_affine(op.epilogue, op.epilogue_inputs, 1)
    if not steps or (len(steps) == 1 and job.bias_index is not None):
        return job
    return replace(job, expr=expr, bias_index=None, inputs_used=used_inputs(expr), affine=steps)


def conv2d_mapping(m: MachineConfig, dtype: str, groups: int, f: int, c: int, pixels: int,
                   taps: int) -> tuple[int, Flag]:
    """(cycles, flag) of a conv2d of `f` output and `c` input channels, `pixels` output
    pixels and `taps` = kh·kw: the output channels on the MAC columns, or the pixels
    (PIXEL_COLUMNS) when that takes fewer steps (few channels per group)."""
    k_group = c // groups * taps
    steps = {flag: conv2d_steps(m, m.mac_k_lanes(dtype), flag, groups, f // groups, pixels,
                                k_group) for flag in (Flag.NONE, Flag.PIXEL_COLUMNS)}
    flag = min(steps, key=steps.get)
    return m.mac_latency_cycles + steps[flag], flag


def block_lengths(total: int, size: int) -> list[tuple[int, int]]:
    """(length, count) of the blocks `total` is cut into: the whole ones, then the rest."""
    whole = [(size, total // size)] if total >= size else []
    return whole + ([(total % size, 1)] if total % size else [])


def counts(s: ConvShape, t: ConvTiling) -> tuple[int, int, int, int]:
    """Blocks of output channels, rows, cols, and input-channel chunks."""
    nc = ceil_div(s.cg, t.cb) if within_group(s, t) else 1
    return ceil_div(s.f, t.fb), ceil_div(s.ho, t.rows), ceil_div(s.wo, t.cols), nc


def mac_channels(s: ConvShape, t: ConvTiling) -> tuple[int, int]:
    """(groups, input channels) of each conv2d of a whole tile: one group's chunk, or
    the tile's whole groups with all their channels."""
    if within_group(s, t):
        return 1, t.cb
    return t.fb // s.fg, t.fb // s.fg * s.cg


def weight_elems(s: ConvShape, t: ConvTiling) -> int:
    return t.fb * (t.cb if within_group(s, t) else s.cg) * s.kh * s.kw


def weights_resident(s: ConvShape, t: ConvTiling) -> bool:
    """Whether each block of weights is loaded once for the dispatch: its two slots hold
    the blocks of at most two input-channel chunks across the spatial tiles."""
    return counts(s, t)[3] <= 2


class DirectConvTiler:
    """The direct strategy (tiler.Tiler): estimated cycles of a tiling (the cost model's
    formulas per engine) over the tilings that fit. With `folded` (tile_conv.affine_job's
    job), a tiling whose weights stay resident folds the epilogue's per-channel affine
    chain into each block of weights as it is loaded (one vector pass over the block)
    instead of running it over every output tile."""

    def __init__(self, job: ConvJob, folded: ConvJob | None = None):
        self.job, self.s, self.m = job, job.s, job.m
        self.folded = folded
        # tiling -> (ramp or None, its estimate): the ramp is chosen by the estimates
        self._plans: dict[ConvTiling, tuple[tuple[list[int], list[int]] | None, int]] = {}

    def job_for(self, t: ConvTiling) -> ConvJob:
        return self.folded if self.folded and weights_resident(self.s, t) else self.job

    def mac_cycles(self, t: ConvTiling) -> int:
        groups, c = mac_channels(self.s, t)
        return conv2d_mapping(self.m, self.job.dtype, groups, t.fb, c, t.rows * t.cols,
                              self.s.kh * self.s.kw)[0]

    def ramp(self, t: ConvTiling) -> tuple[list[int], list[int]] | None:
        return self._plan(t)[0]

    def estimate(self, t: ConvTiling) -> int:
        return self._plan(t)[1]

    def _plan(self, t: ConvTiling) -> tuple[tuple[list[int], list[int]] | None, int]:
        """(ramp, estimate), cached. The ramp: the rows of the first and of the last tiles
        (tile_conv_im2col.ramp_rows) of a tile loop that is one sweep down the rows (one
        block of output channels, input channels and columns, one image), where tiles
        growing from one row and shrinking back (tile.ramp_blocks) are estimated faster
        than whole ones; else None. The MAC
        then starts after a one-row load and the last store is one row: a tile grows by
        the ratio of its MACs to the other engines' work (at least 2), so the next
        tile's load fits in the previous tile's MACs."""
        if t not in self._plans:
            s = self.s
            self._plans[t] = (None, self._estimate(t))
            nf, _, nx, nc = counts(s, t)
            if nf * s.n * nx * nc == 1 and s.ho >= 3 * t.rows:
                load, mac, vector, store = self._tile_costs(t, t.rows)
                growth = mac / max(load, vector, store)
                if growth > 1:
                    ramp = ramp_rows(t.rows, max(growth, 2.0))
                    cycles = self._ramped_estimate(t, ramp_blocks(s.ho, t.rows, *ramp))
                    if cycles < self._plans[t][1]:
                        self._plans[t] = (ramp, cycles)
        return self._plans[t]

    def _tile_costs(self, t: ConvTiling, rows: int) -> tuple[int, int, int, int]:
        """(input and epilogue loads, MAC, vector, store) cycles of a tile of `rows` rows
        of a one-sweep loop."""
        job = self.job_for(t)
        epilogue_in, vector = job.transfers.epilogue(t.fb, rows, t.cols)
        return (job.transfers.input(mac_channels(self.s, t)[1], rows, t.cols) + epilogue_in,
                self.mac_cycles(replace(t, rows=rows)), vector,
                job.transfers.store(t.fb, rows, t.cols))

    def _ramped_estimate(self, t: ConvTiling, row_blocks: list[tuple[int, int]]) -> int:
        """estimate's pipeline over the tiles of `row_blocks` (one sweep, weights loaded
        once)."""
        job = self.job_for(t)
        w_channels = t.cb if within_group(self.s, t) else self.s.cg
        fold = job.transfers.weight_fold(t.fb, w_channels) if job.affine else 0
        costs = {rows: self._tile_costs(t, rows) for rows in {r for _, r in row_blocks}}
        totals = [sum(costs[rows][i] for _, rows in row_blocks) for i in range(4)]
        (load, first_mac, first_vector, _) = costs[row_blocks[0][1]]
        (_, last_mac, last_vector, last_store) = costs[row_blocks[-1][1]]
        fill = job.transfers.weights(t.fb, w_channels) + fold + load
        return max(totals[0] + fill - load + last_mac + last_vector + last_store,
                   fill + totals[1] + last_vector + last_store,
                   fill + first_mac + totals[2] + fold + last_store,
                   fill + first_mac + first_vector + totals[3])

    def mac_total(self, t: ConvTiling) -> int:
        """MAC cycles of every conv2d of the dispatch: the last block of each dim (output
        channels, rows, cols, input-channel chunks) as long as it is."""
        s = self.s
        chunks = block_lengths(s.cg, t.cb) if within_group(s, t) else [(t.cb, 1)]
        return s.n * sum(
            nf * ny * nx * nc * self.mac_cycles(replace(t, fb=fb, rows=rows, cols=cols, cb=cb))
            for fb, nf in block_lengths(s.f, t.fb) for rows, ny in block_lengths(s.ho, t.rows)
            for cols, nx in block_lengths(s.wo, t.cols) for cb, nc in chunks)

    def _estimate(self, t: ConvTiling) -> int:
        """The busiest engine's cycles over the tiles, plus the first tile's stages before
        it (fill) and the last tile's after it (drain)."""
        s, m, job = self.s, self.m, self.job_for(t)
        nf, ny, nx, nc = counts(s, t)
        tiles = s.n * nf * ny * nx
        one_mac = self.mac_cycles(t) * nc
        dense = within_group(s, t)
        load_in = job.transfers.input(mac_channels(s, t)[1], t.rows, t.cols)
        # Two slots per operand: blocks cycling through at most two keys stay resident
        # (inputs across the channel blocks of one group when there is one spatial tile,
        # weights across spatial tiles when there are at most two input-channel chunks).
        spatial = s.n * ny * nx
        input_loads = s.groups * spatial * nc if dense and spatial * nc <= 2 else tiles * nc
        weight_loads = nf * nc if nc <= 2 else tiles * nc
        w_channels = t.cb if dense else s.cg
        load_w = job.transfers.weights(t.fb, w_channels)
        epilogue_in, vector = job.transfers.epilogue(t.fb, t.rows, t.cols)
        fold = job.transfers.weight_fold(t.fb, w_channels) if job.affine else 0
        dma_in = input_loads * load_in + weight_loads * load_w + tiles * epilogue_in
        store = job.transfers.store(t.fb, t.rows, t.cols)
        fill = load_in + load_w + fold + epilogue_in
        return max(dma_in + fold + one_mac + vector + store,
                   fill + self.mac_total(t) + vector + store,
                   fill + one_mac + tiles * vector + weight_loads * fold + store,
                   fill + one_mac + vector + tiles * store)

    def fits(self, t: ConvTiling) -> bool:
        return footprint(lambda sram: ConvEmitter(self.job_for(t), t, sram)) <= \
            self.m.sram_bytes

    def candidates(self) -> list[Candidate]:
        s, m = self.s, self.m
        lanes = m.mac_k_lanes(self.job.dtype)
        if s.groups == 1:
            blocks = [(fb, cb) for fb in block_candidates(s.f, m.mac_cols)
                      for cb in block_candidates(s.c, lanes)]
        else:       # whole groups, or a part of one group with chunks of its channels
            blocks = [(s.fg * g, g * s.cg) for g in split_candidates(s.groups)]
            blocks += [(fb, cb) for fb in block_candidates(s.fg, m.mac_cols)
                       if fb < s.fg and s.fg % fb == 0 for cb in block_candidates(s.cg, lanes)]
        candidates = []
        for fb, cb in blocks:
            whole_rows = self.fits(ConvTiling(fb, cb, 1, s.wo))
            for cols in [s.wo] if whole_rows else split_candidates(s.wo):
                rows_fitting = fitting(split_candidates(s.ho),
                                       lambda rows: self.fits(ConvTiling(fb, cb, rows, cols)))
                for rows in rows_fitting:
                    t = ConvTiling(fb, cb, rows, cols)
                    candidates.append(Candidate(t, rows * cols * fb * cb))
        return candidates

    def emit(self, t: ConvTiling) -> TiledProgram:
        return ConvEmitter(self.job_for(t), t, Sram(self.m.sram_bytes)).run(self.ramp(t))


class ConvTiler:
    """The tiler (tiler.Tiler) of conv2d dispatches. Its candidates are the cheapest
    tiling of each strategy that applies (direct MAC conv2d, im2col matmul for few output
    channels, depthwise with dwconv2d), each a (strategy index, tiling) pair of size 0:
    strategies compare on their estimates alone, their tile sizes count different
    things. A tiling is plain data: another dispatch's ConvTiler emits it for its own
    tensors (backend.tiling_key)."""

    def __init__(self, lowered: Lowered, machine: MachineConfig):
        self.job = conv_job(lowered, machine)
        self.strategies = self._strategies()

    def _strategies(self) -> list[Tiler]:
        job = self.job
        folded = affine_job(job) if job.dtype == "f32" else job
        strategies: list[Tiler] = [DirectConvTiler(job, folded if folded is not job else None)]
        bias_dtype = None if job.bias_index is None else \
            job.lowered.tensors[f"epilogue.{job.bias_index}"].dtype
        if job.s.groups == 1 and job.dtype in ("f32", "i8", "u8") and \
                bias_dtype in (None, job.dtype) and job.weight_dtype in (job.dtype, "i8", "u8"):
            strategies.append(Im2colTiler(folded))
        if depthwise.applies(job):
            strategies.append(depthwise.DepthwiseTiler(folded))
        return strategies

    def candidates(self) -> list[Candidate]:
        found = []
        for index, strategy in enumerate(self.strategies):
            candidates = strategy.candidates()
            if candidates:
                found.append(Candidate((index, cheapest(strategy, candidates)), 0))
        if not found:
            s = self.job.s
            raise NotLowerable(f"does not fit SRAM even tiled: conv {s.c}->{s.f} channels, "
                               f"{s.kh}x{s.kw} kernel, width {s.w}")
        return found

    def estimate(self, tiling: tuple[int, object]) -> int:
        index, t = tiling
        return self.strategies[index].estimate(t)

    def emit(self, tiling: tuple[int, object]) -> TiledProgram:
        index, t = tiling
        return self.strategies[index].emit(t)


class ConvEmitter:
    """Allocates the SRAM of a tiling and writes its tile loop as NPU instructions."""

    def __init__(self, job: ConvJob, t: ConvTiling, sram: Sram):
        s = job.s
        self.job, self.s, self.t, self.sram = job, s, t, sram
        self.tensors = job.lowered.tensors
        self.dtype = job.dtype
        nf, _, _, nc = counts(s, t)
        self.inputs = Slots(sram, "in", self.dtype,
                            (t.cb * s.in_rows(t.rows) * s.in_cols(t.cols),))
        self.weights = Slots(sram, "w", self.dtype, (weight_elems(s, t),),
                             1 if nf * nc == 1 else 2)
        self.outs = Slots(sram, "acc", job.acc_dtype, (t.fb * t.rows * t.cols,))
        tile = [1, t.fb, t.rows, t.cols]
        self.bias = None
        if job.bias_index is not None:
            self.bias = Streamed(sram, self.tensors[f"epilogue.{job.bias_index}"], tile,
                                 compute_dtype=job.acc_dtype)
        self.affine = AffineFold(sram, job.affine, self.tensors, s.f, job.m) if job.affine else None
        self.folded_bias = sram.alloc("affine.bias", "f32", (s.f,)) if job.affine else None
        self.epi_inputs = EpilogueInputs(sram, self.tensors, job.inputs_used,
                                         len(job.lowered.op.epilogue_inputs), tile, job.acc_dtype,
                                         job.m)
        self.output = OutputStage(sram, job.expr, job.acc_dtype, self.tensors["out"],
                                  t.fb * t.rows * t.cols, job.m,
                                  input_dtypes=self.epi_inputs.dtypes,
                                  tensors=self.tensors, constants=job.lowered.constants,
                                  tile_counts=tile,
                                  extra_outputs=job.lowered.extra_outputs)
        self.epi_inputs.keep_only(self.output.tile_inputs)

    def run(self, ramp: tuple[list[int], list[int]] | None = None) -> TiledProgram:
        """The tile loop; with `ramp` (DirectConvTiler.ramp), its one sweep down the rows
        in ramped blocks."""
        s, t = self.s, self.t
        nf, _, nx, nc = counts(s, t)
        setup = self.output.setup + self.epi_inputs.setup
        if self.affine is not None:
            setup += self.affine.scale_and_bias(Operand(self.folded_bias, (0, 0, 1)))
        pipeline = Pipeline(setup)
        rows = ramp_blocks(s.ho, t.rows, *ramp) if ramp else \
            [(y0, min(t.rows, s.ho - y0)) for y0 in range(0, s.ho, t.rows)]
        for fi in range(nf):
            for n in range(s.n):
                for y0, tile_rows in rows:
                    for xi in range(nx):
                        pipeline.add(*self._tile(fi, n, y0, tile_rows, xi, nc))
        ramped = ""
        if ramp:
            up, down = ("+".join(map(str, pieces)) for pieces in ramp)
            ramped = f", first rows {up}, last {down}"
        desc = (f"tiles {t.fb}x{t.rows}x{t.cols} (out channels x rows x cols{ramped})"
                + (f", {nc} input-channel chunks of {t.cb}" if nc > 1 else ""))
        return TiledProgram(pipeline.finish(), self.sram.buffers, desc, 2)

    def _tile(self, fi, n, y0, rows, xi, nc) -> tuple[list[Instr], list[Instr]]:
        s, t = self.s, self.t
        f0, x0 = fi * t.fb, xi * t.cols
        fb, cols = min(t.fb, s.f - f0), min(t.cols, s.wo - x0)
        note = f"n{n} f{f0}+{fb} y{y0}+{rows} x{x0}+{cols}"
        out, _ = self.outs.acquire(None)
        front: list[Instr] = []
        bias_addr, flags = 0, Flag.NONE
        if self.bias is not None:
            bias_buf, _, loads = self.bias.load([n, f0, y0, x0], [1, fb, rows, cols], note)
            front += loads
            bias_addr, flags = bias_buf.addr, Flag.BIAS
        elif self.folded_bias is not None:
            bias_buf = self.folded_bias
            bias_addr, flags = bias_buf.addr + f0 * dtype_bytes("f32"), Flag.BIAS
        for ci in range(nc):
            if within_group(s, t):      # dense, over a chunk of the group's channels
                w0, cc, groups = ci * t.cb, min(t.cb, s.cg - ci * t.cb), 1
                c0, w_channels = f0 // s.fg * s.cg + w0, cc
            else:
                c0, cc, groups = f0 // s.fg * s.cg, fb // s.fg * s.cg, fb // s.fg
                w0, w_channels = 0, s.cg
            in_buf = self._load_input(front, n, c0, cc, y0, rows, x0, cols, note)
            w_buf = self._load_weights(front, fi, ci, f0, fb, w0, w_channels, note)
            fields = {"in": in_buf.addr, "w": w_buf.addr, "out": out.addr, "c": cc,
                      "hi": s.in_rows(rows), "wi": s.in_cols(cols), "f": fb, "ho": rows,
                      "wo": cols, "kh_kw": pack_pair(s.kh, s.kw), "sh_sw": pack_pair(s.sh, s.sw),
                      "dh_dw": pack_pair(s.dh, s.dw), "groups": groups,
                      "bias": 0 if ci else bias_addr}
            reads = (in_buf, w_buf) + ((bias_buf,) if flags & Flag.BIAS else ())
            if ci:
                flags, reads = Flag.ACCUMULATE, (in_buf, w_buf, out)
            _, columns = conv2d_mapping(self.job.m, self.dtype, groups, fb, cc, rows * cols,
                                        s.kh * s.kw)
            front.append(Instr("conv2d", self.dtype, fields,
                               int(flags | columns) | self.job.mac_flags,
                               reads=reads,
                               writes=(out,), note=note + f" c{c0}+{cc}"))
        dense = [rows * cols, cols, 1]
        acc = Operand(out, tuple(dense))
        loads, epi_inputs = self.epi_inputs.load([n, f0, y0, x0], [1, fb, rows, cols], note,
                                                 without_batch)
        back = self.output.emit((fb, rows, cols), acc, epi_inputs, [n, f0, y0, x0],
                                [1, fb, rows, cols], [0] + dense, note)
        return front, loads + back

    def _load_input(self, front, n, c0, cc, y0, rows, x0, cols, note):
        s = self.s
        buf, fresh = self.inputs.acquire((n, c0, cc, y0, rows, x0, cols))
        if fresh:
            instrs, _ = load_window(self.tensors["input"], buf, n, c0, cc, y0 * s.sh - s.pt,
                                    x0 * s.sw - s.pl, s.in_rows(rows), s.in_cols(cols), 0,
                                    note + f" input c{c0}+{cc}")
            front += instrs
        return buf

    def _load_weights(self, front, fi, ci, f0, fb, c0, cc, note):
        s = self.s
        buf, fresh = self.weights.acquire((fi, ci))
        if fresh:
            src = self.tensors["weight"]
            sf, sc, sy, sx = src.strides
            k = s.kh * s.kw
            dims = [Dim(fb, sf, cc * k), Dim(cc, sc, k), Dim(s.kh, sy, s.kw), Dim(s.kw, sx, 1)]
            front += dma_instrs("dma.load", src, f0 * sf + c0 * sc, buf, 0, dims,
                                      note + f" weights c{c0}+{cc}")
            if self.affine is not None:
                rows = Operand(buf, (0, cc * k, 1))
                front.append(binary("vmul", "f32", rows, rows,
                                    Operand(self.affine.scale, (0, 1, 0), f0),
                                    (1, fb, cc * k), note + " affine fold into the weights"))
        return buf
