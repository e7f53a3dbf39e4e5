"""Every class of bad access or malformed instruction is rejected with its status and
message before anything is touched; random garbage programs never crash the core."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from executable_format import isa
from hal_driver.status import StatusCode, StatusError
from tests.native.programs import dma, instr, program

OOR, INV = StatusCode.OUT_OF_RANGE, StatusCode.INVALID_ARGUMENT
SRAM = 2 * 1024 * 1024
ROW = ((1, 1, 1, 16), (0, 0, 0, 1), (0, 0, 0, 1))


def _expect(core, prog, code, message, bindings=None, const_pool=b""):
    guards = [np.full(8192 + 128, 0x5A, np.uint8), np.full(1024 + 128, 0x5A, np.uint8)]
    if bindings is None:
        bindings = [guards[0][64:-64], guards[1][64:-64]]
    with pytest.raises(StatusError) as e:
        core.execute(prog, bindings, const_pool=const_pool)
    assert e.value.code == code
    assert e.value.message == message
    for g in guards:
        assert (g == 0x5A).all()


def _vadd(**fields):
    base = dict(dst=0, lhs=0, rhs=0, n0=1, n1=1, n2=16, dst_s2=1, lhs_s2=1, rhs_s2=1)
    base.update(fields)
    return instr("vadd", **base)


RANGE_CASES = [
    (program(instr("barrier"), dma("dma.load", 1, 1024, 0, (1, 1, 1, 2048), (0, 0, 0, 1),
                                   (0, 0, 0, 1))),
     "instruction 1 (dma.load): DRAM range [1024, 9216) exceeds binding 1 length 1024"),
    (program(dma("dma.store", 0, 0, 0, (2, 1, 1, 16), (4096, 0, 0, 1), (16, 0, 0, 1))),
     "instruction 0 (dma.store): DRAM range [0, 16448) exceeds binding 0 length 8192"),
    (program(dma("dma.load", 2, 0, 0, *ROW)),
     "instruction 0 (dma.load): binding 2 out of range (2 bindings)"),
    (program(dma("dma.load", isa.CONST_POOL, 32, 0, *ROW)),
     "instruction 0 (dma.load): DRAM range [32, 96) exceeds the constant pool length 64"),
    (program(dma("dma.load", 0, 0, SRAM - 32, *ROW)),
     f"instruction 0 (dma.load): sram SRAM range [{SRAM - 32}, {SRAM + 32}) exceeds "
     f"sram_bytes {SRAM}"),
    (program(instr("fill", sram_addr=0, n0=2, n1=1, n2=1, n3=1, s0=SRAM // 4)),
     f"instruction 0 (fill): sram SRAM range [0, {SRAM + 4}) exceeds sram_bytes {SRAM}"),
    (program(instr("matmul", a=0, b=SRAM - 64, out=4096, m=4, n=4, k=8, lda=8, ldb=4, ldo=4)),
     f"instruction 0 (matmul): b SRAM range [{SRAM - 64}, {SRAM + 64}) exceeds sram_bytes {SRAM}"),
    (program(instr("matmul", "f32", isa.Flag.BIAS, a=0, b=0, out=4096, bias=SRAM - 8, m=4, n=4, k=8,
                   lda=8, ldb=4, ldo=4)),
     f"instruction 0 (matmul): bias SRAM range [{SRAM - 8}, {SRAM + 8}) exceeds sram_bytes {SRAM}"),
    (program(instr("conv2d", **{"in": 0}, w=0, out=SRAM - 4, c=1, hi=3, wi=3, f=1, ho=1,
                   wo=2, kh_kw=(3, 2), sh_sw=(1, 1), dh_dw=(1, 1), groups=1)),
     f"instruction 0 (conv2d): out SRAM range [{SRAM - 4}, {SRAM + 4}) exceeds sram_bytes {SRAM}"),
    (program(instr("dwconv2d", **{"in": 0}, w=SRAM - 32, out=64, c=2, hi=3, wi=3, ho=1,
                   wo=1, kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(1, 1))),
     f"instruction 0 (dwconv2d): w SRAM range [{SRAM - 32}, {SRAM + 40}) exceeds sram_bytes {SRAM}"),
    (program(_vadd(rhs=SRAM - 32)),
     f"instruction 0 (vadd): rhs SRAM range [{SRAM - 32}, {SRAM + 32}) exceeds sram_bytes {SRAM}"),
    (program(_vadd(dst_s0=1, n0=2, dst_s1=SRAM, n1=2)),
     f"instruction 0 (vadd): dst SRAM range [0, {4 * SRAM + 68}) exceeds sram_bytes {SRAM}"),
    (program(instr("vexp", dst=0, src=SRAM, n0=1, n1=1, n2=1, dst_s2=1, src_s2=1)),
     f"instruction 0 (vexp): src SRAM range [{SRAM}, {SRAM + 4}) exceeds sram_bytes {SRAM}"),
    (program(instr("vcvt", "i8", dst=SRAM - 4, src=0, n0=1, n1=1, n2=8, dst_s2=1, src_s2=1,
                   src_dtype=int(isa.DType.F32))),
     f"instruction 0 (vcvt): dst SRAM range [{SRAM - 4}, {SRAM + 4}) exceeds sram_bytes {SRAM}"),
    (program(instr("vreduce", dst=SRAM, src=0, outer=1, inner=4)),
     f"instruction 0 (vreduce): dst SRAM range [{SRAM}, {SRAM + 4}) exceeds sram_bytes {SRAM}"),
]


@pytest.mark.parametrize("prog,message", RANGE_CASES)
def test_out_of_range(core, prog, message):
    _expect(core, prog, OOR, message, const_pool=bytes(64))


def test_vpool_src_out_of_range(core):
    _expect(core, program(instr("vpool", dst=0, src=SRAM - 16, c=1, hi=3, wi=2, ho=2, wo=1,
                                kh_kw=(2, 2), sh_sw=(1, 1), dh_dw=(1, 1))), OOR,
            f"instruction 0 (vpool): src SRAM range [{SRAM - 16}, {SRAM + 8}) exceeds "
            f"sram_bytes {SRAM}")


def _raw(opcode, dtype=0, flags=0, a=()):
    record = np.zeros((), dtype=isa.INSTRUCTION_DTYPE)
    record["opcode"], record["dtype"], record["flags"] = opcode, dtype, flags
    record["a"][:len(a)] = a
    return record


MALFORMED_CASES = [
    (program(_raw(99)), "instruction 0: invalid opcode 99"),
    (program(_raw(isa.OPCODES_BY_NAME["vadd"].code, dtype=7)),
     "instruction 0 (vadd): invalid dtype 7"),
    (program(instr("vadd", "i8")), "instruction 0 (vadd): dtype i8 is not allowed"),
    (program(instr("vpool", "i32")), "instruction 0 (vpool): dtype i32 is not allowed"),
    (program(instr("vadd", flags=1)), "instruction 0 (vadd): invalid flags 0x1"),
    (program(instr("matmul", flags=3)),
     "instruction 0 (matmul): flags ACCUMULATE and BIAS are exclusive"),
    (program(instr("vrelu", p0=1.0)), "instruction 0 (vrelu): unused field a[11] must be zero, "
                                      "got 1065353216"),
    (program(_raw(isa.OPCODES_BY_NAME["fill"].code, a=[0] * 14 + [5])),
     "instruction 0 (fill): unused field a[14] must be zero, got 5"),
    (program(instr("barrier"), instr("vadd", dst=2, n0=1, n1=1, n2=1)),
     "instruction 1 (vadd): dst SRAM address 2 is not aligned to 4 bytes"),
    (program(dma("dma.load", 0, 6, 0, *ROW)),
     "instruction 0 (dma.load): DRAM offset 6 is not aligned to 4 bytes"),
    (program(dma("dma.store", isa.CONST_POOL, 0, 0, *ROW)),
     "instruction 0 (dma.store): the constant pool is read-only"),
    (program(instr("wait", engine=2, sem=3, value=1)),
     "instruction 0 (wait): waits for signal 1 of semaphore 3 but only 0 precede it"),
    (program(instr("signal", engine=0, sem=16)),
     "instruction 0 (signal): semaphore 16 out of range (16 semaphores)"),
    (program(instr("signal", engine=4, sem=0)), "instruction 0 (signal): invalid engine 4"),
    (program(instr("signal", engine=0, sem=1), instr("signal", engine=3, sem=1)),
     "instruction 1 (signal): semaphore 1 is signalled from engine 0 and engine 3"),
    (program(instr("conv2d", c=3, hi=1, wi=1, f=4, ho=1, wo=1, groups=2, kh_kw=(1, 1),
                   sh_sw=(1, 1), dh_dw=(1, 1))),
     "instruction 0 (conv2d): groups 2 must divide c 3 and f 4"),
    (program(instr("conv2d", c=1, hi=1, wi=1, f=1, ho=1, wo=1, groups=1, kh_kw=(1, 1),
                   sh_sw=(0, 1), dh_dw=(1, 1))),
     "instruction 0 (conv2d): kernel 1x1, stride 0x1 and dilation 1x1 must be at least 1"),
    (program(instr("conv2d", **{"in": 0}, w=0, out=4096, c=1, hi=3, wi=3, f=1, ho=2, wo=2,
                   kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(1, 1), groups=1)),
     "instruction 0 (conv2d): windows span 4x4 input elements but the tile is 3x3"),
    (program(instr("conv2d", **{"in": 0}, w=0, out=4096, c=1, hi=3, wi=3, f=1, ho=1, wo=1,
                   kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(1, 1), groups=1, bias=64)),
     "instruction 0 (conv2d): bias field is 64 without the BIAS flag"),
    (program(instr("dwconv2d", c=2, hi=1, wi=1, ho=0, wo=1, kh_kw=(1, 1), sh_sw=(1, 1),
                   dh_dw=(1, 1))),
     "instruction 0 (dwconv2d): ho must be at least 1"),
    (program(instr("dwconv2d", **{"in": 0}, w=0, out=4096, c=1, hi=5, wi=3, ho=2, wo=1,
                   kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(2, 1))),
     "instruction 0 (dwconv2d): windows span 6x3 input elements but the tile is 5x3"),
    (program(instr("dwconv2d", "f32", isa.Flag.ACCUMULATE | isa.Flag.BIAS, c=1, hi=1, wi=1,
                   ho=1, wo=1, kh_kw=(1, 1), sh_sw=(1, 1), dh_dw=(1, 1))),
     "instruction 0 (dwconv2d): flags ACCUMULATE and BIAS are exclusive"),
    (program(instr("dwconv2d", **{"in": 0}, w=64, out=68, c=2, hi=2, wi=2, ho=2, wo=2,
                   kh_kw=(1, 1), sh_sw=(1, 1), dh_dw=(1, 1))),
     "instruction 0 (dwconv2d): out SRAM range [68, 100) overlaps w SRAM range [64, 72)"),
    (program(instr("vpool", "f32", isa.Flag.POOL_AVG, dst=0, src=64, c=1, hi=2, wi=2, ho=1,
                   wo=1, kh_kw=(2, 2), sh_sw=(1, 1), dh_dw=(1, 1), pt_pl=(1, 0), vh_vw=(2, 2))),
     "instruction 0 (vpool): valid region rows [1, 3) cols [0, 2) exceeds the 2x2 tile"),
    (program(instr("matmul", a=0, b=0, out=4096, m=2, n=8, k=1, lda=1, ldb=8, ldo=4)),
     "instruction 0 (matmul): leading dimensions lda 1, ldb 8, ldo 4 are below the stored "
     "rows 1, 8, 8"),
    (program(instr("matmul", "f32", isa.Flag.TRANSPOSE_A, a=0, b=0, out=4096, m=3, n=8, k=2,
                   lda=2, ldb=8, ldo=8)),
     "instruction 0 (matmul): leading dimensions lda 2, ldb 8, ldo 8 are below the stored "
     "rows 3, 8, 8"),
    (program(instr("matmul", a=0, b=0, out=4096, m=2, n=0, k=1, lda=1, ldb=8, ldo=4)),
     "instruction 0 (matmul): n must be at least 1"),
    (program(dma("dma.load", 0, 0, 0, (1, 0, 1, 1), (0, 0, 0, 1), (0, 0, 0, 1))),
     "instruction 0 (dma.load): n1 must be at least 1"),
    (program(_vadd(n2=0)), "instruction 0 (vadd): n2 must be at least 1"),
    (program(instr("vreduce", outer=2)), "instruction 0 (vreduce): inner must be at least 1"),
    (program(instr("fill", "f16", sram_addr=0, n0=1, n1=1, n2=1, n3=1, value=0x10000)),
     "instruction 0 (fill): value 0x10000 does not fit f16"),
    (program(instr("fill", "i32", int(isa.Flag.PUSH_CONSTANT), sram_addr=0, n0=1, n1=1, n2=1,
                   n3=1, value=0)),
     "instruction 0 (fill): fills push constant 0 (0 constants)"),
    (program(instr("fill", "i8", int(isa.Flag.PUSH_CONSTANT), sram_addr=0, n0=1, n1=1, n2=1,
                   n3=1, value=0)),
     "instruction 0 (fill): a push constant fills 32-bit elements, not i8"),
    (program(instr("matmul", a=0, b=256, out=32, m=4, n=4, k=4, lda=4, ldb=4, ldo=4)),
     "instruction 0 (matmul): out SRAM range [32, 96) overlaps a SRAM range [0, 64)"),
    (program(instr("fill", sram_addr=0, n0=1 << 16, n1=1 << 16, n2=2, n3=1, s3=1)),
     "instruction 0 (fill): 8589934592 elements exceed the per-instruction limit 134217728 "
     "(64 per SRAM byte)"),
    (program(instr("vcvt", src_dtype=9)), "instruction 0 (vcvt): invalid src_dtype 9"),
    (program(instr("vcvt", "i32", n0=1, n1=1, n2=1, src_dtype=int(isa.DType.I64))),
     "instruction 0 (vcvt): src_dtype i64 converts to f32 only, unscaled, without flags"),
    (program(instr("vcvt", "f32", n0=1, n1=1, n2=1, scale=isa.f32_bits(2.0),
                   src_dtype=int(isa.DType.I64))),
     "instruction 0 (vcvt): src_dtype i64 converts to f32 only, unscaled, without flags"),
    (program(instr("signal", engine=1, sem=2), instr("wait", engine=3, sem=2, value=1),
             instr("wait", engine=3, sem=2, value=2)),
     "instruction 2 (wait): waits for signal 2 of semaphore 2 but only 1 precede it"),
    (program(instr("barrier"), end=False), "program has no end instruction"),
    (b"\x01" * 63, "program size 63 is not a positive multiple of 64 bytes"),
]


@pytest.mark.parametrize("prog,message", MALFORMED_CASES)
def test_malformed(core, prog, message):
    _expect(core, prog, INV, message)


def test_structural_errors_run_nothing(core):
    """A malformed instruction anywhere stops the program before its first instruction."""
    out = np.zeros(64, np.uint8)
    prog = program(instr("fill", "i8", sram_addr=0, n0=1, n1=1, n2=1, n3=64, s3=1, value=7),
                   dma("dma.store", 0, 0, 0, (1, 1, 1, 64), (0, 0, 0, 1), (0, 0, 0, 1), "i8"),
                   _raw(200))
    with pytest.raises(StatusError):
        core.execute(prog, [out])
    assert not out.any()


def test_read_only_binding_rejected(core):
    with pytest.raises(StatusError) as e:
        core.execute(program(), [b"immutable"])
    assert e.value.code == INV and "binding 0 is not a writable" in e.value.message


FUZZ = textwrap.dedent("""
    import numpy as np
    from executable_format import isa
    from executable_format.machine import MachineConfig
    from hal_driver.device.npu_core import NpuCore
    from hal_driver.status import StatusError

    rng = np.random.default_rng(1234)
    core = NpuCore(MachineConfig(sram_bytes=1 << 14))
    special = np.array([0, 1, 2, 3, 4, 7, 8, 16, 64, 1000, 4096, 65535, 65536, 0x10001,
                        0x20002, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFFC], np.uint32)
    ok = failed = 0
    for trial in range(2000):
        count = int(rng.integers(1, 5))
        records = np.zeros(count + 1, isa.INSTRUCTION_DTYPE)
        for r in records:
            info = isa.OPCODE_LIST[int(rng.integers(0, len(isa.OPCODE_LIST)))]
            r["opcode"] = info.code
            r["dtype"] = info.dtypes[int(rng.integers(0, len(info.dtypes)))]
            if info.name in ("matmul", "conv2d", "dwconv2d", "vpool", "vreduce"):
                r["flags"] = int(rng.integers(0, 16 if info.name == "matmul" else 4))
            pick = rng.random(15)
            small = rng.integers(1, 12, size=15) * rng.choice([1, 4, 64], size=15)
            a = np.where(pick < 0.7, small, rng.choice(special, size=15))
            a = np.where(pick > 0.97, rng.integers(0, 1 << 32, size=15), a)
            a[len(info.fields):] = 0
            if info.fields[-2:] == ("p0", "p1"):      # parameters only where used
                a[{"vclamp": 13, "vscale": 13, "vleakyrelu": 12}.get(info.name, 11):] = 0
            r["a"] = a
            if rng.random() < 0.1:          # a structural fault
                r["opcode" if rng.random() < 0.5 else "dtype"] = int(rng.integers(0, 256))
        records[-1] = np.zeros((), isa.INSTRUCTION_DTYPE)
        records[-1]["opcode"] = 1
        data = records.tobytes()
        if trial % 7 == 0:
            data = data[:int(rng.integers(0, len(data) + 1))]
        guard = np.full(4096 + 128, 0x5A, np.uint8)
        bindings = [guard[64:-64], np.zeros(int(rng.integers(0, 300)), np.uint8)]
        try:
            core.execute(data, bindings, const_pool=bytes(100))
            ok += 1
        except StatusError:
            failed += 1
        assert (guard[:64] == 0x5A).all() and (guard[-64:] == 0x5A).all()
    print(ok, failed)
""")


def test_garbage_programs_never_crash():
    result = subprocess.run([sys.executable, "-c", FUZZ], capture_output=True, text=True,
                            timeout=120, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert result.returncode == 0, result.stderr[-2000:]
    ok, failed = (int(v) for v in result.stdout.split())
    assert ok > 40 and failed > 1000, (ok, failed)      # ok: 60-100 of 2000 over seeds


def test_fill_from_push_constant(core):
    """fill push_constant writes the dispatch's push constant `value` (a scalar operand)."""
    out = np.zeros(4 * 8, np.uint8)
    prog = program(instr("fill", "i32", int(isa.Flag.PUSH_CONSTANT), sram_addr=0, n0=1, n1=1,
                         n2=1, n3=8, s3=1, value=1),
                   dma("dma.store", 0, 0, 0, (1, 1, 1, 8), (0, 0, 0, 1), (0, 0, 0, 1), "i32"))
    core.execute(prog, [out], constants=[7, 0xFFFF5920])
    np.testing.assert_array_equal(out.view(np.int32), np.full(8, -42720, np.int32))
