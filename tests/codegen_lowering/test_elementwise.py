"""Elementwise: randomized shapes, layouts and broadcasts, expressions with every
vector op, on the native NPU core against numpy."""
from dataclasses import replace

import numpy as np
import pytest

from compiler_target.codegen.analysis.expressions import pruned, simplified
from compiler_target.codegen.hoist import hoist
from compiler_target.codegen.ops import Elementwise
from executable_format.machine import MachineConfig

from . import reference
from .helpers import MACHINE, Bindings, compile_and_run

EXPRESSIONS = [
    [("input", 0), ("input", 1), ("add", (0, 1))],
    [("input", 0), ("input", 1), ("mul", (0, 1)), ("relu", (2,))],
    [("input", 0), ("input", 1), ("sub", (0, 1)), ("const", 2.0), ("div", (2, 3)),
     ("tanh", (4,))],
    [("input", 0), ("input", 1), ("max", (0, 1)), ("input", 0), ("min", (3, 1)),
     ("leakyrelu", (2,), 0.1), ("scale", (4,), 3.0, -1.0), ("add", (5, 6))],
    [("input", 0), ("sigmoid", (0,)), ("input", 1), ("exp", (2,)), ("neg", (3,)),
     ("mul", (1, 4)), ("abs", (5,))],
    [("input", 0), ("clamp", (0,), -0.5, 0.5)],
    [("input", 1)],
]


@pytest.mark.parametrize("seed", range(10))
def test_random_elementwise(seed):
    rng = np.random.default_rng(3000 + seed)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 40, rank))
    b = Bindings()
    arrays, refs = [], []
    for _ in range(2):
        broadcast = tuple(1 if rng.random() < 0.3 else n for n in shape)
        x = (rng.standard_normal(broadcast) * 0.5).astype(np.float32)
        order = tuple(rng.permutation(rank)) if rng.random() < 0.4 else None
        refs.append(b.add_broadcast(x, shape, order))
        arrays.append(np.broadcast_to(x, shape))
    expr = EXPRESSIONS[seed % len(EXPRESSIONS)]
    out = b.output(shape)
    op = Elementwise(out, refs, expr)
    machine = MachineConfig(sram_bytes=16 * 1024) if seed % 3 == 0 else MACHINE
    compiled, stats = compile_and_run(op, b, machine=machine)
    expected = reference.expression(expr, arrays)
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-4, atol=1e-5)
    assert compiled.estimated_cycles == stats.total_cycles


def test_large_add_streams_near_dram_bandwidth(rng):
    shape = (8, 64, 56, 56)
    b = Bindings()
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape).astype(np.float32)
    op = Elementwise(b.output(shape), [b.add(x), b.add(y)], [("input", 0), ("input", 1),
                                                               ("add", (0, 1))])
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), x + y, rtol=1e-6)
    # loads and stores run on separate engines: the loads bound the time
    assert stats.dram_read_bytes / MACHINE.dram_bytes_per_cycle / stats.total_cycles >= 0.9


@pytest.mark.parametrize("sram_bytes", [2 * 1024 * 1024, 16 * 1024])
def test_nearest_upsampling_as_a_rank5_broadcast(sram_bytes, rng):
    """A gathered input (nearest 2x upsampling: out (C, H, 2, W, 2) reads x[c][h][w],
    stride 0 along the repeat digits) plus a dense tensor: vector boxes over the long
    dims, one instruction per repeat index."""
    c, h, w = 6, 9, 13
    b = Bindings()
    x = rng.standard_normal((c, h, 1, w, 1)).astype(np.float32)
    z = rng.standard_normal((c, h, 2, w, 2)).astype(np.float32)
    shape = (c, h, 2, w, 2)
    refs = [b.add_broadcast(x, shape), b.add(z)]
    out = b.output(shape)
    expr = [("input", 0), ("input", 1), ("add", (0, 1))]
    compiled, stats = compile_and_run(Elementwise(out, refs, expr), b,
                                      machine=MachineConfig(sram_bytes=sram_bytes))
    np.testing.assert_allclose(b.read(out), x + z, rtol=1e-6)
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("rows,cols,sram_bytes", [(4, 16, MACHINE.sram_bytes),
                                               (32, 512, MACHINE.sram_bytes),
                                               (32, 512, 16 * 1024)])
