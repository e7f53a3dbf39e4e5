"""Matmul / batch matmul: randomized M, N, K, transposed operands by strides, batch
broadcast, bias and epilogues, on the native NPU core against numpy."""
import numpy as np
import pytest

from compiler_target.codegen import tile_contraction
from compiler_target.codegen.lower import lower
from compiler_target.codegen.ops import Matmul, TensorRef
from compiler_target.codegen.tiler import cheapest
from executable_format.machine import MachineConfig

from . import reference
from .helpers import MACHINE, Bindings, compile_and_run

SMALL_SRAM = MachineConfig(sram_bytes=32 * 1024)


def build_matmul(rng, batch, m, n, k, transpose_a=False, transpose_b=False,
                 broadcast_b=False, epilogue="none"):
    b = Bindings()
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    w = rng.standard_normal((1 if broadcast_b else batch, k, n)).astype(np.float32)
    ar = b.add(a, (0, 2, 1) if transpose_a else None, offset_elems=3)
    br = b.add_broadcast(w, (batch, k, n), (0, 2, 1) if transpose_b else None)
    acc = np.einsum("bmk,bkn->bmn", a.astype(np.float64), np.broadcast_to(w, (batch, k, n)))
    expr, refs, values = [("acc",)], [], []
    if epilogue != "none":
        bias_shape = (1, 1, 1) if epilogue == "scalar_bias" else (1, 1, n)
        bias = rng.standard_normal(bias_shape).astype(np.float32)
        refs.append(b.add_broadcast(bias, acc.shape))
        values.append(np.broadcast_to(bias, acc.shape))
        expr = [("acc",), ("input", 0), ("add", (0, 1))]
        if epilogue == "bias_gelu_ish":
            expr += [("sigmoid", (2,)), ("mul", (2, 3))]
    out = b.output(acc.shape)
    op = Matmul(ar, br, out, epilogue=expr, epilogue_inputs=refs)
    return op, b, reference.expression(expr, values, acc)


@pytest.mark.parametrize("seed", range(8))
def test_random_matmul(seed):
    rng = np.random.default_rng(2000 + seed)
    batch = int(rng.integers(1, 4))
    m, n, k = (int(v) for v in rng.integers(1, 150, 3))
    op, b, expected = build_matmul(rng, batch, m, n, k, transpose_a=bool(seed & 1),
                                   transpose_b=bool(seed & 2), broadcast_b=bool(seed & 4),
                                   epilogue=("none", "bias", "bias_gelu_ish")[seed % 3])
    machine = SMALL_SRAM if seed % 2 else MACHINE
    compiled, stats = compile_and_run(op, b, machine=machine)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert compiled.estimated_cycles == stats.total_cycles


def test_scalar_bias_is_added_to_every_column(rng):
    """A bias broadcast along N (ONNX Gemm with a scalar C) cannot use the per-column
    MAC bias; every output column must still get it."""
    op, b, expected = build_matmul(rng, 1, 5, 40, 7, epilogue="scalar_bias")
    compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-5, atol=1e-5)


def test_small_bias_is_loaded_once(rng):
    """An MLP layer (8 x 256 -> 512) with a per-column bias over several N tiles: the
    bias (2 KB) is loaded whole before the first tile, one DMA for the dispatch instead
    of one per tile, each paying a DMA latency for a few hundred bytes."""
    op, b, expected = build_matmul(rng, 1, 8, 512, 256, epilogue="bias")
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    loads = [line for line in compiled.asm.splitlines() if "dma.load" in line]
    assert sum("binding=2," in line for line in loads) == 1          # the bias
    assert sum(line.lstrip().startswith("matmul") for line in compiled.asm.splitlines()) > 2
    assert compiled.estimated_cycles == stats.total_cycles


def test_matmul_512_reaches_roofline(rng):
    op, b, expected = build_matmul(rng, 1, 512, 512, 512, epilogue="bias")
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.85
    assert "of roofline (MACs)" in compiled.detail


def test_few_columns_swap_m_and_n(rng):
    """24 output columns fill 0.75 of the MAC array's 32; computed as out^T = b^T a^T,
    the 4096 rows become the columns and the dispatch passes that bound."""
    op, b, expected = build_matmul(rng, 1, 4096, 24, 64, epilogue="bias")
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert "M and N swapped" in compiled.detail
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.8


