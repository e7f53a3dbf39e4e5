"""NPU code generation for one dispatch, the `codegen.plan_dispatch` the driver calls at
the executable-sources phase: analyse (analyse.py) -> legalize (legalize.py) -> lower,
tile, schedule, emit (backend.compile_op). Dispatches that stop before lowering, or that
lowering refuses, keep their host (llvm-cpu) binary with the reason in the plan."""
from ..dispatch_plan import DispatchPlan
from .analysis import Analysis, analyse
from .legalize import legalize


def plan_dispatch(index: int, executable_op, machine) -> DispatchPlan:
    analysis = analyse(executable_op)
    plan = DispatchPlan(index=index, name=analysis.name, summary=analysis.summary,
                        target="host", task=task_of(analysis),
                        source_location=analysis.source_location, macs=analysis.macs)
    plan.reason = legalize(analysis, machine)
    if plan.reason:
        return plan
    # The lowering half is imported here so analysis and its tests stand on their own.
    from .backend import BindingInfo, NotLowerable, compile_op
    bindings = [BindingInfo(read_only=b.read_only, size_bytes=b.size_bytes)
                for b in analysis.bindings]
    try:
        compiled = compile_op(analysis.op, name=analysis.name, bindings=bindings,
                              constant_count=analysis.constant_count, machine=machine,
                              source_location=analysis.source_location)
    except NotLowerable as error:
        plan.reason = f"not lowerable on npu: {error}"
        return plan
    plan.target = "npu"
    plan.detail = compiled.detail
    plan.npu_fb = compiled.npu_fb
    plan.asm = compiled.asm
    plan.ir_stages = compiled.ir_stages
    plan.estimated_cycles = compiled.estimated_cycles
    return plan


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