def test_rows_read_in_reverse(rows, cols, sram_bytes, rng):
    """out[t] = x[T-1-t] + 1 (a sequence reversed in time): the input's row stride is
    negative, which a DMA stride cannot be; the rows are loaded one DMA each."""
    b = Bindings()
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    ref = b.add(x)
    reversed_rows = replace(ref, offset=ref.offset + (rows - 1) * cols * 4, strides=(-cols, 1))
    out = b.output((rows, cols))
    expr = [("input", 0), ("const", 1.0), ("add", (0, 1))]
    compiled, stats = compile_and_run(Elementwise(out, [reversed_rows], expr), b,
                                      machine=MachineConfig(sram_bytes=sram_bytes))
    np.testing.assert_array_equal(b.read(out), x[::-1] + np.float32(1.0))
    assert compiled.estimated_cycles == stats.total_cycles


# sqrt|x| * rsqrt(y·y + 0.5)
SQRT_RSQRT = [("input", 0), ("abs", (0,)), ("sqrt", (1,)), ("input", 1), ("mul", (3, 3)),
              ("const", 0.5), ("add", (4, 5)), ("rsqrt", (6,)), ("mul", (2, 7))]


@pytest.mark.parametrize("dtype,sram_bytes", [(np.float32, MACHINE.sram_bytes),
                                              (np.float32, 16 * 1024), (np.float16, 16 * 1024)])
def test_sqrt_and_rsqrt_bit_exact(rng, dtype, sram_bytes):
    """vsqrt and vrsqrt (1 / sqrt in f32), each node rounded to the dtype: equal to numpy
    bit for bit, in one tile or several."""
    shape = (6, 50, 40)
    b = Bindings()
    x = rng.standard_normal(shape).astype(dtype)
    y = rng.standard_normal(shape).astype(dtype)
    out = b.output(shape, dtype)
    op = Elementwise(out, [b.add(x), b.add(y)], SQRT_RSQRT)
    compiled, stats = compile_and_run(op, b, machine=MachineConfig(sram_bytes=sram_bytes))
    assert "vsqrt" in compiled.asm and "vrsqrt" in compiled.asm

    def r(v):                                   # an f32 result stored in `dtype`
        return np.asarray(v, np.float32).astype(dtype).astype(np.float32)

    root = r(np.sqrt(np.abs(x.astype(np.float32))))
    y32 = y.astype(np.float32)
    inverse = r(np.float32(1) / np.sqrt(r(r(y32 * y32) + np.float32(0.5))))
    np.testing.assert_array_equal(b.read(out), r(root * inverse).astype(dtype))
    assert compiled.estimated_cycles == stats.total_cycles


def lstm_cell() -> tuple[list, int]:
    """The expression of an LSTM cell as IREE fuses it: gates i, o, f, g each the sum of
    4 inputs (x·W, h·R and the two biases), input 16 the previous c; c = f·c0 + i·g is
    stored besides h = o·tanh(c). (expr, c's node)."""
    expr = [("input", k) for k in range(17)]

    def node(*n) -> int:
        expr.append(n)
        return len(expr) - 1

    gates = []
    for g in range(4):
        total = node("add", (4 * g, 4 * g + 1))
        total = node("add", (total, 4 * g + 2))
        gates.append(node("add", (total, 4 * g + 3)))
    i, o, f = (node("sigmoid", (gate,)) for gate in gates[:3])
    g = node("tanh", (gates[3],))
    c = node("add", (node("mul", (f, 16)), node("mul", (i, g))))
    node("mul", (o, node("tanh", (c,))))
    return expr, c


@pytest.mark.parametrize("sram_bytes", [MACHINE.sram_bytes, 16 * 1024])
def test_lstm_cell_writes_c_and_h(sram_bytes, rng):
    """17 streamed inputs of 512, two outputs in one binding (as IREE binds them); with
    16 KB of SRAM in several tiles. c is computed once, into its own output tiles, and
    read there by tanh(c)."""
    b = Bindings()
    arrays = [rng.standard_normal(512).astype(np.float32) for _ in range(17)]
    refs = [b.add(x) for x in arrays]
    c_out = b.output((512,))
    h_out = b.add(np.zeros(512, np.float32), read_only=False, binding=c_out.binding)
    expr, c = lstm_cell()
    op = Elementwise(h_out, refs, expr, [(c_out, c)])
    compiled, stats = compile_and_run(op, b, machine=MachineConfig(sram_bytes=sram_bytes))
    np.testing.assert_allclose(b.read(c_out), reference.expression(expr[:c + 1], arrays),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.read(h_out), reference.expression(expr, arrays),
                               rtol=1e-5, atol=1e-6)
    assert compiled.estimated_cycles == stats.total_cycles
    assert "%out.1.tile.1 = " in compiled.ir_stages[1][1]     # c's double-buffered tiles
    assert ("tiles 512 " in compiled.detail) == (sram_bytes == MACHINE.sram_bytes)


