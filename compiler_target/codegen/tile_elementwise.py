"""Tiling of Elementwise: chunks of the iteration space, each loaded, computed on the
vector engine and stored, double-buffered.

The iteration space is first simplified: unit dimensions are dropped and neighbouring
dimensions that are contiguous in every tensor are merged (so a dense 4-D add is one
long dimension). A tile then keeps the innermost dimensions, chunks one of them and
steps through the outer ones; the number of tiles comes from an estimate (pipeline fill
and drain against per-transfer latency). A vector instruction covers a 3-D box: the
tile's three longest dimensions, the others (a gather's repeat digits, e.g. the 2x2 of
a nearest upsampling) each one instruction per index. Broadcast inputs (stride 0) are
loaded compactly and read with stride 0; a broadcast tile that does not change between
tiles is not reloaded, and a small one (tile.worth_resident) is loaded whole before the
first tile. An operation varying along fewer dims than the node reading it (hoist.py: a
squeeze-and-excitation scale's per-channel part) is computed over its own smaller box
and read with stride 0. Each output (`out` and the extra outputs of a multi-result
expression) has a double-buffered tile its node writes, which later nodes read; the
expression is computed once per tile and every output stored. A copy of one input
(IREE's slow_memcpy) stores the loaded tile itself.
"""
import itertools

from executable_format.machine import MachineConfig

from . import requant
from .epilogue import (EpiloguePlan, Lookups, byte_ranges, float_dtype, load_dtype,
                       temp_count, used_inputs, with_byte_lookups)
from .hoist import Hoisted, hoist
from .lower import Lowered, NotLowerable
from .npu_ir import FLOATS, Buffer, busy_cycles, dtype_bytes
from .ops import LEAVES
from .vector import Operand, convert
from .tile import (SRAM_ALIGN, Dim, dma_instrs, Resident, Slots, Sram, Streamed, TiledProgram,
                   ceil_div, dense_sram_strides, prod, store_instrs, worth_resident)
from .tiler import Candidate

TILE_COUNTS = [1 << i for i in range(9)]
# SRAM of one lookup table: its values, the table, its record and its temporaries.
LOOKUP_BYTES = 16 * requant.TABLE_MAX * 4
# The most records a lookup's per-channel steps take (one per value of the channel).
MAX_CHANNEL_RECORDS = 512

