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

from .lower import NotLowerable
from .npu_ir import Buffer, Instr, dtype_bytes
from .ops import LEAVES, live_nodes
from .tile import Slots, Sram, dense_sram_strides, dma_instrs, fill_instrs, store_instrs, Dim
from .vector import Operand, convert, unary

RECORD_WORDS = len(REQUANT_RECORD)
FIELD = {name: i for i, name in enumerate(REQUANT_RECORD)}
STEPS = ("mul", "fma", "div")          # the record's f32 steps, in its order
TABLE_MAX = 256


@dataclass
class Pattern:
    """An epilogue as vrequant's record and table expression."""
    correction: int | None          # node Y of isub(acc, Y), or None (itof(acc))
    correction_node: int | None     # the isub node (when Y is computed per tile)
    operands: dict                  # record field -> ("const", v) or ("input", k)
    lo: float
    hi: float
    rest: list                      # the table's expression, ("input", 0) being q


def _users(expr, index: int) -> list[int]:
    return [i for i, node in enumerate(expr) if node[0] not in LEAVES and index in node[1]]


def _operand(expr, index: int):
    node = expr[index]
    return node if node[0] in ("const", "input") else None


def match(expr) -> Pattern | None:
    """The record and table of `expr`, or None when it is not a requantization chain."""
    accs = [i for i, node in enumerate(expr) if node[0] == "acc"]
    if len(accs) != 1 or len(_users(expr, accs[0])) != 1:
        return None
    current = _users(expr, accs[0])[0]
    correction = correction_node = None
    if expr[current][0] == "isub" and expr[current][1][0] == accs[0] and \
            accs[0] != expr[current][1][1]:
        correction, correction_node = expr[current][1][1], current
        users = _users(expr, current)
        if len(users) != 1:
            return None
        current = users[0]
    if expr[current][0] != "itof":
        return None
    operands = {"zero": ("iconst", 0), "mul": ("const", 1.0), "fma_mul": ("const", 1.0),
                "fma_add": ("const", -0.0), "div": ("const", 1.0)}
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
            break
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
    rest = _table_expression(expr, user)
    if rest is None:
        return None
    return Pattern(correction, correction_node, operands, float(lo), float(hi), rest)


def _table_expression(expr, rounded: int):
    """The nodes after `rounded` as an expression of ("input", 0) = its value, if they
    read nothing else but scalars."""
    order, stack, seen = [], [len(expr) - 1], set()
    while stack:
        index = stack.pop()
        if index in seen or index == rounded:
            continue
        seen.add(index)
        node = expr[index]
        if node[0] in ("acc", "input", "pconst") or (node[0] in LEAVES and index < rounded
                                                    and node[0] not in ("const", "iconst")):
            return None
        if node[0] not in LEAVES:
            if index < rounded:
                return None
            stack.extend(node[1])
        order.append(index)
    if len(expr) - 1 == rounded:
        return [("input", 0)]
    renumber = {rounded: 0}
    rest = [("input", 0)]
    for index in sorted(order):
        node = expr[index]
        renumber[index] = len(rest)
        rest.append(node if node[0] in LEAVES else
                    (node[0], tuple(renumber[a] for a in node[1])) + tuple(node[2:]))
    return rest


def channel_input(tensor: Buffer) -> bool:
    """Whether an epilogue tensor varies along one output dim at most."""
    return sum(1 for n, s in zip(tensor.shape, tensor.strides) if s and n > 1) <= 1


