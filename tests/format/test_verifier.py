"""The verifier rejects each class of malformed npu-fb input with its specific message."""
import struct

import numpy as np
import pytest

from executable_format.builder import ExecutableBuilder, ProgramBuilder
from executable_format.errors import FormatError
from executable_format.generated import npu_executable_generated as fb
from executable_format.isa import INSTRUCTION_DTYPE, OPCODES_BY_NAME, UNUSED_FIELDS
from executable_format.machine import DEFAULT_MACHINE, MachineConfig
from executable_format.verifier import verify

from .helpers import TILE_BYTES, dma, relu_executable, relu_program, unary

PREFIX = "npu-fb verification failed: "


def rejects(data, message: str) -> None:
    with pytest.raises(FormatError) as info:
        verify(data)
    text = str(info.value)
    assert text.startswith(PREFIX) and "\n" not in text
    assert message in text, text


def instructions_at(data: bytes) -> int:
    """Byte position of export 0's first instruction."""
    return vector_data(fb.Executable.GetRootAs(data, 0).Exports(0).Program(), 4)


def vector_data(table, vtable_slot_offset: int) -> int:
    """Byte position of the data of a table's vector or string field."""
    return table._tab.Vector(table._tab.Offset(vtable_slot_offset))


def patched_record(data: bytes, index: int, **values) -> bytes:
    """`data` with instruction `index` of export 0 changed (opcode/dtype/flags or a<slot>)."""
    data = bytearray(data)
    start = instructions_at(bytes(data)) + 64 * index
    record = np.frombuffer(bytes(data[start:start + 64]), INSTRUCTION_DTYPE).copy()
    for name, value in values.items():
        if name.startswith("a"):
            record["a"][0][int(name[1:])] = value
        else:
            record[name] = value
    data[start:start + 64] = record.tobytes()
    return bytes(data)


def with_extra(extra) -> bytes:
    return relu_executable(relu_program(extra), verify=False)


def test_valid_buffer_verifies():
    verify(relu_executable())
    verify(bytearray(relu_executable()))
    verify(memoryview(relu_executable()))


# --- structure ------------------------------------------------------------------------

def test_too_small():
    rejects(b"", "buffer of 0 bytes is too small")
    rejects(relu_executable()[:7], "buffer of 7 bytes is too small")


def test_wrong_identifier():
    data = bytearray(relu_executable())
    data[4:8] = b"IREE"
    rejects(bytes(data), "file identifier b'IREE' is not b'NPUF'")


