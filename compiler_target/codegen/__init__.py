"""NPU code generation for one dispatch, the `codegen.plan_dispatch` the driver calls at
the executable-sources phase: analyse (analyse.py) -> legalize (legalize.py) -> lower,
tile, schedule, emit (backend.compile_op). Dispatches that stop before lowering, or that
lowering refuses, keep their host (llvm-cpu) binary with the reason in the plan.

A dispatch with dynamic extents is planned at the push constants a probe input gives it
(compiler_target/probe_constants.py); when that plan runs on the NPU, the dispatch
becomes a parametric npu-fb export that npu-sim specialises for the extents of each
call (dynamic_extents.py, compiler_target/specialise.py).

The lowering half of a static plan can be deferred (`deferred=True`): the plan then
carries a PendingCompile, plain data that `complete_plans` runs for every plan of a
module, on several processes when the machine has several CPUs. Only the analysis reads
the MLIR; the forked processes run Python over the analysed op alone."""
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields, replace
from functools import partial

from executable_format import verifier
from executable_format.builder import (READ_ONLY, RECORD_OVERFLOW, ExecutableBuilder,
                                       ProgramBuilder)

from ..dispatch_plan import DispatchPlan
from ..errors import CompileError
from .analysis import Analysis, NotSupported, analyse
from .dynamic_extents import (
    INVALID_AT_EXTENTS, executable_of, extent_constants, high_word_constants, size_constants,
    specialised)
from .legalize import EMPTY, PAST_WORK_LIMIT, legalize


def plan_dispatch(index: int, executable_op, machine,
                  probes: dict[int, list[int | None] | None] | None = None,
                  deferred: bool = False) -> DispatchPlan:
    """`probes`: the dispatch's push constants for each probe extent (probe_constants),
    which a dispatch with dynamic extents is planned at (_plan_parametric). `deferred`:
    a static dispatch's lowering is left pending (complete_plans runs it)."""
    dims = extent_constants(executable_op)
    if dims:
        return _plan_parametric(index, executable_op, machine, dims, probes, deferred)
    return plan_static(index, executable_op, machine, deferred)


def _plan_parametric(index: int, executable_op, machine, dims: tuple[int, ...],
                     probes: dict[int, list[int | None] | None] | None,
                     deferred: bool) -> DispatchPlan:
    """The plan of a dispatch with dynamic extents: its plan at the first probe's
    constants, with a parametric npu-fb (source and extent constants) when it runs on
    the NPU. Where the dispatch is empty at the first probe (a length six poolings
    empty), the longer probes are tried; where its work passes a program's limit there
    (a big layer at a batch of 64) or its operands a record's 32 bits (a full-resolution
    layer after three 2x upsamplings), the shorter ones; where it is invalid at the
    probe's extents (a 512-tap window over 64 samples, a value the exporter typed at a
    batch of 1), the others, longer ones first; it takes the first that runs on the NPU.
    Any other refusal leaves it on the host: the NPU does not take it at every extent (a
    Resize's gather may be affine at one).
    A host plan reports the first probe's refusal. With `deferred`, the lowering at
    the first probe the analysis takes is left pending like a static one's
    (complete_plans runs them together); should it refuse, the others are planned in
    this process then."""
    analysis = analyse(executable_op)
    attempts = _ProbeAttempts(index, executable_op, machine, dims, probes or {None: None})
    probe, plan = attempts.next_plan(deferred)
    if plan is None:
        plan = DispatchPlan(index=index, name=analysis.name, summary=analysis.summary,
                            target="host", reason=attempts.refusals[0])
    plan.summary = analysis.summary
    plan.task = task_of(analysis)
    finish = partial(_made_parametric, analysis=analysis, attempts=attempts, probe=probe,
                     machine=machine)
    if plan.pending is not None:
        plan.pending.finish = finish
    else:
        finish(plan)
    return plan


