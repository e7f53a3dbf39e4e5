"""Stage 2, tile: SRAM placement and the per-tile instruction stream, before scheduling.

The op-specific tilers (tile_conv and its im2col / depthwise strategies,
tile_contraction, tile_elementwise, tile_pool, tile_reduce, tile_rowwise; their
interface and the choice among their candidates are in tiler.py) choose tile sizes from
the machine and write an unsynchronised program: instructions in a valid sequential
order, each naming the buffers it reads and writes. This module holds what they share:

- candidate block sizes and `fitting` (bisection on SRAM fit);
- `Sram`: a bump allocator over the scratchpad (64-byte aligned buffers), and
  `footprint` to measure what an emitter would allocate;
- `Slots`: an operand's buffers keyed by the block they hold. Acquiring a key a slot
  holds reuses it (no reload); a new key takes the slot after the one used last. With
  two slots, the load of tile i+1 goes to the other buffer than the one tile i computes
  from, so scheduling can overlap them;
- `Streamed`: a DRAM tensor streamed tile by tile through Slots (broadcast dimensions
  not loaded, dtype converted on load when needed);
- `dma_instrs` / `fill_instrs` / `load_window` / `store_instrs`: strided boxes between a
  DRAM tensor and a dense SRAM tile, ordered so the innermost DMA dimension is the
  DRAM-contiguous one; padded convolution/pooling windows with filled halos;
- `Pipeline`: the program order of the tile loop (tile i's front before tile i-1's back).
"""
import itertools
from dataclasses import dataclass, field

from executable_format.cost import ceil_div
from executable_format.machine import MachineConfig

from .analysis.indexing import row_major
from .lower import NotLowerable
from .npu_ir import Buffer, Instr, alloc_line, dispatch_text, dtype_bytes, instr_line
from .vector import Operand, convert

SRAM_ALIGN = 64
DMA_DIMS = 4
RAMP_DEPTHS = range(4)  # pieces - 1 of a last tile cut by ramp_down_pieces


