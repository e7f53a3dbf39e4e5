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
"""
from dataclasses import dataclass

from executable_format.isa import Flag
from executable_format.machine import MachineConfig

from .epilogue import (LEAVES, SCRATCH_NODES, check_vector_nodes, float_dtype, load_dtype,
                       node_dtypes, node_instrs, scalar_fill)
from .lower import Lowered, NotLowerable
from .npu_ir import FLOATS, Buffer, Instr
from .ops import SCALARS, row_varying, varies_along_rows
from .tile import Slots, Sram, Streamed, TiledProgram, ceil_div, store_instrs
from .tiler import Candidate, pipelined_cycles
from .vector import Operand, convert, unary

REDUCE_FLAGS = {"sum": Flag.NONE, "max": Flag.REDUCE_MAX}


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


def plan(expr, inputs, load_dtypes: list[str], floats: str, stored=()) -> RowwisePlan:
    """`load_dtypes`: the dtype each input is loaded as; `floats`: the float nodes';
    `stored`: nodes besides the last that the tile stores (extra outputs), so their
    temporaries live to the end of the tile."""
    varies = varies_along_rows(expr, [row_varying(ref, len(ref.shape) - 1) for ref in inputs])
    dtypes = node_dtypes(expr, load_dtypes, None, floats)
    for node in expr:
        check_vector_nodes([node], also=("reduce",))
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


def batches(op) -> int:
    """B of a (B, O, I) space, 1 for an (O, I) one."""
    return op.out.shape[0] if len(op.out.shape) == 3 else 1


class RowwiseEmitter:
    def __init__(self, lowered: Lowered, m: MachineConfig, plan_: RowwisePlan, rows: int):
        op = lowered.op
        self.op, self.m, self.plan, self.rows = op, m, plan_, rows
        self.dtype = float_dtype(op.out.dtype, *(ref.dtype for ref in op.inputs), expr=op.expr)
        self.columns = op.out.shape[-1]
        self.batch = [1] * (len(op.out.shape) - 2)      # a (B, O, I) space's unit B count
        self.tensors = lowered.tensors
        sram = Sram(m.sram_bytes)
        self.sram = sram
        full, row = rows * self.columns, rows
        used = sorted({node[1] for node in op.expr if node[0] == "input"})
        self.streams = {k: Streamed(sram, self.tensors[f"in.{k}"],
                                    self.batch + [rows, self.columns],
                                    compute_dtype=load_dtype(op.inputs[k].dtype, self.dtype))
                        for k in used}
        self.temps = {(varies, dtype, i): sram.alloc(
            f"{'tile' if varies else 'row'}{'' if dtype == self.dtype else '.' + dtype}{i}",
            dtype, (full if varies else row,))
            for (varies, dtype), count in plan_.slots.items() for i in range(count)}
        self.scratch = sram.alloc("scratch", self.dtype, (full,)) if plan_.scratch else None
        out_varies = op.out.strides[-1] != 0
        result = plan_.dtypes[-1]
        self.outs = Slots(sram, "out", op.out.dtype, (full if out_varies else row,))
        self.results = Slots(sram, "res", result, (full if out_varies else row,)) \
            if result != op.out.dtype else None
        self.out_varies = out_varies
        self.setup: list[Instr] = []
        self.consts: dict[int, Buffer] = {}
        for index, node in enumerate(op.expr):
            if node[0] in SCALARS:
                cell = sram.alloc(f"const{index}", plan_.dtypes[index], (1,))
                self.consts[index] = cell
                self.setup += scalar_fill(cell, node)

    def run(self) -> TiledProgram:
        instrs = list(self.setup)
        total = self.op.out.shape[-2]
        for b in range(batches(self.op)):
            for r0 in range(0, total, self.rows):
                instrs += self.tile(b, r0, min(self.rows, total - r0))
        return TiledProgram(instrs, self.sram.buffers,
                            f"tiles {self.rows}x{self.columns} (rows x row length)", 2)

    def tile(self, b: int, r0: int, rows: int) -> list[Instr]:
        """Rows r0 .. r0 + rows - 1 (of batch b)."""
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
                buf, strides, loads = self.streams[node[1]].load(at + [r0, 0],
                                                                 self.batch + [rows, columns],
                                                                 note)
                instrs += loads
                values[index] = Operand(buf, (0, strides[-2], strides[-1]))
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
                instrs += node_instrs(kind, node[2:], self.plan.dtypes[index], target,
                                      [values[a] for a in node[1]], box, scratch, note)
                values[index] = target
        result = values[final]
        if expr[final][0] in LEAVES + ("reduce",):
            box = full_box if self.out_varies else row_box
            target = Operand(out, (0, columns, 1) if self.out_varies else (0, 1, 0))
            instrs.append(unary("vcopy", self.plan.dtypes[final], target, result, box, note))
        counts = [rows, columns if self.out_varies else 1]
        if out is not stored:   # an integer result to a narrower integer output
            instrs.append(convert(Operand.flat(stored), Operand.flat(out),
                                  (1, 1, counts[0] * counts[1]), note + " convert"))
        sram_strides = [0] * len(self.batch) + ([columns, 1] if self.out_varies else [1, 0])
        instrs += store_instrs(self.tensors["out"], at + [r0, 0], self.batch + counts,
                               stored, sram_strides, note)
        for k, (ref, node) in enumerate(self.op.extra_outputs, 1):
            value, varies = values[node], self.plan.varies[node]
            instrs += store_instrs(self.tensors[f"out.{k}"], at + [r0, 0],
                                   self.batch + [rows, columns if varies else 1], value.buffer,
                                   [0] * len(self.batch) + [value.strides[1],
                                                            value.strides[2] if varies else 0],
                                   f"{note} out.{k}")
        return instrs

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

    def reduce(self, target: Operand, source: Operand, kind: str, rows: int, note: str) -> list[Instr]:
        """vreduce of a dense [row][i] value; other layouts are first copied into one."""
        columns = self.columns
        instrs = []
        if source.strides[1:] != (columns, 1):
            dense = Operand(self.scratch, (0, columns, 1))
            instrs.append(unary("vcopy", self.dtype, dense, source, (1, rows, columns), note))
            source = dense
        instrs.append(Instr("vreduce", self.dtype,
                            {"dst": target.buffer.addr, "src": source.buffer.addr,
                             "outer": rows, "inner": columns}, int(REDUCE_FLAGS[kind]),
                            reads=(source.buffer,), writes=(target.buffer,), note=note))
        return instrs


class RowwiseTiler:
    """The tiler (tiler.Tiler) of rowwise dispatches; a tiling is the rows per tile."""

    def __init__(self, lowered: Lowered, m: MachineConfig):
        op = lowered.op
        floats = float_dtype(op.out.dtype, *(ref.dtype for ref in op.inputs), expr=op.expr)
        self.lowered, self.m = lowered, m
        self.plan = plan(op.expr, op.inputs, [load_dtype(ref.dtype, floats) for ref in op.inputs],
                         floats, [node for _, node in op.extra_outputs])
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
        buffers fit SRAM)."""
        total, columns = self.lowered.op.out.shape[-2:]
        candidates = []
        for rows in sorted({ceil_div(total, 1 << i) for i in range(9)}, reverse=True):
            try:
                self.estimate(rows)
            except NotLowerable:
                continue
            candidates.append(Candidate(rows, rows))
        if not candidates:
            raise NotLowerable(f"does not fit SRAM even tiled: rows of {columns} elements")
        return candidates

    def estimate(self, rows: int) -> int:
        """From the instructions of the first tile as the emitter writes them."""
        total = self.lowered.op.out.shape[-2]
        first = RowwiseEmitter(self.lowered, self.m, self.plan, rows).tile(0, 0, min(rows, total))
        return pipelined_cycles(self.m, first, batches(self.lowered.op) * ceil_div(total, rows))

    def emit(self, rows: int) -> TiledProgram:
        return RowwiseEmitter(self.lowered, self.m, self.plan, rows).run()
