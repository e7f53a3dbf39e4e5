"""NPU code generation for one dispatch: NpuOp -> NPU IR -> tiled, double-buffered,
scheduled NPU program -> npu-fb.

    lower     NpuOp -> one `npu.<kind>` op on DRAM tensors            (lower.py)
    tile      candidate tilings, the cheapest estimate, SRAM placement,
              per-tile loads / fills / compute / epilogue / stores     (tiler.py, tile*.py,
                                                                        epilogue.py)
    schedule  engines, SIGNAL/WAIT so loads and stores overlap compute (schedule.py)
    emit      npu-fb via executable_format's builder, asm listing     (emit.py)

Each stage's NPU IR (MLIR generic form) is returned in `ir_stages`, printed on first use
(only `--iree-npu-dump-ir` reads them; printing the tile and schedule stages costs about
as much as tiling). docs/compiler-codegen.md describes the stages and how to add an op.
"""
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import cached_property

from executable_format.cost import Roofline
from executable_format.isa import ENGINE_NAMES
from executable_format.machine import MachineConfig

from .tile_contraction import ContractionTiler
from .tile_conv import ConvTiler
from .tile_elementwise import ElementwiseTiler
from .tile_pool import PoolTiler
from .tile_reduce import ReduceTiler
from .tile_rowwise import RowwiseTiler
from .emit import Emitted, emit, timeline
from .lower import Lowered, NotLowerable, lower, lowered_text
from .npu_ir import Instr, instr_line
from .ops import NpuOp, TensorRef
from .roofline import roofline
from .schedule import schedule
from .tile import SramFull, TiledProgram, tiled_text
from .tiler import fastest, shortlist

__all__ = ["BindingInfo", "CompiledOp", "NotLowerable", "compile_op"]

# op kind -> the class of its tiler.Tiler, constructed from (lowered, machine)
TILERS = {"conv2d": ConvTiler, "matmul": ContractionTiler, "elementwise": ElementwiseTiler,
          "pool2d": PoolTiler, "reduce": ReduceTiler, "rowwise": RowwiseTiler}


@dataclass
class BindingInfo:
    """One HAL binding of the export, in binding order."""
    read_only: bool
    size_bytes: int



@dataclass
class CompiledOp:
    npu_fb: bytes
    ir_stages: Sequence[tuple[str, str]]
    estimated_cycles: int
    detail: str
    roofline: Roofline
    engine_busy_cycles: dict[str, int]   # per engine: the cycles of its instructions
    tiling: object = None                # the tiler's tiling of the program

    @property
    def asm(self) -> str:
        """The listing (the emit stage's text, disassembled when first read)."""
        return self.ir_stages[-1][1]


class IrStages(Sequence):
    """The (stage, text) pairs lower, tile, schedule, emit; the tile and schedule texts
    are printed when the sequence is first read. `without_tiles()`: lower and emit alone,
    without the programs the others print (most of a pickled CompiledOp)."""

    def __init__(self, name: str, lowered_text: str, program: TiledProgram | None,
                 scheduled: list[Instr] | None, machine: MachineConfig, emitted: Emitted):
        self._name, self._lowered_text, self._emitted = name, lowered_text, emitted
        self._program, self._scheduled, self._machine = program, scheduled, machine

    def without_tiles(self) -> "IrStages":
        return IrStages(self._name, self._lowered_text, None, None, self._machine,
                        self._emitted)

    @cached_property
    def _stages(self) -> list[tuple[str, str]]:
        if self._program is None:
            return [("lower", self._lowered_text), ("emit", self._emitted.asm)]
        return [("lower", self._lowered_text),
                ("tile", tiled_text(self._program, self._name, "tile")),
                ("schedule", schedule_text(self._program, self._scheduled, self._name,
                                           self._machine)),
                ("emit", self._emitted.asm)]

    def __getitem__(self, index):
        return self._stages[index]

    def __len__(self) -> int:
        return len(self._stages)


