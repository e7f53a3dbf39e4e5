"""The specialiser npu-sim calls for parametric npu-fb exports (dispatches with dynamic
extents): the dispatch's code generated for the extent values of one call.

npu-sim reaches it through the `iree_npu.specialisers` entry point (pyproject.toml), so
the runtime imports nothing of the compiler; a runtime without the compiler package
refuses parametric exports. docs/npu-ir-to-hal.md ("Dynamic shapes") gives the design and
its cost.
"""
from iree.compiler import ir

from executable_format.machine import MachineConfig

from .codegen import plan_static
from .codegen.analysis import NotSupported
from .codegen.dynamic_extents import binding_reach, executable_of, specialised


class SpecialisationError(ValueError):
    """The dispatch cannot run on the NPU at these extents; str(e) says why."""


def specialise_npu_fb(source: str, constants: dict[int, int], machine: MachineConfig,
                      binding_lengths: list[int]) -> bytes:
    """A static npu-fb executable (one export, named as the dispatch) for the dispatch
    `source` (a hal.executable, MLIR text) with push constants `constants`
    ({ordinal: u32 value}) fixing its extents. Extents whose tensors overrun the bound
    ranges (`binding_lengths`, bytes per binding) are refused before any code is
    generated: they would be wrong, and could be arbitrarily large."""
    context = ir.Context()
    try:
        module = specialised(source, context, constants)
        with context, ir.Location.unknown():
            _check_reach(executable_of(module), binding_lengths)
            plan = plan_static(0, executable_of(module), machine)
    except NotSupported as error:
        raise SpecialisationError(f"not supported on npu: {error}") from None
    if plan.target != "npu":
        raise SpecialisationError(plan.reason)
    return plan.npu_fb


def _check_reach(executable_op, binding_lengths: list[int]) -> None:
    for binding, reach in sorted(binding_reach(executable_op).items()):
        if binding < len(binding_lengths) and reach > binding_lengths[binding]:
            raise SpecialisationError(f"binding {binding} needs {reach} bytes at these extents "
                                      f"but is bound to {binding_lengths[binding]}")
