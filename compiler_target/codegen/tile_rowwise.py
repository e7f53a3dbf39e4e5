"""Tiling of Rowwise (softmax, layer-norm rows, x - mean(x), reductions of computed
values): tiles of whole rows on the vector engine.

A tile holds `rows` rows of every input (of one batch, in a (B, O, I) space), dense
[row][i] in SRAM (an input broadcast
along I is one value per row, one broadcast along the rows one row), so `vreduce` can
reduce a tile's values row by row. Each expression node is one vector instruction per
tile: nodes varying along I over the box rows x I, per-row nodes (reductions and what is
computed from them) over rows x 1, reading per-row values with stride 0 along I.
Intermediate values live in SRAM temporaries of their class (a tile, or a row vector),
reused once their last reader has run. The number of rows per tile comes from an
estimate (the cost model's cycles of each tile's transfers and vector work against
the pipeline fill and drain), among the tilings whose buffers fit SRAM.

The parts of the expression that are functions of a byte input (a quantized mean's
dequantize: isub, itof, mul) are one table lookup each (lookup.py), one vrequant per
tile in place of a vector pass per node.

A row too long for SRAM (an InstanceNormalization over a whole image) is streamed: one
row per tile, read in chunks once per level of reductions (softmax: its max, then its
sum, then the output), each pass recomputing what it needs from the inputs and adding
each chunk's vreduce into the row values, which stay in SRAM to the end of the row.
"""
from dataclasses import dataclass, replace

from executable_format.isa import Flag
from executable_format.machine import MachineConfig

from .epilogue import (LEAVES, SCRATCH_NODES, EpiloguePlan, Lookups, byte_ranges,
                       check_vector_nodes, float_dtype, load_dtype, with_byte_lookups,
                       node_dtypes, node_instrs, scalar_fill)
from .lookup import LOOKUPS, LookupTables
from .lower import Lowered, NotLowerable
from .npu_ir import FLOATS, Buffer, Instr
from .ops import SCALARS, row_varying, varies_along_rows
from .tile import (Slots, Sram, Streamed, TiledProgram, ceil_div, dense_sram_strides,
                   mixed_broadcast, prod, store_instrs)
from .tiler import Candidate, pipelined_cycles
from .vector import Operand, binary, convert, unary

REDUCE_FLAGS = {"sum": Flag.NONE, "max": Flag.REDUCE_MAX}
STREAMED_CHUNK_CANDIDATES = 3


@dataclass
class RowwisePlan:
    """What is fixed for the dispatch: per node whether it varies along I, its dtype,
    and the temporary each computed node writes (index within its class: a tile or a
    row vector, of integers or floats)."""
    varies: list[bool]
    dtypes: list[str]
    slot: dict[int, int]
    slots: dict[tuple[bool, str], int]     # (varies, dtype) -> temporaries of that class
    scratch: bool          # a scratch tile: for `abs`, or to make a reduced input dense


def plan(expr, inputs, load_dtypes: list[str], floats: str, row_rank: int,
         stored=()) -> RowwisePlan:
    """`load_dtypes`: the dtype each input is loaded as; `floats`: the float nodes';
    `row_rank`: the dims of a row (Rowwise.row_rank); `stored`: nodes besides the last
    that the tile stores (extra outputs), so their temporaries live to the end of the
    tile."""
    varies = varies_along_rows(expr, [row_varying(ref, len(ref.shape) - row_rank)
                                      for ref in inputs])
    dtypes = node_dtypes(expr, load_dtypes, None, floats)
    for node in expr:
        check_vector_nodes([node], also=("reduce",) + LOOKUPS)
        if node[0] == "reduce" and dtypes[node[1][0]] not in FLOATS:
            raise NotLowerable("a row sum of integers (vreduce sums floats)")
    last_use = {node: len(expr) for node in stored}
    for index, node in enumerate(expr):
        if node[0] not in LEAVES:
            for arg in node[1]:
                last_use[arg] = max(index, last_use.get(arg, index))
    free: dict[tuple[bool, str], list[int]] = {}
    used: dict[tuple[bool, str], int] = {}
    slot = {}
    final = len(expr) - 1
    for index, node in enumerate(expr):
        if node[0] in LEAVES:
            continue
        for arg in set(node[1]):
            if last_use.get(arg) == index and arg in slot:
                free.setdefault((varies[arg], dtypes[arg]), []).append(slot[arg])
        if index == final and node[0] != "reduce":
            continue
        cls = (varies[index], dtypes[index])
        pool = free.setdefault(cls, [])
        slot[index] = pool.pop() if pool else used.get(cls, 0)
        used[cls] = max(used.get(cls, 0), slot[index] + 1)
    sparse_reduced = any(
        node[0] == "reduce" and expr[node[1][0]][0] == "input" and
        0 in inputs[expr[node[1][0]][1]].strides for node in expr)
    if any(node[0] == "reduce" and not varies[node[1][0]] for node in expr):
        raise NotLowerable("a reduction of a value that does not vary along the row")
    return RowwisePlan(varies, dtypes, slot, used,
                       sparse_reduced or any(node[0] in SCRATCH_NODES for node in expr))