@pytest.mark.parametrize("batch, m, n, k", [(1, 240, 960, 240), (2, 500, 64, 300)])
def test_last_tile_is_cut_to_drain_the_pipeline_early(batch, m, n, k, monkeypatch):
    """The last tile is cut into shrinking pieces (tile_contraction.ramp_pieces), so the
    epilogue and store after the MAC's last instruction are short: the same results in
    fewer cycles than the program with the last tile whole (a second batch's last tile
    only)."""
    op, b, expected = build_matmul(np.random.default_rng(1), batch, m, n, k,
                                   epilogue="bias_gelu_ish")
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert " block in " in compiled.detail
    assert compiled.estimated_cycles == stats.total_cycles
    monkeypatch.setattr(tile_contraction, "RAMP_DEPTHS", range(1))
    op, b, _ = build_matmul(np.random.default_rng(1), batch, m, n, k, epilogue="bias_gelu_ish")
    whole, whole_stats = compile_and_run(op, b)
    assert " block in " not in whole.detail
    assert stats.total_cycles < whole_stats.total_cycles


@pytest.mark.parametrize("batch, m, n, k, epilogue", [(1, 512, 512, 512, "bias"),
                                                       (1, 4096, 24, 64, "bias_gelu_ish"),
                                                       (3, 100, 140, 70, "none")])
def test_bounds_spare_estimates_and_keep_the_choice(batch, m, n, k, epilogue):
    """Each candidate's bound is at most its estimate, and `cheapest`, which estimates in
    the order of the bounds and stops past 1% of the best, picks what it picks when it
    estimates every candidate (all bounds 0), estimating fewer than half of them."""
    op, b, _ = build_matmul(np.random.default_rng(0), batch, m, n, k, epilogue=epilogue)
    tiler = tile_contraction.ContractionTiler(lower(op, len(b.infos())), MACHINE)
    candidates = tiler.candidates()
    estimates = [tiler.estimate(c.tiling) for c in candidates]
    assert all(0 < c.bound <= e for c, e in zip(candidates, estimates))
    counted = Counting(tiler)
    chosen = cheapest(counted, candidates)
    assert chosen == cheapest(tiler, [c._replace(bound=0) for c in candidates])
    assert counted.calls < len(candidates) / 2


class Counting:
    """A tiler's estimates, counted."""

    def __init__(self, tiler):
        self.tiler, self.calls = tiler, 0

    def estimate(self, tiling) -> int:
        self.calls += 1
        return self.tiler.estimate(tiling)


def build_contraction(rng, batch, m, n, k, orders, epilogue=False, out_padding=0):
    """A Matmul whose roles span several dims (`batch`, `m`, `n`, `k`: tuples of extents),
    each tensor stored in the memory order `orders[name]` (a permutation of its dims),
    the output inside a bigger zero buffer when `out_padding` (a padded-store result)."""
    a = rng.standard_normal(batch + m + k).astype(np.float32)
    w = rng.standard_normal(batch + k + n).astype(np.float32)
    b = Bindings()
    ar, br = b.add(a, orders["a"]), b.add(w, orders["b"])
    flat = lambda dims: int(np.prod(dims))  # noqa: E731
    acc = np.matmul(a.reshape(flat(batch), flat(m), flat(k)).astype(np.float64),
                    w.reshape(flat(batch), flat(k), flat(n))).reshape(batch + m + n)
    expr, refs, values = [("acc",)], [], []
    if epilogue:
        # A per-column bias over the N dims (the MAC's BIAS) and a per-row scale over M.
        bias = rng.standard_normal((1,) * len(batch + m) + n).astype(np.float32)
        scale = rng.standard_normal((1,) * len(batch) + m + (1,) * len(n)).astype(np.float32)
        refs = [b.add_broadcast(bias, acc.shape), b.add_broadcast(scale, acc.shape)]
        values = [np.broadcast_to(bias, acc.shape), np.broadcast_to(scale, acc.shape)]
        expr = [("acc",), ("input", 0), ("add", (0, 1)), ("input", 1), ("mul", (2, 3)),
                ("relu", (4,))]
    padded = b.output(tuple(d + 2 * out_padding for d in acc.shape), order=orders["out"])
    inner = tuple(slice(out_padding, out_padding + d) for d in acc.shape)
    offset = sum(out_padding * s for s in padded.strides) * 4
    out = TensorRef("f32", acc.shape, padded.strides, padded.binding, padded.offset + offset)
    dims = (len(batch), len(m), len(n), len(k))
    op = Matmul(ar, br, out, epilogue=expr, epilogue_inputs=refs, dims=dims)
    expected = np.zeros(padded.shape)
    expected[inner] = reference.expression(expr, values, acc)
    return op, b, padded, expected


