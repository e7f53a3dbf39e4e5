"""Stand-ins for compiler_target.codegen.plan_dispatch, for driving the pipeline in tests."""
from compiler_target.dispatch_plan import DispatchPlan
from compiler_target.executable_sources import symbol_name


def npu_fb_bytes(index: int) -> bytes:
    return b"NPUFB-TEST" + bytes([index]) + bytes(range(64))


def export_name(executable) -> str:
    variant = executable.regions[0].blocks[0].operations[0]
    return symbol_name(variant.regions[0].blocks[0].operations[0])


def host_plan(index, executable, machine, probe_constants=None) -> DispatchPlan:
    return DispatchPlan(index, export_name(executable), "test op", "host",
                        reason="not supported on npu: test planner")


def npu_plan(index, executable, machine, probe_constants=None) -> DispatchPlan:
    name = export_name(executable)
    return DispatchPlan(index, name, "test op", "npu", detail="test tiles",
                        npu_fb=npu_fb_bytes(index), workgroup_count=(index + 2, 3, 1),
                        asm=f"; {name}\n  halt\n",
                        ir_stages=[("npu-lowered", f"// {name} lowered\n"),
                                   ("npu-scheduled", f"// {name} scheduled\n")],
                        estimated_cycles=100 + index, task={"engine": "mac"})


def alternating_plan(index, executable, machine, probe_constants=None) -> DispatchPlan:
    """Even dispatches on the npu, odd ones on the host."""
    return (npu_plan if index % 2 == 0 else host_plan)(index, executable, machine)


PLANNERS = {"host": host_plan, "npu": npu_plan, "alternating": alternating_plan}
