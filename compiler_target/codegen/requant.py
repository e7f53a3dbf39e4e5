"""A quantized epilogue as one vrequant per tile (docs/npu-architecture.md).

IREE fuses a QDQ layer's requantization into the contraction's dispatch: an i32
accumulator, its zero-point correction (`isub`), `sitofp`, f32 scalings and a bias (mul,
the contracted mul+add `fma`, div), a rounding clamped to the zero point's range, and
then the rest: dequantize, activation, quantize again, the zero point, `fptosi`. Up to
that first rounding the chain is vrequant's record (`match` finds it from the expression
nodes, whatever the model); after it every value is a function of an integer in
[lo, hi], at most 256 values, so the rest is a table the vector engine computes once per
dispatch with the ordinary epilogue instructions, over those values (`Requant.setup`).

The record's operands are scalar constants (filled once) or tensors that vary along one
output dim, the channel (copied into the records per tile, with their tile's strides); a
correction that varies along more dims is computed into the accumulator first.
"""
import math
from dataclasses import dataclass

import numpy as np

from executable_format.isa import CONST_POOL, REQUANT_RECORD, Flag, f32_bits
from executable_format.machine import MachineConfig

from .lower import NotLowerable
from .npu_ir import Buffer, Instr, dtype_bytes
from .ops import LEAVES, live_nodes, reachable
from .tile import Slots, Sram, dense_sram_strides, fill_instrs, gathered_loads, store_instrs
from .vector import Operand, convert, unary

RECORD_WORDS = len(REQUANT_RECORD)
FIELD = {name: i for i, name in enumerate(REQUANT_RECORD)}
STEPS = ("mul", "fma", "div")          # the record's f32 steps, in its order
TABLE_MAX = 256
TABLE_INPUT = 1 << 16       # the table's value as an input of Pattern.after
# The record operands whose steps leave an integer value as it is.
IDENTITY_STEPS = {"zero": ("iconst", 0), "mul": ("const", 1.0), "fma_mul": ("const", 1.0),
                  "fma_add": ("const", -0.0), "div": ("const", 1.0)}


@dataclass
class Pattern:
    """An epilogue as vrequant's record and table expression."""
    correction: int | None          # node Y of isub(acc, Y), or None (itof(acc))
    operands: dict                  # record field -> ("const", v), ("iconst", v) or
                                    # ("input", k); "zero" may be ("expr", nodes)
    lo: float
    hi: float
    rest: list                      # the table's expression, ("input", 0) being q and
                                    # ("input", 1 + j) the scalar epilogue input
    table_inputs: list              # table_inputs[j]
    after: list | None = None       # the epilogue after the table (None: the table is
                                    # the result), the table's value its input TABLE_INPUT
    source: str = "i32"             # the source's dtype (an accumulator's i32, or an
                                    # elementwise input's i8, u8, f32)


def _users(expr, index: int) -> list[int]:
    return [i for i, node in enumerate(expr) if node[0] not in LEAVES and index in node[1]]


def _operand(expr, index: int):
    node = expr[index]
    return node if node[0] in ("const", "input") else None


def match(expr, scalar_inputs=frozenset()) -> Pattern | None:
    """The record and table of `expr`, or None when it is not a requantization chain. The
    table may read the epilogue inputs `scalar_inputs` (one value each, as the 0-d tensors
    IREE hoists a quantized graph's scales and offsets into)."""
    accs = [i for i, node in enumerate(expr) if node[0] == "acc"]
    if len(accs) != 1 or len(_users(expr, accs[0])) != 1:
        return None
    current = _users(expr, accs[0])[0]
    correction = None
    if expr[current][0] == "isub" and expr[current][1][0] == accs[0] and \
            accs[0] != expr[current][1][1]:
        correction = expr[current][1][1]
        users = _users(expr, current)
        if len(users) != 1:
            return None
        current = users[0]
    if expr[current][0] != "itof":
        return None
    chain = steps_to_rounding(expr, current)
    if chain is None:
        return None
    operands, lo, hi, rounded = chain
    table, after = table_expression(expr, rounded, scalar_inputs), None
    if table is None:
        cut = table_cut(expr, rounded, scalar_inputs)
        if cut is None:
            return None
        table = table_expression(expr, rounded, scalar_inputs, cut)
        after = live_nodes([(("input", TABLE_INPUT) if i == cut else node)
                            for i, node in enumerate(expr)])
        if table is None or any(node[0] in ("acc", "pconst") for node in after):
            return None
    rest, table_inputs = table
    return Pattern(correction, operands, float(lo), float(hi), rest, table_inputs, after)


