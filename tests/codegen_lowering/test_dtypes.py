"""f16 and i8 where natural: f16 operands accumulate in f32 on the MAC array and are
converted (vcvt) to f16 outputs; f16 epilogue inputs are converted to the accumulator
type; vector ops compute in f16; i8 matmuls accumulate in i32."""
import numpy as np
import pytest

from compiler_target.codegen import tile_conv
from compiler_target.codegen.ops import Conv2D, Elementwise, Matmul, Pool2D

from . import reference
from .helpers import Bindings, compile_and_run


def test_f16_matmul_with_f16_bias_and_output(rng):
    b = Bindings()
    a = rng.standard_normal((1, 70, 96)).astype(np.float16)
    w = rng.standard_normal((1, 96, 50)).astype(np.float16)
    bias = rng.standard_normal((1, 1, 50)).astype(np.float16)
    out = b.output((1, 70, 50), np.float16)
    op = Matmul(b.add(a), b.add(w), out, epilogue=[("acc",), ("input", 0), ("add", (0, 1)),
                                                   ("relu", (2,))],
                epilogue_inputs=[b.add_broadcast(bias, (1, 70, 50))])
    compiled, stats = compile_and_run(op, b)
    expected = np.maximum(np.einsum("bmk,bkn->bmn", a.astype(np.float64), w) + bias, 0)
    np.testing.assert_allclose(b.read(out).astype(np.float64), expected, rtol=2e-3, atol=2e-2)
    assert compiled.estimated_cycles == stats.total_cycles


def test_f16_conv_with_f32_output(rng):
    b = Bindings()
    x = rng.standard_normal((1, 16, 14, 14)).astype(np.float16)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float16)
    out = b.output((1, 24, 14, 14))
    op = Conv2D(b.add(x, (0, 2, 3, 1)), b.add(w), out, pads=(1, 1, 1, 1))
    compiled, stats = compile_and_run(op, b)
    expected = reference.conv2d(x.astype(np.float64), w.astype(np.float64), pads=(1, 1, 1, 1))
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-3, atol=1e-3)


def test_f16_depthwise_conv_with_bias_and_f16_output(rng):
    """dwconv2d accumulates f16 operands in f32, the f32 bias on the MAC (BIAS flag), the
    output converted to f16."""
    b = Bindings()
    x = rng.standard_normal((1, 24, 15, 17)).astype(np.float16)
    w = rng.standard_normal((24, 1, 3, 3)).astype(np.float16)
    bias = rng.standard_normal((1, 24, 1, 1)).astype(np.float32)
    out = b.output((1, 24, 8, 17), np.float16)
    op = Conv2D(b.add(x), b.add(w), out, stride=(2, 1), pads=(1, 1, 1, 1), groups=24,
                epilogue=[("acc",), ("input", 0), ("add", (0, 1))],
                epilogue_inputs=[b.add_broadcast(bias, (1, 24, 8, 17))])
    compiled, stats = compile_and_run(op, b)
    assert "dwconv2d.f16 flags=bias," in compiled.asm
    expected = reference.conv2d(x, w.astype(np.float64), stride=(2, 1), pads=(1, 1, 1, 1),
                                groups=24) + bias
    np.testing.assert_allclose(b.read(out).astype(np.float64), expected, rtol=2e-3, atol=2e-2)
    assert compiled.estimated_cycles == stats.total_cycles


def test_bf16_depthwise_conv_accumulates_in_f32(rng):
    b = Bindings()
    x, x_values = b.add_bf16(rng.standard_normal((2, 12, 20, 9)))
    k, k_values = b.add_bf16(rng.standard_normal((12, 1, 5, 3)))
    out = b.output((2, 12, 16, 7))
    compiled, stats = compile_and_run(Conv2D(x, k, out, groups=12), b)
    assert "dwconv2d" in compiled.detail
    np.testing.assert_allclose(b.read(out), reference.conv2d(x_values, k_values, groups=12),
                               rtol=1e-4, atol=1e-3)
    assert compiled.estimated_cycles == stats.total_cycles


def test_i8_depthwise_conv_accumulates_in_i32(rng, monkeypatch):
    """dwconv2d in i8 (the depthwise strategy alone: a grouped conv2d is as fast on this
    small one), exact in i32."""
    strategies = tile_conv.ConvTiler._strategies
    monkeypatch.setattr(tile_conv.ConvTiler, "_strategies", lambda self: [
        s for s in strategies(self) if isinstance(s, tile_conv.depthwise.DepthwiseTiler)])
    b = Bindings()
    x = rng.integers(-128, 128, (1, 40, 12, 70)).astype(np.int8)
    w = rng.integers(-128, 128, (40, 1, 5, 5)).astype(np.int8)
    out = b.output((1, 40, 8, 66), np.int32)
    op = Conv2D(b.add(x), b.add(w), out, groups=40)
    compiled, stats = compile_and_run(op, b)
    assert "dwconv2d" in compiled.detail
    expected = reference.conv2d(x.astype(np.int64), w.astype(np.int64), groups=40)
    np.testing.assert_array_equal(b.read(out), expected)
    assert compiled.estimated_cycles == stats.total_cycles


