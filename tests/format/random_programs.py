"""Random valid npu-fb executables: every opcode, dtype, flag and odd float/string value."""
import random

from executable_format.builder import READ_ONLY, ExecutableBuilder, ProgramBuilder
from executable_format.isa import (BYTE_INTS, CONST_POOL, HALF_FLOATS, OPCODE_FLAGS,
                                   OPCODES_BY_NAME, DType, Flag, pack_pair)
from executable_format.machine import MachineConfig

BINDINGS = [(READ_ONLY, 1 << 20), (0, 1 << 20), (0, 1 << 16)]
CONSTANTS_BYTES = 4096
SIGNAL_ENGINES = (0, 1, 2, 3)
NAMES = ["main_dispatch_0", "conv 3x3 #1", 'quote " and \\ backslash', "ünïcødé", "a" * 80]
STRINGS = ["", "loc(\"model.onnx\":12:3)", "line one\nline two\t# not a comment", "∑ ≠ ∞"]
FLOAT_BITS = (0, 0x80000000, 0x3F800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7FA00001,
              0x00000001, 0x007FFFFF, 0x3DCCCCCD)


class _Generator:
    def __init__(self, rng: random.Random, semaphores: int):
        self.rng = rng
        self.semaphores = semaphores
        self.signal_engine: dict[int, int] = {}
        self.signals: dict[int, int] = {}

    def address(self) -> int:
        return self.rng.randrange(0, 1 << 14) * 4

    def disjoint_addresses(self, count: int) -> list[int]:
        """Addresses in distinct 8 KiB slots: MAC operands may not overlap their output."""
        return [slot * 8192 + self.rng.randrange(0, 256) * 4
                for slot in self.rng.sample(range(8), count)]

    def counts(self, rank: int) -> list[int]:
        return [self.rng.randint(1, 4) for _ in range(rank)]

    def strides(self, rank: int) -> list[int]:
        return [self.rng.randint(0, 8) for _ in range(rank)]

    def f32(self) -> int:
        return self.rng.choice(FLOAT_BITS) if self.rng.random() < 0.5 else self.rng.getrandbits(32)

    def dtype(self, opcode: str) -> int:
        return int(self.rng.choice(OPCODES_BY_NAME[opcode].dtypes))

    def flags(self, opcode: str, exclusive=()) -> int:
        bits = 0
        for bit in OPCODE_FLAGS.get(opcode, {}).values():
            if self.rng.random() < 0.5:
                bits |= bit
        for first, second in exclusive:
            if bits & first and bits & second:
                bits &= ~second
        return bits

    def mac_flags(self, opcode: str, dtype: int) -> int:
        """Random valid flags of a MAC instruction: mixed_sign only with byte operands,
        narrow_sum only with f16 or bf16 ones, half_b only with f32 ones."""
        flags = self.flags(opcode, [(Flag.ACCUMULATE, Flag.BIAS)])
        if dtype not in BYTE_INTS:
            flags &= ~Flag.MIXED_SIGN
        if dtype not in HALF_FLOATS:
            flags &= ~Flag.NARROW_SUM
        if dtype != DType.F32:
            flags &= ~Flag.HALF_B
        return flags

    def emit(self, p: ProgramBuilder) -> None:
        kind = self.rng.choice(["dma", "fill", "matmul", "conv2d", "dwconv2d", "binary",
                                "unary", "vcvt", "vrequant", "vpool", "vreduce", "sync",
                                "sync", "barrier"])
        getattr(self, kind)(p)

    def dma(self, p):
        load = self.rng.random() < 0.6
        opcode = "dma.load" if load else "dma.store"
        binding = self.rng.choice([0, 1, 2, CONST_POOL] if load else [1, 2])
        dtype = self.dtype(opcode)
        align = 2 if dtype == DType.I64 else 1     # 8-byte elements: 8-byte aligned
        a = [binding, self.rng.randrange(0, 256) // align * align * 4,
             self.address() // (4 * align) * (4 * align),
             *self.counts(4), *self.strides(4), *self.strides(4)]
        p.emit_raw(OPCODES_BY_NAME[opcode].code, dtype, 0, a)

    def fill(self, p):
        dtype = self.dtype("fill")
        width = {0: 32, 1: 16, 2: 16, 3: 8, 4: 32, 5: 8}[dtype]
        a = [self.address(), *self.counts(4), *self.strides(4), self.rng.getrandbits(width)]
        p.emit_raw(OPCODES_BY_NAME["fill"].code, dtype, 0, a)

    def _mac_addresses(self, flags: int) -> list[int]:
        """Input, weight/B, output and bias (0 without BIAS) addresses, all disjoint."""
        first, second, out, bias = self.disjoint_addresses(4)
        return [first, second, out, bias if flags & Flag.BIAS else 0]

    def matmul(self, p):
        dtype = self.dtype("matmul")
        flags = self.mac_flags("matmul", dtype)
        m, n, k = self.counts(3)
        a_row = m if flags & Flag.TRANSPOSE_A else k
        b_row = k if flags & Flag.TRANSPOSE_B else n
        first, second, out, bias = self._mac_addresses(flags)
        a = [first, second, out, m, n, k,
             a_row + self.rng.randint(0, 3), b_row + self.rng.randint(0, 3),
             n + self.rng.randint(0, 3), bias]
        p.emit_raw(OPCODES_BY_NAME["matmul"].code, dtype, flags, a)

    def _window(self):
        kh, kw, sh, sw, dh, dw, ho, wo = (self.rng.randint(1, 3) for _ in range(8))
        hi = (ho - 1) * sh + (kh - 1) * dh + 1 + self.rng.randint(0, 2)
        wi = (wo - 1) * sw + (kw - 1) * dw + 1 + self.rng.randint(0, 2)
        return hi, wi, ho, wo, pack_pair(kh, kw), pack_pair(sh, sw), pack_pair(dh, dw)

    def conv2d(self, p):
        dtype = self.dtype("conv2d")
        flags = self.mac_flags("conv2d", dtype)
        groups = self.rng.randint(1, 3)
        hi, wi, ho, wo, k, s, d = self._window()
        c, f = groups * self.rng.randint(1, 3), groups * self.rng.randint(1, 3)
        first, second, out, bias = self._mac_addresses(flags)
        a = [first, second, out, c, hi, wi, f, ho, wo, k, s, d, groups, bias]
        p.emit_raw(OPCODES_BY_NAME["conv2d"].code, dtype, flags, a)

    def dwconv2d(self, p):
        dtype = self.dtype("dwconv2d")
        flags = self.mac_flags("dwconv2d", dtype)
        hi, wi, ho, wo, k, s, d = self._window()
        first, second, out, bias = self._mac_addresses(flags)
        a = [first, second, out, self.rng.randint(1, 4), hi, wi, ho, wo, k, s, d, bias]
        p.emit_raw(OPCODES_BY_NAME["dwconv2d"].code, dtype, flags, a)

    def binary(self, p):
        opcode = self.rng.choice(["vadd", "vsub", "vmul", "vmax", "vmin", "vdiv"])
        a = [self.address(), self.address(), self.address(), *self.counts(3),
             *self.strides(3), *self.strides(3), *self.strides(3)]
        p.emit_raw(OPCODES_BY_NAME[opcode].code, self.dtype(opcode), 0, a)

    def unary(self, p):
        opcode = self.rng.choice(["vcopy", "vrelu", "vclamp", "vleakyrelu", "vsigmoid",
                                  "vtanh", "vexp", "vscale", "vsqrt", "vrsqrt", "vhswish",
                                  "verf", "vlog", "vlog1p", "vsin", "vcos"])
        params = {"vclamp": 2, "vscale": 2, "vleakyrelu": 1, "vhswish": 2}.get(opcode, 0)
        a = [self.address(), self.address(), *self.counts(3), *self.strides(3),
             *self.strides(3), *(self.f32() for _ in range(params))]
        p.emit_raw(OPCODES_BY_NAME[opcode].code, self.dtype(opcode), 0, a)

    def vcvt(self, p):
        """An i64 source converts to f32 only, unscaled."""
        source = self.rng.choice(list(DType))
        i64 = source == DType.I64
        a = [self.address(), self.address() // 8 * 8 if i64 else self.address(),
             *self.counts(3), *self.strides(3), *self.strides(3), 0 if i64 else self.f32(),
             source]
        p.emit_raw(OPCODES_BY_NAME["vcvt"].code, DType.F32 if i64 else self.dtype("vcvt"), 0, a)

    def vrequant(self, p):
        """Its records zero-filled first (valid data: lo = hi = 0, a one-entry table at 0)."""
        counts, par_strides = self.counts(3), self.strides(3)
        params = self.address()
        records = 1 + sum((n - 1) * s for n, s in zip(counts, par_strides))
        p.emit_raw(OPCODES_BY_NAME["fill"].code, int(DType.I32), 0,
                   [params, 1, 1, 1, records * 8, 0, 0, 0, 1, 0])
        flags = self.rng.choice([0, *OPCODE_FLAGS["vrequant"].values()])
        a = [self.address(), self.address(), *counts, *self.strides(3), *self.strides(3),
             params, *par_strides]
        p.emit_raw(OPCODES_BY_NAME["vrequant"].code, self.dtype("vrequant"), int(flags), a)

    def vpool(self, p):
        flags = self.flags("vpool")
        if flags & Flag.COUNT_INCLUDE_PAD:
            flags |= Flag.POOL_AVG
        hi, wi, ho, wo, k, s, d = self._window()
        pt, pl = self.rng.randint(0, hi - 1), self.rng.randint(0, wi - 1)
        valid = pack_pair(self.rng.randint(0, hi - pt), self.rng.randint(0, wi - pl))
        a = [self.address(), self.address(), self.rng.randint(1, 4), hi, wi, ho, wo, k, s, d,
             pack_pair(pt, pl), valid]
        p.emit_raw(OPCODES_BY_NAME["vpool"].code, self.dtype("vpool"), flags, a)

    def vreduce(self, p):
        flags = self.flags("vreduce", [(Flag.REDUCE_MAX, Flag.REDUCE_MEAN)])
        a = [self.address(), self.address(), *self.counts(2)]
        p.emit_raw(OPCODES_BY_NAME["vreduce"].code, self.dtype("vreduce"), flags, a)

    def sync(self, p):
        sem = self.rng.randrange(self.semaphores)
        if self.signals.get(sem) and self.rng.random() < 0.5:
            value = self.rng.randint(0, self.signals[sem])
            p.emit_raw(OPCODES_BY_NAME["wait"].code, 0, 0,
                       [self.rng.choice(SIGNAL_ENGINES), sem, value])
            return
        engine = self.signal_engine.setdefault(sem, self.rng.choice(SIGNAL_ENGINES))
        self.signals[sem] = self.signals.get(sem, 0) + 1
        p.emit_raw(OPCODES_BY_NAME["signal"].code, self.rng.choice([0, 0, 3]), 0, [engine, sem])

    def barrier(self, p):
        p.emit_raw(OPCODES_BY_NAME["barrier"].code, 0, 0, [])