def steps_to_rounding(expr, current: int):
    """(record operands, lo, hi, the rounding node) of the chain of f32 steps (mul, the
    contracted fma, add, div, in the record's order) from node `current` to its rounding
    clamped to at most TABLE_MAX integers; None if the nodes are not such a chain."""
    operands = dict(IDENTITY_STEPS)
    done = -1
    while True:
        users = _users(expr, current)
        if len(users) != 1:
            return None
        user = users[0]
        kind, args = expr[user][0], expr[user][1]
        others = [a for a in args if a != current]
        if kind == "round":
            lo, hi = expr[user][2], expr[user][3]
            if not (math.isfinite(lo) and math.isfinite(hi) and lo == int(lo) and
                    hi == int(hi) and 0 <= hi - lo < TABLE_MAX):
                return None
            return operands, lo, hi, user
        if kind == "fma" and args[2] != current and current in args[:2]:
            step, fields = 1, {"fma_mul": others[0], "fma_add": args[2]}
        elif kind == "mul" and len(others) == 1:
            step, fields = (0, {"mul": others[0]}) if done < 0 else \
                (1, {"fma_mul": others[0]})
        elif kind == "add" and len(others) == 1:
            step, fields = 1, {"fma_add": others[0]}
        elif kind == "div" and args[0] == current and others:
            step, fields = 2, {"div": args[1]}
        else:
            return None
        if step <= done or any(_operand(expr, i) is None for i in fields.values()):
            return None
        operands.update({name: _operand(expr, i) for name, i in fields.items()})
        done, current = step, user


INTEGER_SOURCES = {"i8": (-128, 127), "u8": (0, 255)}
SOURCE_FLAGS = {"i8": Flag.SRC_I8, "u8": Flag.SRC_U8, "f32": Flag.SRC_F32}   # vrequant's


def match_source(expr, source: int, dtype: str, scalar_inputs=frozenset()) -> Pattern | None:
    """An elementwise expression of one tensor input, `source` (of `dtype`), and scalars
    as vrequant's record and table, or None. A byte source has at most 256 values: the
    whole expression is the table (the record's steps the identity, q the byte itself,
    read as i32 by the table's expression). An f32 source must start with the record's
    steps and a rounding (a quantize, x / scale rounded), the rest being the table."""
    nodes = [i for i, node in enumerate(expr) if node == ("input", source)]
    if len(nodes) != 1 or any(node[0] in ("acc", "pconst") for node in expr):
        return None
    if dtype in INTEGER_SOURCES:
        lo, hi = INTEGER_SOURCES[dtype]
        operands, table = dict(IDENTITY_STEPS), table_expression(expr, nodes[0], scalar_inputs)
    elif dtype == "f32":
        chain = steps_to_rounding(expr, nodes[0])
        if chain is None:
            return None
        operands, lo, hi, rounded = chain
        if any(operand[0] != "const" for name, operand in operands.items() if name != "zero"):
            return None
        table = table_expression(expr, rounded, scalar_inputs)
    else:
        return None
    if table is None:
        return None
    rest, table_inputs = table
    return Pattern(None, operands, float(lo), float(hi), rest, table_inputs, source=dtype)


def table_cut(expr, rounded: int, scalar_inputs) -> int | None:
    """The one node of the values computed from `rounded` and scalars alone that the rest
    of the expression reads (a residual add reads a per-pixel tensor after it), or None."""
    def scalar(i):
        return expr[i][0] in ("const", "iconst") or (
            expr[i][0] == "input" and expr[i][1] in scalar_inputs)
    cone = {rounded}
    for i in range(rounded + 1, len(expr)):
        if expr[i][0] not in LEAVES and all(a in cone or scalar(a) for a in expr[i][1]):
            cone.add(i)
    read = {a for i in reachable(expr) if i not in cone and expr[i][0] not in LEAVES
            for a in expr[i][1] if a in cone}
    return read.pop() if len(read) == 1 else None