def test_truncated():
    data = relu_executable()
    rejects(data[:len(data) // 2], "outside the")


def test_root_offset_out_of_range():
    data = bytearray(relu_executable())
    data[0:4] = struct.pack("<I", 1 << 30)
    rejects(bytes(data), "root (Executable table) at byte 1073741824 lies outside")


def test_misaligned_root():
    data = bytearray(relu_executable())
    data[0:4] = struct.pack("<I", struct.unpack_from("<I", data, 0)[0] + 1)
    rejects(bytes(data), "is not 4-byte aligned")


def test_vector_length_out_of_range():
    data = bytearray(relu_executable())
    at = instructions_at(bytes(data)) - 4
    data[at:at + 4] = struct.pack("<I", 0x7FFFFFF0)
    rejects(bytes(data), "root.exports[0].program.instructions of 2147483632 elements")


def test_string_without_terminator():
    data = bytearray(relu_executable())
    at = vector_data(fb.Executable.GetRootAs(bytes(data), 0).Exports(0), 4)   # the name
    length = struct.unpack_from("<I", data, at - 4)[0]
    data[at + length] = ord("x")
    rejects(bytes(data), "root.exports[0].name string is not NUL-terminated")


def test_missing_required_field():
    data = bytearray(relu_executable())
    export = fb.Executable.GetRootAs(bytes(data), 0).Exports(0)
    vtable = export._tab.Pos - struct.unpack_from("<i", data, export._tab.Pos)[0]
    data[vtable + 4 + 2 * 5:vtable + 4 + 2 * 6] = b"\0\0"          # slot 5: program
    rejects(bytes(data), "root.exports[0].program is required but missing")


def test_field_outside_its_table():
    data = bytearray(relu_executable())
    export = fb.Executable.GetRootAs(bytes(data), 0).Exports(0)
    vtable = export._tab.Pos - struct.unpack_from("<i", data, export._tab.Pos)[0]
    data[vtable + 4:vtable + 6] = struct.pack("<H", 0xFFF0)         # slot 0: name
    rejects(bytes(data), "root.exports[0].name lies outside its table")


# --- header, machine, exports ---------------------------------------------------------

def test_wrong_version():
    rejects(relu_executable(verify=False, version=(1, 6)),
            "format version 1.6 is not supported (major version must be 2)")


def test_newer_minor_version_is_accepted():
    verify(relu_executable(version=(2, 1)))


def test_machine_parameter_not_positive():
    rejects(relu_executable(verify=False, machine=MachineConfig(semaphores=0)),
            "machine parameter 'semaphores' must be positive, got 0")


def test_unknown_machine_parameter():
    data = relu_executable()
    rejects(data.replace(b"clock_hz", b"clock_hx"), "unknown machine parameter 'clock_hx'")


def test_duplicate_export_names():
    b = ExecutableBuilder()
    b.add_export("relu", [(0, TILE_BYTES), (0, TILE_BYTES)], program=relu_program())
    b.add_export("relu", [(0, TILE_BYTES), (0, TILE_BYTES)], program=relu_program())
    rejects(b.finish(verify_output=False), "export 1 name 'relu' is not unique")


def test_unprintable_export_name_is_quoted_as_a_short_excerpt():
    b = ExecutableBuilder()
    b.add_export("relu\x00" + "\x1b" * 100, [(0, TILE_BYTES), (0, TILE_BYTES)],
                 program=relu_program())
    rejects(b.finish(verify_output=False), "export 0 name 'relu\\x00" + "\\x1b" * 30 +
            "... (105 characters)' has unprintable characters")


@pytest.mark.parametrize("counts", [(1, 0, 1), (1, 1)])
def test_bad_workgroup_count(counts):
    b = ExecutableBuilder()
    b.add_export("relu", [(0, TILE_BYTES), (0, TILE_BYTES)], program=relu_program(),
                 workgroup_count=counts)
    rejects(b.finish(verify_output=False), "must be 3 positive counts")


def test_unknown_binding_flag():
    b = ExecutableBuilder()
    b.add_export("relu", [(4, TILE_BYTES), (0, TILE_BYTES)], program=relu_program())
    rejects(b.finish(verify_output=False), "export 0 binding 0 has unknown flags 0x4")


def test_program_sram_bytes_above_machine():
    b = ExecutableBuilder()
    b.add_export("relu", [(0, TILE_BYTES), (0, TILE_BYTES)],
                 program=ProgramBuilder(sram_bytes=3 << 20))
    rejects(b.finish(verify_output=False),
            "export 0 program sram_bytes 3145728 exceeds the machine's sram_bytes 2097152")


def test_empty_program():
    b = ExecutableBuilder()
    b.add_export("relu", [], program=ProgramBuilder())
    rejects(b.finish(verify_output=False), "export 0 program has 0 bytes")


# --- instructions ---------------------------------------------------------------------

def test_unknown_opcode():
    rejects(patched_record(relu_executable(), 3, opcode=99),
            "export 0 instruction 3: unknown opcode 99")


def test_unknown_dtype():
    rejects(patched_record(relu_executable(), 0, dtype=9),
            "export 0 instruction 0 (dma.load): unknown dtype 9")


def test_dtype_not_allowed():
    data = with_extra(lambda p: p.emit_raw(OPCODES_BY_NAME["vpool"].code, 3, 0, [0] * 15))
    rejects(data, "instruction 7 (vpool): dtype i8 is not allowed")


def test_i64_is_loaded_and_converted_to_f32_only():
    """i64 (npu-fb 2.10) is dma.load's and vcvt's src_dtype's: converted to f32, unscaled."""
    vadd_i64 = with_extra(lambda p: p.emit_raw(OPCODES_BY_NAME["vadd"].code, 6, 0,
                                               [0, 0, 0, 1, 1, 1] + [0] * 9))
    rejects(vadd_i64, "instruction 7 (vadd): dtype i64 is not allowed")
    vcvt = OPCODES_BY_NAME["vcvt"].code
    for dtype, scale in ((4, 0), (0, 0x40000000)):       # to i32; scaled by 2
        data = with_extra(lambda p: p.emit_raw(vcvt, dtype, 0, [0, 64, 1, 1, 1] + [0] * 6 +
                                               [scale, 6, 0, 0]))
        rejects(data, "instruction 7 (vcvt): src_dtype i64 converts to f32 only, unscaled, "
                      "without flags")
    verify(with_extra(lambda p: p.emit_raw(vcvt, 0, 0, [0, 64, 1, 1, 1] + [0] * 6 +
                                           [0, 6, 0, 0])))


def test_half_b_needs_an_f32_instruction():
    """half_b (npu-fb 2.10): an f32 MAC instruction's f16 weights."""
    matmul = OPCODES_BY_NAME["matmul"].code
    data = with_extra(lambda p: p.emit_raw(matmul, 3, 128, [0, 64, 128, 1, 1, 1, 1, 1, 1, 0]
                                           + [0] * 5))
    rejects(data, "instruction 7 (matmul): flag half_b needs an f32 instruction, not i8")


def test_undefined_flag_bits():
    rejects(patched_record(relu_executable(), 3, flags=1),
            "instruction 3 (vrelu): flags 0x1 has bits not defined for vrelu")


def test_nonzero_unused_field():
    rejects(patched_record(relu_executable(), 1, a5=7),
            "instruction 1 (signal): unused field a[5] is 7, must be 0")
    rejects(patched_record(relu_executable(), 3, a11=1),
            "instruction 3 (vrelu): unused field p0 is 1, must be 0")


def test_missing_end():
    p = ProgramBuilder()
    p.emit("barrier")
    b = ExecutableBuilder()
    b.add_export("x", [], program=p)
    rejects(b.finish(verify_output=False), "export 0 program does not end with end")


def test_end_before_last():
    rejects(with_extra(lambda p: p.end()),
            "instruction 7 (end): end must be the last instruction only")


def test_wait_without_signal():
    rejects(with_extra(lambda p: p.emit("wait", engine="mac", sem=3, value=1)),
            "instruction 7 (wait): waits for semaphore 3 value 1 but only 0 signals precede it")
    rejects(with_extra(lambda p: p.emit("wait", engine="mac", sem=0, value=2)),
            "waits for semaphore 0 value 2 but only 1 signals precede it")


def test_semaphore_signalled_from_two_engines():
    rejects(with_extra(lambda p: p.emit("signal", engine="mac", sem=0)),
            "semaphore 0 is signalled from mac but already from dma_in")


def test_semaphore_out_of_range():
    rejects(with_extra(lambda p: p.emit("signal", engine="mac", sem=16)),
            "semaphore 16 out of range (machine has 16)")


def test_bad_engine():
    rejects(patched_record(relu_executable(), 1, a0=4),
            "instruction 1 (signal): engine 4 is not one of dma_in, dma_out, mac, vector")


def test_binding_out_of_range():
    rejects(with_extra(lambda p: dma(p, "dma.load", 2, sram_addr=0)),
            "instruction 7 (dma.load): binding 2 out of range (2 bindings)")


def test_dram_range_beyond_min_size():
    rejects(with_extra(lambda p: dma(p, "dma.load", 0, sram_addr=0, dram_offset=4)),
            "DRAM range [4, 132) of dram_offset exceeds binding 0 min_size 128")


def test_constant_pool_range():
    rejects(with_extra(lambda p: dma(p, "dma.load", "const", sram_addr=0, dram_offset=192)),
            "DRAM range [192, 320) of dram_offset exceeds the constant pool of 256 bytes")


def test_store_to_read_only_binding_and_constant_pool():
    rejects(with_extra(lambda p: dma(p, "dma.store", 0, sram_addr=0)),
            "stores to read-only binding 0")
    rejects(with_extra(lambda p: dma(p, "dma.store", "const", sram_addr=0)),
            "stores to the constant pool")


def test_sram_range_beyond_machine():
    p = relu_program(lambda p: dma(p, "dma.load", 0, sram_addr=2097136), sram_bytes=2 << 20)
    rejects(relu_executable(p, verify=False),
            "instruction 7 (dma.load): SRAM range [2097136, 2097264) of sram_addr exceeds "
            "sram_bytes 2097152")


def test_sram_range_beyond_program_declaration():
    p = ProgramBuilder(sram_bytes=TILE_BYTES)
    dma(p, "dma.load", 0, sram_addr=64)
    p.end()
    rejects(relu_executable(p, verify=False),
            "SRAM range [64, 192) of sram_addr exceeds the program's sram_bytes 128")


def test_misaligned_addresses():
    rejects(with_extra(lambda p: dma(p, "dma.load", 0, sram_addr=2)),
            "sram_addr SRAM address 2 is not aligned to 4 bytes")
    rejects(patched_record(relu_executable(), 0, a1=2),
            "dram_offset DRAM offset 2 is not aligned to 4 bytes")


@pytest.mark.parametrize("opcode", [info.name for info in OPCODES_BY_NAME.values()
                                    if info.fields[:3] == ("dst", "src", "n0") and
                                    {"p0", "p1"} <= set(UNUSED_FIELDS.get(info.name, ()))])
def test_zero_count(opcode):
    """Every parameterless unary vector opcode (vsqrt and vrsqrt included) checks its box."""
    rejects(with_extra(lambda p: unary(p, opcode, 0, 0, rows=0)), "n1 must be positive, got 0")


def conv(p, **changes):
    args = dict(dst_in=0, w=1024, out=4096, c=4, hi=5, wi=5, f=8, ho=3, wo=3, kh_kw=(3, 3),
                sh_sw=(1, 1), dh_dw=(1, 1), groups=1)
    args.update(changes)
    args["in"] = args.pop("dst_in")
    return p.emit("conv2d", **args)


def test_conv2d_valid_and_shape_errors():
    verify(with_extra(conv))
    rejects(with_extra(lambda p: conv(p, ho=4)),
            "window (ho 4, kernel 3, stride 1, dilation 1) reads past hi 5")
    rejects(with_extra(lambda p: conv(p, wo=2, dh_dw=(1, 2))),
            "window (wo 2, kernel 3, stride 1, dilation 2) reads past wi 5")
    rejects(with_extra(lambda p: conv(p, groups=3)), "c 4 is not divisible by groups 3")
    rejects(with_extra(lambda p: conv(p, kh_kw=(0, 3))), "kh_kw 0x3 must be positive")
    rejects(with_extra(lambda p: conv(p, flags="accumulate|bias", bias=4096)),
            "flags accumulate and bias exclude each other")
    rejects(with_extra(lambda p: conv(p, bias=4096)), "bias is 4096 but the bias flag is not set")
    rejects(with_extra(lambda p: conv(p, out=2048)),
            "out SRAM range [2048, 2336) overlaps w SRAM range [1024, 2176)")


def dwconv(p, **changes):
    args = dict(dst_in=0, w=1024, out=4096, c=4, hi=5, wi=5, ho=3, wo=3, kh_kw=(3, 3),
                sh_sw=(1, 1), dh_dw=(1, 1))
    args.update(changes)
    args["in"] = args.pop("dst_in")
    return p.emit("dwconv2d", **args)


def test_dwconv2d_valid_and_shape_errors():
    verify(with_extra(dwconv))
    verify(with_extra(lambda p: dwconv(p, flags="bias", bias=2048)))
    rejects(with_extra(lambda p: dwconv(p, ho=4)),
            "window (ho 4, kernel 3, stride 1, dilation 1) reads past hi 5")
    rejects(with_extra(lambda p: dwconv(p, wo=2, sh_sw=(1, 2), dh_dw=(1, 2))),
            "window (wo 2, kernel 3, stride 2, dilation 2) reads past wi 5")
    rejects(with_extra(lambda p: dwconv(p, c=0)), "c must be positive, got 0")
    rejects(with_extra(lambda p: dwconv(p, sh_sw=(0, 1))), "sh_sw 0x1 must be positive")
    rejects(with_extra(lambda p: dwconv(p, flags="accumulate|bias", bias=2048)),
            "flags accumulate and bias exclude each other")
    rejects(with_extra(lambda p: dwconv(p, bias=2048)), "bias is 2048 but the bias flag is not set")
    rejects(with_extra(lambda p: dwconv(p, w=4000)),
            "out SRAM range [4096, 4240) overlaps w SRAM range [4000, 4144)")


def test_work_per_instruction_is_bounded_by_sram_size():
    limit = 64 * DEFAULT_MACHINE.sram_bytes
    rejects(with_extra(lambda p: p.emit("vrelu", dst=0, src=0, n0=limit // 4, n1=2, n2=4,
                                        dst_s0=0, dst_s1=0, dst_s2=0, src_s0=0, src_s1=0,
                                        src_s2=0)),
            f"{2 * limit} elements exceed the per-instruction limit {limit} (64 per SRAM byte)")


def test_matmul_leading_dimension():
    def matmul(p, **changes):
        args = dict(a=0, b=1024, out=2048, m=4, n=8, k=16, lda=16, ldb=8, ldo=8)
        args.update(changes)
        p.emit("matmul", **args)
    verify(with_extra(matmul))
    verify(with_extra(lambda p: matmul(p, flags="transpose_a", lda=4)))
    rejects(with_extra(lambda p: matmul(p, lda=8)), "lda 8 is less than the row length 16")


def test_vround_takes_one_rounding():
    def vround(p, flags=""):
        p.emit("vround", dst=0, src=1024, n0=1, n1=1, n2=8, dst_s0=0, dst_s1=0, dst_s2=1,
               src_s0=0, src_s1=0, src_s2=1,
               p0=float("-inf"), p1=float("inf"), flags=flags)
    verify(with_extra(lambda p: vround(p, "floor")))
    rejects(with_extra(lambda p: vround(p, "floor|ceil")),
            "flags floor, ceil and half_away exclude each other")


def test_mixed_sign_needs_byte_operands():
    def matmul(p, dtype):
        p.emit("matmul", dtype=dtype, a=0, b=1024, out=2048, m=4, n=8, k=16, lda=16, ldb=8,
               ldo=8, flags="mixed_sign")
    verify(with_extra(lambda p: matmul(p, "u8")))
    rejects(with_extra(lambda p: matmul(p, "f16")),
            "flag mixed_sign needs i8 or u8 operands, not f16")


def test_narrow_sum_needs_half_float_operands():
    def conv(p, dtype):
        p.emit("conv2d", dtype=dtype, **{"in": 0}, w=1024, out=2048, c=2, hi=4, wi=4, f=2,
               ho=2, wo=2, kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(1, 1), groups=1,
               flags="narrow_sum")
    verify(with_extra(lambda p: conv(p, "bf16")))
    rejects(with_extra(lambda p: conv(p, "f32")),
            "flag narrow_sum needs f16 or bf16 operands, not f32")


def test_vpool_valid_region():
    def pool(p, **changes):
        args = dict(dst=0, src=1024, c=2, hi=4, wi=4, ho=2, wo=2, kh_kw=(2, 2), sh_sw=(2, 2),
                    dh_dw=(1, 1), pt_pl=(0, 0), vh_vw=(4, 4))
        args.update(changes)
        p.emit("vpool", **args)
    verify(with_extra(pool))
    rejects(with_extra(lambda p: pool(p, pt_pl=(1, 0))),
            "valid region rows [1, 5) cols [0, 4) exceeds the 4x4 tile")


def test_fill_value_must_fit_dtype():
    rejects(patched_record(with_extra(lambda p: p.emit(
        "fill", dtype="i8", sram_addr=0, n0=1, n1=1, n2=1, n3=1, s0=0, s1=0, s2=0, s3=0,
        value=0)), 7, a9=256), "value 0x100 does not fit i8")


def test_shared_objects_cannot_multiply_work():
    """Ten exports repointed at export 0's 300 bindings: reading them all would take ten
    times the buffer, so the objects must overlap and the buffer is rejected."""
    b = ExecutableBuilder()
    b.add_export("e0", [(0, TILE_BYTES)] * 300, program=relu_program())
    for index in range(1, 11):
        b.add_export(f"e{index}", [(0, TILE_BYTES)] * 2, program=relu_program())
    data = bytearray(b.finish())
    root = fb.Executable.GetRootAs(bytes(data), 0)
    first = root.Exports(0)
    shared = first._tab.Pos + first._tab.Offset(8)
    shared += struct.unpack_from("<I", data, shared)[0]          # export 0's bindings
    for index in range(1, 11):
        export = root.Exports(index)
        field = export._tab.Pos + export._tab.Offset(8)
        data[field:field + 4] = struct.pack("<I", shared - field)
    rejects(bytes(data), "objects overlap (their sizes add up to more than the")


def test_fill_of_a_push_constant_the_export_does_not_take():
    """relu_executable's export takes no push constants."""
    fill = OPCODES_BY_NAME["fill"].code
    data = with_extra(lambda p: p.emit_raw(fill, 4, 1, [0, 1, 1, 1, 1] + [0] * 10))
    rejects(data, "instruction 7 (fill): fills push constant 0 (0 constants)")