def prod(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def block_candidates(total: int, step: int, most: int = 16) -> list[int]:
    """Block sizes for a dimension: the whole extent, and ceil(total / k) rounded up to a
    multiple of `step` for k up to `most` (multiples of the MAC array's lanes)."""
    sizes = {total}
    for k in range(1, min(total, most) + 1):
        size = ceil_div(ceil_div(total, k), step) * step
        if size < total:
            sizes.add(size)
    return sorted(sizes)


def split_candidates(total: int, most: int = 64) -> list[int]:
    """ceil(total / k) for k up to `most`, and small sizes below that."""
    return sorted({ceil_div(total, k) for k in range(1, min(total, most) + 1)} |
                  set(range(1, min(total, 8) + 1)))


def ramp_blocks(total: int, block: int, up: list[int], down: list[int]) -> list[tuple[int, int]]:
    """(start, size) blocks covering `total`: at most `block` each, starting with the
    short blocks `up` and ending with the short blocks `down`, so the pipeline fills
    (first load and operand preparation before the MAC starts) and drains (last
    epilogue and store after it ends) with short tiles. Plain `block`-sized blocks when
    `total` is too short to ramp."""
    middle = total - sum(up) - sum(down)
    if middle < block:
        sizes = [block] * (total // block) + ([total % block] if total % block else [])
    else:
        count = ceil_div(middle, block)
        sizes = up + [middle // count + (i < middle % count) for i in range(count)] + down
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return list(zip(starts, sizes))


def ramp_down_pieces(count: int, depth: int, growth: float, step: int) -> list[int] | None:
    """`count` cut into `depth` + 1 pieces (multiples of `step`) that shrink by `growth`
    each, the last two equal: 48 at depth 2, growth 2 is [24, 12, 12]. None when a piece
    would be shorter than `step`."""
    weights = [growth ** i for i in range(depth)][::-1] + [1.0]
    last = count / sum(weights) / step
    if int(last) < 1:
        return None
    pieces = [max(1, round(w * last)) * step for w in weights[1:]]
    first = count - sum(pieces)
    return [first] + pieces if first >= pieces[0] else None


def fitting(sizes: list[int], fits) -> list[int]:
    """The ascending `sizes` for which `fits(size)` holds, fits being monotonic (a
    smaller tile fits whenever a bigger one does): found by bisection."""
    low, high = 0, len(sizes)
    while low < high:
        middle = (low + high) // 2
        if fits(sizes[middle]):
            low = middle + 1
        else:
            high = middle
    return sizes[:low]


class SramFull(NotLowerable):
    """A buffer past SRAM's capacity: the tiling's buffers do not fit (a smaller tile's
    may)."""


class Sram:
    """Bump allocator over [0, capacity) bytes (None: unbounded, to measure footprints)."""

    def __init__(self, capacity: int | None):
        self.capacity = capacity
        self.top = 0
        self.buffers: list[Buffer] = []

    def alloc(self, name: str, dtype: str, shape: tuple[int, ...]) -> Buffer:
        buffer = Buffer(name, dtype, tuple(shape), "sram", addr=self.top)
        end = self.top + buffer.size_bytes
        if self.capacity is not None and end > self.capacity:
            raise SramFull(f"does not fit SRAM: {name} needs {buffer.size_bytes} bytes "
                               f"at {self.top}, SRAM has {self.capacity}")
        self.top = end + (-end % SRAM_ALIGN)
        self.buffers.append(buffer)
        return buffer


def footprint(allocate) -> int:
    """SRAM bytes `allocate(sram)` takes: the footprint of a tiling is what its emitter
    allocates, measured on an unbounded allocator."""
    sram = Sram(None)
    allocate(sram)
    return sram.top


def aligned(nbytes: int) -> int:
    return nbytes + (-nbytes % SRAM_ALIGN)


class Slots:
    """`count` SRAM buffers for one operand, keyed by which block they hold."""

    def __init__(self, sram: Sram, name: str, dtype: str, shape: tuple[int, ...], count: int = 2):
        self.buffers = [sram.alloc(f"{name}.{i}", dtype, shape) for i in range(count)]
        self.keys = [None] * count
        self.last = count - 1

    def acquire(self, key) -> tuple[Buffer, bool]:
        """The buffer holding `key`, and whether it must be (re)loaded."""
        if key is not None and key in self.keys:
            self.last = self.keys.index(key)
            return self.buffers[self.last], False
        self.last = (self.last + 1) % len(self.buffers)
        self.keys[self.last] = key
        return self.buffers[self.last], True


# ---------------------------------------------------------------------- DMA box helpers

@dataclass(frozen=True)
class Dim:
    """One dimension of a transfer: element count, DRAM element stride, SRAM element stride."""
    count: int
    dram: int
    sram: int


def _canonical(dims: list[Dim]) -> list[Dim]:
    """Drops unit dims, orders by DRAM stride (innermost = smallest), merges dims that
    are contiguous in both memories."""
    dims = sorted((d for d in dims if d.count > 1), key=lambda d: (d.dram, d.sram), reverse=True)
    merged: list[Dim] = []
    for d in dims:
        if merged:
            outer = merged[-1]
            if outer.dram == d.count * d.dram and outer.sram == d.count * d.sram:
                merged[-1] = Dim(outer.count * d.count, d.dram, d.sram)
                continue
        merged.append(d)
    return merged


def _split_outer(dims: list[Dim]):
    """Yields (dram_elem_offset, sram_elem_offset, 4 dims) covering `dims`."""
    if len(dims) <= DMA_DIMS:
        yield 0, 0, [Dim(1, 0, 0)] * (DMA_DIMS - len(dims)) + dims
        return
    outer, rest = dims[0], dims[1:]
    for i in range(outer.count):
        for dram, sram, box in _split_outer(rest):
            yield i * outer.dram + dram, i * outer.sram + sram, box


def _steps(dims: list[Dim]):
    """(dram, sram) element offsets of every index of `dims`, outermost first."""
    for index in itertools.product(*(range(d.count) for d in dims)):
        yield (sum(i * d.dram for i, d in zip(index, dims)),
               sum(i * d.sram for i, d in zip(index, dims)))


def dma_instrs(op: str, dram: Buffer, dram_elem_offset: int, sram: Buffer, sram_elem_offset: int,
               dims: list[Dim], note: str) -> list[Instr]:
    """dma.load (DRAM -> SRAM) or dma.store (SRAM -> DRAM) of a strided box. DMA strides
    are unsigned: a dim read in reverse (negative DRAM stride, e.g. a sequence reversed
    in time) is stepped, one box per index."""
    elem = dtype_bytes(dram.dtype)
    reverse = [d for d in dims if d.dram < 0 and d.count > 1]
    forward = [d for d in dims if d not in reverse]
    instrs = []
    for (r_dram, r_sram), (d_off, s_off, box) in itertools.product(
            _steps(reverse), list(_split_outer(_canonical(forward)))):
        fields = {"binding": dram.binding,
                  "dram_offset": dram.offset + (dram_elem_offset + r_dram + d_off) * elem,
                  "sram_addr": sram.addr + (sram_elem_offset + r_sram + s_off) * elem}
        for i, d in enumerate(box):
            fields[f"n{i}"] = d.count
        for i, d in enumerate(box):
            fields[f"dram_s{i}"] = d.dram
        for i, d in enumerate(box):
            fields[f"sram_s{i}"] = d.sram
        reads, writes = ((dram,), (sram,)) if op == "dma.load" else ((sram,), (dram,))
        instrs.append(Instr(op, dram.dtype, fields, reads=reads, writes=writes, note=note))
    return instrs


def gathered_loads(sram: Sram, runs: list[tuple[Buffer, int]], machine: MachineConfig,
                   name: str, note: str) -> tuple[list[tuple[Buffer, int]], list[Instr]]:
    """Loads of small DRAM runs, each a view and the elements it needs from its offset
    (per-channel operands, table scalars): runs of one dtype in one binding whose gaps
    move in no longer than a DMA latency, which a load of their own would pay, are one
    load of the bytes they span. Returns each run's SRAM (buffer, element offset), in
    the order given, and the loads."""
    gap_bytes = machine.dma_latency_cycles * machine.dram_bytes_per_cycle

    def end(i: int) -> int:
        view, count = runs[i]
        return view.offset + count * dtype_bytes(view.dtype)

    groups: list[list[int]] = []
    for i in sorted(range(len(runs)), key=lambda i: (runs[i][0].binding, runs[i][0].dtype,
                                                     runs[i][0].offset)):
        view = runs[i][0]
        if groups:
            first = runs[groups[-1][0]][0]
            if (first.binding, first.dtype) == (view.binding, view.dtype) and \
                    (view.offset - first.offset) % dtype_bytes(view.dtype) == 0 and \
                    view.offset - max(end(j) for j in groups[-1]) <= gap_bytes:
                groups[-1].append(i)
                continue
        groups.append([i])
    placed: list[tuple[Buffer, int]] = [None] * len(runs)
    instrs: list[Instr] = []
    for group in groups:
        first = runs[group[0]][0]
        elem = dtype_bytes(first.dtype)
        count = (max(end(j) for j in group) - first.offset) // elem
        buf = sram.alloc(f"{name}.{group[0]}", first.dtype, (count,))
        instrs += dma_instrs("dma.load", first, 0, buf, 0, [Dim(count, 1, 1)], note)
        for j in group:
            placed[j] = (buf, (runs[j][0].offset - first.offset) // elem)
    return placed, instrs


def fill_instrs(sram: Buffer, elem_offset: int, dims: list[tuple[int, int]], value_bits: int,
                note: str, flags: int = 0) -> list[Instr]:
    """fill of an SRAM box given as (count, element stride) dims (`flags`: the fill's,
    e.g. push_constant with the constant's number as `value_bits`)."""
    if any(count == 0 for count, _ in dims):
        return []
    box = _canonical([Dim(count, stride, stride) for count, stride in dims]) or [Dim(1, 1, 1)]
    elem = dtype_bytes(sram.dtype)
    instrs = []
    for off, _, padded in _split_outer(box):
        fields = {"sram_addr": sram.addr + (elem_offset + off) * elem}
        for i, d in enumerate(padded):
            fields[f"n{i}"] = d.count
        for i, d in enumerate(padded):
            fields[f"s{i}"] = d.sram
        fields["value"] = value_bits
        instrs.append(Instr("fill", sram.dtype, fields, flags=flags, writes=(sram,), note=note))
    return instrs


def dense_sram_strides(counts: list[int]) -> list[int]:
    return list(row_major(counts))


def mixed_broadcast(tensor, groups) -> frozenset[int]:
    """The dims of each group (of `tensor`'s dims, a tile's flattened run: a contraction's
    M or N dims, a row's dims) along which `tensor` is broadcast while it varies along
    another dim of the group: loaded anyway (Streamed's expand), so that its tile is
    dense over the run and read with one stride along it."""
    expanded = set()
    for group in groups:
        dims = [d for d in group if tensor.shape[d] > 1]
        if any(tensor.strides[d] for d in dims):
            expanded |= {d for d in dims if not tensor.strides[d]}
    return frozenset(expanded)


# ------------------------------------------------------------------------- the result

@dataclass
class TiledProgram:
    """The unsynchronised program of one dispatch with its SRAM placement."""
    instrs: list[Instr]
    sram: list[Buffer]
    tiles: str                         # e.g. "tiles 8x8x498 (f x rows x cols)"
    buffers: int                       # buffering depth of the streamed operands
    dram: list[Buffer] = field(default_factory=list)
    tiling: object = None              # the tiler's tiling it was emitted from


def tiled_text(program: TiledProgram, name: str, stage: str, lines: list[str] | None = None) -> str:
    body = [alloc_line(b) for b in program.sram]
    body += lines if lines is not None else [instr_line(i) for i in program.instrs]
    return dispatch_text(name, program.dram, body, {"stage": stage, "tiling": program.tiles,
                                                    "buffers": program.buffers})



# ------------------------------------------------------------------- streamed tensors

class Streamed:
    """A DRAM tensor read tile by tile into double-buffered dense SRAM tiles. Broadcast
    dimensions (DRAM stride 0) are not loaded: the SRAM tile is dense over the other
    dimensions, and compute reads it with stride 0 along the broadcast ones; those in
    `expand` are loaded anyway (the DMA reads the same elements again), where compute
    needs the tile dense over them. With a `compute_dtype` other than the tensor's, each
    loaded tile is converted (vcvt)."""

    def __init__(self, sram: Sram, dram: Buffer, max_counts: list[int], count: int = 2,
                 compute_dtype: str | None = None, expand=frozenset()):
        self.dram, self.expand = dram, expand
        live = [c for d, c in enumerate(max_counts) if self._loaded(d)]
        self.slots = Slots(sram, dram.name + ".tile", dram.dtype, (prod(live),), count)
        self.converted = None
        if compute_dtype not in (None, dram.dtype):
            self.converted = Slots(sram, dram.name + ".cvt", compute_dtype, (prod(live),), count)

    def load(self, starts: list[int], counts: list[int], note: str):
        """(buffer, SRAM element stride per logical dim (0 if broadcast), load instrs)."""
        strides = self.dram.strides
        key = tuple((start if s else 0, n if self._loaded(d) else 1)
                    for d, (start, n, s) in enumerate(zip(starts, counts, strides)))
        buffer, fresh = self.slots.acquire(key)
        live = [i for i in range(len(strides)) if self._loaded(i)]
        dense = dense_sram_strides([counts[i] for i in live])
        sram_strides = [0] * len(strides)
        for i, stride in zip(live, dense):
            sram_strides[i] = stride
        instrs = []
        if fresh:
            origin = sum(start * s for start, s in zip(starts, strides))
            dims = [Dim(counts[i], strides[i], sram_strides[i]) for i in live]
            instrs = dma_instrs("dma.load", self.dram, origin, buffer, 0, dims, note)
        if self.converted is not None:
            raw = buffer
            buffer, fresh = self.converted.acquire(key)
            if fresh:
                count = prod(counts[i] for i in live)
                instrs.append(convert(Operand.flat(buffer), Operand.flat(raw), (1, 1, count),
                                      note + " convert"))
        return buffer, sram_strides, instrs

    def _loaded(self, dim: int) -> bool:
        return self.dram.strides[dim] != 0 or dim in self.expand


def worth_resident(dram: Buffer, m: MachineConfig) -> bool:
    """Whether a broadcast tensor is loaded whole (Resident) rather than tile by tile:
    when that one transfer takes no longer than a DMA latency, which every tile's load
    of its part would pay."""
    count = prod(n for n, s in zip(dram.shape, dram.strides) if s)
    return count * dtype_bytes(dram.dtype) <= m.dma_latency_cycles * m.dram_bytes_per_cycle


class Resident:
    """A small DRAM tensor (a per-channel operand) loaded whole, once, before the first
    tile: a Streamed of one slot over the tensor's whole extent, its broadcast
    dimensions not loaded. Each tile reads it at the offset of the tile's start: one
    transfer instead of one per tile, each of which would pay the DMA latency for a few
    bytes. `loads` are the instructions that load (and convert) it."""

    def __init__(self, sram: Sram, dram: Buffer, note: str, compute_dtype: str | None = None):
        shape = list(dram.shape)
        self.buffer, self.strides, self.loads = Streamed(
            sram, dram, shape, 1, compute_dtype).load([0] * len(shape), shape, note)

    def at(self, starts: list[int]) -> tuple[Buffer, list[int], int]:
        """(buffer, SRAM element stride per dim (0 if broadcast), offset of `starts`)."""
        return self.buffer, self.strides, sum(i * s for i, s in zip(starts, self.strides))


def store_instrs(dram: Buffer, starts: list[int], counts: list[int], sram: Buffer,
                 sram_strides: list[int], note: str) -> list[Instr]:
    """dma.store of an SRAM tile to the DRAM tensor's box at `starts`."""
    origin = sum(start * s for start, s in zip(starts, dram.strides))
    dims = [Dim(n, s, t) for n, s, t in zip(counts, dram.strides, sram_strides)]
    return dma_instrs("dma.store", dram, origin, sram, 0, dims, note)


def window_extent(outputs: int, stride: int, kernel: int, dilation: int) -> int:
    """The input rows (or columns) a window of `outputs` output rows reads."""
    return (outputs - 1) * stride + (kernel - 1) * dilation + 1


def window_columns(cols: int, all_cols: int, stride: int, kernel: int, dilation: int,
                   pad_left: int, width: int, height: int) -> int:
    """The input columns a window of `cols` output columns loads. A window over all
    `all_cols` of an image of several rows reaches to the row's end (`pad_left + width`)
    even where a stride leaves its last column unread, so that it loads whole DRAM rows:
    the rows of a padded input's channel then merge into one run, where rows one element
    short each began their own bursts. (Of a single row, there is nothing to merge.)"""
    needed = window_extent(cols, stride, kernel, dilation)
    return max(needed, pad_left + width) if cols == all_cols and height > 1 else needed


def load_window(src: Buffer, buf: Buffer, n: int, c0: int, cc: int, iy: int, ix: int,
                hi: int, wi: int, pad_bits: int, note: str):
    """Loads the window rows [iy, iy+hi) x cols [ix, ix+wi) of channels [c0, c0+cc) of
    image n of an (N, C, H, W) tensor into the dense SRAM tile buf[cc][hi][wi]: the part
    inside the image as one strided DMA box, the halo bands filled with `pad_bits`.
    Returns (instrs, (r0, r1, q0, q1)): the valid rows and cols within the tile."""
    _, _, h, w = src.shape
    r0, r1 = max(iy, 0) - iy, min(iy + hi, h) - iy
    q0, q1 = max(ix, 0) - ix, min(ix + wi, w) - ix
    plane = hi * wi
    if r1 <= r0 or q1 <= q0:
        return fill_instrs(buf, 0, [(cc, plane), (hi, wi), (wi, 1)], pad_bits, note), (0, 0, 0, 0)
    instrs = []
    for offset, dims in ((0, [(cc, plane), (r0, wi), (wi, 1)]),
                         (r1 * wi, [(cc, plane), (hi - r1, wi), (wi, 1)]),
                         (r0 * wi, [(cc, plane), (r1 - r0, wi), (q0, 1)]),
                         (r0 * wi + q1, [(cc, plane), (r1 - r0, wi), (wi - q1, 1)])):
        instrs += fill_instrs(buf, offset, dims, pad_bits, note)
    sn, sc, sy, sx = src.strides
    origin = n * sn + c0 * sc + (iy + r0) * sy + (ix + q0) * sx
    dims = [Dim(cc, sc, plane), Dim(r1 - r0, sy, wi), Dim(q1 - q0, sx, 1)]
    instrs += dma_instrs("dma.load", src, origin, buf, r0 * wi + q0, dims, note)
    return instrs, (r0, r1, q0, q1)


class Pipeline:
    """The program order of the tile loop. Each tile comes in two parts: its front
    (operand loads and preparation, MAC work) and its back (epilogue inputs' loads,
    epilogue, conversion, store).
    Tile i's front is emitted before tile i-1's back, so an engine serving both parts
    (the vector engine preparing im2col operands of tile i and finishing tile i-1) works
    ahead for the MAC instead of waiting behind it, and the DMA engine loads tile i's
    operands before tile i-1's epilogue inputs. This preserves the sequential
    meaning: the two parts touch different buffers, since every streamed operand and
    result alternates between two SRAM slots."""

    def __init__(self, setup: list[Instr]):
        self.setup = list(setup)
        self.tiles: list | None = []    # (front, back) of the first two tiles, held
        self.instrs: list[Instr] = []
        self.pending: list[Instr] = []

    def add(self, front: list[Instr], back: list[Instr]) -> None:
        if self.tiles is not None:
            self.tiles.append((front, back))
            if len(self.tiles) == 2:
                self._start()
            return
        self.instrs += front + self.pending
        self.pending = back

    def finish(self) -> list[Instr]:
        if self.tiles is not None:
            self._start()
        return self.instrs + self.pending

    def _start(self) -> None:
        """The first tiles with the setup: before the first front what the first two
        fronts depend on, the rest with the first back."""
        fronts = [front for front, _ in self.tiles]
        early, late = split_setup(self.setup, [i for front in fronts for i in front])
        self.instrs = early + (fronts[0] if fronts else [])
        self.pending = late + (self.tiles[0][1] if self.tiles else [])
        if len(self.tiles) == 2:
            self.instrs += fronts[1] + self.pending
            self.pending = self.tiles[1][1]
        self.tiles = None


def split_setup(setup: list[Instr], front: list[Instr]) -> tuple[list[Instr], list[Instr]]:
    """(the setup instructions `front` depends on, the others): the others can run after
    it, so the first loads of MAC operands are not queued behind the setup's (a
    requantization table's scalars: a DMA latency each) and the MAC starts sooner. An
    instruction stays early if it writes an SRAM buffer the front (or an early
    instruction after it) reads or writes, or reads one they write; the order within
    each part is kept, so every dependency holds."""
    reads = {id(b) for i in front for b in i.reads if b.scope == "sram"}
    writes = {id(b) for i in front for b in i.writes if b.scope == "sram"}
    early = [False] * len(setup)
    for index in range(len(setup) - 1, -1, -1):
        instr = setup[index]
        r = {id(b) for b in instr.reads if b.scope == "sram"}
        w = {id(b) for b in instr.writes if b.scope == "sram"}
        if w & (reads | writes) or r & writes:
            early[index] = True
            reads |= r
            writes |= w
    return ([i for i, e in zip(setup, early) if e], [i for i, e in zip(setup, early) if not e])
