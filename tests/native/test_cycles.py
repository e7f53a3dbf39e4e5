"""The C cycle model equals executable_format/cost.py: random programs, two hand-computed
programs, and never faster than the roofline."""
import numpy as np
import pytest

from executable_format import cost, isa
from executable_format.machine import MachineConfig
from hal_driver.device.npu_core import NpuCore
from tests.native.programs import decode, dma, instr, program

DTYPES = ["f32", "f16", "bf16", "i8", "i32"]
MAC_DTYPES = ["f32", "f16", "bf16", "i8"]
BINDING_BYTES = 1 << 16
KIB = 1024


def _dense(rng, counts):
    strides = [0] * len(counts)
    step = 1
    for d in rng.permutation(len(counts))[::-1]:
        strides[d] = int(step)
        step *= counts[d]
    return strides


def _pick(rng, values):
    return values[int(rng.integers(0, len(values)))]


def _vector_fields(rng, operands, dtype_of):
    counts = [int(v) for v in rng.integers(1, 9, size=3)]
    fields = dict(n0=counts[0], n1=counts[1], n2=counts[2])
    for i, name in enumerate(operands):
        fields[name] = 128 * KIB * i + 64 * int(rng.integers(0, 100))
        strides = _dense(rng, counts)
        fields.update({f"{name}_s{d}": strides[d] for d in range(3)})
    return fields