def table_expression(expr, rounded: int, scalar_inputs, last: int | None = None):
    """(the nodes after `rounded` up to `last` (default: the final node) as an expression
    of ("input", 0) = its value and ("input", 1 + j) = scalar input table_inputs[j],
    table_inputs) if they read nothing else but constants and scalar inputs; else None."""
    last = len(expr) - 1 if last is None else last
    order, stack, seen = [], [last], set()
    while stack:
        index = stack.pop()
        if index in seen or index == rounded:
            continue
        seen.add(index)
        node = expr[index]
        scalar = node[0] == "input" and node[1] in scalar_inputs
        if not scalar and (node[0] in ("acc", "input", "pconst") or (
                node[0] in LEAVES and index < rounded and node[0] not in ("const", "iconst"))):
            return None
        if node[0] not in LEAVES:
            if index < rounded:
                return None
            stack.extend(node[1])
        order.append(index)
    if last == rounded:
        return [("input", 0)], []
    renumber = {rounded: 0}
    rest, table_inputs = [("input", 0)], []
    for index in sorted(order):
        node = expr[index]
        renumber[index] = len(rest)
        if node[0] == "input":
            table_inputs.append(node[1])
            rest.append(("input", len(table_inputs)))
        else:
            rest.append(node if node[0] in LEAVES else
                        (node[0], tuple(renumber[a] for a in node[1])) + tuple(node[2:]))
    return rest, table_inputs


def channel_input(tensor: Buffer) -> bool:
    """Whether an epilogue tensor varies along one output dim at most."""
    return len(_varying_dims(tensor)) <= 1


def _varying_dims(tensor: Buffer) -> set[int]:
    return {d for d, (n, s) in enumerate(zip(tensor.shape, tensor.strides)) if s and n > 1}


def channel_records(tensors: dict, tile_counts) -> dict[int, tuple[int, int]]:
    """Epilogue input -> (the output dim it varies along, -1 for none; the most values it
    has in a tile of `tile_counts`: its records), of the f32 inputs that vary along one
    output dim at most."""
    records = {}
    for name, tensor in tensors.items():
        if name.startswith("epilogue.") and tensor.dtype == "f32" and channel_input(tensor):
            dim = min(_varying_dims(tensor), default=-1)
            records[int(name.removeprefix("epilogue."))] = \
                (dim, tile_counts[dim] if dim >= 0 else 1)
    return records


def _terms(expr, index: int, sign: int) -> list[tuple[int, int]]:
    """sign·node `index` as a sum of (sign, term node): iadd and isub opened up."""
    node = expr[index]
    if node[0] in ("iadd", "isub"):
        a, b = node[1]
        return _terms(expr, a, sign) + _terms(expr, b, sign if node[0] == "iadd" else -sign)
    return [(sign, index)]


def _wrapped(value: int) -> int:
    return (value + 2 ** 31) % 2 ** 32 - 2 ** 31


def _sum(nodes: list, start: int | None, terms) -> int | None:
    """Appends the nodes of start + Σ sign·term (start None: 0) to `nodes`, a product by a
    constant as one ifma; returns the sum's node (None: no terms, no start)."""
    current = start
    for sign, term in terms:
        node = nodes[term]
        if node[0] == "imul" and current is not None:
            x, c = node[1] if nodes[node[1][1]][0] == "iconst" else node[1][::-1]
            if nodes[c][0] == "iconst":
                nodes.append(("iconst", _wrapped(sign * nodes[c][1])))
                nodes.append(("ifma", (x, len(nodes) - 1, current)))
                current = len(nodes) - 1
                continue
        if current is None and sign > 0:
            current = term
            continue
        if current is None:
            nodes.append(("iconst", 0))
            current = len(nodes) - 1
        nodes.append(("iadd" if sign > 0 else "isub", (current, term)))
        current = len(nodes) - 1
    return current