CONTRACTIONS = {
    # A 1x1 convolution in NCHW: M = rows x cols, the output stored into a padded buffer.
    "conv1x1_nchw": ((), (6, 20), (16,), (8,), {"a": (2, 0, 1), "b": (1, 0), "out": (2, 0, 1)}, 1),
    "batch2_m2_n2_k2": ((2, 3), (5, 7), (4, 9), (3, 6),
                        {"a": (0, 5, 2, 1, 4, 3), "b": (1, 0, 2, 3, 4, 5),
                         "out": (4, 0, 1, 5, 2, 3)}, 0),
    "k_split": ((), (40,), (70,), (30, 20), {"a": (1, 2, 0), "b": (0, 1, 2), "out": (0, 1)}, 0),
}


@pytest.mark.parametrize("case", CONTRACTIONS)
@pytest.mark.parametrize("epilogue", [False, True])
def test_contraction_with_multi_dim_roles(rng, case, epilogue):
    batch, m, n, k, orders, padding = CONTRACTIONS[case]
    op, b, padded, expected = build_contraction(rng, batch, m, n, k, orders, epilogue, padding)
    machine = SMALL_SRAM if case == "k_split" else MACHINE
    compiled, stats = compile_and_run(op, b, machine=machine)
    np.testing.assert_allclose(b.read(padded), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


# bias, then BatchNormalization (x - mean) * s1 * s2 + shift as ONNX imports it, a
# constant step and a reversed subtraction, then hardswish's x * clamp(x / 6 + 0.5)
BATCHNORM_HARDSWISH = [("acc",), ("input", 0), ("add", (0, 1)), ("input", 1), ("sub", (2, 3)),
                       ("input", 2), ("mul", (4, 5)), ("input", 3), ("mul", (6, 7)),
                       ("input", 4), ("add", (8, 9)), ("const", 2.0), ("div", (10, 11)),
                       ("const", 0.25), ("sub", (13, 12)), ("scale", (14,), 1 / 6, 0.5),
                       ("clamp", (15,), 0.0, 1.0), ("mul", (14, 16))]


@pytest.mark.parametrize("transpose_b", [False, True])
def test_batchnorm_folds_into_each_b_tile(rng, transpose_b):
    """A pointwise convolution as IREE forms it (a matmul over pixels x channels) with a
    per-channel affine epilogue: A scales each B tile as it is loaded (K and N split by
    a small SRAM), B is the MAC's bias; only the hardswish is left per tile."""
    b = Bindings()
    m, n, k = 300, 70, 90
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    w = rng.standard_normal((1, k, n)).astype(np.float32)
    ar, br = b.add(a), b.add(w, (0, 2, 1) if transpose_b else None)
    acc = np.einsum("bmk,bkn->bmn", a.astype(np.float64), w.astype(np.float64))
    values = [rng.uniform(0.5, 1.5, (1, 1, n)).astype(np.float32) for _ in range(5)]
    refs = [b.add_broadcast(v, acc.shape) for v in values]
    out = b.output(acc.shape)
    op = Matmul(ar, br, out, epilogue=BATCHNORM_HARDSWISH, epilogue_inputs=refs)
    expected = reference.expression(BATCHNORM_HARDSWISH,
                                    [np.broadcast_to(v, acc.shape) for v in values], acc)
    compiled, stats = compile_and_run(op, b, machine=SMALL_SRAM)
    setup, tiles = compiled.asm.split("matmul.f32", 1)
    assert "vdiv" in setup and "vsub" in setup
    assert "vdiv" not in tiles and "vsub" not in tiles
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_batchnorm_folds_into_each_a_tile_when_m_and_n_swap(rng):
    """A pointwise convolution in NCHW (PP-OCRv4 det's 32 -> 48 channels over 40x40):
    out^T = b^T a^T fills the MAC columns with pixels, so the channel is M. The affine
    chain is then folded per row: A scales each A (weights) tile as it is loaded, and
    each accumulator tile starts at B (a vcopy) instead of the MAC's per-column bias; the
    three vector passes of the chain per tile become that one. Folded per column only, the
    tiler kept M and N: 15,201 cycles, 0.63 of the roofline; now 12,089, 0.79."""
    b = Bindings()
    m, n, k = 1600, 48, 32
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    w = rng.standard_normal((1, k, n)).astype(np.float32)
    ar, br = b.add(a, (0, 2, 1)), b.add(w, (0, 2, 1))
    acc = np.einsum("bmk,bkn->bmn", a.astype(np.float64), w.astype(np.float64))
    values = [rng.uniform(0.5, 1.5, (1, 1, n)).astype(np.float32) for _ in range(5)]
    refs = [b.add_broadcast(v, acc.shape) for v in values]
    out = b.output(acc.shape, order=(0, 2, 1))
    op = Matmul(ar, br, out, epilogue=BATCHNORM_HARDSWISH, epilogue_inputs=refs)
    expected = reference.expression(BATCHNORM_HARDSWISH,
                                    [np.broadcast_to(v, acc.shape) for v in values], acc)
    compiled, stats = compile_and_run(op, b)
    assert "M and N swapped" in compiled.detail
    setup, tiles = compiled.asm.split("matmul.f32", 1)
    assert "vdiv" in setup and "vsub" in setup
    assert "vdiv" not in tiles and "vsub" not in tiles and "vadd" not in tiles
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.75


def test_batchnorm_operands_near_each_other_are_one_load(rng):
    """BatchNormalization's per-channel operands as the constant pool holds them: a few
    hundred bytes each, with gaps, in one binding. Five loads would each pay the DMA
    latency; the bytes they span (2 KB) are one load."""
    b = Bindings()
    m, n, k = 300, 70, 90
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    w = rng.standard_normal((1, k, n)).astype(np.float32)
    ar, br = b.add(a), b.add(w)
    acc = np.einsum("bmk,bkn->bmn", a.astype(np.float64), w.astype(np.float64))
    values = [rng.uniform(0.5, 1.5, (1, 1, n)).astype(np.float32) for _ in range(5)]
    pool, refs = None, []
    for v in values:
        ref = b.add(v, offset_elems=40, binding=pool)
        pool = ref.binding
        refs.append(TensorRef("f32", acc.shape, (0, 0, 1), binding=pool, offset=ref.offset))
    out = b.output(acc.shape)
    op = Matmul(ar, br, out, epilogue=BATCHNORM_HARDSWISH, epilogue_inputs=refs)
    expected = reference.expression(BATCHNORM_HARDSWISH,
                                    [np.broadcast_to(v, acc.shape) for v in values], acc)
    compiled, stats = compile_and_run(op, b)
    pool_loads = [line for line in compiled.asm.splitlines()
                  if line.lstrip().startswith("dma.load") and f"binding={pool}," in line]
    assert len(pool_loads) == 1
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_an_epilogue_operation_on_scalars_alone_runs_on_one_element():
    """A dynamically quantized matmul's epilogue multiplies the accumulator by the
    product of its runtime scale (an input holding one value) and a constant scale: that
    product is computed once, on one element (epilogue.EpiloguePlan's scalar nodes), not
    over every tile; the bits are those of the expression computed element by element."""
    rng = np.random.default_rng(5)
    b = Bindings()
    m, n, k = 96, 64, 128
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    w = rng.standard_normal((1, k, n)).astype(np.float32)
    scale = np.array([[[0.037]]], np.float32)
    ar, br = b.add(a), b.add(w)
    scale_ref = b.add_broadcast(scale, (1, m, n))
    expr = [("acc",), ("input", 0), ("const", 0.01), ("mul", (1, 2)), ("mul", (0, 3))]
    out = b.output((1, m, n))
    op = Matmul(ar, br, out, epilogue=expr, epilogue_inputs=[scale_ref])
    compiled, _ = compile_and_run(op, b)
    acc = np.einsum("bmk,bkn->bmn", a, w)
    product = np.float32(scale[0, 0, 0]) * np.float32(0.01)
    np.testing.assert_allclose(b.read(out), acc * product, rtol=1e-5, atol=1e-4)
    vmuls = [line for line in compiled.ir_stages[1][1].splitlines()   # the tile stage
             if '"npu.vmul"(' in line]
    one_element = [line for line in vmuls if "n0 = 1 : i64, n1 = 1 : i64, n2 = 1 : i64" in line]
    tiles = {line.split('tile = "')[1].split('"')[0] for line in vmuls}
    assert len(tiles) > 1 and len(one_element) == len(tiles)   # the product, per tile
    assert len(vmuls) == 2 * len(tiles)                        # and the tile times it