def random_instruction(rng, sem_engines, sem_counts):
    kind = _pick(rng, ["dma.load", "dma.store", "fill", "matmul", "conv2d", "dwconv2d",
                       "binary", "unary", "vcvt", "vpool", "vreduce", "signal", "wait",
                       "barrier"])
    dtype = _pick(rng, DTYPES)
    if kind in ("dma.load", "dma.store"):
        counts = [int(v) for v in rng.integers(1, 9, size=4)]
        dram_s = _dense(rng, counts)
        if rng.random() < 0.5:       # contiguous rows, sometimes padded
            dram_s = [counts[3] * counts[2] * counts[1] * 2, counts[3] * counts[2] * 2,
                      counts[3] + int(rng.integers(0, 3)), 1]
        return dma(kind, 0 if kind == "dma.load" else 1, 0, 64 * int(rng.integers(0, 4000)),
                   counts, dram_s, _dense(rng, counts), dtype)
    if kind == "fill":
        counts = [int(v) for v in rng.integers(1, 9, size=4)]
        s = _dense(rng, counts)
        return instr("fill", dtype, sram_addr=64 * int(rng.integers(0, 4000)), n0=counts[0],
                     n1=counts[1], n2=counts[2], n3=counts[3], s0=s[0], s1=s[1], s2=s[2],
                     s3=s[3], value=int(rng.integers(0, 1 << 8)))
    if kind == "matmul":
        dtype = _pick(rng, MAC_DTYPES)
        m, n, k = (int(v) for v in rng.integers(1, 80, size=3))
        flags = int(rng.integers(0, 16))
        flags &= ~isa.Flag.BIAS if flags & isa.Flag.ACCUMULATE else 0xF
        ta, tb = flags & isa.Flag.TRANSPOSE_A, flags & isa.Flag.TRANSPOSE_B
        return instr("matmul", dtype, flags, a=0, b=256 * KIB, out=1024 * KIB,
                     bias=1536 * KIB if flags & isa.Flag.BIAS else 0, m=m, n=n, k=k, lda=m if ta else k, ldb=k if tb else n,
                     ldo=n)
    if kind == "conv2d":
        dtype = _pick(rng, MAC_DTYPES)
        groups = int(rng.integers(1, 4))
        c, f = groups * int(rng.integers(1, 9)), groups * int(rng.integers(1, 9))
        kh, kw, sh, sw = (int(v) for v in rng.integers(1, 4, size=4))
        ho, wo = (int(v) for v in rng.integers(1, 16, size=2))
        flags = _pick(rng, [0, 1, 2]) | _pick(rng, [0, isa.Flag.PIXEL_COLUMNS])
        return instr("conv2d", dtype, flags, **{"in": 0}, w=256 * KIB, out=1024 * KIB,
                     bias=1536 * KIB if flags & isa.Flag.BIAS else 0, c=c, hi=(ho - 1) * sh + kh,
                     wi=(wo - 1) * sw + kw, f=f, ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=(sh, sw),
                     dh_dw=(1, 1), groups=groups)
    if kind == "dwconv2d":
        kh, kw, sh, sw, dh, dw = (int(v) for v in rng.integers(1, 6, size=6))
        ho, wo = (int(v) for v in rng.integers(1, 40, size=2))
        flags = _pick(rng, [0, 1, 2])
        return instr("dwconv2d", _pick(rng, MAC_DTYPES), flags, **{"in": 0}, w=256 * KIB,
                     out=1024 * KIB, bias=1536 * KIB if flags & isa.Flag.BIAS else 0,
                     c=int(rng.integers(1, 9)), hi=(ho - 1) * sh + (kh - 1) * dh + 1,
                     wi=(wo - 1) * sw + (kw - 1) * dw + 1, ho=ho, wo=wo, kh_kw=(kh, kw),
                     sh_sw=(sh, sw), dh_dw=(dh, dw))
    if kind == "binary":
        op = _pick(rng, ["vadd", "vsub", "vmul", "vmax", "vmin", "vdiv"])
        return instr(op, _pick(rng, ["f32", "f16", "bf16", "i32"]),
                     **_vector_fields(rng, ["dst", "lhs", "rhs"], None))
    if kind == "unary":
        op = _pick(rng, ["vcopy", "vrelu", "vclamp", "vleakyrelu", "vsigmoid", "vtanh",
                         "vexp", "vscale", "vsqrt", "vrsqrt", "vhswish", "verf",
                         "vlog", "vlog1p", "vsin", "vcos"])
        return instr(op, _pick(rng, ["f32", "f16", "bf16"]),
                     **_vector_fields(rng, ["dst", "src"], None))
    if kind == "vcvt":
        return instr("vcvt", dtype, scale=0.5, src_dtype=int(rng.integers(0, 5)),
                     **_vector_fields(rng, ["dst", "src"], None))
    if kind == "vpool":
        kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
        ho, wo = (int(v) for v in rng.integers(1, 10, size=2))
        return instr("vpool", _pick(rng, ["f32", "f16", "bf16"]), _pick(rng, [0, 1, 3]),
                     dst=512 * KIB, src=0, c=int(rng.integers(1, 5)), hi=ho + kh - 1,
                     wi=wo + kw - 1, ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=(1, 1), dh_dw=(1, 1),
                     pt_pl=(0, 0), vh_vw=(ho, wo))
    if kind == "vreduce":
        return instr("vreduce", _pick(rng, ["f32", "f16", "bf16"]), _pick(rng, [0, 1, 2]),
                     dst=512 * KIB, src=0, outer=int(rng.integers(1, 20)),
                     inner=int(rng.integers(1, 200)))
    if kind == "signal":
        sem = int(rng.integers(0, 16))
        engine = sem_engines.setdefault(sem, int(rng.integers(0, 4)))
        sem_counts[sem] = sem_counts.get(sem, 0) + 1
        return instr("signal", engine=engine, sem=sem)
    if kind == "wait" and sem_counts:
        sem = _pick(rng, sorted(sem_counts))
        return instr("wait", engine=int(rng.integers(0, 4)), sem=sem,
                     value=int(rng.integers(0, sem_counts[sem] + 1)))
    return instr("barrier")


def random_program(rng, length):
    sem_engines, sem_counts = {}, {}
    return program(*[random_instruction(rng, sem_engines, sem_counts) for _ in range(length)])


def _assert_matches_cost_model(machine, stats, prog):
    ref = cost.simulate_timeline(machine, decode(prog), record_events=True)
    assert stats.total_cycles == ref.total_cycles
    assert stats.busy_cycles == ref.busy_cycles
    assert stats.stall_cycles == ref.stall_cycles
    assert stats.dram_read_bytes == ref.dram_read_bytes
    assert stats.dram_write_bytes == ref.dram_write_bytes
    assert stats.macs == ref.macs
    assert stats.events == ref.events


