"""Deferred dma.loads (native/npu_deferred.h): the core may postpone the copy of a load
of contiguous rows and let a MAC instruction read the DRAM source in place, but every
program must see SRAM and DRAM exactly as if each instruction had run in order. Random
programs of loads (contiguous and strided, from a read-only and a read-write binding;
a product's matrix as rows of a wider one), stores over a load's source, overlapping
and covering loads and matrix-vector products are checked against a numpy model of
that order; and a vrequant's table, which no operand box names, is read after its
load lands."""
import numpy as np
import pytest

from executable_format import isa
from tests.native.programs import dma, instr, program

F = isa.Flag
SRAM_WORDS = 1024              # the f32 words of SRAM the programs use
DRAM_WORDS = 1536
# SRAM zones of the matrix-vector product: its vector, its matrix (n rows of k) and its
# output are disjoint, as the core requires, with a row's room between the first two;
# loads and stores land anywhere
A_AT, B_AT, OUT_AT = 0, 112, 960
K, N = 48, 16                  # A_AT + K <= B_AT - K, B_AT + N * K <= OUT_AT


def _dense(count: int):
    return (1, 1, 1, count), (0, 0, 0, 1), (0, 0, 0, 1)


class _Model:
    """SRAM and the two DRAM bindings as the program's order leaves them."""

    def __init__(self, rng):
        self.dram = [rng.integers(-4, 5, DRAM_WORDS).astype(np.float32),
                     rng.integers(-4, 5, DRAM_WORDS).astype(np.float32)]
        self.initial = [d.copy() for d in self.dram]
        self.sram = np.zeros(SRAM_WORDS, np.float32)

    def random_op(self, rng) -> np.ndarray:
        kind = rng.choice(["load", "load", "strided", "weights", "store", "matvec"])
        if kind == "matvec":
            a, b = self.sram[A_AT:A_AT + K], self.sram[B_AT:B_AT + N * K].reshape(N, K)
            self.sram[OUT_AT:OUT_AT + N] = b @ a            # small integers: exact
            return instr("matmul", "f32", F.TRANSPOSE_B, a=A_AT * 4, b=B_AT * 4,
                         out=OUT_AT * 4, m=1, n=N, k=K, lda=K, ldb=K, ldo=N)
        if kind == "weights":    # the product's matrix from rows of a wider one, from row 0
            binding = int(rng.integers(0, 2))      # or 1 of the load (a row before it)
            first = B_AT - K * int(rng.integers(0, 2))
            rows = (B_AT - first) // K + N
            src = int(rng.integers(0, DRAM_WORDS - rows * (K + 8)))
            for r in range(rows):
                self.sram[first + r * K:first + (r + 1) * K] = \
                    self.dram[binding][src + r * (K + 8):src + r * (K + 8) + K]
            return dma("dma.load", binding, src * 4, first * 4, (1, 1, rows, K),
                       (0, 0, K + 8, 1), (0, 0, K, 1))
        if kind == "strided":            # rows of `run` words, SRAM rows `gap` apart
            rows, run, gap = (int(v) for v in rng.integers(2, 6, 3))
            binding = int(rng.integers(0, 2))
            src = int(rng.integers(0, DRAM_WORDS - rows * 40))
            at = int(rng.integers(0, SRAM_WORDS - rows * (run + gap)))
            for r in range(rows):
                dst = at + r * (run + gap)
                self.sram[dst:dst + run] = self.dram[binding][src + r * 40:src + r * 40 + run]
            return dma("dma.load", binding, src * 4, at * 4, (1, 1, rows, run),
                       (0, 0, 40, 1), (0, 0, run + gap, 1))
        count = int(rng.integers(1, 400))
        at = int(rng.integers(0, SRAM_WORDS - count))
        where = int(rng.integers(0, DRAM_WORDS - count))
        if kind == "store":
            self.dram[1][where:where + count] = self.sram[at:at + count]
            return dma("dma.store", 1, where * 4, at * 4, *_dense(count))
        binding = int(rng.integers(0, 2))
        self.sram[at:at + count] = self.dram[binding][where:where + count]
        return dma("dma.load", binding, where * 4, at * 4, *_dense(count))


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_see_the_order_of_their_instructions(core, seed):
    rng = np.random.default_rng(seed)
    model = _Model(rng)
    zero_sram = instr("fill", "f32", sram_addr=0, n0=1, n1=1, n2=1, n3=SRAM_WORDS, s3=1)
    records = [zero_sram] + [model.random_op(rng) for _ in range(int(rng.integers(1, 25)))]
    records.append(dma("dma.store", 2, 0, 0, *_dense(SRAM_WORDS)))    # SRAM as it ends
    d0, d1 = model.initial[0].copy(), model.initial[1].copy()
    sram_out = np.zeros(SRAM_WORDS, np.float32)
    core.execute(program(*records), [d0.view(np.uint8), d1.view(np.uint8),
                                     sram_out.view(np.uint8)])
    np.testing.assert_array_equal(d0, model.initial[0])
    np.testing.assert_array_equal(d1, model.dram[1])
    np.testing.assert_array_equal(sram_out, model.sram)


