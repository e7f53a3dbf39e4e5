"""Parts of an expression computed as one table lookup each: a vrequant per tile.

A value that is a function of at most 256 integers is a table. Two such integers:
- a byte input's value (a quantized residual's i8, which its load widens to i32);
- a rounding clamped to at most 256 integers, together with the f32 steps before it
  that vrequant's record performs (mul, the contracted fma, div: IREE's own operations,
  each one rounding), from an f32 value or from an i32 one converted (itof).
The nodes after it that read only that integer and constants (a dequantize, an
activation, a quantize again) are computed once per dispatch over the possible values,
by the same vector instructions, so a lookup has their bits; each tile then takes one
vrequant instead of a vector pass per node. A QDQ graph's fake quantization (x / s
rounded, clamped, times s) becomes one pass instead of three, a residual's dequantize
(isub, itof, mul) one instead of three.

requant.py does this for a whole epilogue read from an integer accumulator, with
per-channel records; this module finds such parts anywhere in an expression (an
elementwise dispatch's, or what is left after a requantization). Their records are
constant, but for f32 steps read from a per-channel input (`channel_records`: a QDQ
graph's float bias add or per-channel scale between two quantizations, ppocrv4_rec's
classifier bias): each tile copies the input's values into its records' field, as
requant.py does, so the step is part of the lookup's one pass instead of a vector pass
of its own (and a copy of the input into the tile for the fma's destination).
"""
from dataclasses import dataclass

from executable_format.machine import MachineConfig

from .lower import NotLowerable
from .npu_ir import Buffer, Instr
from .ops import INT_NODES, LEAVES, SCALARS, live_nodes, reachable
from .requant import (FIELD, IDENTITY_STEPS, RECORD_WORDS, TABLE_MAX, computed_table, record_fills,
                      steps_to_rounding, table_expression, vrequant)
from .tile import Sram, ceil_div, dense_sram_strides, prod
from .vector import Operand, unary

LOOKUPS = ("lookup", "ilookup")       # node kinds: a float or an integer table's value


@dataclass(frozen=True)
class Payoff:
    """Whether a table pays for itself in a dispatch whose expression runs over `elements`
    values: the vector passes it saves over them (4 bytes each) against loading its
    values and computing it once (its nodes over TABLE_MAX values). A small dispatch (a
    classifier head's matvec, a group norm's rows of 32) is faster without."""
    elements: int
    machine: MachineConfig

    def pays(self, saved_passes: int, table_nodes: int) -> bool:
        m, values = self.machine, TABLE_MAX * 4
        load = m.dma_latency_cycles + ceil_div(values, m.dram_bytes_per_cycle)
        pass_ = m.vector_latency_cycles + ceil_div(values, m.vector_bytes_per_cycle)
        return saved_passes * ceil_div(self.elements * 4, m.vector_bytes_per_cycle) > \
            load + (table_nodes + 1) * pass_


@dataclass(frozen=True)
class Table:
    """One lookup: the record's steps from its source and its table's expression."""
    source: str             # the source's dtype as vrequant reads it: i32 or f32
    record: dict            # record field -> ("const", v), ("iconst", v) or ("input", k)
    lo: float
    hi: float
    rest: list              # the table's expression of ("input", 0) = q
    q_dtype: str            # q's dtype in `rest`: i32 (a byte's value) or f32 (a rounding)
    channel: tuple = ()     # the fields read from inputs, in the order the lookup node
                            # reads those inputs after its source

    def records(self, channel_records: dict[int, tuple[int, int]]) -> int:
        """The records a tile needs: one, or the most values a channel input has in it."""
        return max((channel_records[self.record[f][1]][1] for f in self.channel), default=1)


