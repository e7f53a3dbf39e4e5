"""Elementwise expressions (ops.ExprNode lists) as vector-engine instructions on tiles.

An expression is planned once per dispatch (SRAM temporaries for intermediate nodes,
reused once a node's last consumer has run; one-element SRAM cells filled with each
scalar constant, read with stride 0) and emitted once per tile over a box of up to three
dimensions. Every operand is an SRAM `Operand`: a buffer and per-dimension element
strides, 0 where it broadcasts. The last node writes the destination operand.
"""
from dataclasses import dataclass

from executable_format.isa import f32_bits

from .lower import NotLowerable
from .npu_ir import Buffer, Instr, dtype_bytes
from .tile import Sram, dense_sram_strides, fill_instrs

BINARY = {"add": "vadd", "sub": "vsub", "mul": "vmul", "div": "vdiv", "max": "vmax",
          "min": "vmin"}
UNARY = {"relu": "vrelu", "sigmoid": "vsigmoid", "tanh": "vtanh", "exp": "vexp",
         "clamp": "vclamp", "leakyrelu": "vleakyrelu", "scale": "vscale", "neg": "vscale",
         "abs": "vmax"}
LEAVES = ("input", "acc", "const")


@dataclass(frozen=True)
class Operand:
    buffer: Buffer
    strides: tuple[int, int, int]
    elem_offset: int = 0


def _last_uses(expr) -> dict[int, int]:
    last = {}
    for index, node in enumerate(expr):
        if node[0] not in LEAVES:
            for arg in node[1]:
                last[arg] = index
    return last


def reachable(expr) -> set[int]:
    """Indices of the nodes the final node depends on (itself included)."""
    seen, stack = set(), [len(expr) - 1]
    while stack:
        index = stack.pop()
        if index in seen:
            continue
        seen.add(index)
        if expr[index][0] not in LEAVES:
            stack.extend(expr[index][1])
    return seen


def used_inputs(expr) -> list[int]:
    return sorted({expr[i][1] for i in reachable(expr) if expr[i][0] == "input"})


def fold_bias(expr, inputs, channel_dim: int, acc_dtype: str):
    """If the expression starts by adding a per-channel input to the accumulator (and
    uses the accumulator nowhere else), returns (that input's index, the expression with
    the add replaced by the accumulator) so the MAC BIAS flag does the add; else (None, expr)."""
    acc_nodes = [i for i, node in enumerate(expr) if node[0] == "acc"]
    if len(acc_nodes) != 1:
        return None, expr
    acc = acc_nodes[0]
    users = [i for i, node in enumerate(expr) if node[0] not in LEAVES and acc in node[1]]
    if len(users) != 1 or expr[users[0]][0] != "add" or users[0] not in reachable(expr):
        return None, expr
    add = users[0]
    other = [a for a in expr[add][1] if a != acc]
    if len(other) != 1 or expr[other[0]][0] != "input":
        return None, expr
    k = expr[other[0]][1]
    ref = inputs[k]
    if ref.dtype != acc_dtype or any(s != 0 for d, s in enumerate(ref.strides) if d != channel_dim):
        return None, expr
    return k, [("acc",) if i == add else node for i, node in enumerate(expr)]


def temp_count(expr) -> int:
    """SRAM temporaries (of the tile size) the expression needs."""
    slots = _assign_temps(expr)
    return max(slots.values(), default=-1) + 1 + any(node[0] == "abs" for node in expr)


def _assign_temps(expr) -> dict[int, int]:
    """Temp index per intermediate node (not the last, not a leaf), linear scan."""
    last = _last_uses(expr)
    free: list[int] = []
    used = 0
    slot_of: dict[int, int] = {}
    final = len(expr) - 1
    for index, node in enumerate(expr):
        if node[0] in LEAVES:
            continue
        for arg in set(node[1]):
            if last.get(arg) == index and arg in slot_of:
                free.append(slot_of[arg])
        if index != final:
            if free:
                slot_of[index] = free.pop()
            else:
                slot_of[index] = used
                used += 1
    return slot_of


