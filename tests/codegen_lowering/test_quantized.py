"""Quantized (int8) ops as IREE fuses a QDQ graph: expressions mixing i32 and f32 nodes
(iadd/isub/imul, itof, round, ftoi) on the vector engine and i8 x i8 -> i32 MAC ops
with requantizing epilogues, run on the native NPU core against numpy computing the
same steps in the same types (the results must be identical: integers, and f32 with
one rounding per op)."""
import numpy as np
import pytest

from compiler_target.codegen.analysis.expressions import pruned, simplified
from compiler_target.codegen.ops import LEAVES, Conv2D, Elementwise, Matmul, Rowwise

from . import reference
from .helpers import MACHINE, Bindings, compile_and_run

F32 = np.float32


def quantize_expr(x: int, scale: float, zero_point: int) -> list:
    """clamp(roundeven(x / scale) + zp, -128, 127) -> i8, as IREE imports QuantizeLinear."""
    return [("const", scale), ("div", (x, x + 1)), ("round", (x + 2,), -np.inf, np.inf),
            ("const", float(zero_point)), ("add", (x + 3, x + 4)),
            ("clamp", (x + 5,), -128.0, 127.0), ("ftoi", (x + 6,), 8)]


def qdq_expr(x: int, scale: float, zero_point: int) -> list:
    """The QuantizeLinear of node x then its DequantizeLinear, as IREE imports them: the
    result is node x + 12."""
    return quantize_expr(x, scale, zero_point) + [
        ("iconst", zero_point), ("isub", (x + 7, x + 8)), ("itof", (x + 9,)),
        ("const", scale), ("mul", (x + 10, x + 11))]