def simplify(shape: tuple[int, ...], strides: list[tuple[int, ...]]):
    """(shape, per-tensor strides) without unit dims, contiguous neighbours merged."""
    dims = [(n, [s[i] for s in strides]) for i, n in enumerate(shape) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, st in dims:
        if merged:
            outer_n, outer_st = merged[-1]
            if all(o == n * i for o, i in zip(outer_st, st)):
                merged[-1] = (outer_n * n, st)
                continue
        merged.append((n, st))
    if not merged:
        merged = [(1, [0 for _ in strides])]
    return [n for n, _ in merged], [tuple(st[t] for _, st in merged) for t in range(len(strides))]


def in_input_order(expr, shape: list[int], strides: list[tuple[int, ...]], outputs: int):
    """A transpose (the expression a copy of one input, not broadcast, whose innermost dim
    is not its contiguous one) with its dims ordered by that input's strides, outermost
    first, where the input's contiguous dim is shorter than the output's: tiles take the
    inner dims whole and the outer ones in chunks, so they then span the short dim whole
    and a chunk of the long one, and each side moves runs of the chunk or longer (LYT-Net's
    NHWC -> NCHW of 76800 pixels x 32 channels: in the output's order, a tile of one
    channel read one element per burst). Else (shape, strides) as given."""
    source = strides[outputs] if len(strides) == outputs + 1 else None
    if outputs != 1 or len(expr) != 1 or expr[0][0] != "input" or source is None or \
            0 in source or abs(source[-1]) == 1:
        return shape, strides
    order = sorted(range(len(shape)), key=lambda d: -abs(source[d]))
    if shape[order[-1]] >= shape[-1]:
        return shape, strides
    return [shape[d] for d in order], [tuple(s[d] for d in order) for s in strides]


def view(buffer: Buffer, shape, strides) -> Buffer:
    return Buffer(buffer.name, buffer.dtype, tuple(shape), "dram", binding=buffer.binding,
                  offset=buffer.offset, strides=tuple(strides), view_of=buffer)


def split(shape: list[int], target: int) -> tuple[int, int]:
    """(k, chunk): tiles cover dims k.. (dim k in chunks), dims before k one at a time."""
    k = 0
    while k < len(shape) - 1 and prod(shape[k + 1:]) > target:
        k += 1
    inner = prod(shape[k + 1:])
    return k, max(1, min(shape[k], target // inner))


def box_dims(counts: list[int]) -> list[int]:
    """The dims of a tile one vector instruction covers: its three longest (the inner
    one on ties), in dim order."""
    longest = sorted(range(len(counts)), key=lambda d: (-counts[d], -d))[:3]
    return sorted(longest)


def _compute(plan: EpiloguePlan, counts: list[int], dsts: dict[int, Buffer], dense: list[int],
             loaded: dict, input_count: int, note: str) -> list:
    """The expression over one tile: one box of its longest dims per index of the
    others; `dsts` are the output tiles of the stored nodes (the last one included),
    `loaded` the inputs' (SRAM buffer, element stride per dim, offset of the tile)."""
    box = box_dims(counts)
    stepped = [d for d in range(len(counts)) if d not in box]
    pad = [None] * (3 - len(box))

    def operand(buffer: Buffer, strides, base: int, index) -> Operand:
        offset = base + sum(i * strides[d] for d, i in zip(stepped, index))
        return Operand(buffer, tuple(0 if d is None else strides[d] for d in pad + box), offset)

    shape = tuple([1] * len(pad) + [counts[d] for d in box])
    final = len(plan.expr) - 1
    instrs = []
    for index in itertools.product(*(range(counts[d]) for d in stepped)):
        inputs = [operand(*loaded[i], index) if i in loaded else None for i in range(input_count)]
        stored = {node: operand(dst, dense, 0, index) for node, dst in dsts.items()
                  if node != final}
        instrs += plan.emit(shape, operand(dsts[final], dense, 0, index), inputs, None, note,
                            stored)
    return instrs


def _transfer(m: MachineConfig, op: str, dram: Buffer, counts: list[int]) -> int:
    live = [i for i, s in enumerate(dram.strides) if s]
    dense = dense_sram_strides([counts[i] for i in live])
    dims = [Dim(counts[i], dram.strides[i], stride) for i, stride in zip(live, dense)]
    probe = Buffer("probe", dram.dtype, (prod(counts),), "sram")
    return busy_cycles(m, dma_instrs(op, dram, 0, probe, 0, dims, ""))


def _outputs(lowered: Lowered) -> list[tuple[Buffer, int]]:
    """(DRAM buffer, stored node) of `out` (the last node) and of each extra output."""
    return [(lowered.tensors["out"], len(lowered.op.expr) - 1)] + lowered.extra_outputs


def _operations(expr) -> int:
    """Vector passes of an expression over its box (a copy is one)."""
    return sum(1 for node in expr if node[0] not in ("input", "const")) or 1


def hoisted_counts(h: Hoisted, counts: list[int]) -> list[int]:
    """The box of a hoisted node in a tile of `counts`: 1 along the dims it does not
    vary along."""
    return [n if d in h.dims else 1 for d, n in enumerate(counts)]


class HoistedPlan:
    """A hoisted node (hoist.Hoisted) of the expression computed per tile into its own
    SRAM buffer, over its smaller box; computed again only when that box's range
    changes between tiles."""

    def __init__(self, h: Hoisted, sram: Sram, floats: str, tile_counts: list[int],
                 input_dtypes: list[str], index: int):
        self.h = h
        elems = prod(hoisted_counts(h, tile_counts))
        self.plan = EpiloguePlan(h.expr, sram, floats, elems, name=f"hoist{index}",
                                 input_dtypes=input_dtypes)
        self.result = Slots(sram, f"hoist{index}.res", self.plan.result_dtype, (elems,), 1)

    def compute(self, starts: list[int], counts: list[int], loaded: dict, input_count: int,
                note: str):
        """((buffer, strides: 0 along the dims it does not vary along, offset 0),
        instrs) for the tile at `starts` of `counts`."""
        box = hoisted_counts(self.h, counts)
        key = tuple((start, n) for d, (start, n) in enumerate(zip(starts, counts))
                    if d in self.h.dims)
        buffer, fresh = self.result.acquire(key)
        dense = dense_sram_strides(box)
        strides = [s if d in self.h.dims else 0 for d, s in enumerate(dense)]
        final = len(self.h.expr) - 1
        instrs = _compute(self.plan, box, {final: buffer}, dense, loaded, input_count,
                          note + " hoisted") if fresh else []
        return (buffer, strides, 0), instrs


class ElementwiseTiler:
    """The tiler (tiler.Tiler) of elementwise dispatches; a tiling is a split (k, chunk)
    of the simplified iteration space."""

    def __init__(self, lowered: Lowered, m: MachineConfig):
        op = lowered.op
        self.op, self.m = op, m
        self.outputs = _outputs(lowered)
        out = lowered.tensors["out"]
        self.stored = {node for _, node in self.outputs}    # each has its own output tiles
        used = used_inputs(op.expr, self.stored)
        ins = [lowered.tensors[f"in.{k}"] for k in range(len(op.inputs))]
        self.dtype = out.dtype
        copies = all(node[0] in LEAVES for node in op.expr)
        # A copy loads each input as it is, but an i64 one (a Cast of ids) as f32.
        copied = [load_dtype(i.dtype, out.dtype) if i.dtype == "i64" else i.dtype for i in ins]
        if copies and any(dram.dtype != out.dtype for dram, _ in self.outputs):
            raise NotLowerable("elementwise copies into outputs of different dtypes")
        if copies and any(copied[k] != out.dtype and
                          FLOATS.count(copied[k]) + FLOATS.count(out.dtype) < 2 for k in used):
            raise NotLowerable("elementwise copy between dtypes (not both floats)")
        # Inputs are loaded as the dtype the expression reads them in (integers as i32).
        self.floats = out.dtype if copies else float_dtype(out.dtype, *(i.dtype for i in ins),
                                                           expr=op.expr)
        self.load_dtypes = copied if copies else [load_dtype(i.dtype, self.floats) for i in ins]
        self.shape, strides = in_input_order(op.expr, *simplify(
            out.shape, [dram.strides for dram, _ in self.outputs] +
            [ins[k].strides for k in used]), len(self.outputs))
        self.out_views = [view(dram, self.shape, st)
                          for (dram, _), st in zip(self.outputs, strides)]
        self.in_views = {k: view(ins[k], self.shape, st)
                         for k, st in zip(used, strides[len(self.outputs):])}
        self.constants = lowered.constants
        self.table_source, self.table_pattern = self._table_source(ins, used)
        if self.table_source is not None:
            self._budget_table(ins[self.table_source])
            return
        self.expr, self.hoisted = op.expr, []
        if len(self.outputs) == 1:
            live = {k: frozenset(d for d, s in enumerate(v.strides) if s)
                    for k, v in self.in_views.items()}
            self.expr, self.hoisted = hoist(op.expr, live, len(op.inputs))
        elem = max(dtype_bytes(self.floats), *(dtype_bytes(dram.dtype) for dram, _ in self.outputs))
        # A hoisted node's result and temporaries hold at most its whole extent.
        hoisted_bytes = sum(elem * (1 + temp_count(h.expr)) * prod(
            self.shape[d] for d in h.dims) for h in self.hoisted)
        if hoisted_bytes > m.sram_bytes // 4:
            self.expr, self.hoisted, hoisted_bytes = op.expr, [], 0
        if self.hoisted:
            self.outputs = [(self.outputs[0][0], len(self.expr) - 1)]
            self.stored = {len(self.expr) - 1}
        self.lookups = Lookups(self.constants, m, byte_ranges(
            {k: v.dtype for k, v in self.in_views.items()}), prod(self.shape),
            self._channel_records())
        # The expression as its plan computes it: parts worth a table each one vrequant;
        # a byte input only lookups read stays bytes (but where hoisted parts read them).
        self.computed, tables = with_byte_lookups(
            self.expr, self.lookups, self.load_dtypes,
            {} if self.hoisted else {k: i.dtype for k, i in enumerate(ins)}, self.floats,
            self.stored - {len(self.expr) - 1})
        # Small broadcast inputs (per-channel operands) are loaded whole, once.
        self.resident = {k for k, v in self.in_views.items()
                         if 0 in v.strides and worth_resident(v, m)}
        fixed = hoisted_bytes + sum(self._whole_bytes(k, elem) for k in self.resident) + \
            sum(LOOKUP_BYTES + 4 * requant.RECORD_WORDS * table.records(
                self.lookups.channel_records) for table in tables)
        # results converted to their output's dtype
        result_tiles = 2 if any(dram.dtype != self.floats for dram, _ in self.outputs) else 0
        per_element = elem * ((2 + result_tiles) * len(self.stored) +
                              temp_count(self.expr, self.stored)) + sum(
            2 * dtype_bytes(ins[k].dtype) + (2 * elem if ins[k].dtype != self.load_dtypes[k]
                                             else 0) for k in used if k not in self.resident)
        slack = 8 + 4 * len(used) + 2 * len(self.stored) + len(op.expr) + \
            sum(1 + len(h.expr) for h in self.hoisted)       # alignment, SRAM_ALIGNs
        self.budget = (m.sram_bytes - fixed - SRAM_ALIGN * slack) // per_element
        if self.budget < 1:
            raise NotLowerable("does not fit SRAM even tiled")
        self.stored_as_loaded = self._stored_as_loaded()

    def _channel_records(self) -> dict[int, tuple[int, int]]:
        """Input -> (the dim it varies along, -1 for none; its extent), of the f32 inputs
        that vary along one dim at most, over at most MAX_CHANNEL_RECORDS values: a
        lookup's records may take them (Lookups)."""
        records = {}
        for k, v in self.in_views.items():
            dims = [d for d, (n, s) in enumerate(zip(self.shape, v.strides)) if s and n > 1]
            extent = self.shape[dims[0]] if dims else 1
            if self.load_dtypes[k] == "f32" and len(dims) <= 1 and \
                    extent <= MAX_CHANNEL_RECORDS:
                records[k] = (dims[0] if dims else -1, extent)
        return records

    def _table_source(self, ins: list[Buffer], used: list[int]):
        """(the input the expression is a vrequant table of, its requant.Pattern) (a byte
        input, any expression of it; an f32 input, quantized: requant.match_source): the
        only input read per element, not broadcast, all others scalars; (None, None)
        otherwise. One pass per tile, where the expression takes a vector pass per node."""
        tensors = [k for k in used if any(self.in_views[k].strides)]
        if len(self.outputs) != 1 or len(tensors) != 1 or \
                0 in self.in_views[tensors[0]].strides:
            return None, None
        k = tensors[0]
        scalars = {j for j in used if j != k and ins[j].dtype == "f32"}
        pattern = requant.match_source(self.op.expr, k, ins[k].dtype, scalars) \
            if len(scalars) == len(used) - 1 else None
        return (k, pattern) if pattern is not None else (None, None)

    def _budget_table(self, source: Buffer) -> None:
        """The SRAM budget of a table plan: two tiles of the source and two of the result,
        beside the table, its inputs and its temporaries."""
        per_element = 2 * (dtype_bytes(source.dtype) + dtype_bytes(self.dtype))
        fixed = LOOKUP_BYTES
        self.budget = (self.m.sram_bytes - fixed) // per_element
        self.expr, self.hoisted, self.resident, self.stored_as_loaded = self.op.expr, [], set(), None

    def _stored_as_loaded(self) -> int | None:
        """The input a copy stores as it was loaded (IREE's slow_memcpy into a padded
        buffer): the expression is that input, in the output's dtype, not broadcast, so
        its loaded tile is dense in the output tile's order and needs no vcopy; None
        otherwise."""
        node = self.expr[-1]
        if len(self.outputs) != 1 or len(self.expr) != 1 or node[0] != "input":
            return None
        view = self.in_views[node[1]]
        return node[1] if view.dtype == self.load_dtypes[node[1]] == self.dtype and \
            0 not in view.strides else None

    def _whole_bytes(self, k: int, elem: int) -> int:
        """SRAM bytes of input k loaded whole (and converted to its load dtype)."""
        v = self.in_views[k]
        count = prod(n for n, s in zip(self.shape, v.strides) if s)
        return count * (dtype_bytes(v.dtype) + (elem if v.dtype != self.load_dtypes[k] else 0))

    def candidates(self) -> list[Candidate]:
        """The splits into 1, 2, 4, ... 256 tiles: more tiles shorten the first load and
        last store the others cannot hide, and each costs a DMA latency per transfer."""
        total = prod(self.shape)
        candidates = []
        for wanted in TILE_COUNTS:
            k, chunk = split(self.shape, min(self.budget, ceil_div(total, wanted)))
            candidates.append(Candidate((k, chunk), prod(self.tile_counts(k, chunk))))
        return candidates

    def tile_counts(self, k: int, chunk: int) -> list[int]:
        return [1] * k + [chunk] + self.shape[k + 1:]

    def estimate(self, split_: tuple[int, int]) -> int:
        """Transfers costed exactly (bursts included) on the first tile; `ops` vector
        passes per tile."""
        m = self.m
        counts = self.tile_counts(*split_)
        elems = prod(counts)
        tiles = ceil_div(prod(self.shape), elems)
        load = sum(_transfer(m, "dma.load", v, counts) for k, v in self.in_views.items()
                   if k not in self.resident)
        whole = sum(_transfer(m, "dma.load", self.in_views[k], self.shape) for k in self.resident)
        store = sum(_transfer(m, "dma.store", v, counts) for v in self.out_views)
        if self.table_source is not None:       # one vrequant of the wider element
            elem = max(dtype_bytes(self.dtype),
                       dtype_bytes(self.in_views[self.table_source].dtype))
            vector = m.vector_latency_cycles + ceil_div(elems * elem, m.vector_bytes_per_cycle)
            return max(tiles * load, tiles * store, tiles * vector) + load + store + vector
        vector = 0 if self.stored_as_loaded is not None else sum(
            passes * self._pass_cycles(box)
            for passes, box in [(_operations(self.computed), counts)] +
            [(_operations(h.expr), hoisted_counts(h, counts)) for h in self.hoisted])
        return max(tiles * load + whole, tiles * store, tiles * vector) + \
            whole + load + store + vector

    def _pass_cycles(self, counts: list[int]) -> int:
        """Vector cycles of one pass over a box of `counts`."""
        m, elems = self.m, prod(counts)
        boxes = elems // prod(counts[d] for d in box_dims(counts))
        return boxes * m.vector_latency_cycles + ceil_div(
            elems * dtype_bytes(self.out_views[0].dtype), m.vector_bytes_per_cycle)

    def emit(self, split_: tuple[int, int]) -> TiledProgram:
        if self.table_source is not None:
            return self._emit_table(split_)
        op, shape, (k, chunk) = self.op, self.shape, split_
        tile_counts = self.tile_counts(k, chunk)
        tile_elems = prod(tile_counts)
        sram = Sram(self.m.sram_bytes)
        # A tile stored as loaded stays in its slot until the store: four slots, the
        # SRAM of two input and two output tiles, keep the loads as far ahead.
        streams = {i: Streamed(sram, v, tile_counts,
                               4 if i == self.stored_as_loaded else 2, self.load_dtypes[i])
                   for i, v in self.in_views.items() if i not in self.resident}
        residents = {i: Resident(sram, self.in_views[i], f"input {i} whole", self.load_dtypes[i])
                     for i in sorted(self.resident)}
        hoisted = [HoistedPlan(h, sram, self.floats, tile_counts, self.load_dtypes, j)
                   for j, h in enumerate(self.hoisted)]
        plan = EpiloguePlan(self.expr, sram, self.floats, tile_elems,
                            stored=self.stored - {len(self.expr) - 1},
                            input_dtypes=self.load_dtypes + [h.plan.result_dtype for h in hoisted],
                            lookups=self.lookups,
                            result_dtype=self.outputs[0][0].dtype if len(self.outputs) == 1
                            else None)
        # The plan's last node is the last stored one (lookups may have shortened it).
        outputs = [(dram, len(plan.expr) - 1 if node == len(self.expr) - 1 else node)
                   for dram, node in self.outputs]
        stored: dict[int, Buffer] = {}        # stored node -> its first output
        for dram, node in outputs:
            stored.setdefault(node, dram)
        results = {node: Slots(sram, f"{dram.name}.res", plan.dtypes[node], (tile_elems,))
                   for node, dram in stored.items() if plan.dtypes[node] != dram.dtype}
        outs = {} if self.stored_as_loaded is not None else {
            node: Slots(sram, f"{dram.name}.tile", dram.dtype, (tile_elems,))
            for node, dram in stored.items()}
        instrs = [i for h in hoisted for i in h.plan.setup] + plan.setup + [
            i for r in residents.values() for i in r.loads]
        for starts, counts, note in self._tiles(k, chunk):
            loaded = {}
            for i, stream in streams.items():
                buf, st, loads = stream.load(starts, counts, note)
                instrs += loads
                loaded[i] = (buf, st, 0)
            for i, resident in residents.items():
                loaded[i] = resident.at(starts)
            for j, h in enumerate(hoisted):
                loaded[len(op.inputs) + j], computes = h.compute(starts, counts, loaded,
                                                                 len(op.inputs), note)
                instrs += computes
            dense = dense_sram_strides(counts)
            if self.stored_as_loaded is not None:
                buffer = loaded[self.stored_as_loaded][0]
                instrs += store_instrs(self.out_views[0], starts, counts, buffer, dense, note)
                continue
            dsts = {node: slots.acquire(None)[0] for node, slots in outs.items()}
            computed = {node: results[node].acquire(None)[0] if node in results else dst
                        for node, dst in dsts.items()}
            instrs += _compute(plan, counts, computed, dense, loaded,
                               len(op.inputs) + len(hoisted), note)
            for node in results:   # e.g. a quantized i8 output of an i32 result
                instrs.append(convert(Operand.flat(dsts[node]), Operand.flat(computed[node]),
                                      (1, 1, prod(counts)), note + " convert"))
            for out_view, (_, node) in zip(self.out_views, outputs):
                instrs += store_instrs(out_view, starts, counts, dsts[node], dense, note)
        return self._program(instrs, sram, tile_counts)

    def _program(self, instrs: list, sram: Sram, tile_counts: list[int]) -> TiledProgram:
        tiles = "x".join(map(str, tile_counts))
        return TiledProgram(instrs, sram.buffers,
                            f"tiles {tiles} (of {'x'.join(map(str, self.shape))})", 2)

    def _tiles(self, k: int, chunk: int):
        """(starts, counts, note) of each tile of a split, in order."""
        shape, outer = self.shape, self.shape[:k]
        for index in range(prod(outer)):
            prefix = []
            for extent in reversed(outer):
                prefix.insert(0, index % extent)
                index //= extent
            for start in range(0, shape[k], chunk):
                starts = prefix + [start] + [0] * (len(shape) - k - 1)
                counts = [1] * k + [min(chunk, shape[k] - start)] + shape[k + 1:]
                yield starts, counts, "at " + ",".join(map(str, starts)) + " size " + \
                    "x".join(map(str, counts))

    def _emit_table(self, split_: tuple[int, int]) -> TiledProgram:
        """Each tile of the source loaded as it is and looked up by one vrequant."""
        tile_counts = self.tile_counts(*split_)
        tile_elems = prod(tile_counts)
        sram = Sram(self.m.sram_bytes)
        source = self.in_views[self.table_source]
        stream = Streamed(sram, source, tile_counts, 2, source.dtype)
        scalars = {j: v for j, v in self.in_views.items() if j != self.table_source}
        plan = requant.plan_elementwise(self.table_pattern, sram, self.out_views[0], scalars,
                                        self.constants, tile_elems, EpiloguePlan, self.m)
        instrs = list(plan.setup)
        for starts, counts, note in self._tiles(*split_):
            buffer, _, loads = stream.load(starts, counts, note)
            elems = prod(counts)
            instrs += loads + plan.emit((1, 1, elems), Operand.flat(buffer), [], starts, counts,
                                        dense_sram_strides(counts), note)
        return self._program(instrs, sram, tile_counts)