EXTRA_OUTPUTS = [
    # an intermediate read by later nodes
    ([("input", 0), ("input", 1), ("add", (0, 1)), ("tanh", (2,)), ("mul", (3, 0))], [2]),
    # a value the last node does not depend on (input 0 only feeds it)
    ([("input", 0), ("input", 1), ("add", (0, 1)), ("input", 2), ("mul", (1, 3))], [2]),
    # an input stored as it is, an intermediate, and the last node stored twice
    ([("input", 0), ("exp", (0,)), ("abs", (1,)), ("neg", (2,))], [0, 1, 3]),
]


@pytest.mark.parametrize("seed", range(6))
def test_random_extra_outputs(seed):
    rng = np.random.default_rng(4000 + seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(v) for v in rng.integers(2, 40, rank))
    expr, nodes = EXTRA_OUTPUTS[seed % len(EXTRA_OUTPUTS)]
    b = Bindings()
    arrays = [(rng.standard_normal(shape) * 0.5).astype(np.float32) for _ in range(3)]
    refs = [b.add(x) for x in arrays]
    order = lambda: tuple(rng.permutation(rank)) if rng.random() < 0.5 else None  # noqa: E731
    out = b.output(shape, order=order())
    extra = [(b.output(shape, order=order()), node) for node in nodes]
    machine = MachineConfig(sram_bytes=16 * 1024) if seed % 2 else MACHINE
    compiled, stats = compile_and_run(Elementwise(out, refs, expr, extra), b, machine=machine)
    np.testing.assert_allclose(b.read(out), reference.expression(expr, arrays), rtol=1e-5,
                               atol=1e-6)
    for ref, node in extra:
        np.testing.assert_allclose(b.read(ref), reference.expression(expr[:node + 1], arrays),
                                   rtol=1e-5, atol=1e-6)
    assert compiled.estimated_cycles == stats.total_cycles


def test_affine_chain_is_one_vscale_with_the_same_bits():
    """(x·2 - 1.5)·0.25, negated, subtracted from 3, / 4: simplified, two vscales
    ((x·0.5 - 0.375), then (3 + y)·0.25: a negation does not fold into a shifted value)
    compute the six instructions' result bit for bit, signed zeros included."""
    x = (np.random.default_rng(11).standard_normal((64, 96)) * 100).astype(np.float32)
    x[0, :6] = [0.0, -0.0, 0.75, -0.75, 6.0, -6.0]
    chain = [("input", 0), ("const", 2.0), ("mul", (0, 1)), ("const", 1.5), ("sub", (2, 3)),
             ("const", 0.25), ("mul", (4, 5)), ("neg", (6,)), ("const", 3.0), ("sub", (8, 7)),
             ("const", 4.0), ("div", (9, 10))]
    folded = pruned(simplified(chain), [None])[0]
    results, vector = [], []
    for expr in (chain, folded):
        b = Bindings()
        op = Elementwise(b.output(x.shape), [b.add(x)], expr)
        compiled, stats = compile_and_run(op, b)
        assert compiled.estimated_cycles == stats.total_cycles
        results.append(b.read(op.out))
        vector.append(sum(line.lstrip().startswith("v") for line in compiled.asm.splitlines()))
    np.testing.assert_allclose(results[0], reference.expression(chain, [x]), rtol=1e-6)
    np.testing.assert_array_equal(results[1].view(np.uint32), results[0].view(np.uint32))
    assert vector[1] < vector[0]


# A squeeze-and-excitation block's scale: x · hardsigmoid(s + b), s and b per channel.
SE_SCALE = [("input", 0), ("input", 1), ("add", (0, 1)), ("scale", (2,), 0.2, 0.5),
            ("clamp", (3,), 0.0, 1.0), ("input", 2), ("mul", (5, 4))]


@pytest.mark.parametrize("sram_bytes,vector_fraction", [(MACHINE.sram_bytes, 0.33),
                                                       (16 * 1024, 0.6)])