# Refusals that depend on the probe's size, and the probes worth trying after them: a
# dispatch empty at the probe takes a longer one, one past a limit a shorter one, one
# invalid at the probe's extents any other (a graph exported with some value typed at a
# batch of 1 is valid at that batch alone).
_TOO_SHORT = (f"not supported on npu: {EMPTY} ",)
_TOO_LONG = (PAST_WORK_LIMIT, verifier.PAST_WORK_LIMIT, RECORD_OVERFLOW)
_WRONG_SIZE = (INVALID_AT_EXTENTS,)


class _ProbeAttempts:
    """The probes a dispatch with dynamic extents is planned at, in turn, and the
    reasons the ones tried did not take it."""

    def __init__(self, index: int, executable_op, machine, dims: tuple[int, ...],
                 probes: dict):
        self.index, self.executable_op, self.machine, self.dims = \
            index, executable_op, machine, dims
        self.source = str(executable_op)
        self.first = next(iter(probes))
        self.remaining = list(probes.items())
        self.refusals: list[str] = []

    def next_plan(self, deferred: bool) -> tuple[dict[int, int] | None, DispatchPlan | None]:
        """(probe values, plan) at the next probe whose plan runs on the NPU or waits
        for its lowering (`deferred`), or (None, None) when no probe is left to try."""
        while self.remaining:
            _, constants = self.remaining.pop(0)
            try:
                probe = _probe_values(self.executable_op, self.dims, constants)
                if probe is None:
                    extents = ", ".join(f"pc{k}" for k in self.dims)
                    raise NotSupported(f"dynamic extents ({extents}) the host program "
                                       "computes in a way the npu target cannot evaluate "
                                       "at compile time")
                module = specialised(self.source, self.executable_op.context, probe)
            except NotSupported as error:
                self.refused(f"not supported on npu: {error}")
                continue
            plan = plan_static(self.index, executable_of(module), self.machine, deferred)
            if plan.target == "npu" or plan.pending is not None:
                return probe, plan
            self.refused(plan.reason)
        return None, None

    def refused(self, reason: str) -> None:
        """Records the refusal; the first one decides which probes are left to try."""
        if not self.refusals:
            other = any(r in reason for r in _WRONG_SIZE)
            longer = other or any(r in reason for r in _TOO_SHORT)
            shorter = other or not longer and any(r in reason for r in _TOO_LONG)
            self.remaining = [(e, c) for e, c in self.remaining if e is not None and (
                longer and e > self.first or shorter and e < self.first)]
        self.refusals.append(reason)


def _made_parametric(plan: DispatchPlan, analysis: Analysis, attempts: _ProbeAttempts,
                     probe: dict[int, int] | None, machine) -> None:
    """An npu plan at the probe's extents as the dispatch's plan for any extents: its
    npu-fb the parametric export, its detail the probe's. A plan whose lowering refused
    takes the next probe's plan that runs on the NPU, if any."""
    if plan.target != "npu" and probe is not None:
        attempts.refused(plan.reason)
        probe, retried = attempts.next_plan(deferred=False)
        if retried is not None:
            for field in fields(DispatchPlan):
                if field.name not in ("summary", "task"):
                    setattr(plan, field.name, getattr(retried, field.name))
    if plan.target != "npu":
        plan.reason = attempts.refusals[0]
        return
    probe_text = ", ".join(f"pc{k}={value}" for k, value in probe.items())
    plan.detail = (f"dynamic extents, specialised at dispatch time; at the probe input's "
                   f"{probe_text}: {plan.detail}")
    plan.npu_fb = parametric_npu_fb(analysis, attempts.source, tuple(probe), machine)
    plan.macs = 0          # unknown until the extents are: npu-sim counts them per call


NEGATIVE_HIGH_WORD = 1 << 31    # the high word of a negative 64-bit value has its sign bit