def correction_terms(expr, pattern: Pattern, tensors: dict):
    """acc - Y as (the record terms: (sign, node) of Y = P + Z whose Z varies along the
    records' dim at most, the per-channel part of IREE's zero-point correction; the
    pixel terms: (sign, node) of acc + Σ sign·node = acc - P, the others, a per-pixel
    input sum times the weights' zero point), or None when the record operands vary
    along more than one dim."""
    dims = set()
    for name, operand in pattern.operands.items():
        if operand[0] == "input":
            dims |= _varying_dims(tensors[f"epilogue.{operand[1]}"])
    if len(dims) > 1:
        return None
    record, pixel = [], []
    for sign, term in _terms(expr, pattern.correction, -1):
        term_dims = _term_dims(expr, term, tensors)
        if len(term_dims | dims) <= 1:
            record.append((-sign, term))
            dims |= term_dims
        else:
            pixel.append((sign, term))
    return record, pixel


def _term_dims(expr, term: int, tensors: dict) -> set[int]:
    dims = set()
    for i in reachable(expr, [term]):
        if expr[i][0] == "input":
            dims |= _varying_dims(tensors[f"epilogue.{expr[i][1]}"])
    return dims


def column_bias(expr, tensors: dict, column_dims: set[int]) -> tuple[list, list] | None:
    """The pixel terms of a quantized epilogue's correction (correction_terms) as an
    expression of the epilogue inputs, when they vary along `column_dims` only (the MAC's
    output columns: an NCHW pointwise convolution computed as out^T = b^T a^T has the
    pixels there), so that the MAC's BIAS adds them before the products instead of an
    ifma pass over every tile after them (i32 sums wrap: the same bits): (that
    expression, the epilogue with the correction reduced to its record terms); else
    None."""
    pattern = match(expr)
    if pattern is None or pattern.correction is None:
        return None
    terms = correction_terms(expr, pattern, tensors)
    if terms is None or not terms[1] or any(
            not _term_dims(expr, term, tensors) <= column_dims or
            any(expr[i][0] in ("acc", "pconst") for i in reachable(expr, [term]))
            for _, term in terms[1]):
        return None
    nodes = list(expr)
    bias = live_nodes(nodes, _sum(nodes, None, terms[1]))
    record = _sum(nodes, None, terms[0])
    if record is None:
        nodes.append(("iconst", 0))
        record = len(nodes) - 1
    return bias, substituted(nodes, pattern.correction, record, len(expr) - 1)


def substituted(nodes: list, old: int, new: int, final: int) -> list:
    """The expression of node `final` of `nodes` with node `old` read as node `new`
    wherever it is an argument, its nodes renumbered in an order that keeps every
    argument before its users (`new` may come after `old`'s users in `nodes`)."""
    order: list[int] = []
    seen: set[int] = set()

    def visit(index: int) -> None:
        index = new if index == old else index
        if index in seen:
            return
        seen.add(index)
        if nodes[index][0] not in LEAVES:
            for arg in nodes[index][1]:
                visit(arg)
        order.append(index)

    visit(final)
    renumber = {index: position for position, index in enumerate(order)}
    renumber[old] = renumber[new]
    return [nodes[i] if nodes[i][0] in LEAVES else
            (nodes[i][0], tuple(renumber[a] for a in nodes[i][1])) + tuple(nodes[i][2:])
            for i in order]


def split_correction(expr, pattern: Pattern, tensors: dict):
    """acc - Y as (the expression of acc - P, or None when P = 0; the record's zero Z):
    Y = P + Z (correction_terms), P computed per element (one ifma each), Z per record.
    i32 arithmetic wraps, so any order of the terms gives the same bits."""
    terms = correction_terms(expr, pattern, tensors)
    if terms is None:
        return None
    record, pixel = terms
    nodes = list(expr)
    acc = next(i for i, node in enumerate(expr) if node[0] == "acc")
    corrected = _sum(nodes, acc, pixel)
    zero = _sum(nodes, None, record)
    if zero is None:
        zero_operand = ("iconst", 0)
    elif nodes[zero][0] in ("input", "iconst"):
        zero_operand = nodes[zero]
    else:
        zero_operand = ("expr", live_nodes(nodes, zero))
    return (live_nodes(nodes, corrected) if corrected != acc else None), zero_operand


