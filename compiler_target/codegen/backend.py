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
from collections.abc import Sequence
from dataclasses import dataclass
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
from .ops import NpuOp
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

    @property
    def asm(self) -> str:
        """The listing (the emit stage's text, disassembled when first read)."""
        return self.ir_stages[-1][1]


class IrStages(Sequence):
    """The (stage, text) pairs lower, tile, schedule, emit; the tile and schedule texts
    are printed when the sequence is first read."""

    def __init__(self, name: str, lowered_text: str, program: TiledProgram,
                 scheduled: list[Instr], machine: MachineConfig, emitted: Emitted):
        self._name, self._lowered_text, self._emitted = name, lowered_text, emitted
        self._program, self._scheduled, self._machine = program, scheduled, machine

    @cached_property
    def _stages(self) -> list[tuple[str, str]]:
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
               source_location: str = "", constant_count: int = 0) -> CompiledOp:
    """Compiles one NPU op into a verified npu-fb executable with a single export `name`
    (workgroup grid 1x1x1) taking `constant_count` push constants (tensors at
    push-constant offsets are read through binding views). Raises NotLowerable with the
    reason when it cannot."""
    lowered = lower(op, len(bindings))
    npu_ir = lowered_text(lowered, name)
    program = tile_program(lowered, machine)
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
    return CompiledOp(emitted.npu_fb, stages, cycles, detail, bound, busy)


def tile_program(lowered: Lowered, machine: MachineConfig) -> TiledProgram:
    """The fastest scheduled program among the op kind's tiler's shortlist of candidate
    tilings (tiler.shortlist: the cheapest estimate and those close to it). Where the
    emitter finds a tiling's buffers past SRAM (a tiler's footprint formula leaves out
    what an epilogue plans for itself: a requantization's tables and value tiles), the
    tiling is dropped; where every one is, the shortlist of the candidates with smaller
    tiles than the cheapest, and so on."""
    tiler = TILERS[lowered.kind](lowered, machine)
    candidates = tiler.candidates()
    while True:
        tilings = [tiling for tiling, _ in shortlist(tiler, candidates)]
        programs, full = [], None
        for tiling in tilings:
            try:
                programs.append(tiler.emit(tiling))
            except SramFull as error:
                full = error
        if programs:
            break
        size = next(c.size for c in candidates if c.tiling is tilings[0])
        candidates = [c for c in candidates if c.size < size]
        if not candidates:
            raise full
    program = fastest(programs, machine)
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