class Requant:
    """The plan of one matched epilogue: the table and records in SRAM (`setup`, once per
    dispatch) and per tile the record copies, the correction if any, and one vrequant
    into an output tile of the output dtype (`emit`)."""

    def __init__(self, expr, pattern: Pattern, sram: Sram, out: Buffer, constants,
                 max_elements: int, plan_class, acc_dtype: str, input_dtypes):
        self.pattern, self.out = pattern, out
        per_channel = [k for _, k in self._inputs()]
        self.records_count = max(out.shape) if per_channel else 1
        entries = int(pattern.hi - pattern.lo) + 1
        q = np.arange(pattern.lo, pattern.hi + 1, dtype=np.float32)
        q_dram = Buffer("requant.q", "f32", (entries,), "dram", binding=CONST_POOL,
                        offset=constants.intern(q.tobytes()), strides=(1,))
        q_sram = sram.alloc("requant.q", "f32", (entries,))
        table_plan = plan_class(pattern.rest, sram, "f32", entries, name="table",
                                input_dtypes=["f32"])
        result = table_plan.result_dtype
        self.table = sram.alloc("requant.table", out.dtype, (entries,))
        staging = sram.alloc("requant.result", result, (entries,)) if result != out.dtype \
            else self.table
        self.records = sram.alloc("requant.records", "i32",
                                  (self.records_count * RECORD_WORDS,))
        box = (1, 1, entries)
        flat = (0, 0, 1)
        setup = dma_instrs("dma.load", q_dram, 0, q_sram, 0, [Dim(entries, 1, 1)],
                           "requant values")
        setup += table_plan.setup
        setup += table_plan.emit(box, Operand(staging, flat), [Operand(q_sram, flat)], None,
                                 "requant table")
        if staging is not self.table:
            setup.append(convert(Operand(self.table, flat), Operand(staging, flat), box,
                                 "requant table"))
        fields = {name: operand for name, operand in pattern.operands.items()
                  if operand[0] != "input"}
        if pattern.correction_node is not None and not self._zero_input():
            fields["zero"] = ("iconst", 0)
        for name, operand in fields.items():
            bits = int(np.int32(operand[1]).view(np.uint32)) if name == "zero" else \
                f32_bits(operand[1])
            setup += fill_instrs(self.records, FIELD[name], [(self.records_count, RECORD_WORDS)],
                                 bits, f"requant {name}")
        for name, bits in (("lo", f32_bits(pattern.lo)), ("hi", f32_bits(pattern.hi)),
                           ("table", self.table.addr)):
            setup += fill_instrs(self.records, FIELD[name], [(self.records_count, RECORD_WORDS)],
                                 bits, f"requant {name}")
        self.correction = None
        if pattern.correction_node is not None and not self._zero_input():
            prefix = live_nodes(expr, pattern.correction_node)
            self.correction = plan_class(prefix, sram, acc_dtype, max_elements, name="corr",
                                         input_dtypes=input_dtypes)
            setup += self.correction.setup
        self.setup = setup
        self.cast = Slots(sram, "out", out.dtype, (max_elements,))

    def _zero_input(self) -> bool:
        return self.pattern.operands["zero"][0] == "input"

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
        for name, k in self._inputs():
            operand = inputs[k]
            if strides is None:
                strides = operand.strides
            elif operand.strides != strides:
                raise NotLowerable("requantization operands of different layouts")
            reduced = tuple(n if s else 1 for n, s in zip(box, operand.strides))
            if 1 + sum((n - 1) * s for n, s in zip(reduced, operand.strides)) > \
                    self.records_count:
                raise NotLowerable("requantization records exceed their buffer")
            dtype = "i32" if name == "zero" else "f32"
            dst = Operand(self.records, tuple(RECORD_WORDS * s for s in operand.strides),
                          FIELD[name])
            instrs.append(unary("vcopy", dtype, dst, operand, reduced, note + f" {name}"))
        out_tile, _ = self.cast.acquire(None)
        fields = {"dst": out_tile.addr, "src": acc.buffer.addr + acc.elem_offset * 4,
                  "params": self.records.addr}
        fields.update({f"n{i}": n for i, n in enumerate(box)})
        fields.update({f"dst_s{i}": s for i, s in enumerate(acc.strides)})
        fields.update({f"src_s{i}": s for i, s in enumerate(acc.strides)})
        fields.update({f"par_s{i}": s for i, s in enumerate(strides or (0, 0, 0))})
        instrs.append(Instr("vrequant", self.out.dtype, fields,
                            reads=(acc.buffer, self.records, self.table),
                            writes=(out_tile,), note=note))
        return instrs + store_instrs(self.out, starts, counts, out_tile, sram_strides, note)


def plan(expr, sram: Sram, out: Buffer, tensors: dict | None, constants, max_elements: int,
         plan_class, acc_dtype: str, input_dtypes) -> Requant | None:
    """The vrequant plan of an integer accumulator's epilogue, or None (no match, or a
    record operand that varies along more than one dim)."""
    if acc_dtype != "i32" or tensors is None or constants is None or \
            out.dtype not in ("i8", "u8", "i32", "f32"):
        return None
    pattern = match(expr)
    if pattern is None:
        return None
    if pattern.operands["zero"] == ("iconst", 0) and pattern.correction is not None:
        node = expr[pattern.correction]
        if node[0] == "input" and channel_input(tensors[f"epilogue.{node[1]}"]):
            pattern.operands["zero"] = node
    for name, operand in pattern.operands.items():
        if operand[0] == "input" and not channel_input(tensors[f"epilogue.{operand[1]}"]):
            return None
    if any(operand[0] == "input" for operand in pattern.operands.values()) and \
            max(out.shape) * RECORD_WORDS * 4 > 2 * max_elements * 4:
        return None
    return Requant(expr, pattern, sram, out, constants, max_elements, plan_class, acc_dtype,
                   input_dtypes)
