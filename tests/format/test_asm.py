"""Assembly text: exact round trips, samples, syntax errors."""
import pathlib
import random

import pytest

from executable_format.asm import assemble
from executable_format.builder import ExecutableBuilder, ProgramBuilder
from executable_format.disasm import disassemble
from executable_format.errors import FormatError
from executable_format.isa import DType
from executable_format.reader import read_executable
from executable_format.scalars import decode_value, encode_value, format_float

from .helpers import relu_executable
from .random_programs import random_executable

SAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "samples" / "asm").glob("*.s"))


def significant_lines(text: str) -> list[str]:
    """The text without comments, indentation and blank lines (samples carry prose)."""
    lines = (line.partition("#")[0].strip() for line in text.splitlines())
    return [line for line in lines if line]


def test_samples_exist():
    assert {path.name for path in SAMPLES} >= {"conv_tile.s", "matmul_tile.s"}


@pytest.mark.parametrize("path", SAMPLES, ids=lambda path: path.name)
def test_sample_assembles_verifies_and_disassembles_to_itself(path):
    text = path.read_text()
    data = assemble(text, source=str(path))
    exe = read_executable(data)
    assert exe.exports[0].program.instruction_count > 10
    listing = disassemble(data)
    assert significant_lines(listing) == significant_lines(text)
    assert assemble(listing) == data


def test_disassembly_round_trips_exactly():
    data = relu_executable()
    text = disassemble(data)
    assert assemble(text) == data
    assert disassemble(assemble(text)) == text


def test_random_programs_round_trip_exactly():
    rng = random.Random(7)
    for _ in range(80):
        data = random_executable(rng)
        text = disassemble(data)
        assert assemble(text) == data
        assert disassemble(assemble(text)) == text


def test_disassembly_annotates_index_engine_and_cycles():
    text = disassemble(relu_executable())
    assert "dma.load.f32 binding=0, dram_offset=0, sram_addr=0x0, n0=1" in text
    assert "# [0] dma_in, 104 cycles" in text
    assert "signal engine=dma_in, sem=0  # [1] control" in text


def test_hand_written_conveniences():
    text = """
    .machine semaphores=4
    .constants f32 1.5, -2
    .constants align 64
    .constants i8 -1 255
    .export "my export" bindings=[rw:64]
    .npu_ir "a # not a comment"   # a comment
        fill.f32 sram_addr=0x40, n0=1, n1=1, n2=1, n3=16, s0=0, s1=0, s2=0, s3=1, value=-inf
        vclamp.f32 dst=0, src=0, n0=1, n1=1, n2=16, dst_s0=0, dst_s1=0, dst_s2=1, src_s0=0, src_s1=0, src_s2=1, p1=6, p0=0x0
        vcvt.i8 dst=0, src=0, n0=1, n1=1, n2=4, dst_s0=0, dst_s1=0, dst_s2=1, src_s0=0, src_s1=0, src_s2=1, src_dtype=f32
        dma.load.i8 binding=const, dram_offset=64, sram_addr=0, n0=1, n1=1, n2=1, n3=2, dram_s0=0, dram_s1=0, dram_s2=0, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=0, sram_s3=1
        end
    """
    exe = read_executable(assemble(text))
    assert exe.machine.semaphores == 4
    assert exe.constants[:8] == bytes.fromhex("0000c03f000000c0") and exe.constants[64:] == b"\xff\xff"
    export = exe.exports[0]
    assert export.name == "my export" and export.debug.npu_ir == "a # not a comment"
    assert export.program.sram_bytes == 128                     # derived: the fill's end
    assert "scale=0.0" in disassemble(assemble(text))           # optional field defaults to 0