def compile_op(op: NpuOp, *, name: str, bindings: list[BindingInfo], machine: MachineConfig,
               source_location: str = "", constant_count: int = 0,
               tiling=None) -> CompiledOp:
    """Compiles one NPU op into a verified npu-fb executable with a single export `name`
    (workgroup grid 1x1x1) taking `constant_count` push constants (tensors at
    push-constant offsets are read through binding views). Raises NotLowerable with the
    reason when it cannot. With `tiling` (the CompiledOp.tiling of an op equal in
    tiling_key), that tiling's program, without a search (tile_program)."""
    lowered = lower(op, len(bindings))
    npu_ir = lowered_text(lowered, name)
    program = tile_program(lowered, machine, tiling)
    scheduled = schedule(program.instrs, machine)
    header = [f"dispatch {name}", f"source {source_location or 'unknown'}",
              f"{lowered.kind}: {program.tiles}, {program.buffers} buffers"]
    bound = roofline(lowered)
    emitted = emit(scheduled, name=name, bindings=bindings, views=lowered.views,
                   roofline=bound,
                   constant_count=constant_count,
                   constants=bytes(lowered.constants.data), machine=machine,
                   source_location=source_location, npu_ir=npu_ir, header=header)
    stages = IrStages(name, npu_ir, program, scheduled, machine, emitted)
    cycles = emitted.stats.total_cycles
    detail = f"{program.tiles}, {program.buffers} buffers, est. {cycles} cycles, " + \
        efficiency(bound, cycles, machine)
    busy = {engine: int(c) for engine, c in emitted.stats.busy_cycles.items()}
    return CompiledOp(emitted.npu_fb, stages, cycles, detail, bound, busy, program.tiling)


def tiling_key(op: NpuOp, binding_count: int, machine: MachineConfig) -> bytes:
    """What the choice of a tiling reads of `op`: its shapes, strides, dtypes and
    expressions, but not where its tensors lie in their bindings nor the values of its
    float scalars, in which alone a quantized transformer's layers differ (each its
    own executable: the scales are inlined). The cost model does not read them either
    (a transfer costs by its counts and strides, a vector op by its elements), so ops
    equal in this key get the tiling one search finds for each of them."""
    return pickle.dumps((_unplaced(op), binding_count, machine))


def _unplaced(value):
    """`value` (an op, or a part of one) with its tensors' byte offsets 0 and its float
    scalars ("const" nodes) without their value."""
    if isinstance(value, TensorRef):
        return replace(value, offset=0)
    if isinstance(value, tuple) and value[:1] == ("const",):
        return ("const",)
    if isinstance(value, (list, tuple)):
        return type(value)(_unplaced(v) for v in value)
    if is_dataclass(value):
        return replace(value, **{f.name: _unplaced(getattr(value, f.name))
                                 for f in fields(value)})
    return value


def tile_program(lowered: Lowered, machine: MachineConfig, tiling=None) -> TiledProgram:
    """The fastest scheduled program among the op kind's tiler's shortlist of candidate
    tilings (tiler.shortlist: the cheapest estimate and those close to it). Where the
    emitter finds a tiling's buffers past SRAM (a tiler's footprint formula leaves out
    what an epilogue plans for itself: a requantization's tables and value tiles), the
    tiling is dropped; where every one is, the shortlist of the candidates with smaller
    tiles than the cheapest, and so on. With `tiling` (the one an op equal in
    tiling_key got), that tiling's program, unless its buffers do not fit."""
    tiler = TILERS[lowered.kind](lowered, machine)
    if tiling is not None:
        try:
            return _placed(tiler.emit(tiling), tiling, lowered)
        except SramFull:
            pass
    candidates = tiler.candidates()
    while True:
        tilings = [tiling for tiling, _ in shortlist(tiler, candidates)]
        programs, full = [], None
        for tiling in tilings:
            try:
                programs.append(_placed(tiler.emit(tiling), tiling, lowered))
            except SramFull as error:
                full = error
        if programs:
            break
        size = next(c.size for c in candidates if c.tiling is tilings[0])
        candidates = [c for c in candidates if c.size < size]
        if not candidates:
            raise full
    return fastest(programs, machine)


def _placed(program: TiledProgram, tiling, lowered: Lowered) -> TiledProgram:
    """`program` with its DRAM tensors and tiling (the tiler's own, where its emitter
    names a more specific one: the ramp it chose)."""
    program.tiling = program.tiling or tiling
    program.dram = list(lowered.tensors.values())
    return program


def efficiency(bound: Roofline, cycles: int, machine: MachineConfig) -> str:
    """The fraction of the true roofline the program reaches, and what bounds it."""
    return f"{bound.fraction(machine, cycles):.2f} of roofline ({bound.bound(machine)})"


def schedule_text(program: TiledProgram, scheduled: list[Instr], name: str,
                  machine: MachineConfig) -> str:
    """The scheduled program in execution order, each instruction with its engine and the
    cycle model's start/end times."""
    stats = timeline(scheduled, machine, events=True)
    times = {index: (start, end) for _, start, end, _, index in stats.events}
    lines = []
    for order, instr in enumerate(scheduled):
        extra = {"order": order, "engine": instr.engine_name}
        if instr.op in ("signal", "wait"):
            extra["engine"] = ENGINE_NAMES[instr.engine]
        elif order in times:
            extra["cycles"] = list(times[order])
        lines.append(instr_line(instr, extra))
    return tiled_text(program, name, "schedule", lines)