def quantize_numpy(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    q = np.rint(x.astype(F32) / F32(scale)) + F32(zero_point)
    return np.clip(q, F32(-128), F32(127)).astype(np.int8)


@pytest.mark.parametrize("shape", [(3, 48, 192), (7, 33)])
def test_quantize_f32_to_i8(rng, shape):
    b = Bindings()
    x = (rng.standard_normal(shape) * 2).astype(F32)
    x.ravel()[:4] = [0.0039215686 * 2.5, -0.0039215686 * 0.5, 1e9, -1e9]   # ties, saturation
    out = b.output(shape, np.int8)
    scale, zero_point = 0.0078430846, -3
    op = Elementwise(out, [b.add(x)], [("input", 0)] + quantize_expr(0, scale, zero_point))
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_array_equal(b.read(out), quantize_numpy(x, scale, zero_point))
    assert compiled.estimated_cycles == stats.total_cycles


def test_dequantize_i8_to_f32(rng):
    """(extsi(q) - zp) as i32, sitofp, * scale."""
    b = Bindings()
    q = rng.integers(-128, 128, (9, 130), dtype=np.int8)
    out = b.output(q.shape)
    expr = [("input", 0), ("iconst", -128), ("isub", (0, 1)), ("itof", (2,)),
            ("const", 0.027965717), ("mul", (3, 4))]
    op = Elementwise(out, [b.add(q)], expr)
    compile_and_run(op, b)
    expected = (q.astype(np.int32) + 128).astype(F32) * F32(0.027965717)
    np.testing.assert_array_equal(b.read(out), expected)


def test_i8_matmul_requantized_to_i8(rng):
    """acc - (row_sum * zp_b + col_term) in i32, then f32 scale and requantization."""
    b = Bindings()
    a = rng.integers(-128, 128, (1, 40, 200), dtype=np.int8)
    w = rng.integers(-128, 128, (1, 200, 24), dtype=np.int8)
    row_sum = a.astype(np.int32).sum(axis=2, keepdims=True, dtype=np.int32)   # (1, 40, 1)
    col_term = rng.integers(-5000, 5000, (1, 1, 24), dtype=np.int32)
    out = b.output((1, 40, 24), np.int8)
    expr = [("acc",), ("input", 0), ("iconst", 3), ("imul", (1, 2)), ("input", 1),
            ("iadd", (3, 4)), ("isub", (0, 5)), ("itof", (6,)), ("const", 0.00065),
            ("mul", (7, 8))] + quantize_expr(9, 0.05, 7)
    op = Matmul(b.add(a), b.add(w), out, epilogue=expr,
                epilogue_inputs=[b.add_broadcast(row_sum, (1, 40, 24)),
                                 b.add_broadcast(col_term, (1, 40, 24))])
    compiled, stats = compile_and_run(op, b)
    acc = np.einsum("bmk,bkn->bmn", a.astype(np.int64), w.astype(np.int64)).astype(np.int32)
    corrected = acc - (row_sum * 3 + col_term)
    expected = quantize_numpy(corrected.astype(F32) * F32(0.00065), 0.05, 7)
    np.testing.assert_array_equal(b.read(out), expected)
    assert "matmul.i8" in compiled.asm
    assert compiled.estimated_cycles == stats.total_cycles


def test_i8_conv_dequantized_to_f32(rng):
    b = Bindings()
    x = rng.integers(-128, 128, (1, 8, 18, 18), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 8, 3, 3), dtype=np.int8)
    out = b.output((1, 16, 16, 16))
    expr = [("acc",), ("itof", (0,)), ("const", 1.5e-4), ("mul", (1, 2)), ("relu", (3,))]
    op = Conv2D(b.add(x), b.add(w), out, epilogue=expr)
    compiled, stats = compile_and_run(op, b)
    acc = reference.conv2d(x.astype(np.int64), w.astype(np.int64)).astype(np.int32)
    expected = np.maximum(acc.astype(F32) * F32(1.5e-4), F32(0))
    np.testing.assert_array_equal(b.read(out), expected)
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("rows, columns", [(8, 1152), (200, 192)])
def test_quantized_mean_of_rows(rng, rows, columns):
    """Dequantize, mean along the rows, requantize: an i8 global average pool as IREE
    fuses it (Rowwise with integer and float nodes, one i8 result per row)."""
    b = Bindings()
    q = rng.integers(-128, 128, (rows, columns), dtype=np.int8)
    out = b.output((rows, 1), np.int8)
    out = type(out)(out.dtype, (rows, columns), (out.strides[0], 0), out.binding, out.offset)
    expr = [("input", 0), ("iconst", -128), ("isub", (0, 1)), ("itof", (2,)),
            ("const", 0.027965717), ("mul", (3, 4)), ("reduce", (5,), "sum"),
            ("const", float(columns)), ("div", (6, 7))] + quantize_expr(8, 0.0061906809, -128)
    compiled, stats = compile_and_run(Rowwise(out, [b.add(q)], expr), b)
    dequantized = (q.astype(np.int32) + 128).astype(F32) * F32(0.027965717)
    lanes = np.zeros((rows, 16), F32)     # vreduce's order: 16 lanes, then lane by lane
    for k in range(0, columns, 16):
        lanes += dequantized[:, k:k + 16]
    sums = lanes[:, 0].copy()
    for lane in range(1, 16):
        sums += lanes[:, lane]
    expected = quantize_numpy(sums / F32(columns), 0.0061906809, -128)
    np.testing.assert_array_equal(b.read(out)[:, 0], expected)
    assert compiled.estimated_cycles == stats.total_cycles


def test_qdq_pair_folds_to_divide_round_multiply_exactly(rng):
    """IREE's quantize-dequantize pair, div round add clamp ftoi isub itof mul, is
    div round(bounds) mul after simplification, with identical results."""
    b = Bindings()
    x = (rng.standard_normal((16, 300)) * 3).astype(F32)
    x.ravel()[:3] = [0.05 * 2.5, 0.05 * -126.5, 1e9]            # ties and saturation
    scale, zero_point = 0.05, -2
    qdq = [("input", 0)] + qdq_expr(0, scale, zero_point)
    expr, inputs = pruned(simplified(qdq), [b.add(x)])
    assert [n[0] for n in expr if n[0] not in LEAVES] == ["div", "round", "mul"]
    out = b.output(x.shape)
    compile_and_run(Elementwise(out, inputs, expr), b)
    q = quantize_numpy(x, scale, zero_point)
    expected = (q.astype(np.int32) - zero_point).astype(F32) * F32(scale)
    np.testing.assert_array_equal(b.read(out), expected)


