"""Stand-ins for compiler_target.codegen.plan_dispatch, for driving the pipeline in tests."""
from compiler_target.dispatch_plan import DispatchPlan
from compiler_target.executable_sources import symbol_name
from executable_format.builder import ExecutableBuilder, ProgramBuilder


def npu_fb_bytes(index: int, name: str) -> bytes:
    """A valid npu-fb (the hal phase may link several into one): export `name` loads the
    `index + 1` bytes of its constant pool into SRAM."""
    program = ProgramBuilder()
    program.emit("dma.load", dtype="u8", binding="const", dram_offset=0, sram_addr=0,
                 n0=1, n1=1, n2=1, n3=index + 1, dram_s0=0, dram_s1=0, dram_s2=0, dram_s3=1,
                 sram_s0=0, sram_s1=0, sram_s2=0, sram_s3=1)
    program.end()
    builder = ExecutableBuilder()
    builder.add_constants(bytes([index]) * (index + 1))
    builder.add_export(name, bindings=[], program=program)
    return builder.finish()


def export_name(executable) -> str:
    variant = executable.regions[0].blocks[0].operations[0]
    return symbol_name(variant.regions[0].blocks[0].operations[0])


def host_plan(index, executable, machine, probes=()) -> DispatchPlan:
    return DispatchPlan(index, export_name(executable), "test op", "host",
                        reason="not supported on npu: test planner")


def npu_plan(index, executable, machine, probes=()) -> DispatchPlan:
    name = export_name(executable)
    return DispatchPlan(index, name, "test op", "npu", detail="test tiles",
                        npu_fb=npu_fb_bytes(index, name), workgroup_count=(index + 2, 3, 1),
                        ir_stages=[("npu-lowered", f"// {name} lowered\n"),
                                   ("npu-scheduled", f"// {name} scheduled\n"),
                                   ("emit", f"; {name}\n  halt\n")],
                        estimated_cycles=100 + index, task={"engine": "mac"})


def alternating_plan(index, executable, machine, probes=()) -> DispatchPlan:
    """Even dispatches on the npu, odd ones on the host."""
    return (npu_plan if index % 2 == 0 else host_plan)(index, executable, machine)


PLANNERS = {"host": host_plan, "npu": npu_plan, "alternating": alternating_plan}
