"""The interface every tiler implements, and the choice among its candidate tilings.

A tiler handles one op kind (`backend.TILERS` maps the kind to the tiler's class). It
is constructed for one dispatch from `(lowered, machine)`, raising NotLowerable when the
op cannot run on the NPU whatever the tiling (dtypes, kinds), and then:

- `candidates()`: the tilings worth considering, each with its tile size (elements),
  only those whose buffers fit SRAM; NotLowerable (with the reason) when none does;
- `estimate(tiling)`: its cycles, from the cost model's formulas or by costing the
  instructions the tiling emits (`pipelined_cycles`);
- `emit(tiling)`: the TiledProgram.

A tiling is plain data (`plain_data`): dispatches equal but for their tensors' offsets
and float scalars take the tiling found for the first of them (codegen.complete_plans).

`cheapest` is the choice `backend.tile_program` makes, and the convolution tiler makes
among the candidates of each of its strategies.
"""
from dataclasses import fields, is_dataclass
from typing import NamedTuple, Protocol

from executable_format.machine import MachineConfig

from .emit import timeline
from .npu_ir import Instr, busy_cycles
from .schedule import schedule
from .tile import TiledProgram

NEAR_BEST = 1.01
# The estimate does not see how a program's first and last tiles wait on each other
# (a ramp's pieces, a first load no compute hides: 1-3k cycles): in a program estimated
# under SHORTLIST_CYCLES, the candidates estimated within SHORTLIST_MARGIN of the best
# are scheduled, SHORTLIST_LENGTH at most, and the fastest kept.
SHORTLIST_CYCLES = 30_000
SHORTLIST_MARGIN = 1.10
SHORTLIST_LENGTH = 3
ENGINES = ("dma_in", "mac", "vector", "dma_out")


def plain_data(tiling) -> bool:
    """Whether `tiling` is made of numbers, strings and None alone (in tuples, lists,
    named tuples and dataclasses): what another dispatch's tiler of the same kind can
    emit for its own tensors (backend.tiling_key). A tiler object inside one would emit
    the program of the dispatch it was made for."""
    if tiling is None or isinstance(tiling, (bool, int, float, str)):
        return True
    if isinstance(tiling, (tuple, list)):
        return all(plain_data(part) for part in tiling)
    if is_dataclass(tiling) and not isinstance(tiling, type):
        return all(plain_data(getattr(tiling, f.name)) for f in fields(tiling))
    return False


class Candidate(NamedTuple):
    tiling: object
    size: int          # elements per tile: among near-equal estimates the biggest wins
    bound: int = 0     # cycles its estimate cannot fall below (0: none known)


class Tiler(Protocol):
    def candidates(self) -> list[Candidate]: ...

    def estimate(self, tiling) -> int: ...

    def emit(self, tiling) -> TiledProgram: ...


def cheapest(tiler: Tiler, candidates: list[Candidate]):
    """The tiling of the biggest tile among the candidates within 1% of the best
    estimate, since fewer, bigger tiles make a shorter program at no measurable cost
    (the lower estimate among equal sizes, the first among equal both)."""
    return shortlist(tiler, candidates)[0][0]


def shortlist(tiler: Tiler, candidates: list[Candidate]) -> list[tuple[object, int]]:
    """(tiling, estimate) of the tilings worth scheduling: the cheapest first, then,
    where the best estimate is under SHORTLIST_CYCLES, the other candidates within
    SHORTLIST_MARGIN of it, the lowest first, at most SHORTLIST_LENGTH in all.
    Candidates are estimated in the order of their bounds, up to the first bound past
    1% of the best estimate so far: the ones left cannot be within 1% of the best."""
    estimates, best = {}, None
    for index in sorted(range(len(candidates)), key=lambda i: candidates[i].bound):
        if best is not None and candidates[index].bound > best * NEAR_BEST:
            break
        estimates[index] = tiler.estimate(candidates[index].tiling)
        best = estimates[index] if best is None else min(best, estimates[index])
    first = max((i for i in sorted(estimates) if estimates[i] <= best * NEAR_BEST),
                key=lambda i: (candidates[i].size, -estimates[i]))
    others = sorted((i for i in estimates if i != first and best < SHORTLIST_CYCLES and
                     estimates[i] <= best * SHORTLIST_MARGIN), key=lambda i: estimates[i])
    return [(candidates[i].tiling, estimates[i])
            for i in [first] + others[:SHORTLIST_LENGTH - 1]]


def pipeline_bound(stages: list[int], tiles: int) -> int:
    """Cycles of `tiles` tiles through engines in a pipeline, one tile taking `stages`
    cycles on each in order: the slowest stage over every tile, plus the stages before
    it of the first tile (the fill) and after it of the last (the drain)."""
    return max(sum(stages[:i]) + tiles * stage + sum(stages[i + 1:])
               for i, stage in enumerate(stages))


def pipelined_cycles(machine: MachineConfig, first_tile: list[Instr], tiles: int) -> int:
    """pipeline_bound of `tiles` tiles like the first one, from the first tile's
    instructions as the emitter writes them."""
    return pipeline_bound([busy_cycles(machine, [i for i in first_tile
                                                 if i.engine_name == engine])
                           for engine in ENGINES], tiles)


def fastest(programs: list[TiledProgram], machine: MachineConfig) -> TiledProgram:
    """The program whose scheduled timeline takes the fewest cycles (the first among
    equal ones); where the estimate cannot tell the programs apart (a ramp's pieces)."""
    if len(programs) == 1:
        return programs[0]
    return min(programs, key=lambda p: timeline(schedule(p.instrs, machine),
                                                machine).total_cycles)