def test_more_disjoint_loads_than_the_core_defers_at_once(core, rng):
    dram = rng.integers(-4, 5, 24 * 32).astype(np.float32)
    out = np.zeros(24 * 32, np.float32)
    loads = [dma("dma.load", 0, i * 32 * 4, i * 32 * 4, *_dense(32)) for i in range(24)]
    core.execute(program(*loads, dma("dma.store", 1, 0, 0, *_dense(24 * 32))),
                 [dram.view(np.uint8), out.view(np.uint8)])
    np.testing.assert_array_equal(out, dram)


def test_a_store_over_the_source_after_a_load_leaves_the_loaded_values(core, rng):
    """The matrix-vector product reads B as loaded, though its DRAM source changed since."""
    b = rng.integers(-4, 5, N * K).astype(np.float32)
    a = rng.integers(-4, 5, K).astype(np.float32)
    zeros = np.zeros(N * K, np.float32)
    dram = np.concatenate([b, a, zeros])
    out = np.zeros(N, np.float32)
    prog = program(
        dma("dma.load", 0, 0, B_AT * 4, *_dense(N * K)),
        dma("dma.load", 0, N * K * 4, A_AT * 4, *_dense(K)),
        dma("dma.load", 0, (N * K + K) * 4, OUT_AT * 4, *_dense(N)),
        dma("dma.store", 0, 0, OUT_AT * 4, *_dense(N)),       # zeros over B's first row
        instr("matmul", "f32", F.TRANSPOSE_B, a=A_AT * 4, b=B_AT * 4, out=OUT_AT * 4, m=1,
              n=N, k=K, lda=K, ldb=K, ldo=N),
        dma("dma.store", 1, 0, OUT_AT * 4, *_dense(N)))
    core.execute(prog, [dram.view(np.uint8), out.view(np.uint8)])
    np.testing.assert_array_equal(out, b.reshape(N, K) @ a)
    assert not dram[:N].any()


def test_a_requant_table_loaded_on_its_own_is_read_after_it_lands(core, rng):
    """vrequant reads its table at an address in its records, not in an operand box."""
    src = rng.integers(-128, 128, 64).astype(np.int8)
    table = rng.integers(-128, 128, 256).astype(np.int8)
    words = np.zeros(len(isa.REQUANT_RECORD), np.uint32)
    for col, value in enumerate((1.0, 1.0, 0.0, 1.0, -128.0, 127.0), 1):
        words[col] = isa.f32_bits(value)
    src_at, params_at, dst_at, table_at = 0, 64, 128, 256
    words[7] = table_at
    out = np.zeros(64, np.int8)
    prog = program(
        dma("dma.load", 0, 0, src_at, *_dense(64), dtype="i8"),
        dma("dma.load", 1, 0, params_at, *_dense(len(words)), dtype="i32"),
        dma("dma.load", 2, 0, table_at, *_dense(256), dtype="i8"),
        instr("vrequant", "i8", F.SRC_I8, dst=dst_at, src=src_at, n0=1, n1=1, n2=64,
              dst_s2=1, src_s2=1, params=params_at),
        dma("dma.store", 3, 0, dst_at, *_dense(64), dtype="i8"))
    core.execute(prog, [src.view(np.uint8), words.view(np.uint8), table.view(np.uint8),
                        out.view(np.uint8)])
    np.testing.assert_array_equal(out, table[src.astype(int) + 128])
