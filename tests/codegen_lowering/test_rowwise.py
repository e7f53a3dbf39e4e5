"""Rowwise ops (rows of I elements with reductions read back along the row): softmax,
layer norm (by sqrt or rsqrt of the variance), a max-abs normalization, x - mean(x),
per-row sums of computed values, in
several layouts and tile counts, on the native NPU core against numpy; the estimated
cycles equal the simulated ones."""
import numpy as np
import pytest

from compiler_target.codegen.ops import Rowwise
from executable_format.machine import MachineConfig

from . import reference
from .helpers import Bindings, compile_and_run

SOFTMAX = [("input", 0), ("reduce", (0,), "max"), ("sub", (0, 1)), ("exp", (2,)),
           ("reduce", (3,), "sum"), ("div", (3, 4))]
# (x - mean) * gamma / (sqrt-free) max-abs scale + beta: three reductions, row and column inputs
NORMALIZE = [("input", 0), ("reduce", (0,), "sum"), ("const", 1 / 24), ("mul", (1, 2)),
             ("sub", (0, 3)), ("abs", (4,)), ("reduce", (5,), "max"), ("const", 1e-3),
             ("add", (6, 7)), ("div", (4, 8)), ("input", 1), ("mul", (9, 10)), ("input", 2),
             ("add", (11, 12))]
MEAN_SUBTRACTED = [("input", 0), ("reduce", (0,), "sum"), ("const", 1 / 24), ("mul", (1, 2)),
                   ("sub", (0, 3))]
SUM_OF_SQUARES = [("input", 0), ("mul", (0, 0)), ("reduce", (1,), "sum")]


def layer_norm(columns: int, root: str) -> list:
    """(x - mean) / sqrt(var + eps) * gamma + beta over rows of `columns`; with `root`
    "rsqrt" the division is a product with rsqrt(var + eps)."""
    divide = "div" if root == "sqrt" else "mul"
    return [("input", 0), ("reduce", (0,), "sum"), ("const", 1 / columns), ("mul", (1, 2)),
            ("sub", (0, 3)), ("mul", (4, 4)), ("reduce", (5,), "sum"), ("mul", (6, 2)),
            ("const", 1e-5), ("add", (7, 8)), (root, (9,)), (divide, (4, 10)),
            ("input", 1), ("mul", (11, 12)), ("input", 2), ("add", (13, 14))]


def build(rng, expr, rows, columns, transposed=False, per_row_out=False):
    b = Bindings()
    x = rng.standard_normal((rows, columns)).astype(np.float32)
    gamma = rng.standard_normal((1, columns)).astype(np.float32)   # broadcast along rows
    beta = rng.standard_normal((rows, 1)).astype(np.float32)       # one value per row
    inputs = [b.add(x, (1, 0) if transposed else None), b.add_broadcast(gamma, (rows, columns)),
              b.add_broadcast(beta, (rows, columns))]
    values = [x, np.broadcast_to(gamma, x.shape), np.broadcast_to(beta, x.shape)]
    used = 1 + max(node[1] for node in expr if node[0] == "input")
    out = b.output((rows, 1) if per_row_out else (rows, columns))
    if per_row_out:
        out = type(out)(out.dtype, (rows, columns), (out.strides[0], 0), out.binding, out.offset)
    op = Rowwise(out, inputs[:used], expr)
    expected = np.broadcast_to(reference.expression(expr, values[:used]), (rows, columns))
    return op, b, expected


@pytest.mark.parametrize("case", ["softmax", "normalize", "mean_subtracted", "softmax_transposed",
                                  "layer_norm_sqrt", "layer_norm_rsqrt"])
def test_rowwise_matches_numpy(rng, case):
    expr = {"softmax": SOFTMAX, "normalize": NORMALIZE, "mean_subtracted": MEAN_SUBTRACTED,
            "softmax_transposed": SOFTMAX, "layer_norm_sqrt": layer_norm(24, "sqrt"),
            "layer_norm_rsqrt": layer_norm(24, "rsqrt")}[case]
    op, b, expected = build(rng, expr, 40, 24, transposed=case.endswith("transposed"))
    compiled, stats = compile_and_run(op, b)
    got = b.read(op.out)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert compiled.estimated_cycles == stats.total_cycles


