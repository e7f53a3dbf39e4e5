"""Elementwise expressions (ops.ExprNode lists) as vector-engine instructions on tiles.

An expression is planned once per dispatch (SRAM temporaries for intermediate nodes,
reused once a node's last consumer has run; one-element SRAM cells filled with each
scalar constant, read with stride 0) and emitted once per tile over a box of up to three
dimensions. Every operand is an SRAM `Operand`: a buffer and per-dimension element
strides, 0 where it broadcasts. The last node writes the destination operand; the
`stored` nodes of a multi-output expression write operands of their own (their output
tiles, never temporaries), where later nodes read them.
"""
import math
from dataclasses import dataclass, field

from executable_format.isa import ACCUMULATOR, DTYPE_NAMES, Flag
from executable_format.machine import MachineConfig

from . import requant
from .lookup import LOOKUPS, LookupTables, Payoff, byte_sources, tabulated
from .requant import INTEGER_SOURCES
from .lower import NotLowerable
from .ops import INT_NODES, LEAVES, SCALARS, live_nodes, reachable
from .npu_ir import DTYPES, FLOATS, Buffer, Instr, dtype_bytes, value_bits
from .tile import (Resident, Slots, Sram, Streamed, dense_sram_strides, fill_instrs,
                   store_instrs, worth_resident)
from .vector import Operand, binary, convert, unary

BINARY = {"add": "vadd", "sub": "vsub", "mul": "vmul", "div": "vdiv", "max": "vmax",
          "min": "vmin"}
INT_BINARY = {"iadd": "vadd", "isub": "vsub", "imul": "vmul", "imax": "vmax", "imin": "vmin",
              "iand": "vand"}
CONVERT = ("itof", "ftoi", "ftou")  # vcvt between a node's i32 and f32
ROUNDINGS = {"floor": Flag.ROUND_FLOOR, "ceil": Flag.ROUND_CEIL,
             "roundaway": Flag.ROUND_HALF_AWAY}        # vround with its rounding flag
INTS = ("i8", "i32", "u8")
# Nodes whose instructions may need a scratch tile.
SCRATCH_NODES = ("abs", "fma", "ifma", "selgt", "selge", "select")
# Nodes of three operands whose instruction reads the third from its destination, and
# its flags: ("fma", (a, b, c)) a·b + c (vfma), ("selgt"/"selge", (a, b, c)) a > b ? a : c
# and a >= b ? a : c (vselgt), ("select", (c, a, b)) c != 0 ? a : b (vselect).
INTO_DESTINATION = {"fma": ("vfma", 0), "ifma": ("vfma", 0), "selgt": ("vselgt", 0),
                    "selge": ("vselgt", int(Flag.OR_EQUAL)), "select": ("vselect", 0)}
UNARY = {"relu": "vrelu", "sigmoid": "vsigmoid", "tanh": "vtanh", "exp": "vexp",
         "sqrt": "vsqrt", "rsqrt": "vrsqrt", "clamp": "vclamp", "leakyrelu": "vleakyrelu",
         "scale": "vscale", "neg": "vscale", "abs": "vmax", "round": "vround",
         "floor": "vround", "ceil": "vround", "roundaway": "vround", "hswish": "vhswish",
         "erf": "verf", "log": "vlog", "log1p": "vlog1p", "narrow": "vnarrow", "sin": "vsin",
         "cos": "vcos"}


@dataclass(frozen=True)
class Lookups:
    """What an EpiloguePlan needs to compute parts of its expression as table lookups
    (lookup.py): the constant pool, the machine, its byte inputs' ranges (input ->
    (lo, hi)) and its f32 inputs that vary along one dim at most (input -> (that dim,
    the most values it has in a tile)), which a lookup's record may read; `elements`: the
    values the expression runs over in the dispatch (lookup.Payoff)."""
    constants: object
    machine: MachineConfig
    byte_inputs: dict
    elements: int
    channel_records: dict = field(default_factory=dict)