def tabulated(expr, payoff: Payoff, byte_inputs: dict[int, tuple[int, int]],
              int_inputs: set[int], channel_inputs: dict[int, int] | None = None,
              byte_loaded: dict[int, str] | None = None) -> tuple[list, list[Table]]:
    """The expression with each part worth a table replaced by a ("lookup" or "ilookup",
    (source, *channel input nodes), j) node, tables[j] its table, where it pays (`payoff`).
    `byte_inputs`: input -> (lo, hi), the inputs of at most 256 integer values;
    `int_inputs`: the inputs read as integers; `channel_inputs`: input -> the dim it
    varies along, of the f32 inputs a record's step may read (per-channel ones; a
    record's all vary along the same dim); `byte_loaded`: input -> i8 or u8, the byte
    inputs whose tiles stay bytes (the others are loaded widened to i32), which a
    vrequant reads as its source (byte_sources)."""
    channel_inputs, byte_loaded = channel_inputs or {}, byte_loaded or {}
    tables: list[Table] = []
    changed = True
    while changed:
        changed = False
        for start, found in _candidates(expr, byte_inputs, int_inputs, channel_inputs,
                                        byte_loaded):
            replaced = _replaced(expr, start, found, len(tables), payoff)
            if replaced is not None:
                expr = replaced[0]
                tables.append(replaced[1])
                changed = True
                break
    return expr, tables


def _candidates(expr, byte_inputs, int_inputs, channel_inputs, byte_loaded):
    """(the node q is, (source node, Table without rest)) of every possible table: byte
    inputs first, then roundings reached by record steps (of constants, or of
    `channel_inputs` but for the i32 zero)."""
    def integer(i):
        node = expr[i]
        return node[0] in INT_NODES or node[0] == "input" and node[1] in int_inputs

    for i, node in enumerate(expr):
        if node[0] == "input" and node[1] in byte_inputs:
            lo, hi = byte_inputs[node[1]]
            yield i, (i, Table(byte_loaded.get(node[1], "i32"), dict(IDENTITY_STEPS), lo, hi,
                               [], "i32"))
    for i, node in enumerate(expr):
        if node[0] in SCALARS or integer(i):
            continue
        chain = steps_to_rounding(expr, i)
        if chain is None:
            continue
        record, lo, hi, rounded = chain
        channel = tuple(f for f, operand in record.items() if operand[0] == "input")
        if any(operand[0] not in ("const", "iconst") for f, operand in record.items()
               if f not in channel) or \
                any(f == "zero" or record[f][1] not in channel_inputs for f in channel) or \
                len({channel_inputs[record[f][1]] for f in channel}) > 1:
            continue
        convert = node[0] == "itof" and integer(node[1][0])    # vrequant converts an i32
        source = node[1][0] if convert else i
        dtype = byte_loaded.get(expr[source][1], "i32") if expr[source][0] == "input" else "i32"
        yield rounded, (source, Table(dtype if convert else "f32", record, lo, hi, [], "f32",
                                      channel))


def byte_sources(expr, byte_inputs) -> set[int]:
    """The byte inputs (of `byte_inputs`) that only lookups read, as their source: their
    tiles may stay bytes, which vrequant widens as it reads them (a vcvt pass less)."""
    reads: dict[int, list[bool]] = {k: [] for k in byte_inputs}
    for node in expr:
        if node[0] in LEAVES:
            continue
        for position, arg in enumerate(node[1]):
            if expr[arg][0] == "input" and expr[arg][1] in reads:
                reads[expr[arg][1]].append(node[0] in LOOKUPS and position == 0)
    if expr[-1][0] == "input" and expr[-1][1] in reads:
        reads[expr[-1][1]].append(False)        # the result itself
    return {k for k, by_lookups in reads.items() if by_lookups and all(by_lookups)}