class EpiloguePlan:
    """Temporaries and constant cells of one expression, `dtype` throughout."""

    def __init__(self, expr, sram: Sram, dtype: str, max_elements: int, name: str = "epi"):
        for node in expr:
            if node[0] not in LEAVES and node[0] not in BINARY and node[0] not in UNARY:
                raise NotLowerable(f"expression op '{node[0]}' has no NPU vector instruction")
        if dtype != "f32" and any(expr[i][0] not in LEAVES for i in reachable(expr)):
            raise NotLowerable(f"{dtype} elementwise expressions are not supported (f32 only)")
        self.expr, self.dtype = expr, dtype
        self.setup: list[Instr] = []
        self.consts: dict[int, Buffer] = {}
        for index, node in enumerate(expr):
            if node[0] == "const":
                cell = sram.alloc(f"{name}.const{index}", dtype, (1,))
                self.consts[index] = cell
                self.setup += fill_instrs(cell, 0, [(1, 1)], f32_bits(float(node[1])),
                                          note=f"constant {node[1]}")
        self.slot_of = _assign_temps(expr)
        count = max(self.slot_of.values(), default=-1) + 1
        self.temps = [sram.alloc(f"{name}.tmp{i}", dtype, (max_elements,)) for i in range(count)]
        self.scratch = sram.alloc(f"{name}.neg", dtype, (max_elements,)) \
            if any(node[0] == "abs" for node in expr) else None

    def emit(self, box: tuple[int, int, int], dst: Operand, inputs: list[Operand],
             acc: Operand | None, note: str) -> list[Instr]:
        """Vector instructions computing the expression over `box` into `dst`."""
        values: dict[int, Operand] = {}
        instrs: list[Instr] = []
        dense = tuple(dense_sram_strides(list(box)))
        final = len(self.expr) - 1
        for index, node in enumerate(self.expr):
            kind = node[0]
            if kind == "input":
                values[index] = inputs[node[1]]
            elif kind == "acc":
                values[index] = acc
            elif kind == "const":
                values[index] = Operand(self.consts[index], (0, 0, 0))
            else:
                target = dst if index == final else Operand(self.temps[self.slot_of[index]], dense)
                args = [values[a] for a in node[1]]
                instrs += self._node(kind, node[2:], target, args, box, note)
                values[index] = target
        if self.expr[final][0] in LEAVES and values[final] != dst:
            instrs.append(_unary("vcopy", self.dtype, dst, values[final], box, note))
        return instrs

    def _node(self, kind, params, target: Operand, args: list[Operand], box, note) -> list[Instr]:
        if kind in BINARY:
            return [_binary(BINARY[kind], self.dtype, target, args[0], args[1], box, note)]
        src = args[0]
        if kind == "neg":
            return [_unary("vscale", self.dtype, target, src, box, note, -1.0, 0.0)]
        if kind == "abs":
            negated = Operand(self.scratch, tuple(dense_sram_strides(list(box))))
            return [_unary("vscale", self.dtype, negated, src, box, note, -1.0, 0.0),
                    _binary("vmax", self.dtype, target, src, negated, box, note)]
        return [_unary(UNARY[kind], self.dtype, target, src, box, note, *params)]


def _addr(operand: Operand) -> int:
    return operand.buffer.addr + operand.elem_offset * dtype_bytes(operand.buffer.dtype)


def _binary(op, dtype, dst: Operand, lhs: Operand, rhs: Operand, box, note) -> Instr:
    fields = {"dst": _addr(dst), "lhs": _addr(lhs), "rhs": _addr(rhs)}
    fields.update({f"n{i}": n for i, n in enumerate(box)})
    for name, operand in (("dst", dst), ("lhs", lhs), ("rhs", rhs)):
        fields.update({f"{name}_s{i}": s for i, s in enumerate(operand.strides)})
    return Instr(op, dtype, fields, reads=(lhs.buffer, rhs.buffer), writes=(dst.buffer,),
                 note=note)


def _unary(op, dtype, dst: Operand, src: Operand, box, note, *params) -> Instr:
    fields = {"dst": _addr(dst), "src": _addr(src)}
    fields.update({f"n{i}": n for i, n in enumerate(box)})
    fields.update({f"dst_s{i}": s for i, s in enumerate(dst.strides)})
    fields.update({f"src_s{i}": s for i, s in enumerate(src.strides)})
    for i, value in enumerate(params):
        fields[f"p{i}"] = f32_bits(float(value))
    return Instr(op, dtype, fields, reads=(src.buffer,), writes=(dst.buffer,), note=note)