def reduction_levels(expr) -> list[int]:
    """Per node, the most reductions on a path from the leaves to it (a reduction's own
    included): a streamed row (RowwiseEmitter.streamed_row) computes a value of level L
    in pass L and completes a reduction of level L + 1 there."""
    levels: list[int] = []
    for node in expr:
        if node[0] in LEAVES:
            levels.append(0)
        elif node[0] == "reduce":
            levels.append(levels[node[1][0]] + 1)
        else:
            levels.append(max(levels[a] for a in node[1]))
    return levels


def passes(op, plan_: RowwisePlan) -> list[tuple[list[int], list[int]]]:
    """The passes over a streamed row: per pass, the nodes it computes per chunk (in
    order: those the reductions it completes need and, in the last pass, those it
    stores, down to the row values kept from earlier passes) and the nodes it stores
    per chunk (the results varying along the row, in the last pass)."""
    expr, levels = op.expr, reduction_levels(op.expr)
    final = len(expr) - 1
    stored = [node for node in [final] + [node for _, node in op.extra_outputs]
              if plan_.varies[node]]
    reductions = [index for index, node in enumerate(expr) if node[0] == "reduce"]
    last = max([levels[expr[r][1][0]] for r in reductions] + [levels[n] for n in stored])
    result = []
    for number in range(last + 1):
        sinks = [r for r in reductions if levels[r] == number + 1] + \
            (stored if number == last else [])
        needed, pending = set(), list(sinks)
        while pending:
            index = pending.pop()
            if index in needed:
                continue
            needed.add(index)
            node = expr[index]
            kept = node[0] == "reduce" and levels[index] <= number
            if node[0] not in LEAVES and not kept:
                pending += list(node[1])
        result.append((sorted(needed), stored if number == last else []))
    return result


def batches(op) -> int:
    """B of a (B, O, I) space, 1 for an (O, I) one."""
    return op.out.shape[0] if len(op.out.shape) == op.row_rank + 2 else 1


def row_count(op) -> int:
    """O of the (B, O, I) space: the rows of a batch."""
    return op.out.shape[-op.row_rank - 1]