def record_fills(records: Buffer, count: int, operands: dict, lo: float, hi: float,
                 table: Buffer, note: str) -> list[Instr]:
    """Fills of `count` records (every RECORD_WORDS words of `records`) with the constant
    operands (record field -> ("const", v) or ("iconst", v)), the bounds and the table's
    address."""
    words = {name: int(np.int32(operand[1]).view(np.uint32)) if name == "zero" else
             f32_bits(operand[1]) for name, operand in operands.items()
             if operand[0] in ("const", "iconst")}
    words.update(lo=f32_bits(lo), hi=f32_bits(hi), table=table.addr)
    return [i for name, bits in words.items()
            for i in fill_instrs(records, FIELD[name], [(count, RECORD_WORDS)], bits,
                                 f"{note} {name}")]


def vrequant(dtype: str, dst: Operand, src: Operand, box, records: Buffer,
             par_strides: tuple[int, int, int], table: Buffer, source: str,
             note: str) -> Instr:
    """One vrequant of `box` from `src` (of the `source` dtype's flag: SOURCE_FLAGS, none
    for i32) into `dst` through the records (par_strides apart) and their table."""
    fields = {"dst": dst.buffer.addr + dst.elem_offset * dtype_bytes(dst.buffer.dtype),
              "src": src.buffer.addr + src.elem_offset * dtype_bytes(src.buffer.dtype),
              "params": records.addr}
    fields.update({f"n{i}": n for i, n in enumerate(box)})
    fields.update({f"dst_s{i}": s for i, s in enumerate(dst.strides)})
    fields.update({f"src_s{i}": s for i, s in enumerate(src.strides)})
    fields.update({f"par_s{i}": s for i, s in enumerate(par_strides)})
    return Instr("vrequant", dtype, fields, flags=int(SOURCE_FLAGS.get(source, 0)),
                 reads=(src.buffer, records, table), writes=(dst.buffer,), note=note)


def computed_table(rest, lo: float, hi: float, q_dtype: str, scalars: list[Buffer], sram: Sram,
                   name: str, constants, machine: MachineConfig, plan_class,
                   dtype: str | None = None) -> tuple[Buffer, list[Instr]]:
    """(the SRAM table of `rest` over q = lo..hi, the instructions that compute it once
    per dispatch). q is ("input", 0) of `rest`, of `q_dtype`: f32 (a rounding) or i32
    (a byte source's value); ("input", 1 + j) is scalars[j], a DRAM view of one value. The
    values come from the constant pool, the table from `plan_class`'s vector
    instructions, in `dtype` (default: the expression's result dtype; another one is
    converted into)."""
    entries = int(hi - lo) + 1
    values = np.arange(lo, hi + 1).astype(np.int32 if q_dtype == "i32" else np.float32)
    q_dram = Buffer(f"{name}.q", q_dtype, (entries,), "dram", binding=CONST_POOL,
                    offset=constants.intern(values.tobytes()), strides=(1,))
    placed, setup = gathered_loads(sram, [(q_dram, entries)] + [(v, 1) for v in scalars],
                                   machine, f"{name}.in", "table values and scalars")
    (q, q_offset), scalar_cells = placed[0], placed[1:]
    plan = plan_class(rest, sram, "f32", entries, name=f"{name}.expr",
                      input_dtypes=[q_dtype] + ["f32"] * len(scalars))
    table = sram.alloc(name, dtype or plan.result_dtype, (entries,))
    staging = sram.alloc(f"{name}.result", plan.result_dtype, (entries,)) \
        if plan.result_dtype != table.dtype else table
    box, flat = (1, 1, entries), (0, 0, 1)
    setup += plan.setup + plan.emit(
        box, Operand(staging, flat),
        [Operand(q, flat, q_offset)] + [Operand(cell, (0, 0, 0), offset)
                                        for cell, offset in scalar_cells], None, "table")
    if staging is not table:
        setup.append(convert(Operand(table, flat), Operand(staging, flat), box, "table"))
    return table, setup


