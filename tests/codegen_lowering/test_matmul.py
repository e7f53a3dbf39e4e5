"""Matmul / batch matmul: randomized M, N, K, transposed operands by strides, batch
broadcast, bias and epilogues, on the native NPU core against numpy."""
import numpy as np
import pytest

from compiler_target.codegen.ops import Matmul
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


def test_matmul_512_reaches_roofline(rng):
    op, b, expected = build_matmul(rng, 1, 512, 512, 512, epilogue="bias")
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert stats.roofline_cycles(MACHINE, "f32") / stats.total_cycles >= 0.85
    assert "MAC util" in compiled.detail
