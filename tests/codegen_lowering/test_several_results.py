"""Matmuls and convolutions that store several values of their epilogue (extra_outputs):
each stored node gets a tile of its own, every tile of every output is stored, in
either orientation of a contraction and in every conv strategy; checked against numpy,
and the compiler's estimate against the simulated cycles."""
from dataclasses import replace

import numpy as np
import pytest

from compiler_target.codegen.ops import Conv2D, Elementwise, Matmul

from . import reference
from .helpers import Bindings, compile_and_run

# acc + bias, then relu: the raw sum (node 0) and the biased one (node 2) stored too.
BIAS_RELU = [("acc",), ("input", 0), ("add", (0, 1)), ("relu", (2,))]


@pytest.mark.parametrize("m, n, k", [(70, 50, 96), (300, 8, 64), (8, 300, 40)])
def test_matmul_stores_its_raw_and_biased_sums_beside_the_relu(rng, m, n, k):
    b = Bindings()
    a = rng.standard_normal((1, m, k)).astype(np.float32)
    w = rng.standard_normal((1, k, n)).astype(np.float32)
    bias = rng.standard_normal((1, 1, n)).astype(np.float32)
    raw, biased, out = (b.output((1, m, n)) for _ in range(3))
    op = Matmul(b.add(a), b.add(w), out, epilogue=BIAS_RELU,
                epilogue_inputs=[b.add_broadcast(bias, (1, m, n))],
                extra_outputs=[(raw, 0), (biased, 2)])
    compiled, stats = compile_and_run(op, b)
    expected = np.einsum("bmk,bkn->bmn", a.astype(np.float64), w)
    np.testing.assert_allclose(b.read(raw), expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b.read(biased), expected + bias, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b.read(out), np.maximum(expected + bias, 0), rtol=1e-5, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("channels, features, groups", [(16, 24, 1), (3, 8, 1), (16, 16, 16)],
                         ids=["conv", "few_channels", "depthwise"])
def test_conv_stores_its_biased_sum_beside_the_relu(rng, channels, features, groups):
    b = Bindings()
    x = rng.standard_normal((1, channels, 14, 14)).astype(np.float32)
    w = rng.standard_normal((features, channels // groups, 3, 3)).astype(np.float32)
    bias = rng.standard_normal((1, features, 1, 1)).astype(np.float32)
    biased, out = b.output((1, features, 14, 14)), b.output((1, features, 14, 14))
    op = Conv2D(b.add(x), b.add(w), out, pads=(1, 1, 1, 1), groups=groups,
                epilogue=BIAS_RELU,
                epilogue_inputs=[b.add_broadcast(bias, (1, features, 14, 14))],
                extra_outputs=[(biased, 2)])
    compiled, stats = compile_and_run(op, b)
    expected = reference.conv2d(x.astype(np.float64), w.astype(np.float64), pads=(1, 1, 1, 1),
                                groups=groups) + bias
    np.testing.assert_allclose(b.read(biased), expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(b.read(out), np.maximum(expected, 0), rtol=1e-5, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_int8_matmul_stores_its_i32_sum_beside_the_dequantized_value(rng):
    """An integer accumulator's epilogue with another stored value is the general one
    (never one vrequant): the i32 sum exactly, and its f32 scaling."""
    b = Bindings()
    a = rng.integers(-128, 128, (1, 40, 72)).astype(np.int8)
    w = rng.integers(-128, 128, (1, 72, 24)).astype(np.int8)
    raw, out = b.output((1, 40, 24), np.int32), b.output((1, 40, 24))
    op = Matmul(b.add(a), b.add(w), out,
                epilogue=[("acc",), ("itof", (0,)), ("const", 0.0625), ("mul", (1, 2))],
                extra_outputs=[(raw, 0)])
    compiled, stats = compile_and_run(op, b)
    expected = np.einsum("bmk,bkn->bmn", a.astype(np.int64), w.astype(np.int64))
    np.testing.assert_array_equal(b.read(raw), expected)
    np.testing.assert_array_equal(b.read(out), (expected * 0.0625).astype(np.float32))
    assert compiled.estimated_cycles == stats.total_cycles


# DynamicQuantizeLinear's scalars: scale = (max(hi, 0) - min(lo, 0)) / 255 and the zero
# point clamp(round(-min(lo, 0) / scale), 0, 255) as u8 (node 9, an i32 node stored as i8).
QUANTIZER = [("input", 0), ("input", 1), ("const", 0.0), ("min", (0, 2)), ("max", (1, 2)),
             ("sub", (4, 3)), ("const", 255.0), ("div", (5, 6)), ("neg", (3,)),
             ("div", (8, 7)), ("round", (9,), 0.0, 255.0), ("ftou", (10,), 8)]


@pytest.mark.parametrize("shape", [(), (3, 40)], ids=["scalar", "per_row"])
def test_elementwise_stores_f32_and_u8_results(rng, shape):
    """Two results of different dtypes from one expression: each stored node gets a tile
    in its output's dtype (the i32 node converted to the u8 output)."""
    b = Bindings()
    lo = -rng.uniform(0.1, 3, shape).astype(np.float32)
    hi = rng.uniform(0.1, 3, shape).astype(np.float32)
    scale, zero = b.output(shape), b.output(shape, np.int8)
    # an i8 tensor receiving fptoui's bytes is stored as u8 (walk.output_ref)
    op = Elementwise(replace(zero, dtype="u8"), [b.add(lo), b.add(hi)], QUANTIZER,
                     extra_outputs=[(scale, 7)])
    compiled, stats = compile_and_run(op, b)
    expected_scale = (np.maximum(hi, 0) - np.minimum(lo, 0)) / np.float32(255)
    np.testing.assert_array_equal(b.read(scale), expected_scale)
    np.testing.assert_array_equal(
        b.read(zero).view(np.uint8),
        np.clip(np.rint(-np.minimum(lo, 0) / expected_scale), 0, 255).astype(np.uint8))
    assert compiled.estimated_cycles == stats.total_cycles
