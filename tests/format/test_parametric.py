"""Parametric exports (npu-fb 1.5): a dispatch whose extents the device fixes at dispatch
time carries its source and extent constants and a lone `end` program; the verifier
checks the constants and the program, and asm/disasm round-trip the export."""
from executable_format.asm import assemble
from executable_format.builder import READ_ONLY, ExecutableBuilder, ProgramBuilder
from executable_format.disasm import disassemble
from executable_format.reader import Parametric, read_executable

from .test_verifier import rejects

SOURCE = 'hal.executable @mm {\n  "quoted" \\ text\n}'


def parametric(dims=(0, 1), constant_count=2, extra_instruction=False, verify=True) -> bytes:
    program = ProgramBuilder()
    if extra_instruction:
        program.emit("signal", engine="dma_in", sem=0)
    program.emit("end")
    builder = ExecutableBuilder()
    builder.add_export("mm", bindings=[(READ_ONLY, 0), (0, 0)], constant_count=constant_count,
                       program=program, parametric=(SOURCE, dims))
    return builder.finish(verify_output=verify)


def test_parametric_export_reads_back_and_round_trips_through_asm():
    data = parametric()
    export = read_executable(data).export("mm")
    assert export.parametric == Parametric(SOURCE, (0, 1))
    text = disassemble(data)
    assert ".parametric dims=pc0,pc1 " in text
    assert assemble(text) == data


def test_static_export_is_not_parametric():
    builder = ExecutableBuilder()
    program = ProgramBuilder()
    program.emit("end")
    builder.add_export("x", bindings=[], program=program)
    assert read_executable(builder.finish()).export("x").parametric is None


def test_extent_constants_must_exist():
    rejects(parametric(dims=(0, 2), verify=False),
            "export 0 parametric extent constants [0, 2] must be ascending, unique and < "
            "constant_count 2")


def test_extent_constants_must_be_ascending_and_unique():
    rejects(parametric(dims=(1, 1), verify=False), "must be ascending, unique")
    rejects(parametric(dims=(1, 0), verify=False), "must be ascending, unique")


def test_a_parametric_export_names_its_extents():
    rejects(parametric(dims=(), verify=False), "export 0 parametric names no extent constants")


def test_a_parametric_program_is_a_lone_end():
    rejects(parametric(extra_instruction=True, verify=False),
            "export 0 is parametric; its program must be a lone end, got 2 instructions")