class Requant:
    """The plan of one matched epilogue: the table and records in SRAM (`setup`, once per
    dispatch) and per tile the record copies, the correction if any, and one vrequant
    into an output tile of the output dtype (`emit`)."""

    def __init__(self, corrected, pattern: Pattern, records_count: int, sram: Sram,
                 out: Buffer, tensors: dict, constants, max_elements: int, plan_class,
                 acc_dtype: str, input_dtypes, machine: MachineConfig, lookups=None):
        self.pattern, self.out, self.records_count = pattern, out, records_count
        zero = pattern.operands["zero"]
        zero_inputs = _zero_inputs(pattern)
        self.table, setup = computed_table(
            pattern.rest, pattern.lo, pattern.hi,
            "i32" if pattern.source in INTEGER_SOURCES else "f32",
            [tensors[f"epilogue.{k}"] for k in pattern.table_inputs], sram, "requant.table",
            constants, machine, plan_class, out.dtype if pattern.after is None else None)
        self.value_dtype = self.table.dtype
        self.records = sram.alloc("requant.records", "i32",
                                  (self.records_count * RECORD_WORDS,))
        setup += record_fills(self.records, self.records_count, pattern.operands, pattern.lo,
                              pattern.hi, self.table, "requant")
        self.zero = self.zero_input = None
        if zero[0] == "expr":
            self.zero = plan_class(zero[1], sram, "i32", self.records_count, name="zero",
                                   input_dtypes=input_dtypes)
            setup += self.zero.setup
            if zero_inputs:
                self.zero_input = zero_inputs[0]
            else:       # push constants: once
                setup += self.zero.emit((1, 1, self.records_count),
                                        Operand(self.records, (0, 0, RECORD_WORDS), FIELD["zero"]),
                                        [], None, "requant zero")
                self.zero = None
        self.correction = None
        if corrected is not None:
            self.correction = plan_class(corrected, sram, acc_dtype, max_elements, name="corr",
                                         input_dtypes=input_dtypes)
            setup += self.correction.setup
        self.setup = setup
        self.tile_inputs = set(_record_inputs(pattern)) | _inputs_of(corrected or []) | \
            (_inputs_of(pattern.after) - {TABLE_INPUT} if pattern.after is not None else set())
        self.values = Slots(sram, "requant.value", self.value_dtype, (max_elements,))
        self.after = self.after_result = self.cast = None
        if pattern.after is not None:
            table_input = ("input", len(input_dtypes))
            after = [table_input if node == ("input", TABLE_INPUT) else node
                     for node in pattern.after]
            self.after = plan_class(after, sram, acc_dtype, max_elements, name="after",
                                    input_dtypes=list(input_dtypes) + [self.value_dtype],
                                    lookups=lookups)
            setup += self.after.setup
            result = self.after.result_dtype
            self.after_result = Slots(sram, "after", result, (max_elements,))
            if result != out.dtype:
                self.cast = Slots(sram, "out", out.dtype, (max_elements,))

    def _inputs(self):
        """(record field, input index) of the per-channel operands."""
        return [(name, operand[1]) for name, operand in self.pattern.operands.items()
                if operand[0] == "input"]

    def emit(self, box, acc: Operand, inputs: list, starts, counts, sram_strides,
             note: str) -> list[Instr]:
        instrs: list[Instr] = []
        if self.correction is not None:
            instrs += self.correction.emit(box, acc, inputs, acc, note + " correction")
        strides = None
        fields = self._inputs() + ([("zero", self.zero_input)] if self.zero else [])
        for name, k in fields:
            operand = inputs[k]
            if strides is None:
                strides = operand.strides
            elif operand.strides != strides:
                raise NotLowerable("requantization operands of different layouts")
            reduced = tuple(n if s else 1 for n, s in zip(box, operand.strides))
            if 1 + sum((n - 1) * s for n, s in zip(reduced, operand.strides)) > \
                    self.records_count:
                raise NotLowerable("requantization records exceed their buffer")
            dst = Operand(self.records, tuple(RECORD_WORDS * s for s in operand.strides),
                          FIELD[name])
            if name == "zero" and self.zero is not None:
                instrs += self.zero.emit(reduced, dst, inputs, None, note + " zero")
            else:
                dtype = "i32" if name == "zero" else "f32"
                instrs.append(unary("vcopy", dtype, dst, operand, reduced, note + f" {name}"))
        value, _ = self.values.acquire(None)
        instrs.append(vrequant(self.value_dtype, Operand(value, acc.strides), acc, box,
                               self.records, strides or (0, 0, 0), self.table,
                               self.pattern.source, note))
        if self.after is not None:
            result, _ = self.after_result.acquire(None)
            instrs += self.after.emit(box, Operand(result, acc.strides),
                                      inputs + [Operand(value, acc.strides)], None, note)
            value = result
            if self.cast is not None:
                value, _ = self.cast.acquire(None)
                instrs.append(convert(Operand(value, acc.strides), Operand(result, acc.strides),
                                      box, note + " convert"))
        return instrs + store_instrs(self.out, starts, counts, value, sram_strides, note)