@pytest.mark.parametrize("scale", [0.05, 0.08953426778316498, 3.7e-5, 1234.5])
def test_qdq_pair_repeated_folds_to_one_exactly(rng, scale):
    """Quantized, dequantized, quantized again with the same scale and dequantized (a
    QDQ pair repeated, as at PP-OCR's output): the second pair's div and round go, and
    the result is the twice-computed numpy value bit for bit."""
    b = Bindings()
    x = (rng.standard_normal((16, 300)) * 100 * scale).astype(F32)
    x.ravel()[:4] = [scale * 2.5, scale * -126.5, 1e9, -1e9]    # ties and saturation
    twice = [("input", 0)] + qdq_expr(0, scale, -3) + qdq_expr(12, scale, -3)
    expr, inputs = pruned(simplified(twice), [b.add(x)])
    assert [n[0] for n in expr if n[0] not in LEAVES] == ["div", "round", "mul"]
    out = b.output(x.shape)
    compile_and_run(Elementwise(out, inputs, expr), b)
    once = (quantize_numpy(x, scale, -3).astype(np.int32) + 3).astype(F32) * F32(scale)
    again = (quantize_numpy(once, scale, -3).astype(np.int32) + 3).astype(F32) * F32(scale)
    np.testing.assert_array_equal(b.read(out), again)


def test_dequantized_product_plus_bias_rounds_once(rng):
    """q·s + bias in a quantized expression is one fma (stock's LLVM contracts IREE's
    mulf + addf on an FMA machine): identical to the once-rounded numpy value."""
    b = Bindings()
    q = rng.integers(-128, 128, (12, 257), dtype=np.int8)
    bias = rng.standard_normal((12, 1)).astype(F32)
    expr = [("input", 0), ("itof", (0,)), ("const", 0.0203), ("mul", (1, 2)), ("input", 1),
            ("add", (3, 4))] + quantize_expr(5, 0.031, 3)
    expr, inputs = pruned(simplified(expr), [b.add(q), b.add_broadcast(bias, q.shape)])
    assert "fma" in [n[0] for n in expr]
    out = b.output(q.shape, np.int8)
    compile_and_run(Elementwise(out, inputs, expr), b)
    fused = (q.astype(np.float64) * np.float64(F32(0.0203)) + bias).astype(F32)
    np.testing.assert_array_equal(b.read(out), quantize_numpy(fused, 0.031, 3))


def test_i8_conv_with_few_output_channels_puts_pixels_on_the_mac_columns(rng):
    """F < mac_cols leaves lanes idle with the output channels on the MAC columns; the
    i8 conv2d takes its pixels there instead (flag pixel_columns), exact in i32, at
    the cost model's cycles: 2 channels x ceil(784 / 32) pixel groups x ceil(144 / 64)
    tap steps for its one tile of 28 rows, where channels on the columns would take
    784 x 3."""
    b = Bindings()
    x = rng.integers(-128, 128, (1, 16, 30, 30), dtype=np.int8)
    w = rng.integers(-128, 128, (2, 16, 3, 3), dtype=np.int8)
    out = b.output((1, 2, 28, 28), np.int32)
    compiled, stats = compile_and_run(Conv2D(b.add(x), b.add(w), out), b)
    assert "conv2d.i8" in compiled.asm and "pixel_columns" in compiled.asm
    expected = reference.conv2d(x.astype(np.int64), w.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(b.read(out), expected)
    assert stats.busy_cycles["mac"] == MACHINE.mac_latency_cycles + 2 * 25 * 3
    assert compiled.estimated_cycles == stats.total_cycles