def _probe_values(executable_op, dims: tuple[int, ...],
                  probe: list[int | None] | None) -> dict[int, int] | None:
    """The probe value of each constant to specialise, or None when an extent's is
    unknown. A high word probes as 0, as at run time: an offset's stays 0 below 4 GiB
    wherever the probe input's buffers would lie (a batch of 64 may take more), a loop
    position's is 0 at the first position; one with its sign bit set (a value the probe
    makes negative) raises NotSupported, invalid at these extents. Where the host program's value is unknown
    at compile time, a scalar that sizes nothing (a value the host read back from the
    device, a quantized zero point) is not specialised: the code generator reads it as
    a push constant."""
    high_words, sizes = high_word_constants(executable_op), size_constants(executable_op)
    values = {}
    for k in dims:
        value = probe[k] if probe is not None and k < len(probe) else None
        if k in high_words and value is not None and value >= NEGATIVE_HIGH_WORD:
            # an extent the probe makes negative (a 512-sample window over 64 samples):
            # with its high word read as 0 it would be a huge positive one
            raise NotSupported(f"{INVALID_AT_EXTENTS}: pc{k} is the high word of a negative "
                               f"value ({value:#x}) at the probe")
        if k in high_words:
            values[k] = 0
        elif value is not None:
            values[k] = value
        elif k in sizes:
            return None
    return values


def parametric_npu_fb(analysis: Analysis, source: str, dims: tuple[int, ...], machine) -> bytes:
    program = ProgramBuilder()
    program.emit("end")
    builder = ExecutableBuilder(machine)
    builder.add_export(analysis.name,
                       bindings=[(READ_ONLY if b.read_only else 0, 0) for b in analysis.bindings],
                       constant_count=analysis.constant_count, program=program,
                       parametric=(source, dims),
                       debug={"dispatch_name": analysis.name,
                              "source_location": analysis.source_location})
    return builder.finish()


def plan_static(index: int, executable_op, machine, deferred: bool = False) -> DispatchPlan:
    """The plan of a dispatch whose extents are all static (a specialised one too:
    compiler_target/specialise.py); with `deferred`, its lowering is left pending."""
    analysis = analyse(executable_op)
    plan = DispatchPlan(index=index, name=analysis.name, summary=analysis.summary,
                        target="host", task=task_of(analysis),
                        source_location=analysis.source_location, macs=analysis.macs)
    plan.reason = legalize(analysis, machine)
    if plan.reason:
        return plan
    plan.pending = PendingCompile(analysis.op, analysis.name,
                                  [(b.read_only, b.size_bytes) for b in analysis.bindings],
                                  analysis.constant_count, machine, analysis.source_location)
    if not deferred:
        _complete(plan, plan.pending.run())
    return plan


@dataclass
class PendingCompile:
    """The lowering half of a static plan: backend.compile_op's arguments."""
    op: object                       # the analysed ops.NpuOp
    name: str
    bindings: list[tuple[bool, int]]  # (read_only, size_bytes) per binding
    constant_count: int
    machine: object
    source_location: str
    finish: object = None            # applied to the completed plan (a parametric one's)

    def key(self) -> bytes:
        """backend.tiling_key of the op: pending compiles equal in it share a tiling."""
        from .backend import tiling_key
        return tiling_key(self.op, len(self.bindings), self.machine)

    def run(self, tiling=None):
        """The backend.CompiledOp, or why lowering refused the op; `tiling` as
        backend.compile_op's."""
        # Imported here so analysis and its tests stand on their own.
        from .backend import BindingInfo, NotLowerable, compile_op
        try:
            return compile_op(self.op, name=self.name,
                              bindings=[BindingInfo(*b) for b in self.bindings],
                              constant_count=self.constant_count, machine=self.machine,
                              source_location=self.source_location, tiling=tiling)
        except NotLowerable as error:
            return f"not lowerable on npu: {error}"


_WAITING: list[PendingCompile] = []     # what complete_plans' forked processes run


def _run_waiting(position: int, tiling, tile_stages: bool):
    outcome = _WAITING[position].run(tiling)
    if isinstance(outcome, str) or tile_stages:
        return outcome
    return replace(outcome, ir_stages=outcome.ir_stages.without_tiles())