@pytest.mark.parametrize("line, message", [
    ("    vrelu.f32 dst=0", "<asm>:3: vrelu needs field 'src'"),
    ("    vrelu dst=0", "<asm>:3: vrelu needs a dtype suffix, e.g. vrelu.f32"),
    ("    dma.lod.f32 binding=0", "<asm>:3: unknown opcode 'dma.lod.f32'"),
    ("    vrelu.f64 dst=0", "<asm>:3: unknown dtype 'f64' in 'vrelu.f64'"),
    ("    signal engine=dma_in, sem=0, value=1", "<asm>:3: signal has no field 'value'"),
    ("    signal engine=control, sem=0", "<asm>:3: engine must be one of dma_in, dma_out, mac, vector"),
    ("    signal engine=mac sem=0", "<asm>:3: engine must be one of"),
    ("    signal engine=mac, sem=0, sem=1", "<asm>:3: sem is given twice"),
    ("    signal engine=mac, sem=x", "<asm>:3: sem needs an integer, got 'x'"),
    ("    signal engine=mac, sem=4294967296", "<asm>:3: sem 4294967296 does not fit 32 bits"),
    ("    matmul.f32 flags=bogus", "<asm>:3: matmul has no flag 'bogus'"),
    ("    vpool.f32 dst=0, src=0, c=1, hi=1, wi=1, ho=1, wo=1, kh_kw=3", "<asm>:3: kh_kw needs LOWxHIGH"),
    ("    fill.i8 sram_addr=0, n0=1, n1=1, n2=1, n3=1, s0=0, s1=0, s2=0, s3=0, value=300",
     "<asm>:3: value 300 does not fit i8"),
    ("    fill.f16 sram_addr=0, n0=1, n1=1, n2=1, n3=1, s0=0, s1=0, s2=0, s3=0, value=1e6",
     "<asm>:3: value 1000000.0 overflows f16"),
    (".bogus 1", "<asm>:3: unknown directive '.bogus'"),
    (".sram_bytes lots", "<asm>:3: .sram_bytes needs an integer, got 'lots'"),
    (".sram_bytes 0x100000000", "<asm>:3: .sram_bytes 4294967296 does not fit 32 bits"),
    ("    vadd.f32 dst=0xfffffff0, lhs=0, rhs=0, n0=1, n1=1, n2=4, dst_s0=0, dst_s1=0, dst_s2=1, "
     "lhs_s0=0, lhs_s1=0, lhs_s2=1, rhs_s0=0, rhs_s1=0, rhs_s2=1",
     "<asm>:3: export 0 instruction 0 (vadd): SRAM range [4294967280, 4294967296) of dst "
     "exceeds the 32-bit SRAM address space"),
    (".export y bindings=[ro:0x10000000000000000]",
     "<asm>:3: binding size 18446744073709551616 does not fit 64 bits"),
    (".export y bindings=[] workgroup_count=4294967296x1x1",
     "<asm>:3: workgroup count 4294967296 does not fit 32 bits"),
    (".export y bindings=[ro:4] views=[0+pc4294967296:4]",
     "<asm>:3: view push constant 4294967296 does not fit 32 bits"),
    (".machine sram_bytes=0x10000000000000000",
     "<asm>:3: NPU machine parameter 'sram_bytes' 18446744073709551616 does not fit 64 bits"),
    (".npu_ir unquoted", "<asm>:3: expected a \"string\""),
    (".machine sram_byte=1", "<asm>:3: unknown NPU machine parameter 'sram_byte'"),
    (".constants f64 1.0", "<asm>:3: .constants needs align or one of hex, f32"),
    (".constants hex 0g", "<asm>:3: hex constants need pairs of hex digits"),
    (".export x", "<asm>:3: export 'x' is defined twice"),
    ("    wait engine=mac, sem=9, value=1",
     "<asm>:3: npu-fb verification failed: export 0 instruction 0 (wait): waits for semaphore 9"),
])
def test_syntax_errors_name_the_line(line, message):
    text = f".version 2.0\n.export x bindings=[]\n{line}\n    end\n"
    with pytest.raises(FormatError) as info:
        assemble(text)
    assert str(info.value).startswith(message), str(info.value)


def test_instruction_before_export():
    with pytest.raises(FormatError, match="<asm>:1: instructions and export directives need "
                                          "an .export first"):
        assemble("end\n")


def test_f16_values_round_trip_through_text():
    for bits in range(1 << 16):
        text = format_float(DType.F16, bits)
        if text is not None:
            assert encode_value(DType.F16, float(text)) == bits


def test_f32_and_bf16_values_round_trip_through_text():
    rng = random.Random(3)
    for bits in [rng.getrandbits(32) for _ in range(20000)] + [0x80000000, 1, 0x7F7FFFFF]:
        text = format_float(DType.F32, bits)
        if text is not None:
            assert encode_value(DType.F32, float(text)) == bits
        text = format_float(DType.BF16, bits >> 16)
        if text is not None:
            assert encode_value(DType.BF16, float(text)) == bits >> 16


def test_integer_fill_values_are_signed():
    assert decode_value(DType.I8, 0xFF) == -1 and encode_value(DType.I8, -1) == 0xFF
    assert decode_value(DType.I32, 0x80000000) == -(1 << 31)


def test_nan_fill_value_keeps_its_payload():
    p = ProgramBuilder()
    p.emit_raw(18, int(DType.F16), 0, [0, 1, 1, 1, 1, 0, 0, 0, 0, 0x7E01])
    p.end()
    b = ExecutableBuilder()
    b.add_export("nan", [], program=p)
    data = b.finish()
    text = disassemble(data)
    assert "value=0x7e01" in text and assemble(text) == data