def test_per_channel_subexpression_computed_once_per_channel(sram_bytes, vector_fraction, rng):
    """The add, scale and clamp of per-channel values are hoisted: computed over the
    tile's channels and read with stride 0 by the multiply. The bits equal those of the
    same expression over materialized (dense) inputs, where nothing is hoisted, and the
    vector engine is busy for under a third of that time (0.30: 1,480 cycles against
    4,928 in tiles of 9,600 elements; for less than two thirds with 16 KiB of SRAM,
    whose tiles of two channels pay the instructions' latency)."""
    c, hw = 200, 192
    s = rng.standard_normal((c, 1)).astype(np.float32) * 4
    bias = rng.standard_normal((c, 1)).astype(np.float32)
    x = rng.standard_normal((c, hw)).astype(np.float32)
    machine = MachineConfig(sram_bytes=sram_bytes)
    results, vector = [], []
    for broadcast in (True, False):
        b = Bindings()
        per_channel = [b.add_broadcast(v, (c, hw)) if broadcast else
                       b.add(np.ascontiguousarray(np.broadcast_to(v, (c, hw)))) for v in (s, bias)]
        op = Elementwise(b.output((c, hw)), per_channel + [b.add(x)], SE_SCALE)
        compiled, stats = compile_and_run(op, b, machine=machine)
        assert compiled.estimated_cycles == stats.total_cycles
        results.append(b.read(op.out))
        vector.append(stats.busy_cycles["vector"])
    np.testing.assert_array_equal(results[0].view(np.uint32), results[1].view(np.uint32))
    # hardsigmoid's f32 rounding (an ulp of 0.5) times |x| <= 5: absolute, not relative
    np.testing.assert_allclose(results[0], reference.expression(
        SE_SCALE, [np.broadcast_to(s, (c, hw)), np.broadcast_to(bias, (c, hw)), x]),
        rtol=1e-6, atol=5 * 2.0**-24)
    assert vector[0] < vector_fraction * vector[1]


@pytest.mark.parametrize("sram_bytes", [MACHINE.sram_bytes, 16 * 1024])
def test_copy_into_a_padded_buffer_stores_the_loaded_tiles(sram_bytes, rng):
    """IREE's slow_memcpy of a 3x40x40 image into the interior of a 3x42x42 padded
    buffer: each tile is stored as it was loaded, no vector instruction copies it, and
    the halo keeps what was there."""
    x = rng.standard_normal((3, 40, 40)).astype(np.float32)
    b = Bindings()
    padded = b.output((3, 42, 42))
    padded_values = rng.standard_normal((3, 42, 42)).astype(np.float32)
    b.arrays[padded.binding][padded.offset:padded.offset + padded_values.nbytes] = \
        padded_values.view(np.uint8).reshape(-1)
    interior = replace(padded, shape=(3, 40, 40), offset=padded.offset + (42 + 1) * 4)
    compiled, stats = compile_and_run(Elementwise(interior, [b.add(x)], [("input", 0)]), b,
                                      machine=MachineConfig(sram_bytes=sram_bytes))
    expected = padded_values.copy()
    expected[:, 1:41, 1:41] = x
    np.testing.assert_array_equal(b.read(padded), expected)
    assert not any(line.lstrip().startswith("v") for line in compiled.asm.splitlines())
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("shape, order", [((32, 76800), (1, 0)), ((3, 320, 240), (1, 2, 0)),
                                          ((35490, 6), (1, 0))])
def test_transpose_tiles_span_both_contiguous_dims(shape, order, rng):
    """A Transpose on its own (LYT-Net's NHWC -> NCHW of 240x320x32 pixels, an image's
    HWC -> CHW) is a copy of a permuted view: tiled in the output's order, a tile of one
    channel over many pixels read one element per burst (0.06 of the true roofline);
    tiled in the input's order, each tile loads whole runs and stores chunks of the
    output's rows, no vector instruction between. A detection head's [6][anchors] to
    [anchors][6] keeps the output's order, whose inner dim is the short one."""
    x = rng.standard_normal(shape).astype(np.float32)
    b = Bindings()
    out = b.output(shape)
    compiled, stats = compile_and_run(Elementwise(out, [b.add(x, order)], [("input", 0)]), b)
    np.testing.assert_array_equal(b.read(out), x)
    assert not any(line.lstrip().startswith("v") for line in compiled.asm.splitlines())
    assert compiled.estimated_cycles == stats.total_cycles
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.8   # 0.06, 0.32 before


def test_hoist_splits_the_per_channel_part_of_an_se_scale():
    """hoist.hoist on the SE scale over (channels, pixels): the clamp of the per-channel
    inputs is hoisted with its subexpression, the main expression multiplies the pixel
    input by it; with every input varying along both dims nothing is hoisted."""
    channel, both = frozenset({0}), frozenset({0, 1})
    main, hoisted = hoist(SE_SCALE, {0: channel, 1: channel, 2: both}, 3)
    assert [(h.node, h.dims) for h in hoisted] == [(4, channel)]
    assert hoisted[0].expr == SE_SCALE[:5]
    assert main == [("input", 3), ("input", 2), ("mul", (1, 0))]     # x · hoisted
    assert hoist(SE_SCALE, {0: both, 1: both, 2: both}, 3) == (SE_SCALE, [])