def byte_ranges(dtypes: dict[int, str]) -> dict[int, tuple[int, int]]:
    """The value range of each byte input among `dtypes` (input -> its DRAM dtype)."""
    return {k: INTEGER_SOURCES[d] for k, d in dtypes.items() if d in INTEGER_SOURCES}


def with_lookups(expr, lookups: Lookups | None, input_dtypes, floats: str, stored):
    """(the expression as an EpiloguePlan given `lookups` computes it, its tables): the
    parts worth a table replaced by lookup nodes (lookup.tabulated); the expression as
    it is, and no tables, without lookups, with `stored` results besides the last, or
    with floats other than f32 (vrequant's steps are f32)."""
    if lookups is None or stored or floats != "f32":
        return expr, []
    return tabulated(expr, Payoff(lookups.elements, lookups.machine), lookups.byte_inputs,
                     {k for k, d in enumerate(input_dtypes) if d in INTS},
                     {k: dim for k, (dim, _) in lookups.channel_records.items()
                      if input_dtypes[k] == "f32"},
                     {k: d for k, d in enumerate(input_dtypes) if d in INTEGER_SOURCES})


def with_byte_lookups(expr, lookups: Lookups, load_dtypes: list[str], dram_dtypes: dict,
                      floats: str, stored):
    """with_lookups, where a byte input among `dram_dtypes` (input -> its DRAM dtype, of
    the inputs that may stay bytes) that only lookups read, as their source
    (lookup.byte_sources), stays bytes: its entry of `load_dtypes` becomes its i8 or u8
    (in place), which vrequant widens as it reads it (a vcvt pass a tile less)."""
    computed, tables = with_lookups(expr, lookups, load_dtypes, floats, stored)
    kept = byte_sources(computed, lookups.byte_inputs) & dram_dtypes.keys()
    if not kept:
        return computed, tables
    for k in kept:
        load_dtypes[k] = dram_dtypes[k]
    return with_lookups(expr, lookups, load_dtypes, floats, stored)


def check_vector_nodes(expr, also: tuple[str, ...] = ()) -> None:
    """Raises NotLowerable naming the first node (other than a leaf or one of `also`)
    that no vector instruction computes."""
    for node in expr:
        if node[0] not in LEAVES + also + ("cmp", "icmp") and node[0] not in BINARY and \
                node[0] not in UNARY and node[0] not in INT_BINARY and \
                node[0] not in CONVERT and node[0] not in INTO_DESTINATION:
            raise NotLowerable(f"expression op '{node[0]}' has no NPU vector instruction")


def _last_uses(expr) -> dict[int, int]:
    last = {}
    for index, node in enumerate(expr):
        if node[0] not in LEAVES:
            for arg in node[1]:
                last[arg] = index
    return last


def accumulator(dtype: str) -> str:
    """The MAC array's accumulator dtype for operands of `dtype` (f32, or i32 for i8)."""
    return DTYPE_NAMES[ACCUMULATOR[DTYPES[dtype]]]


def used_inputs(expr, roots=None) -> list[int]:
    return sorted({expr[i][1] for i in reachable(expr, roots) if expr[i][0] == "input"})


def fold_bias(expr, inputs, channel_dims: set[int], acc_dtype: str):
    """If the expression starts by adding a per-channel input to the accumulator (and
    uses the accumulator nowhere else), the input varying only along the `channel_dims`
    (the MAC's output lanes: a conv's F, a matmul's N dims) and along them, returns
    (that input's index, the expression with the add replaced by the accumulator) so
    the MAC BIAS flag does the add; else (None, expr). A bias of another float dtype
    than the accumulator is converted when loaded."""
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
    if acc_dtype not in FLOATS or ref.dtype not in FLOATS or any(
            s != 0 and n != 1 for d, (n, s) in enumerate(zip(ref.shape, ref.strides))
            if d not in channel_dims):
        return None, expr
    if any(ref.strides[d] == 0 and ref.shape[d] != 1 for d in channel_dims):
        return None, expr   # one value for every channel: BIAS reads one per channel
    return k, [("acc",) if i == add else node for i, node in enumerate(expr)]