def _replaced(expr, start: int, found, index: int, payoff: Payoff):
    """(the expression with the table's part replaced, the Table) when the nodes that read
    only `start` and constants are read elsewhere through one node, and replacing them
    saves vector passes that pay for the table; else None."""
    source, table = found
    cut = _cut(expr, start)
    if cut is None or cut == source:        # a byte input's table of itself
        return None
    part = table_expression(expr, start, set(), cut)
    if part is None or part[1]:
        return None
    rest = part[0]
    kind = "ilookup" if rest[-1][0] in INT_NODES or (
        rest[-1][0] == "input" and table.q_dtype == "i32") else "lookup"
    reads = tuple(expr.index(table.record[f]) for f in table.channel)
    replaced = live_nodes([(kind, (source, *reads), index) if i == cut else node
                           for i, node in enumerate(expr)])
    saved = _passes(live_nodes(expr)) - _passes(replaced)
    if saved < 1 or not payoff.pays(saved, _passes(rest)):
        return None
    return replaced, Table(table.source, table.record, table.lo, table.hi, rest,
                           table.q_dtype, table.channel)


def _cut(expr, start: int) -> int | None:
    """The one node of those computed elementwise from `start` and constants alone (a
    row-wise expression's reductions are not) that the rest of the expression reads, or
    that is its result; None if there are several."""
    cone = {start}
    for i in range(start + 1, len(expr)):
        if expr[i][0] not in LEAVES + ("reduce",) and all(
                a in cone or expr[a][0] in ("const", "iconst") for a in expr[i][1]):
            cone.add(i)
    live = reachable(expr)
    read = {a for i in live if i not in cone and expr[i][0] not in LEAVES
            for a in expr[i][1] if a in cone}
    if len(expr) - 1 in cone:
        read.add(len(expr) - 1)
    return read.pop() if len(read) == 1 else None


def _passes(expr) -> int:
    return sum(1 for node in expr if node[0] not in LEAVES)


class LookupTables:
    """The tables of one expression in SRAM: computed once per dispatch (`setup`) by
    `plan_class` over their values, loaded from the constant pool; `instrs` are a
    node's: the copies of its channel inputs into its records, and its vrequant.
    `channel_records`: input -> (its dim, the most values it has in a tile); `dtypes`: table ->
    the dtype it holds, where not its expression's (converted once)."""

    def __init__(self, tables: list[Table], sram: Sram, name: str, constants,
                 machine: MachineConfig, plan_class,
                 channel_records: dict[int, tuple[int, int]], dtypes: dict[int, str]):
        self.tables, self.setup = tables, []
        self.buffers: list[tuple[Buffer, Buffer]] = []      # (records, table) per table
        for j, table in enumerate(tables):
            values, setup = computed_table(table.rest, table.lo, table.hi, table.q_dtype,
                                           [], sram, f"{name}.lut{j}", constants, machine,
                                           plan_class, dtypes.get(j))
            count = table.records(channel_records)
            records = sram.alloc(f"{name}.lut{j}.record", "i32", (count * RECORD_WORDS,))
            self.setup += setup + record_fills(records, count, table.record, table.lo,
                                               table.hi, values, "lookup")
            self.buffers.append((records, values))

    def instrs(self, j: int, dtype: str, target: Operand, source: Operand, box,
               channel: list[Operand], note: str) -> list[Instr]:
        """The records are dense over the box dims the channel operands vary along."""
        records, buffer = self.buffers[j]
        varying = {tuple(s != 0 for s in operand.strides) for operand in channel} or \
            {(False,) * len(box)}
        if len(varying) > 1:
            raise NotLowerable("a lookup's channel operands vary along different dims")
        [along] = varying
        reduced = tuple(n if v else 1 for n, v in zip(box, along))
        strides = tuple(s if v else 0 for s, v in zip(dense_sram_strides(list(reduced)), along))
        if prod(reduced) * RECORD_WORDS > records.shape[0]:
            raise NotLowerable("a lookup's channel operands exceed its records")
        copies = [unary("vcopy", "f32", Operand(records, tuple(RECORD_WORDS * s for s in strides),
                                                 FIELD[field]), operand, reduced,
                        f"{note} lookup {field}")
                  for field, operand in zip(self.tables[j].channel, channel, strict=True)]
        return copies + [vrequant(dtype, target, source, box, records, strides, buffer,
                                  self.tables[j].source, note)]