@pytest.mark.parametrize("machine", [MachineConfig(), MachineConfig(
    mac_rows=16, mac_cols=8, f32_rate_divisor=2, i8_rate_multiplier=4, mac_latency_cycles=7,
    sram_bytes_per_cycle=32, dram_bytes_per_cycle=16, dma_burst_bytes=32, dma_latency_cycles=9,
    vector_bytes_per_cycle=48, vector_latency_cycles=3, transcendental_factor=6)])
def test_random_programs_match_cost_model(rng, machine):
    core = NpuCore(machine)
    bindings = [np.zeros(BINDING_BYTES, np.uint8), np.zeros(BINDING_BYTES, np.uint8)]
    for _ in range(40):
        prog = random_program(rng, int(rng.integers(1, 40)))
        stats = core.execute(prog, bindings, trace=True)
        _assert_matches_cost_model(machine, stats, prog)
        assert stats.total_cycles >= stats.transfer_bound_cycles(machine, "i8")


def test_hand_computed_pipeline(core):
    """load -> matmul -> store chained by semaphores on the default machine."""
    prog = program(
        dma("dma.load", 0, 0, 0, (1, 1, 16, 64), (0, 0, 64, 1), (0, 0, 64, 1)),
        instr("signal", engine=0, sem=0),
        instr("wait", engine=2, sem=0, value=1),
        instr("matmul", a=0, b=8192, out=32768, m=16, n=64, k=64, lda=64, ldb=64, ldo=64),
        instr("signal", engine=2, sem=1),
        instr("wait", engine=1, sem=1, value=1),
        dma("dma.store", 1, 0, 32768, (1, 1, 16, 64), (0, 0, 64, 1), (0, 0, 64, 1)))
    stats = core.execute(prog, [np.zeros(4096, np.uint8), np.zeros(4096, np.uint8)], trace=True)
    # dma: 100 + 16 runs * 256 B / 64 = 164; matmul f32: 32 + 16 * (64/32) * (64/8) = 288
    assert stats.total_cycles == 164 + 288 + 164
    assert stats.busy_cycles == {"dma_in": 164, "dma_out": 164, "mac": 288, "vector": 0}
    assert stats.stall_cycles == {"dma_in": 0, "dma_out": 452, "mac": 164, "vector": 0}
    assert stats.events == [("dma_in", 0, 164, "dma.load", 0), ("mac", 164, 452, "matmul", 3),
                            ("dma_out", 452, 616, "dma.store", 6)]
    assert (stats.dram_read_bytes, stats.dram_write_bytes, stats.macs) == (4096, 4096, 65536)
    assert stats.sram_peak_bytes == 32768 + 4096
    assert stats.total_cycles >= stats.transfer_bound_cycles(MachineConfig(), "f32")


def test_hand_computed_barrier(core):
    """fill, strided load and a transcendental, then a barrier."""
    prog = program(
        instr("fill", sram_addr=0, n0=1, n1=1, n2=1, n3=100, s3=1),
        dma("dma.load", 0, 0, 4096, (1, 1, 8, 8), (0, 0, 1, 8), (0, 0, 8, 1), "f16"),
        instr("vsigmoid", "f16", dst=8192, src=8192, n0=1, n1=1, n2=1024, dst_s2=1, src_s2=1),
        instr("barrier"),
        instr("vreduce", dst=0, src=0, outer=4, inner=100))
    stats = core.execute(prog, [np.zeros(128, np.uint8)])
    # fill 1 + ceil(400/128) = 5; load: 8 rows of 8 f16 8 apart span 114 B, 2 bursts each,
    # 100 + 16 * 64 B / 64 = 116 (ends at 121); vsigmoid 8 + ceil(2048/128) * 4 = 72;
    # barrier at 121; vreduce 8 + ceil(1600/128) = 21
    assert stats.total_cycles == 142
    assert stats.busy_cycles == {"dma_in": 121, "dma_out": 0, "mac": 0, "vector": 93}
    assert stats.stall_cycles == {"dma_in": 0, "dma_out": 121, "mac": 121, "vector": 49}