def scalar_fill(cell: Buffer, node) -> list[Instr]:
    """The fill of a scalar leaf's one-element cell: a constant's value, or a push
    constant (read at dispatch time)."""
    if node[0] == "pconst":
        return fill_instrs(cell, 0, [(1, 1)], node[1], note=f"push constant {node[1]}",
                           flags=int(Flag.PUSH_CONSTANT))
    return fill_instrs(cell, 0, [(1, 1)], value_bits(cell.dtype, node[1]),
                       note=f"constant {node[1]}")


def float_dtype(*dtypes: str, expr=()) -> str:
    """The dtype the float nodes of an expression (`expr`) over these tensors compute
    in: the first float among them; f32 for a quantized (integer-only) op, for bf16,
    which IREE computes in f32 and rounds once, when it stores the result (ONNX's bf16
    Celu is 1 bf16 ulp off otherwise), and for a mixed-precision expression, which
    rounds its f16 values with `narrow` nodes (analysis/half_precision.py)."""
    if "bf16" in dtypes or any(node[0] == "narrow" for node in expr):
        return "f32"
    return next((d for d in dtypes if d in FLOATS), "f32")


def node_dtypes(expr, input_dtypes, acc_dtype: str | None, floats: str) -> list[str]:
    """The dtype each node computes in (ops.py): i32 for integer nodes and an integer
    accumulator, inputs the dtype they are loaded as, `floats` for the others."""
    def dtype(node) -> str:
        if node[0] in INT_NODES:
            return "i32"
        if node[0] == "input":
            return input_dtypes[node[1]]
        if node[0] == "acc":
            return "i32" if acc_dtype in INTS else floats
        return floats
    return [dtype(node) for node in expr]


def temp_count(expr, stored=frozenset()) -> int:
    """SRAM temporaries (of the tile size) the expression needs (an integer and a float
    temporary are both counted; an expression with integer nodes computes floats in f32,
    so every temporary has the size of the widest)."""
    slots = _assign_temps(expr, stored)
    return len(set(slots.values())) + any(node[0] in SCRATCH_NODES for node in expr)


def bytes_per_element(expr, inputs, dtype: str) -> int:
    """SRAM bytes per output element an epilogue computed in `dtype` takes besides its
    result: its temporaries, and two slots of each input it reads plus two for the
    input's conversion (counted whatever the input's dtype)."""
    e = dtype_bytes(dtype)
    return temp_count(expr) * e + sum(2 * (e + dtype_bytes(inputs[k].dtype))
                                      for k in used_inputs(expr))


def quantized_output_bytes(out_dtype: str, dtype: str) -> int:
    """SRAM bytes per output element OutputStage adds when an epilogue computing in
    `dtype` stores another dtype: two i32 result tiles and two output tiles."""
    return 0 if out_dtype == dtype else 2 * (4 + dtype_bytes(out_dtype))


def scalar_nodes(expr, scalar_inputs, stored=frozenset()) -> list[int]:
    """The operations (not the last node, not a `stored` one) whose operands are all
    scalars: constants, `scalar_inputs`, or such operations; those that compute
    element by element (not a lookup, nor a node with a scratch or destination operand)."""
    found: list[int] = []
    scalar = set()
    for index, node in enumerate(expr):
        kind = node[0]
        if kind in SCALARS or (kind == "input" and node[1] in scalar_inputs):
            scalar.add(index)
        elif kind not in LEAVES and kind not in LOOKUPS and kind not in SCRATCH_NODES and \
                all(a in scalar for a in node[1]):
            scalar.add(index)
            if index != len(expr) - 1 and index not in stored:
                found.append(index)
    return found