def emit_random(p: ProgramBuilder, rng: random.Random, semaphores: int, count: int) -> None:
    """Appends `count` random instructions the verifier accepts in an export with BINDINGS
    and a constant pool of CONSTANTS_BYTES."""
    generator = _Generator(rng, semaphores)
    for _ in range(count):
        generator.emit(p)


def random_executable(rng: random.Random) -> bytes:
    machine = MachineConfig.from_overrides(rng.choice(
        [{}, {"semaphores": 32}, {"sram_bytes": 4 << 20, "mac_cols": 64}]))
    b = ExecutableBuilder(machine=machine)
    b.add_constants(rng.randbytes(CONSTANTS_BYTES))
    for _ in range(rng.randint(0, 2)):
        b.add_constants(rng.randbytes(rng.randint(1, 100)))
    names = rng.sample(NAMES, rng.randint(1, 3))
    for name in names:
        p = ProgramBuilder(sram_bytes=rng.choice([None, machine.sram_bytes]))
        emit_random(p, rng, machine.semaphores, rng.randint(0, 40))
        p.end()
        debug = {key: rng.choice(STRINGS) for key in ("dispatch_name", "source_location",
                                                      "npu_ir") if rng.random() < 0.5}
        b.add_export(name, BINDINGS,
                     constant_count=rng.randint(0, 4), program=p,
                     workgroup_count=tuple(rng.randint(1, 3) for _ in range(3)), debug=debug)
    return b.finish()