def plan(expr, sram: Sram, out: Buffer, tensors: dict | None, constants, max_elements: int,
         plan_class, acc_dtype: str, input_dtypes, tile_counts,
         machine: MachineConfig, lookups=None) -> Requant | None:
    """The vrequant plan of an integer accumulator's epilogue, or None (no match, or a
    record operand that varies along more than one dim); `lookups` (epilogue.Lookups)
    lets the epilogue after the table use lookups of its own."""
    if acc_dtype != "i32" or tensors is None or constants is None or \
            out.dtype not in ("i8", "u8", "i32", "f32"):
        return None
    scalar_inputs = {int(name.removeprefix("epilogue.")) for name, tensor in tensors.items()
                     if name.startswith("epilogue.") and tensor.dtype == "f32" and
                     all(s == 0 or n == 1 for n, s in zip(tensor.shape, tensor.strides))}
    pattern = match(expr, scalar_inputs)
    if pattern is None or (pattern.after is not None and input_dtypes is None):
        return None
    for name, operand in pattern.operands.items():
        if operand[0] == "input" and not channel_input(tensors[f"epilogue.{operand[1]}"]):
            return None
    corrected = None
    if pattern.correction is not None:
        split = split_correction(expr, pattern, tensors)
        if split is None:
            return None
        corrected, pattern.operands["zero"] = split
    dims = set()
    for k in _record_inputs(pattern):
        dims |= _varying_dims(tensors[f"epilogue.{k}"])
    records_count = max((tile_counts[d] for d in dims), default=1)
    if records_count * RECORD_WORDS > 2 * max_elements:
        return None
    return Requant(corrected, pattern, records_count, sram, out, tensors, constants,
                   max_elements, plan_class, acc_dtype, input_dtypes, machine, lookups)


def plan_elementwise(pattern: Pattern, sram: Sram, out: Buffer, scalars: dict, constants,
                     max_elements: int, plan_class, machine: MachineConfig) -> Requant:
    """The vrequant plan of an elementwise expression (`pattern`, match_source's) whose
    scalar inputs are `scalars` (input index -> DRAM buffer), stored to `out`."""
    tensors = {f"epilogue.{k}": tensor for k, tensor in scalars.items()}
    return Requant(None, pattern, 1, sram, out, tensors, constants, max_elements, plan_class,
                   "f32", None, machine)


def _inputs_of(expr) -> set[int]:
    return {node[1] for node in expr if node[0] == "input"}


def _zero_inputs(pattern: Pattern) -> list[int]:
    """The epilogue inputs of an expression for the record's `zero`."""
    zero = pattern.operands["zero"]
    return [node[1] for node in zero[1] if node[0] == "input"] if zero[0] == "expr" else []


def _record_inputs(pattern: Pattern) -> list[int]:
    """The epilogue inputs the records are copied or computed from per tile."""
    return [operand[1] for operand in pattern.operands.values() if operand[0] == "input"] + \
        _zero_inputs(pattern)