def _assign_temps(expr, stored=frozenset()) -> dict[int, tuple[bool, int]]:
    """Temp (is_int, index) per intermediate node (not the last, not a leaf, not a
    `stored` node writing an output of its own), linear scan; integer and float nodes
    take temporaries of their own."""
    last = _last_uses(expr)
    free: dict[bool, list[int]] = {False: [], True: []}
    used = {False: 0, True: 0}
    slot_of: dict[int, tuple[bool, int]] = {}
    final = len(expr) - 1
    for index, node in enumerate(expr):
        if node[0] in LEAVES:
            continue
        for arg in set(node[1]):
            if last.get(arg) == index and arg in slot_of:
                is_int, slot = slot_of[arg]
                free[is_int].append(slot)
        if index != final and index not in stored:
            is_int = node[0] in INT_NODES
            if free[is_int]:
                slot_of[index] = (is_int, free[is_int].pop())
            else:
                slot_of[index] = (is_int, used[is_int])
                used[is_int] += 1
    return slot_of


class EpiloguePlan:
    """Temporaries and constant cells of one expression. `dtype` is the accumulator's
    (or, without one, the op's) dtype; `input_dtypes` the dtypes the inputs are loaded
    as (default: `dtype`). Integer nodes compute in i32, float nodes in `dtype` or, for
    an integer `dtype`, in f32. `stored`: the nodes besides the last one that `emit`
    writes to operands it is given."""

    def __init__(self, expr, sram: Sram, dtype: str, max_elements: int, name: str = "epi",
                 stored=frozenset(), input_dtypes=None, lookups: Lookups | None = None,
                 result_dtype: str | None = None, scalar_inputs=frozenset()):
        """`result_dtype`: the byte dtype of the result's output, which the table of a last
        node that is an integer lookup holds, saturated once (the vcvt per tile saved).
        `scalar_inputs`: the inputs that hold one value (broadcast along every dim): an
        operation on scalars alone (a dynamically quantized matmul's product of its
        runtime scale and a constant) is computed on one element into a cell of its own,
        and read broadcast, rather than over the tile."""
        copies = all(node[0] in LEAVES for node in expr)   # in the op's dtype, whatever it is
        floats = dtype if copies else float_dtype(dtype, expr=expr)
        if floats != dtype and dtype in FLOATS and any(node[0] == "acc" for node in expr):
            raise NotLowerable(f"mixed-precision epilogue of a {dtype} accumulator")
        if input_dtypes is None:
            input_dtypes = [dtype] * (1 + max((n[1] for n in expr if n[0] == "input"), default=0))
        expr, tables = with_lookups(expr, lookups, input_dtypes, floats, stored)
        bytes_result = result_dtype in INTEGER_SOURCES and expr[-1][0] == "ilookup"
        self.tables = LookupTables(tables, sram, name, lookups.constants, lookups.machine,
                                   EpiloguePlan, lookups.channel_records,
                                   {expr[-1][2]: result_dtype} if bytes_result else {}) \
            if tables else None
        check_vector_nodes(expr, LOOKUPS)
        self.expr, self.dtype = expr, floats
        self.dtypes = node_dtypes(expr, input_dtypes, dtype, floats)
        if bytes_result:
            self.dtypes[-1] = result_dtype
        if "i32" in self.dtypes and floats != "f32" and any(
                self.dtypes[i] != "i32" for i in reachable(expr)):
            raise NotLowerable(f"integer arithmetic with {floats} values")
        self.setup: list[Instr] = self.tables.setup if self.tables is not None else []
        self.consts: dict[int, Buffer] = {}
        for index, node in enumerate(expr):
            if node[0] in SCALARS:
                cell = sram.alloc(f"{name}.const{index}", self.dtypes[index], (1,))
                self.consts[index] = cell
                self.setup += scalar_fill(cell, node)
        self.scalars = {index: sram.alloc(f"{name}.scalar{index}", self.dtypes[index], (1,))
                        for index in scalar_nodes(expr, scalar_inputs, stored)}
        self.slot_of = _assign_temps(expr, set(stored) | set(self.scalars))
        self.temps = {slot: sram.alloc(f"{name}.{'itmp' if slot[0] else 'tmp'}{slot[1]}",
                                       "i32" if slot[0] else floats, (max_elements,))
                      for slot in sorted(set(self.slot_of.values()))}
        self.scratch = sram.alloc(f"{name}.scratch", floats, (max_elements,)) \
            if any(node[0] in SCRATCH_NODES for node in expr) else None

    @property
    def result_dtype(self) -> str:
        """The dtype of the last node: the destination `emit` writes."""
        return self.dtypes[-1]

    def emit(self, box: tuple[int, int, int], dst: Operand, inputs: list[Operand],
             acc: Operand | None, note: str,
             stored: dict[int, Operand] | None = None) -> list[Instr]:
        """Vector instructions computing the expression over `box` into `dst`, and each
        `stored` node (the plan's) into its operand. A stored leaf (the accumulator, an
        input) is copied where it stands, before a later node can overwrite it in place."""
        values: dict[int, Operand] = {}
        instrs: list[Instr] = []
        dense = tuple(dense_sram_strides(list(box)))
        targets = {**(stored or {}), len(self.expr) - 1: dst}
        for index, node in enumerate(self.expr):
            kind = node[0]
            if kind == "input":
                values[index] = inputs[node[1]]
            elif kind == "acc":
                values[index] = acc
            elif kind in SCALARS:
                values[index] = Operand(self.consts[index], (0, 0, 0))
            elif index in self.scalars:
                values[index] = Operand(self.scalars[index], (0, 0, 0))
                instrs += self._node(kind, node[2:], self.dtypes[index], values[index],
                                     [values[a] for a in node[1]], (1, 1, 1), note)
            else:
                target = targets[index] if index in targets else \
                    Operand(self.temps[self.slot_of[index]], dense)
                args = [values[a] for a in node[1]]
                instrs += self._node(kind, node[2:], self.dtypes[index], target, args, box,
                                     note)
                values[index] = target
            if kind in LEAVES and index in targets and values[index] != targets[index]:
                instrs.append(unary("vcopy", self.dtypes[index], targets[index], values[index],
                                    box, note))
        return instrs

    def _node(self, kind, params, dtype, target: Operand, args: list[Operand], box,
              note) -> list[Instr]:
        if kind in LOOKUPS:
            return self.tables.instrs(params[0], dtype, target, args[0], box, args[1:], note)
        scratch = Operand(self.scratch, tuple(dense_sram_strides(list(box)))) \
            if self.scratch is not None else None
        return node_instrs(kind, params, dtype, target, args, box, scratch, note)