def test_i8_matmul_accumulates_in_i32(rng):
    b = Bindings()
    a = rng.integers(-128, 128, (1, 40, 200)).astype(np.int8)
    w = rng.integers(-128, 128, (1, 200, 72)).astype(np.int8)
    out = b.output((1, 40, 72), np.int32)
    compiled, stats = compile_and_run(Matmul(b.add(a), b.add(w), out), b)
    np.testing.assert_array_equal(b.read(out), np.einsum("bmk,bkn->bmn", a.astype(np.int64), w))
    assert compiled.estimated_cycles == stats.total_cycles


def test_f16_elementwise_with_f32_input(rng):
    b = Bindings()
    x = rng.standard_normal((3, 50, 40)).astype(np.float16)
    y = rng.standard_normal((3, 50, 40)).astype(np.float32)
    out = b.output((3, 50, 40), np.float16)
    op = Elementwise(out, [b.add(x), b.add(y)], [("input", 0), ("input", 1), ("mul", (0, 1)),
                                                 ("const", 0.5), ("add", (2, 3))])
    compile_and_run(op, b)
    expected = x.astype(np.float64) * y.astype(np.float16) + 0.5
    np.testing.assert_allclose(b.read(out).astype(np.float64), expected, rtol=2e-3, atol=2e-3)


def test_f16_max_pool(rng):
    b = Bindings()
    x = rng.standard_normal((1, 8, 17, 17)).astype(np.float16)
    out = b.output((1, 8, 9, 9), np.float16)
    op = Pool2D(b.add(x), out, "max", (3, 3), (2, 2), pads=(1, 1, 1, 1))
    compile_and_run(op, b)
    expected = reference.pool2d(x, "max", (3, 3), (2, 2), pads=(1, 1, 1, 1))
    np.testing.assert_array_equal(b.read(out).astype(np.float64), expected)


def test_bf16_matmul_and_conv_accumulate_in_f32(rng):
    b = Bindings()
    a, a_values = b.add_bf16(rng.standard_normal((1, 33, 70)))
    w, w_values = b.add_bf16(rng.standard_normal((1, 70, 40)))
    out = b.output((1, 33, 40))
    compiled, stats = compile_and_run(Matmul(a, w, out), b)
    expected = np.einsum("bmk,bkn->bmn", a_values.astype(np.float64), w_values)
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-4, atol=1e-3)
    assert compiled.estimated_cycles == stats.total_cycles

    b = Bindings()
    x, x_values = b.add_bf16(rng.standard_normal((1, 8, 12, 12)))
    k, k_values = b.add_bf16(rng.standard_normal((16, 8, 3, 3)))
    out = b.output((1, 16, 10, 10))
    compile_and_run(Conv2D(x, k, out), b)
    np.testing.assert_allclose(b.read(out), reference.conv2d(x_values, k_values),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("groups, stride", [(1, 1), (4, 2), (48, 1), (48, 2)])
def test_f32_conv_with_f16_weights(rng, groups, stride):
    """fp16-stored weights computed in f32 (IREE's `extf` of the weights in the body):
    the MAC's f32 conv2d/dwconv2d with flag half_b, the weights loaded as f16 (half the
    bytes) and widened exactly; a per-channel bias on the MAC. Direct, grouped and
    depthwise convolutions, the depthwise one over several channel blocks."""
    b = Bindings()
    x = rng.standard_normal((1, 48, 20, 22)).astype(np.float32)
    w = rng.standard_normal((48, 48 // groups, 3, 3)).astype(np.float16)
    bias = rng.standard_normal((1, 48, 1, 1)).astype(np.float32)
    acc = reference.conv2d(x.astype(np.float64), w.astype(np.float64), (stride, stride),
                           (1, 1), (1, 1, 1, 1), groups)
    out = b.output(acc.shape)
    op = Conv2D(b.add(x), b.add(w), out, stride=(stride, stride), pads=(1, 1, 1, 1),
                groups=groups, epilogue=[("acc",), ("input", 0), ("add", (0, 1))],
                epilogue_inputs=[b.add_broadcast(bias, acc.shape)])
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(out), acc + bias, rtol=1e-4, atol=1e-4)
    assert "half_b" in compiled.asm
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("half_operand", ["a", "b"])
def test_f32_matmul_with_f16_weights(rng, half_operand):
    """The f16 operand as B, or as A (an NCHW pointwise conv's weights): computed as
    out^T = b^T a^T, so that the f16 operand is the MAC's B (half_b)."""
    b = Bindings()
    a = rng.standard_normal((1, 70, 96)).astype(np.float16 if half_operand == "a" else np.float32)
    w = rng.standard_normal((1, 96, 50)).astype(np.float16 if half_operand == "b" else np.float32)
    out = b.output((1, 70, 50))
    op = Matmul(b.add(a), b.add(w), out)
    compiled, stats = compile_and_run(op, b)
    expected = np.einsum("bmk,bkn->bmn", a.astype(np.float64), w.astype(np.float64))
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-5, atol=1e-5)
    assert "half_b" in compiled.asm
    assert ("M and N swapped" in compiled.detail) == (half_operand == "a")