def test_hand_computed_dma_bursts(core):
    """A row of the innermost dimension moves the 64-byte bursts its bytes span, at most
    one per element: 4 contiguous rows of 16 f32, the same with every other element,
    16 elements one burst apart and 16 elements four bursts apart."""
    prog = program(
        dma("dma.load", 0, 0, 0, (1, 1, 4, 16), (0, 0, 16, 1), (0, 0, 16, 1)),
        dma("dma.load", 0, 0, 0, (1, 1, 4, 16), (0, 0, 32, 2), (0, 0, 16, 1)),
        dma("dma.store", 0, 0, 0, (1, 1, 1, 16), (0, 0, 0, 16), (0, 0, 0, 1)),
        dma("dma.store", 0, 0, 0, (1, 1, 1, 16), (0, 0, 0, 64), (0, 0, 0, 1)))
    stats = core.execute(prog, [np.zeros(4096, np.uint8)])
    # 100 + 4 bursts; 100 + 4 rows * 2 bursts (124 B spanned); 100 + 16 bursts twice
    assert stats.busy_cycles == {"dma_in": 104 + 108, "dma_out": 116 + 116, "mac": 0,
                                 "vector": 0}
    assert stats.dram_read_bytes == 2 * 4 * 16 * 4


def test_hand_computed_dwconv2d(core):
    """Columns take pixels of one channel, rows packed: a row of 240 pixels, 12 channels,
    5x5 f32 (a tile of PP-OCR's depthwise layer), and 3 channels of 4x4 pixels 3x3 f16."""
    prog = program(instr("dwconv2d", **{"in": 0}, w=1024 * KIB, out=1040 * KIB, c=12, hi=5,
                         wi=244, ho=1, wo=240, kh_kw=(5, 5), sh_sw=(1, 1), dh_dw=(1, 1)),
                   instr("dwconv2d", "f16", **{"in": 0}, w=1024 * KIB, out=1040 * KIB, c=3,
                         hi=9, wi=9, ho=4, wo=4, kh_kw=(3, 3), sh_sw=(2, 2), dh_dw=(1, 1)))
    stats = core.execute(prog, [])
    # f32: 32 + 12 channels * ceil(240/32) pixel groups * ceil(25/8) tap steps = 416;
    # f16: 32 + 3 * ceil(16/32) * ceil(9/32) = 35
    assert stats.busy_cycles["mac"] == 416 + 35
    assert stats.macs == 12 * 240 * 25 + 3 * 16 * 9


def test_hand_computed_conv2d_pixel_columns(core):
    """One output channel of 24 input channels, 2x2 f32, over 6 rows of 320 pixels (a
    tile of PP-OCRv4 det's last transposed-convolution phase): with the output channels
    on the columns 31 of 32 idle, with the pixels there (pixel_columns) all busy."""
    fields = dict(w=1024 * KIB, out=1040 * KIB, c=24, hi=7, wi=321, f=1, ho=6, wo=320,
                  kh_kw=(2, 2), sh_sw=(1, 1), dh_dw=(1, 1), groups=1)
    prog = program(instr("conv2d", **{"in": 0}, **fields),
                   instr("conv2d", "f32", isa.Flag.PIXEL_COLUMNS, **{"in": 0}, **fields))
    stats = core.execute(prog, [])
    # 32 + 1920 pixels * ceil(1/32) * ceil(96/8); 32 + 1 channel * ceil(1920/32) * 12
    assert stats.busy_cycles["mac"] == (32 + 1920 * 12) + (32 + 60 * 12)
    assert stats.macs == 2 * 1920 * 96


def test_utilization_and_roofline(core):
    prog = program(instr("matmul", "i8", a=0, b=65536, out=131072, m=128, n=128, k=256,
                         lda=256, ldb=128, ldo=128))
    stats = core.execute(prog, [])
    machine = MachineConfig()
    assert stats.total_cycles == 32 + 128 * 4 * 4
    assert stats.transfer_bound_cycles(machine, "i8") == 128 * 128 * 256 / 2048
    assert stats.utilization(machine, "i8") == pytest.approx(128 * 128 * 256 / 2048 / 2080)