def node_instrs(kind, params, dtype: str, target: Operand, args: list[Operand], box,
                scratch: Operand | None, note: str) -> list[Instr]:
    """The vector instructions of one expression node computing in `dtype` over `box`
    (`abs` needs a `scratch` operand of the box's size)."""
    if kind in BINARY:
        return [binary(BINARY[kind], dtype, target, args[0], args[1], box, note)]
    if kind in ("cmp", "icmp"):
        return [binary("vcmp", dtype, target, args[0], args[1], box, note, flags=params[0])]
    if kind in INTO_DESTINATION:
        return into_destination(*INTO_DESTINATION[kind], dtype, target, args, box, scratch, note)
    if kind in INT_BINARY:
        return [binary(INT_BINARY[kind], "i32", target, args[0], args[1], box, note)]
    src = args[0]
    if kind in CONVERT:
        return [convert(target, src, box, note, truncate=kind in ("ftoi", "ftou"))]
    if kind == "neg":
        return [unary("vscale", dtype, target, src, box, note, -1.0, 0.0)]
    if kind in ROUNDINGS:
        return [unary("vround", dtype, target, src, box, note, -math.inf, math.inf,
                      flags=int(ROUNDINGS[kind]))]
    if kind == "abs":
        return [unary("vscale", dtype, scratch, src, box, note, -1.0, 0.0),
                binary("vmax", dtype, target, src, scratch, box, note)]
    return [unary(UNARY[kind], dtype, target, src, box, note, *params)]