@dataclass(frozen=True)
class Row:
    """The dims of a row (one, or several where the views do not flatten them:
    Rowwise.row_rank) and the boxes of them that tiles and streamed chunks move."""
    dims: tuple[int, ...]

    @property
    def length(self) -> int:
        return prod(self.dims)

    def box(self, c0: int, count: int) -> tuple[list[int], list[int]]:
        """(start, count) per dim of the row's elements c0 .. c0 + count - 1, which
        must be a box of the dims (a chunk of `chunk_lengths`, or the whole row)."""
        starts, rest = [], c0
        for n in reversed(self.dims):
            starts.insert(0, rest % n)
            rest //= n
        counts, left = [1] * len(self.dims), count
        for d in reversed(range(len(self.dims))):
            if left <= self.dims[d] - starts[d]:
                counts[d] = left
                break
            assert starts[d] == 0 and left % self.dims[d] == 0, (self.dims, c0, count)
            counts[d], left = self.dims[d], left // self.dims[d]
        return starts, counts

    def chunk_lengths(self) -> list[int]:
        """Lengths of chunks shorter than the row, longest first: 1/2, 1/4, ... 1/4096 of
        a one-dim row (the last chunk may be shorter); of a row of several dims, the
        boxes that split one dim evenly (a divisor of it times the dims after it)."""
        if len(self.dims) == 1:
            return sorted({ceil_div(self.length, 1 << i) for i in range(1, 13)}, reverse=True)
        lengths, inner = set(), 1
        for n in reversed(self.dims):
            lengths |= {d * inner for d in range(1, n + 1) if n % d == 0}
            inner *= n
        return sorted((n for n in lengths if self.length // 4096 <= n < self.length),
                      reverse=True)


class RowwiseEmitter:
    """Tiles of `rows` whole rows, or with a `chunk` shorter than the row, tiles of one
    row streamed through SRAM (streamed_row)."""

    def __init__(self, lowered: Lowered, m: MachineConfig, plan_: RowwisePlan, rows: int,
                 chunk: int | None = None, tables=()):
        op = lowered.op
        self.op, self.m, self.plan, self.rows = op, m, plan_, rows
        self.dtype = float_dtype(op.out.dtype, *(ref.dtype for ref in op.inputs), expr=op.expr)
        self.row = Row(op.out.shape[-op.row_rank:])
        self.columns = self.row.length
        self.chunk = chunk or self.columns
        self.batch = [1] * (len(op.out.shape) - op.row_rank - 1)   # a (B, O, I) space's B
        self.tensors = lowered.tensors
        sram = Sram(m.sram_bytes)
        self.sram = sram
        full, row = rows * self.chunk, rows
        # each input loaded as its node's dtype (the plan's: load_dtype, or bytes)
        loaded = {node[1]: plan_.dtypes[i] for i, node in enumerate(op.expr)
                  if node[0] == "input"}
        box = self.row.box(0, self.chunk)[1]
        self.streams = {k: Streamed(sram, self.tensors[f"in.{k}"], self.batch + [rows] + box,
                                    compute_dtype=dtype, expand=self._expanded(op.inputs[k]))
                        for k, dtype in sorted(loaded.items())}
        self.temps = {(varies, dtype, i): sram.alloc(
            f"{'tile' if varies else 'row'}{'' if dtype == self.dtype else '.' + dtype}{i}",
            dtype, (full if varies else row,))
            for (varies, dtype), count in plan_.slots.items() for i in range(count)}
        self.scratch = sram.alloc("scratch", self.dtype, (full,)) if plan_.scratch else None
        streamed = self.chunk < self.columns
        self.partial = sram.alloc("partial", self.dtype, (row,)) \
            if streamed else None                       # a chunk's sums of a streamed row
        self.passes = passes(op, plan_) if streamed else None     # of each streamed row
        self.levels = reduction_levels(op.expr) if streamed else None
        self.final_tile: tuple[Buffer, Buffer] | None = None    # a streamed chunk's
        # output slot and, for a narrower integer output, the slot computed into
        out_varies = op.out.strides[-1] != 0
        result = plan_.dtypes[-1]
        self.outs = Slots(sram, "out", op.out.dtype, (full if out_varies else row,))
        self.results = Slots(sram, "res", result, (full if out_varies else row,)) \
            if result != op.out.dtype else None
        self.out_varies = out_varies
        self.setup: list[Instr] = []
        self.tables = None
        if tables:
            self.tables = LookupTables(tables, sram, "lut", lowered.constants, m, EpiloguePlan,
                                       {}, {})
            self.setup += self.tables.setup
        self.consts: dict[int, Buffer] = {}
        for index, node in enumerate(op.expr):
            if node[0] in SCALARS:
                cell = sram.alloc(f"const{index}", plan_.dtypes[index], (1,))
                self.consts[index] = cell
                self.setup += scalar_fill(cell, node)

    def _expanded(self, ref) -> frozenset[int]:
        """The row dims an input varying along the row is broadcast along (a per-channel
        scale of (C, H, W) rows): loaded anyway, so that its tile is dense [row][i]."""
        return mixed_broadcast(ref, [range(len(self.batch) + 1, len(ref.shape))])

    def load(self, k: int, at: list[int], r0: int, rows: int, c0: int, count: int,
             note: str) -> tuple[Operand, list[Instr]]:
        """Input k's elements c0 .. c0 + count - 1 of rows r0 .. r0 + rows - 1, as an
        operand over (1, rows, count), and its loads."""
        starts, counts = self.row.box(c0, count)
        buf, strides, loads = self.streams[k].load(at + [r0] + starts,
                                                   self.batch + [rows] + counts, note)
        b = len(self.batch)
        return Operand(buf, (0, strides[b], 1 if any(strides[b + 1:]) else 0)), loads

    def store(self, name: str, at: list[int], r0: int, rows: int, c0: int, count: int,
              buffer: Buffer, row_stride: int, varies: bool, note: str) -> list[Instr]:
        """Stores rows r0 .. r0 + rows - 1 of SRAM `buffer` (`row_stride` apart) to
        output `name`: their elements c0 .. c0 + count - 1, dense, or with `varies`
        false one value per row."""
        if varies:
            starts, counts = self.row.box(c0, count)
            inner = dense_sram_strides(counts)
        else:
            starts, counts = [0] * len(self.row.dims), [1] * len(self.row.dims)
            inner = [0] * len(self.row.dims)
        return store_instrs(self.tensors[name], at + [r0] + starts,
                            self.batch + [rows] + counts, buffer,
                            [0] * len(self.batch) + [row_stride] + inner, note)

    def run(self) -> TiledProgram:
        instrs = list(self.setup)
        total = row_count(self.op)
        for b in range(batches(self.op)):
            for r0 in range(0, total, self.rows):
                instrs += self.tile(b, r0, min(self.rows, total - r0))
        if self.passes is not None:
            tiles = f"tiles of 1 row, {len(self.passes)} passes over it " \
                f"in chunks of {self.chunk} (row length {self.columns})"
        else:
            tiles = f"tiles {self.rows}x{self.columns} (rows x row length)"
        return TiledProgram(instrs, self.sram.buffers, tiles, 2)

    def tile(self, b: int, r0: int, rows: int) -> list[Instr]:
        """Rows r0 .. r0 + rows - 1 (of batch b)."""
        if self.passes is not None:
            return self.streamed_row(b, r0)
        expr, columns = self.op.expr, self.columns
        at = [b] * len(self.batch)
        note = f"rows {r0}+{rows}" + (f" of batch {b}" if self.batch else "")
        full_box, row_box = (1, rows, columns), (1, rows, 1)
        instrs: list[Instr] = []
        values: dict[int, Operand] = {}
        stored, _ = self.outs.acquire(None)
        out = self.results.acquire(None)[0] if self.results is not None else stored
        final = len(expr) - 1
        for index, node in enumerate(expr):
            kind = node[0]
            if kind == "input":
                values[index], loads = self.load(node[1], at, r0, rows, 0, columns, note)
                instrs += loads
            elif kind in SCALARS:
                values[index] = Operand(self.consts[index], (0, 0, 0))
            elif kind == "reduce":
                values[index] = self.row_value(index, rows)
                instrs += self.reduce(values[index], values[node[1][0]], node[2], rows, note)
            else:
                varies = self.plan.varies[index]
                box = full_box if varies else row_box
                target = self.target(index, out, rows)
                scratch = Operand(self.scratch, (0, columns, 1)) if self.scratch else None
                instrs += self.node(index, target, values, box, scratch, note)
                values[index] = target
        result = values[final]
        if expr[final][0] in LEAVES + ("reduce",):
            box = full_box if self.out_varies else row_box
            target = Operand(out, (0, columns, 1) if self.out_varies else (0, 1, 0))
            instrs.append(unary("vcopy", self.plan.dtypes[final], target, result, box, note))
        if out is not stored:   # an integer result to a narrower integer output
            count = rows * (columns if self.out_varies else 1)
            instrs.append(convert(Operand.flat(stored), Operand.flat(out), (1, 1, count),
                                  note + " convert"))
        instrs += self.store("out", at, r0, rows, 0, columns, stored,
                             columns if self.out_varies else 1, self.out_varies, note)
        for k, (ref, node) in enumerate(self.op.extra_outputs, 1):
            value = values[node]
            instrs += self.store(f"out.{k}", at, r0, rows, 0, columns, value.buffer,
                                 value.strides[1], self.plan.varies[node], f"{note} out.{k}")
        return instrs

    def streamed_row(self, b: int, r0: int) -> list[Instr]:
        """Row r0 (of batch b) when it does not fit SRAM: one pass over its chunks per
        level of reductions (`passes`), each pass recomputing from the inputs the values
        varying along the row that it needs, and adding each chunk's vreduce into the
        row values of the reductions it completes; the row values stay in SRAM between
        passes. Only the last pass stores what varies along the row (so an output
        written over an input is read first), then the row values' results."""
        expr, at = self.op.expr, [b] * len(self.batch)
        note = f"row {r0}" + (f" of batch {b}" if self.batch else "")
        instrs: list[Instr] = []
        values: dict[int, Operand] = {}
        for number, (computed, stored) in enumerate(self.passes):
            for c0 in range(0, self.columns, self.chunk):
                count = min(self.chunk, self.columns - c0)
                chunk_note = f"{note} pass {number} columns {c0}+{count}"
                for index in computed:
                    node = expr[index]
                    if node[0] == "reduce" and self.levels[index] <= number:
                        continue        # completed by an earlier pass: a kept row value
                    instrs += self.chunk_node(index, at, r0, c0, count, values, chunk_note)
                for index in stored:
                    instrs += self.store_chunk(index, at, r0, c0, count, values[index],
                                               chunk_note)
        final = len(expr) - 1
        for index in range(len(expr)):
            if not self.plan.varies[index] and index not in values:
                instrs += self.chunk_node(index, at, r0, 0, 1, values, note)
        row_results = ([final] if not self.plan.varies[final] else []) + \
            [node for _, node in self.op.extra_outputs if not self.plan.varies[node]]
        for index in row_results:
            instrs += self.store_chunk(index, at, r0, 0, 1, values[index], note)
        return instrs

    def chunk_node(self, index: int, at: list[int], r0: int, c0: int, count: int,
                   values: dict, note: str) -> list[Instr]:
        """Node `index` over columns c0 .. c0 + count - 1 of a streamed row; a reduction
        adds the chunk's vreduce into its row value (the first chunk writes it)."""
        node = self.op.expr[index]
        kind = node[0]
        box = (1, 1, count) if self.plan.varies[index] else (1, 1, 1)
        if kind == "input":
            values[index], loads = self.load(node[1], at, r0, 1, c0, count, note)
            return loads
        if kind in SCALARS:
            values[index] = Operand(self.consts[index], (0, 0, 0))
            return []
        if kind == "reduce":
            values[index] = self.row_value(index, 1)
            if not c0:
                return self.reduce(values[index], values[node[1][0]], node[2], 1, note,
                                   inner=count)
            partial = Operand(self.partial, (0, 1, 0))
            combine = "vadd" if node[2] == "sum" else "vmax"
            return self.reduce(partial, values[node[1][0]], node[2], 1, note, inner=count) + \
                [binary(combine, self.dtype, values[index], values[index], partial, box,
                        note + " (row so far)")]
        if index == len(self.op.expr) - 1:     # the result, into an output slot
            stored, _ = self.outs.acquire(None)
            out = self.results.acquire(None)[0] if self.results is not None else stored
            self.final_tile = (stored, out)
            target = Operand(out, (0, self.chunk, 1))
        else:
            target = self.temp(index)
        scratch = Operand(self.scratch, (0, self.chunk, 1)) if self.scratch else None
        instrs = self.node(index, target, values, box, scratch, note)
        values[index] = target
        return instrs

    def node(self, index: int, target: Operand, values: dict, box, scratch, note: str):
        """The instructions of computed node `index` into `target`: a lookup's vrequant,
        or the vector instructions of its kind."""
        kind, args, *params = self.op.expr[index]
        dtype = self.plan.dtypes[index]
        if kind in LOOKUPS:
            return self.tables.instrs(params[0], dtype, target, values[args[0]], box, [], note)
        return node_instrs(kind, params, dtype, target, [values[a] for a in args], box,
                           scratch, note)

    def temp(self, index: int) -> Operand:
        """The SRAM temporary of node `index` (a chunk, or a row value) when streamed."""
        if self.plan.varies[index]:
            key = (True, self.plan.dtypes[index], self.plan.slot[index])
            return Operand(self.temps[key], (0, self.chunk, 1))
        return self.row_value(index, 1)

    def store_chunk(self, index: int, at: list[int], r0: int, c0: int, count: int,
                    value: Operand, note: str) -> list[Instr]:
        """Stores node `index`'s chunk (or row value) to the output it is (`out`, or an
        extra output), through the output slots (a copy, and a conversion to a
        narrower integer output) for `out`."""
        if index != len(self.op.expr) - 1:
            k = next(k for k, (_, node) in enumerate(self.op.extra_outputs, 1) if node == index)
            return self.store(f"out.{k}", at, r0, 1, c0, count, value.buffer, 0,
                              self.plan.varies[index], f"{note} out.{k}")
        box = (1, 1, count)
        if self.op.expr[index][0] in LEAVES + ("reduce",):     # a value, copied out
            stored, _ = self.outs.acquire(None)
            out = self.results.acquire(None)[0] if self.results is not None else stored
            instrs = [unary("vcopy", self.plan.dtypes[index], Operand(out, (0, 0, 1)), value,
                            box, note)]
        else:                                   # computed into its output slot
            (stored, out), instrs = self.final_tile, []
        if out is not stored:
            instrs.append(convert(Operand.flat(stored), Operand.flat(out), box, note + " convert"))
        return instrs + self.store("out", at, r0, 1, c0, count, stored, 0, self.out_varies, note)

    def row_value(self, index: int, rows: int) -> Operand:
        key = (False, self.plan.dtypes[index], self.plan.slot[index])
        return Operand(self.temps[key], (0, 1, 0))

    def target(self, index: int, out: Buffer, rows: int) -> Operand:
        """Where node `index` writes: the output tile for the last node, else its temp."""
        varies = self.plan.varies[index]
        if index == len(self.op.expr) - 1:
            if varies and not self.out_varies:
                raise NotLowerable("a result varying along the row is stored one per row")
            return Operand(out, (0, self.columns, 1) if varies else (0, 1, 0))
        if varies:
            key = (True, self.plan.dtypes[index], self.plan.slot[index])
            return Operand(self.temps[key], (0, self.columns, 1))
        return self.row_value(index, rows)

    def reduce(self, target: Operand, source: Operand, kind: str, rows: int, note: str,
               inner: int | None = None) -> list[Instr]:
        """vreduce of a dense [row][i] value of `inner` (the row length) elements per row;
        other layouts are first copied into one."""
        columns = inner or self.columns
        instrs = []
        if source.strides[2] != 1 or rows > 1 and source.strides[1] != columns:
            dense = Operand(self.scratch, (0, columns, 1))
            instrs.append(unary("vcopy", self.dtype, dense, source, (1, rows, columns), note))
            source = dense
        instrs.append(Instr("vreduce", self.dtype,
                            {"dst": target.buffer.addr, "src": source.buffer.addr,
                             "outer": rows, "inner": columns}, int(REDUCE_FLAGS[kind]),
                            reads=(source.buffer,), writes=(target.buffer,), note=note))
        return instrs


class RowwiseTiler:
    """The tiler (tiler.Tiler) of rowwise dispatches; a tiling is (rows per tile, None)
    or, for a row too long for SRAM, (1, chunk)."""

    def __init__(self, lowered: Lowered, m: MachineConfig):
        op = lowered.op
        floats = float_dtype(op.out.dtype, *(ref.dtype for ref in op.inputs), expr=op.expr)
        self.floats = floats
        self.load_dtypes = [load_dtype(ref.dtype, floats) for ref in op.inputs]
        dtypes = {k: ref.dtype for k, ref in enumerate(op.inputs)}
        lookups = Lookups(lowered.constants, m, byte_ranges(dtypes), prod(op.out.shape))
        expr, self.tables = with_byte_lookups(op.expr, lookups, self.load_dtypes, dtypes,
                                              floats, {node for _, node in op.extra_outputs})
        op = replace(op, expr=expr)
        lowered = replace(lowered, op=op)
        self.lowered, self.m = lowered, m
        self.plan = plan(op.expr, op.inputs, self.load_dtypes, floats, op.row_rank,
                         [node for _, node in op.extra_outputs])
        self.streamed_plan: RowwisePlan | None = None
        if self.plan.dtypes[-1] != op.out.dtype and \
                FLOATS.count(self.plan.dtypes[-1]) + FLOATS.count(op.out.dtype) == 1:
            raise NotLowerable(f"{op.out.dtype} output from a {self.plan.dtypes[-1]} result")
        for ref, node in op.extra_outputs:
            if self.plan.dtypes[node] != ref.dtype:
                raise NotLowerable(f"{ref.dtype} output of a {self.plan.dtypes[node]} value")
            if self.plan.varies[node] != (ref.strides[-1] != 0):
                raise NotLowerable("an output stored one per row of a value varying along "
                                   "the row, or the reverse")

    def candidates(self) -> list[Candidate]:
        """1/1, 1/2, ... 1/256 of the rows, those whose tile the emitter can write (its
        buffers fit SRAM); when not even one row fits, one row streamed in chunks of
        1/2, 1/4, ... 1/4096 of it (RowwiseEmitter.streamed_row)."""
        op = self.lowered.op
        total, row = row_count(op), Row(op.out.shape[-op.row_rank:])
        columns = row.length
        candidates = self._fitting((rows, None) for rows in
                                   sorted({ceil_div(total, 1 << i) for i in range(9)},
                                          reverse=True))
        if not candidates:      # the longest chunks that fit: shorter ones only add work
            candidates = self._fitting(((1, chunk) for chunk in row.chunk_lengths()),
                                       most=STREAMED_CHUNK_CANDIDATES)
        if not candidates:
            raise NotLowerable(f"does not fit SRAM even tiled: rows of {columns} elements")
        return candidates

    def _fitting(self, tilings, most: int | None = None) -> list[Candidate]:
        """The `tilings` whose buffers fit SRAM (the first `most`), as candidates."""
        candidates = []
        for rows, chunk in tilings:
            if len(candidates) == most:
                break
            try:
                self.estimate((rows, chunk))
            except NotLowerable:
                continue
            candidates.append(Candidate((rows, chunk), rows * (chunk or 1)))
        return candidates

    def estimate(self, tiling) -> int:
        """From the instructions of the first tile as the emitter writes them."""
        rows, chunk = tiling
        total = row_count(self.lowered.op)
        first = self._emitter(rows, chunk).tile(0, 0, min(rows, total))
        return pipelined_cycles(self.m, first, batches(self.lowered.op) * ceil_div(total, rows))

    def emit(self, tiling) -> TiledProgram:
        return self._emitter(*tiling).run()

    def _emitter(self, rows: int, chunk: int | None) -> RowwiseEmitter:
        """A streamed row keeps every row value to the end of the row: later passes
        read them again."""
        if chunk is None:
            return RowwiseEmitter(self.lowered, self.m, self.plan, rows, tables=self.tables)
        if self.streamed_plan is None:
            op = self.lowered.op
            kept = [index for index, varies in enumerate(self.plan.varies) if not varies]
            self.streamed_plan = plan(op.expr, op.inputs, self.load_dtypes, self.floats,
                                      op.row_rank, kept + [node for _, node in op.extra_outputs])
        return RowwiseEmitter(self.lowered, self.m, self.streamed_plan, rows, chunk,
                              self.tables)
