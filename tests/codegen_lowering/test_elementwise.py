"""Elementwise: randomized shapes, layouts and broadcasts, expressions with every
vector op, on the native NPU core against numpy."""
import numpy as np
import pytest

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
