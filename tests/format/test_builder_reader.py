"""Build -> read round trip."""
import numpy as np
import pytest

from executable_format.builder import READ_ONLY, ExecutableBuilder, ProgramBuilder
from executable_format.errors import FormatError
from executable_format.isa import CONST_POOL, INSTRUCTION_DTYPE, OPCODES_BY_NAME, f32_bits
from executable_format.machine import MachineConfig
from executable_format.reader import read_executable
from executable_format.version import VERSION_MAJOR, VERSION_MINOR

from .helpers import TILE_BYTES, dma, relu_executable, relu_program, unary


def test_round_trip_preserves_everything():
    machine = MachineConfig.from_overrides({"sram_bytes": 1 << 20, "mac_cols": 16})
    b = ExecutableBuilder(machine=machine)
    assert b.add_constants(b"\x01\x02\x03") == 0
    assert b.add_constants(b"\x04") == 64
    first = relu_program()
    second = ProgramBuilder(sram_bytes=4096)
    dma(second, "dma.load", "const", sram_addr=0, rows=1, cols=16)
    second.end()
    assert b.add_export("relu", [(READ_ONLY, TILE_BYTES), (0, TILE_BYTES)], program=first,
                        constant_count=2, workgroup_count=(2, 3, 4),
                        debug=dict(dispatch_name="d", source_location="m.mlir:1:2",
                                   npu_ir="npu.relu ∂")) == 0
    assert b.add_export("const", [], program=second) == 1
    exe = read_executable(b.finish())

    assert exe.version == (VERSION_MAJOR, VERSION_MINOR)
    assert exe.machine == machine
    assert exe.constants == b"\x01\x02\x03" + bytes(61) + b"\x04"
    relu, const = exe.exports
    assert (relu.name, relu.ordinal, relu.constant_count, relu.workgroup_count) == \
        ("relu", 0, 2, (2, 3, 4))
    assert [(x.flags, x.min_size, x.read_only) for x in relu.bindings] == \
        [(READ_ONLY, TILE_BYTES, True), (0, TILE_BYTES, False)]
    assert relu.binding_count == 2
    assert relu.debug.npu_ir == "npu.relu ∂" and relu.debug.source_location == "m.mlir:1:2"
    assert relu.program.instructions == first.instructions()
    assert relu.program.instruction_count == first.instruction_count == 8
    assert relu.program.sram_bytes == 2 * TILE_BYTES          # derived from the accesses
    assert const.program.sram_bytes == 4096 and const.debug is None
    assert exe.export("const") is const


def test_records_decode_fields():
    exe = read_executable(relu_executable())
    records = exe.exports[0].program.records()
    assert records.dtype == INSTRUCTION_DTYPE
    load = records[0]
    assert load["opcode"] == OPCODES_BY_NAME["dma.load"].code
    assert list(load["a"][:7]) == [0, 0, 0, 1, 1, 4, 8]
    assert records[-1]["opcode"] == OPCODES_BY_NAME["end"].code


def test_emit_encodes_names_pairs_and_floats():
    p = ProgramBuilder()
    p.emit("conv2d", dtype="f32", flags="bias", **{"in": 0}, w=64, out=128, c=1, hi=3, wi=3,
           f=1, ho=1, wo=1, kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(1, 1), groups=1, bias=256)
    unary(p, "vclamp", dst=0, src=0, p0=0.0, p1=6)
    p.emit("fill", dtype="f16", sram_addr=0, n0=1, n1=1, n2=1, n3=1, s0=0, s1=0, s2=0, s3=0,
           value=float("-inf"))
    p.emit("fill", dtype="i8", sram_addr=0, n0=1, n1=1, n2=1, n3=1, s0=0, s1=0, s2=0, s3=0,
           value=-1)
    dma(p, "dma.load", "const", sram_addr=0)
    records = np.frombuffer(p.instructions(), INSTRUCTION_DTYPE)
    assert records[0]["flags"] == 2 and records[0]["a"][9] == 3 | (3 << 16)
    assert records[1]["a"][11] == 0 and records[1]["a"][12] == f32_bits(6.0)
    assert records[2]["a"][9] == 0xFC00 and records[3]["a"][9] == 0xFF
    assert records[4]["a"][0] == CONST_POOL


@pytest.mark.parametrize("call, message", [
    (lambda p: p.emit("nop"), "unknown opcode 'nop'"),
    (lambda p: p.emit("end", dtype="f64"), "unknown dtype 'f64'"),
    (lambda p: p.emit("signal", engine="dma_in"), "signal needs field 'sem'"),
    (lambda p: p.emit("signal", engine="dma_in", sem=0, value=1), "signal has no field 'value'"),
    (lambda p: p.emit("signal", engine="gpu", sem=0), "unknown engine 'gpu'"),
    (lambda p: unary(p, "vrelu", 0, 0, p0=1.0), "vrelu has no field 'p0'"),
    (lambda p: p.emit("vreduce", flags="min", dst=0, src=0, outer=1, inner=1),
     "vreduce has no flag 'min'"),
    (lambda p: p.emit("signal", engine="mac", sem=-1), "operands do not fit"),
])
def test_emit_rejects_bad_operands(call, message):
    with pytest.raises(FormatError, match=message):
        call(ProgramBuilder())


def test_finish_verifies_its_output():
    with pytest.raises(FormatError, match="binding 2 out of range"):
        relu_executable(relu_program(lambda p: dma(p, "dma.load", 2, sram_addr=0)))


def test_appended_records_are_the_program_and_finish_verifies_them():
    """append_records (the compiler's linker) copies whole records; what they hold is
    checked when the executable is finished, as for emitted ones."""
    source = relu_program()
    copy = ProgramBuilder(sram_bytes=source.sram_bytes)
    copy.append_records(np.frombuffer(source.instructions(), dtype=INSTRUCTION_DTYPE))
    assert copy.instructions() == source.instructions()
    bad = np.frombuffer(relu_program(lambda p: dma(p, "dma.load", 2, sram_addr=0))
                        .instructions(), dtype=INSTRUCTION_DTYPE)
    appended = ProgramBuilder()
    appended.append_records(bad)
    with pytest.raises(FormatError, match="binding 2 out of range"):
        relu_executable(appended)
    with pytest.raises(FormatError, match="not isa.INSTRUCTION_DTYPE"):
        ProgramBuilder().append_records(np.zeros(4, np.uint8))