def load_dtype(dtype: str, compute_dtype: str) -> str:
    """The dtype an input of `dtype` is loaded as for an expression computing floats in
    `compute_dtype`: i32 for an integer input (the integer nodes' dtype), f32 for an i64
    one (which the walk takes only where it is converted to f32: ids, masks), else
    `compute_dtype` (an integer one meaning f32)."""
    if dtype == "i64":
        return "f32"
    return "i32" if dtype in INTS else float_dtype(compute_dtype)


def into_destination(opcode: str, flags: int, dtype: str, target: Operand, args: list[Operand],
                     box, scratch: Operand | None, note: str) -> list[Instr]:
    """A node (a, b, c) whose instruction (vfma, vselgt, vselect) reads c from its
    destination: c goes there first; where the target is a or b itself (in place),
    through the `scratch` operand."""
    a, b, c = args
    op = lambda dst: binary(opcode, dtype, dst, a, b, box, note, flags)  # noqa: E731
    if target == c:
        return [op(target)]
    if target.buffer not in (a.buffer, b.buffer, c.buffer):
        return [unary("vcopy", dtype, target, c, box, note), op(target)]
    return [unary("vcopy", dtype, scratch, c, box, note), op(scratch),
            unary("vcopy", dtype, target, scratch, box, note)]


class EpilogueInputs:
    """The epilogue inputs an expression reads (`used`, of `count`), each streamed tile by
    tile from its DRAM tensor `epilogue.<k>` and converted to `compute_dtype`
    (tile.Streamed); `max_counts` is the biggest tile. A small broadcast input (a
    per-channel operand, tile.worth_resident) is loaded whole once instead, by the
    instructions of `setup` (tile.Resident). `expand`: input -> its broadcast dims a
    tile must hold densely (tile.Streamed's), never loaded whole."""

    def __init__(self, sram: Sram, tensors: dict[str, Buffer], used: list[int], count: int,
                 max_counts: list[int], compute_dtype: str, machine: MachineConfig,
                 expand: dict[int, frozenset] | None = None):
        self.count = count
        self.dtypes = [load_dtype(tensors[f"epilogue.{k}"].dtype, compute_dtype)
                       for k in range(count)]
        self.streams, self.residents = {}, {}
        expand = expand or {}
        for k in used:
            tensor = tensors[f"epilogue.{k}"]
            if 0 in tensor.strides and k not in expand and worth_resident(tensor, machine):
                self.residents[k] = Resident(sram, tensor, f"epilogue.{k} whole", self.dtypes[k])
            else:
                self.streams[k] = Streamed(sram, tensor, max_counts, compute_dtype=self.dtypes[k],
                                           expand=expand.get(k, frozenset()))

    @property
    def setup(self) -> list[Instr]:
        """The loads of the inputs loaded whole, before the first tile's epilogue."""
        return [i for r in self.residents.values() for i in r.loads]

    def keep_only(self, inputs: set[int] | None) -> None:
        """Stops streaming the inputs not in `inputs` (OutputStage.tile_inputs; None
        keeps all)."""
        if inputs is not None:
            self.streams = {k: s for k, s in self.streams.items() if k in inputs}
            self.residents = {k: r for k, r in self.residents.items() if k in inputs}

    def load(self, starts: list[int], counts: list[int], note: str,
             box_strides) -> tuple[list[Instr], list[Operand | None]]:
        """The loads of the tile at `starts`, and the operand of every epilogue input
        (None for those not read); `box_strides(k, strides)` turns input k's SRAM strides
        per tensor dim into its three strides over the vector box."""
        instrs: list[Instr] = []
        operands: list[Operand | None] = [None] * self.count
        for k, stream in self.streams.items():
            buf, strides, loads = stream.load(starts, counts, note)
            instrs += loads
            operands[k] = Operand(buf, box_strides(k, strides))
        for k, resident in self.residents.items():
            buf, strides, offset = resident.at(starts)
            operands[k] = Operand(buf, box_strides(k, strides), offset)
        return instrs, operands