def complete_plans(plans: list[DispatchPlan], jobs: int = 0, tile_stages: bool = True) -> None:
    """Runs the pending lowerings of `plans`: on `jobs` forked processes (0: one per
    CPU this process may use) when there are several, else in this process. Of ops
    equal in PendingCompile.key (a quantized transformer's layers), the first is
    compiled, then the others with its tiling, without a search. The outcomes are the
    same either way, but for the plans' ir_stages: without `tile_stages`, a forked
    process returns the lower and emit stages alone (IrStages.without_tiles)."""
    pending = [plan for plan in plans if plan.pending is not None]
    waiting = [plan.pending for plan in pending]
    groups: dict[bytes, list[int]] = {}
    for position, pending_compile in enumerate(waiting):
        groups.setdefault(pending_compile.key(), []).append(position)
    firsts = [(group[0], None) for group in groups.values()]
    outcomes = dict(zip([p for p, _ in firsts],
                        _run_all(waiting, firsts, jobs, tile_stages)))
    others = [(position, _shared_tiling(outcomes[group[0]]))
              for group in groups.values() for position in group[1:]]
    outcomes.update(zip([p for p, _ in others], _run_all(waiting, others, jobs, tile_stages)))
    for position, plan in enumerate(pending):
        _complete(plan, outcomes[position])


def _shared_tiling(outcome):
    """The tiling of a compiled op for the others of its group (None: they search)."""
    from .tiler import plain_data
    tiling = getattr(outcome, "tiling", None)
    return tiling if plain_data(tiling) else None


def _run_all(waiting: list[PendingCompile], work: list[tuple[int, object]],
             jobs: int, tile_stages: bool) -> list:
    """The outcomes of the compiles of `work`, (position in `waiting`, tiling) each."""
    workers = min(jobs or usable_cpus(), len(work))
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [waiting[position].run(tiling) for position, tiling in work]
    _WAITING[:] = waiting
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) \
                as pool:
            return list(pool.map(partial(_run_waiting, tile_stages=tile_stages), *zip(*work)))
    except BrokenProcessPool as error:
        raise CompileError(f"a code generation process stopped ({error}); "
                           "--iree-npu-codegen-jobs=1 lowers in this process") from None
    finally:
        _WAITING.clear()


def usable_cpus() -> int:
    """The CPUs this process may run on: complete_plans' processes when jobs is 0."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _complete(plan: DispatchPlan, outcome) -> None:
    """Fills the plan from its lowering's outcome (a CompiledOp, or the reason lowering
    refused)."""
    machine, finish, plan.pending = plan.pending.machine, plan.pending.finish, None
    if isinstance(outcome, str):
        plan.reason = outcome
    else:
        compiled = outcome
        plan.target = "npu"
        plan.detail = compiled.detail
        plan.npu_fb = compiled.npu_fb
        plan.ir_stages = compiled.ir_stages
        plan.estimated_cycles = compiled.estimated_cycles
        plan.roofline_cycles = compiled.roofline.cycles(machine)
        plan.mac_dtype = compiled.roofline.mac_dtype
        plan.engine_busy_cycles = compiled.engine_busy_cycles
    if finish is not None:
        finish(plan)


def task_of(analysis: Analysis) -> dict:
    """The dispatch's bindings for model.npu.json: role, size and the tensors (usually
    one) the dispatch reads or writes in each, with their byte offsets."""
    bindings = [{"binding": b.index, "role": b.role, "size_bytes": b.size_bytes,
                 "tensors": [{"offset": t.offset, "shape": list(t.shape), "dtype": t.dtype}
                             for t in b.subspans]}
                for b in analysis.bindings]
    return {"bindings": bindings,
            "inputs": [b.index for b in analysis.bindings if b.role == "input"],
            "outputs": [b.index for b in analysis.bindings if b.role == "output"]}