def test_sum_of_squares_one_result_per_row(rng):
    op, b, expected = build(rng, SUM_OF_SQUARES, 30, 50, per_row_out=True)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out)[:, 0], expected[:, 0], rtol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_long_rows_split_over_tiles_in_a_small_sram(rng):
    op, b, expected = build(rng, SOFTMAX, 64, 1000)
    machine = MachineConfig(sram_bytes=64 * 1024)
    compiled, stats = compile_and_run(op, b, machine=machine)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-6)
    assert "tiles 4x1000" in compiled.detail or "tiles 2x1000" in compiled.detail
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("root", ["sqrt", "rsqrt"])
def test_layer_norm_in_several_tiles(rng, root):
    """The square root is one per-row vsqrt (vrsqrt) per tile, at the transcendental
    cost the estimate includes."""
    op, b, expected = build(rng, layer_norm(1000, root), 64, 1000)
    compiled, stats = compile_and_run(op, b, machine=MachineConfig(sram_bytes=64 * 1024))
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-5)
    tiles = compiled.asm.count("vreduce") // 2
    assert tiles > 1 and compiled.asm.count(f"v{root}.") == tiles
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("case", ["softmax", "normalize", "layer_norm", "softmax_transposed",
                                  "sum_of_squares"])
def test_rows_longer_than_sram_stream_through_it(rng, case):
    """Rows of 6000 f32 in a 16 KiB SRAM (an InstanceNormalization over a whole image
    in a real one): each row streamed in chunks, one pass per level of reductions
    (softmax's max, then its sum: three passes), the row values kept between passes."""
    expr, passes = {"softmax": (SOFTMAX, 3), "normalize": (NORMALIZE, 3),
                    "layer_norm": (layer_norm(6000, "rsqrt"), 3),
                    "softmax_transposed": (SOFTMAX, 3), "sum_of_squares": (SUM_OF_SQUARES, 1)}[case]
    op, b, expected = build(rng, expr, 3, 6000, transposed=case.endswith("transposed"),
                            per_row_out=case == "sum_of_squares")
    compiled, stats = compile_and_run(op, b, machine=MachineConfig(sram_bytes=16 * 1024))
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-5)
    assert f"{passes} passes over it" in compiled.detail
    assert compiled.estimated_cycles == stats.total_cycles


def test_streamed_rows_store_a_row_value_and_a_varying_value_beside_the_result(rng):
    """Extra outputs of a streamed row (tf2onnx's layer-norm moments: the mean beside the
    centred values): the mean, a row value, after the last pass; the squares, varying
    along the row, chunk by chunk in it."""
    rows, columns = 2, 6000
    b = Bindings()
    x = rng.standard_normal((rows, columns)).astype(np.float32)
    expr = [("input", 0), ("reduce", (0,), "sum"), ("const", 1 / columns), ("mul", (1, 2)),
            ("sub", (0, 3)), ("mul", (4, 4))]
    out = b.output((rows, columns))
    mean = b.output((rows, 1))
    mean = type(mean)(mean.dtype, (rows, columns), (mean.strides[0], 0), mean.binding,
                      mean.offset)
    centred = b.output((rows, columns))
    op = Rowwise(out, [b.add(x)], expr, extra_outputs=[(mean, 3), (centred, 4)])
    compiled, stats = compile_and_run(op, b, machine=MachineConfig(sram_bytes=16 * 1024))
    expected_mean = x.mean(axis=1, keepdims=True, dtype=np.float64)
    np.testing.assert_allclose(b.read(mean)[:, :1], expected_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.read(centred), x - expected_mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b.read(out), (x - expected_mean) ** 2, rtol=1e-4, atol=1e-5)
    assert "2 passes over it" in compiled.detail
    assert compiled.estimated_cycles == stats.total_cycles