def without_batch(_, strides) -> tuple[int, ...]:
    """Box strides of an (N, C, H, W) tile over the box (C, H, W)."""
    return tuple(strides[1:])


class OutputStage:
    """The end of every output tile: an integer accumulator's requantization as one
    vrequant when the epilogue is one (requant.py: needs the epilogue `tensors` and the
    constant pool), else the epilogue on the accumulator tile (in place, or
    into a tile of its own when its result has another dtype, as a requantized i32
    accumulator's f32 result), a conversion to the output dtype when that differs (vcvt
    into a double-buffered tile: floats to floats, or an integer result saturated to a
    narrower integer, the range the analysis proved), and the store.

    `extra_outputs` (Lowered.extra_outputs): (DRAM buffer, node of `expr`) of each result
    stored besides `out`, from a double-buffered tile of its own that its node writes
    (the last node's: the result tile); in its node's dtype. An epilogue storing several
    results is never one vrequant."""

    def __init__(self, sram: Sram, expr, acc_dtype: str, out: Buffer, max_elements: int,
                 machine: MachineConfig, input_dtypes=None, tensors=None, constants=None,
                 tile_counts=None, extra_outputs=()):
        self.out = out
        lookups = Lookups(constants, machine, byte_ranges(
            {int(k.removeprefix("epilogue.")): t.dtype for k, t in tensors.items()
             if k.startswith("epilogue.")}), math.prod(out.shape),
            requant.channel_records(tensors, tile_counts or out.shape)) \
            if constants is not None and tensors else None
        self.requant = None if extra_outputs else requant.plan(
            expr, sram, out, tensors, constants, max_elements, EpiloguePlan, acc_dtype,
            input_dtypes, tile_counts or out.shape, machine, lookups)
        if self.requant is not None:
            return
        final = len(expr) - 1
        stored = {node for _, node in extra_outputs if node != final}
        scalar_inputs = {int(k.removeprefix("epilogue.")) for k, t in (tensors or {}).items()
                         if k.startswith("epilogue.") and not any(t.strides)}
        self.plan = EpiloguePlan(expr, sram, acc_dtype, max_elements, input_dtypes=input_dtypes,
                                 stored=stored, lookups=lookups, scalar_inputs=scalar_inputs)
        result = self.plan.result_dtype
        if out.dtype != result and not (out.dtype in FLOATS and result in FLOATS) and \
                not (out.dtype in INTS and result in INTS):
            raise NotLowerable(f"{out.dtype} output from a {result} result")
        # per extra output: its DRAM buffer, node, value tile (None: the result's) and a
        # tile converting a float value to another float dtype (an f16 result of an f32
        # expression), or None
        self.extra = []
        for k, (buffer, node) in enumerate(extra_outputs, 1):
            dtype = self.plan.dtypes[node]
            if buffer.dtype != dtype and not (buffer.dtype in FLOATS and dtype in FLOATS):
                raise NotLowerable(f"{buffer.dtype} output of a {dtype} value")
            self.extra.append((
                buffer, node,
                Slots(sram, f"out{k}", dtype, (max_elements,)) if node != final else None,
                Slots(sram, f"out{k}.cast", buffer.dtype, (max_elements,))
                if buffer.dtype != dtype else None))
        self.result = Slots(sram, "res", result, (max_elements,)) if result != acc_dtype \
            else None
        self.cast = Slots(sram, "out", out.dtype, (max_elements,)) if out.dtype != result \
            else None

    @property
    def setup(self) -> list[Instr]:
        return self.requant.setup if self.requant is not None else self.plan.setup

    @property
    def tile_inputs(self) -> set[int] | None:
        """The epilogue inputs each tile reads (None: all the expression reads); a
        requantization table's scalar inputs are read once, by the setup."""
        return self.requant.tile_inputs if self.requant is not None else None

    def emit(self, box, acc: Operand, inputs: list[Operand | None], starts, counts,
             sram_strides, note: str) -> list[Instr]:
        if self.requant is not None:
            return self.requant.emit(box, acc, inputs, starts, counts, sram_strides, note)
        dst = acc if self.result is None else Operand(self.result.acquire(None)[0], acc.strides)
        tiles = [(buffer, node, value.acquire(None)[0] if value else dst.buffer, cast)
                 for buffer, node, value, cast in self.extra]
        stored = {node: Operand(tile, acc.strides) for _, node, tile, _ in tiles
                  if tile is not dst.buffer}
        instrs = self.plan.emit(box, dst, inputs, acc, note, stored)
        result = dst.buffer
        if self.cast is not None:
            result, _ = self.cast.acquire(None)
            instrs.append(convert(Operand(result, acc.strides), dst, box, note + " convert"))
        instrs += store_instrs(self.out, starts, counts, result, sram_strides, note)
        for k, (buffer, _, tile, cast) in enumerate(tiles, 1):
            if cast is not None:
                converted, _ = cast.acquire(None)
                instrs.append(convert(Operand(converted, acc.strides), Operand(tile, acc.strides),
                                      box, f"{note} out.{k} convert"))
                tile = converted
            instrs += store_instrs(buffer, starts, counts, tile, sram_strides, f"{note} out.{k}")
        return instrs


AFFINE = ("add", "sub", "mul", "div")


def fold_affine(expr, inputs, channel_dim: int):
    """The per-channel affine chain the epilogue starts with: acc combined, one op after
    the other, with per-channel f32 inputs or constants by add/sub/mul/div (e.g. a bias
    and a BatchNormalization), or by a scale node (a mul and an add step). Returns
    (steps, the expression with the chain replaced by the accumulator); a step is (op,
    operand node, acc_first) with the operand node an ("input", k) or ("const", v) of
    `expr`. The chain is acc·A + B with per-channel A, B,
    which a tiler can fold into the weights and the bias. ([], expr) when there is none."""
    acc_nodes = [i for i, node in enumerate(expr) if node[0] == "acc"]
    if len(acc_nodes) != 1:
        return [], expr
    live = reachable(expr)
    steps, current = [], acc_nodes[0]
    while True:
        users = [i for i in live if expr[i][0] not in LEAVES and current in expr[i][1]]
        if len(users) != 1:
            break
        user = users[0]
        if expr[user][0] == "scale":
            steps.append(("mul", ("const", expr[user][2]), True))
            if expr[user][3]:
                steps.append(("add", ("const", expr[user][3]), True))
            current = user
            continue
        if expr[user][0] not in AFFINE:
            break
        lhs, rhs = expr[user][1]
        other = rhs if lhs == current else lhs
        if other == current or not _per_channel(expr[other], inputs, channel_dim) or (
                expr[user][0] == "div" and rhs == current):
            break
        steps.append((expr[user][0], expr[other], lhs == current))
        current = user
    if not steps:
        return [], expr
    folded = [("acc",) if i == current else node for i, node in enumerate(expr)]
    return steps, live_nodes(folded)


def _per_channel(node, inputs, channel_dim: int) -> bool:
    if node[0] == "const":
        return True
    if node[0] != "input":
        return False
    ref = inputs[node[1]]
    return ref.dtype == "f32" and all(s == 0 or n == 1 for d, (n, s) in
                                      enumerate(zip(ref.shape, ref.strides)) if d != channel_dim)


