"""Requantizing epilogues as one vrequant per tile (codegen/requant.py): the pattern IREE
fuses for a QDQ conv or matmul (i32 accumulator, zero-point correction, sitofp, scales and
a contracted bias, rounding to the zero point's range, then dequantize, SiLU or an
affine step, quantize), run on the native core; the result must be the bits of the same
epilogue as separate vector instructions (the path that matches stock IREE)."""
import numpy as np
import pytest

from compiler_target.codegen import epilogue, requant, tile_contraction
from compiler_target.codegen.epilogue import EpiloguePlan
from compiler_target.codegen.lower import ConstantPool
from compiler_target.codegen.npu_ir import Buffer
from compiler_target.codegen.tile import Sram
from compiler_target.codegen.ops import Conv2D, Matmul, TensorRef

from .helpers import MACHINE, Bindings, compile_and_run

SILU_TAIL = [("const", 0.031), ("mul", (11, 12)), ("neg", (13,)), ("exp", (14,)),
             ("const", 1.0), ("add", (15, 16)), ("div", (16, 17)), ("mul", (13, 18)),
             ("const", 0.02), ("div", (19, 20)), ("round", (21,), -121.0, 134.0),
             ("scale", (22,), 1.0, -7.0), ("ftoi", (23,), 8)]


def _stage_one(correction: list, zero: int) -> list:
    """acc - correction (nodes 1..zero), sitofp, ·s1, fma(·, s2, bias[c]), / s3, round."""
    n = len(correction) + 1
    return [("acc",)] + correction + [
        ("isub", (0, zero)), ("itof", (n,)), ("const", 0.0123), ("mul", (n + 1, n + 2)),
        ("const", 0.0071), ("input", 1), ("fma", (n + 3, n + 4, n + 5)), ("const", 0.031),
        ("div", (n + 6, n + 7)), ("round", (n + 8,), -140.0, 115.0)]


def _shifted(tail: list, by: int) -> list:
    return [node if node[0] in ("const", "iconst", "input", "acc") else
            (node[0], tuple(a + by for a in node[1])) + tuple(node[2:]) for node in tail]


def separate_instructions(monkeypatch) -> None:
    """From now on epilogues are separate vector instructions: no vrequant, no lookups."""
    monkeypatch.setattr(requant, "plan", lambda *args, **kwargs: None)
    monkeypatch.setattr(epilogue, "tabulated", lambda expr, *args: (expr, []))


def _run_both(make_op, monkeypatch):
    """Compiles and runs the op (`make_op(rng)`, the same data twice) with vrequant and
    with the epilogue as separate instructions."""
    results = []
    for use in (True, False):
        if not use:
            separate_instructions(monkeypatch)
        b, op, out = make_op(np.random.default_rng(7))
        compiled, stats = compile_and_run(op, b)
        assert compiled.estimated_cycles == stats.total_cycles
        results.append((b.read(out), compiled))
    return results


@pytest.mark.parametrize("kind", ["conv", "matmul"])
def test_per_channel_requantization_is_one_vrequant(monkeypatch, kind):
    expr = _stage_one([("input", 0)], 1) + _shifted(SILU_TAIL, 0)

    def make(rng):
        b = Bindings()
        if kind == "conv":
            x = rng.integers(-128, 128, (1, 32, 14, 14), dtype=np.int8)
            w = rng.integers(-128, 128, (48, 32, 3, 3), dtype=np.int8)
            out = b.output((1, 48, 12, 12), np.int8)
            shape, channel = (1, 48, 12, 12), (1, 48, 1, 1)
            zp = rng.integers(-3000, 3000, channel, dtype=np.int32)
            bias = rng.standard_normal(channel).astype(np.float32)
            op = Conv2D(b.add(x), b.add(w), out, epilogue=expr,
                        epilogue_inputs=[b.add_broadcast(zp, shape), b.add_broadcast(bias, shape)])
        else:
            a = rng.integers(-128, 128, (1, 300, 96), dtype=np.int8)
            w = rng.integers(-128, 128, (1, 96, 64), dtype=np.int8)
            out = b.output((1, 300, 64), np.int8)
            shape, channel = (1, 300, 64), (1, 1, 64)
            zp = rng.integers(-3000, 3000, channel, dtype=np.int32)
            bias = rng.standard_normal(channel).astype(np.float32)
            op = Matmul(b.add(a), b.add(w), out, epilogue=expr,
                        epilogue_inputs=[b.add_broadcast(zp, shape), b.add_broadcast(bias, shape)])
        return b, op, out

    (fused, compiled), (separate, reference) = _run_both(make, monkeypatch)
    np.testing.assert_array_equal(fused, separate)
    assert "vrequant.i8" in compiled.asm and "vrequant" not in reference.asm
    assert compiled.asm.count("vexp.f32") == 1        # SiLU once, in the table
    assert compiled.estimated_cycles < reference.estimated_cycles


def test_per_pixel_correction_is_computed_into_the_accumulator(monkeypatch):
    """acc - (row_sum·zp_b + col_term - k): the correction varies along M and N. Here
    the pixels (M = 120) are the MAC's columns (out^T = b^T a^T), so the per-pixel term
    is the MAC's BIAS, computed per tile over its columns (tile_contraction's
    column_bias), and col_term - 77 goes into the records: no pass over the tile but the
    vrequant. The same bits as with the per-pixel term computed into the accumulator
    after the MAC (one vfma per tile), and as the epilogue's separate instructions."""
    correction = [("input", 0), ("iconst", 3), ("imul", (1, 2)), ("input", 2),
                  ("iadd", (3, 4)), ("iconst", 77), ("isub", (5, 6))]
    expr = _stage_one(correction, 7)
    expr += [("const", 0.031), ("mul", (17, 18)), ("const", 0.5), ("add", (19, 20)),
             ("const", 0.02), ("div", (21, 22)), ("round", (23,), 0.0, 255.0),
             ("scale", (24,), 1.0, -128.0), ("ftoi", (25,), 8)]

    def make(rng):
        b = Bindings()
        a = rng.integers(-128, 128, (1, 120, 200), dtype=np.int8)
        w = rng.integers(-128, 128, (1, 200, 40), dtype=np.int8)
        row_sum = a.astype(np.int32).sum(axis=2, keepdims=True, dtype=np.int32)
        col_term = rng.integers(-5000, 5000, (1, 1, 40), dtype=np.int32)
        bias = rng.standard_normal((1, 1, 40)).astype(np.float32)
        out = b.output((1, 120, 40), np.int8)
        shape = (1, 120, 40)
        op = Matmul(b.add(a), b.add(w), out, epilogue=expr,
                    epilogue_inputs=[b.add_broadcast(row_sum, shape), b.add_broadcast(bias, shape),
                                     b.add_broadcast(col_term, shape)])
        return b, op, out

    (fused, compiled), (separate, _) = _run_both(make, monkeypatch)
    np.testing.assert_array_equal(fused, separate)
    assert "vrequant.i8" in compiled.asm
    matmuls = [line for line in compiled.asm.splitlines() if "matmul.i8" in line]
    assert all("bias" in line.split(",")[0] or "accumulate" in line for line in matmuls)
    assert "vfma.i32" not in compiled.asm

    monkeypatch.undo()
    monkeypatch.setattr(tile_contraction, "column_bias", lambda *args: None)
    b, op, out = make(np.random.default_rng(7))
    after_mac, stats = compile_and_run(op, b)
    np.testing.assert_array_equal(b.read(out), fused)
    # acc + row_sum·(-3) as one vfma per tile; col_term - 77 computed into the records
    assert after_mac.asm.count("vfma.i32") == after_mac.asm.count("vrequant.i8")
    assert "vmul.i32" not in after_mac.asm
    assert stats.total_cycles > compiled.estimated_cycles


def test_table_reads_scalar_inputs(monkeypatch):
    """After the rounding, PP-OCR's QDQ graphs scale by 0-d tensors IREE hoists into the
    dispatch's bindings: the table reads them, loaded once per dispatch; two of them a
    few bytes apart in one binding are one load (tile.gathered_loads)."""
    expr = _stage_one([("input", 0)], 1) + [
        ("input", 2), ("mul", (11, 12)), ("const", 0.02), ("div", (13, 14)),
        ("input", 3), ("add", (15, 16)), ("round", (17,), -128.0, 127.0), ("ftoi", (18,), 8)]

    def make(rng):
        b = Bindings()
        a = rng.integers(-128, 128, (1, 200, 96), dtype=np.int8)
        w = rng.integers(-128, 128, (1, 96, 48), dtype=np.int8)
        out = b.output((1, 200, 48), np.int8)
        shape, channel, scalar = (1, 200, 48), (1, 1, 48), (1, 1, 1)
        zp = rng.integers(-3000, 3000, channel, dtype=np.int32)
        bias = rng.standard_normal(channel).astype(np.float32)
        first = b.add(np.full(scalar, 0.019, np.float32))
        second = b.add(np.full(scalar, -3.3, np.float32), offset_elems=5, binding=first.binding)
        scalars = [TensorRef("f32", shape, (0, 0, 0), binding=r.binding, offset=r.offset)
                   for r in (first, second)]
        op = Matmul(b.add(a), b.add(w), out, epilogue=expr, epilogue_inputs=[
            b.add_broadcast(zp, shape), b.add_broadcast(bias, shape)] + scalars)
        scalar_bindings.append(first.binding)
        return b, op, out

    scalar_bindings = []
    (fused, compiled), (separate, _) = _run_both(make, monkeypatch)
    np.testing.assert_array_equal(fused, separate)
    assert len(np.unique(fused)) > 50           # not saturated
    assert "vrequant.i8" in compiled.asm
    assert sum(line.lstrip().startswith("dma.load") and f"binding={scalar_bindings[0]}," in line
               for line in compiled.asm.splitlines()) == 1


@pytest.mark.parametrize("out_dtype", [np.int8, np.float32])
def test_residual_add_after_the_table(monkeypatch, out_dtype):
    """ddddocr's det graph adds a per-pixel residual after the SiLU's requantization:
    the table stops at the value the residual add reads, the add and its requantization
    run after the vrequant."""
    expr = _stage_one([("input", 0)], 1) + [
        ("mul", (11, 9)), ("sigmoid", (12,)), ("const", 0.0036), ("div", (13, 14)),
        ("round", (15,), 0.0, 255.0), ("mul", (16, 14)), ("mul", (12, 17)),
        ("const", 0.0091), ("div", (18, 19)), ("round", (20,), -31.0, 224.0),
        ("input", 2), ("iconst", -91), ("isub", (22, 23)), ("itof", (24,)),
        ("const", 0.0076), ("mul", (25, 26)), ("fma", (21, 19, 27)), ("const", 0.0119),
        ("div", (28, 29)), ("round", (30,), -47.0, 208.0)]
    expr += [("scale", (31,), 1.0, -81.0), ("ftoi", (32,), 8)] if out_dtype == np.int8 else \
        [("const", 0.02), ("mul", (31, 32))]

    def make(rng):
        b = Bindings()
        x = rng.integers(-128, 128, (1, 16, 14, 14), dtype=np.int8)
        w = rng.integers(-128, 128, (40, 16, 3, 3), dtype=np.int8)
        shape, channel = (1, 40, 12, 12), (1, 40, 1, 1)
        out = b.output(shape, out_dtype)
        zp = rng.integers(-3000, 3000, channel, dtype=np.int32)
        bias = rng.standard_normal(channel).astype(np.float32)
        residual = rng.integers(-128, 128, shape, dtype=np.int8)
        op = Conv2D(b.add(x), b.add(w), out, epilogue=expr, epilogue_inputs=[
            b.add_broadcast(zp, shape), b.add_broadcast(bias, shape), b.add(residual)])
        return b, op, out

    (fused, compiled), (separate, reference) = _run_both(make, monkeypatch)
    np.testing.assert_array_equal(fused, separate)
    assert len(np.unique(fused)) > 50
    assert "vrequant.f32" in compiled.asm and compiled.asm.count("vsigmoid.f32") == 1
    assert compiled.estimated_cycles < reference.estimated_cycles


@pytest.mark.parametrize("shape, tile, records", [
    ((1, 10816, 24), (1, 637, 24), 24),     # a 1x1 conv as IREE forms it, (pixels, channels)
    ((1, 40, 6625), (1, 20, 512), 512)])    # a classifier over 6625 characters
def test_records_are_per_channel_of_a_tile(shape, tile, records):
    """One record per channel of the biggest tile: not per element of the longest dim,
    nor per channel of the whole output."""
    expr = _stage_one([("input", 0)], 1) + _shifted(SILU_TAIL, 0)
    out = Buffer("out", "i8", shape, "dram", binding=2, strides=(0, shape[2], 1))
    channel = dict(shape=shape, scope="dram", binding=1, strides=(0, 0, 1))
    tensors = {"out": out, "epilogue.0": Buffer("zp", "i32", **channel),
               "epilogue.1": Buffer("bias", "f32", **channel)}
    plan = requant.plan(expr, Sram(None), out, tensors, ConstantPool(), tile[1] * tile[2],
                        EpiloguePlan, "i32", ["i32", "f32"], tile, MACHINE)
    assert plan is not None and plan.records_count == records


def test_match_rejects_what_vrequant_cannot_compute():
    base = [("acc",), ("itof", (0,)), ("const", 0.5), ("mul", (1, 2))]
    assert requant.match(base + [("round", (3,), -128.0, 127.0), ("ftoi", (4,), 8)])
    assert requant.match(base + [("round", (3,), -np.inf, np.inf), ("ftoi", (4,), 8)]) is None
    assert requant.match(base + [("round", (3,), 0.0, 300.0)]) is None      # > 256 values
    assert requant.match(base + [("relu", (3,)), ("round", (4,), 0.0, 9.0)]) is None
    # the table may read scalars only: a per-pixel input after the rounding runs after it
    assert requant.match(base + [("round", (3,), 0.0, 9.0), ("input", 0),
                                 ("add", (4, 5))]).after == [
        ("input", requant.TABLE_INPUT), ("input", 0), ("add", (0, 1))]
    # ... unless two values of the table's part are read after it
    assert requant.match(base + [("round", (3,), 0.0, 9.0), ("exp", (4,)), ("input", 0),
                                 ("add", (4, 6)), ("add", (5, 7))]) is None
    assert requant.match(base + [("round", (3,), 0.0, 9.0), ("input", 0),
                                 ("add", (4, 5))], scalar_inputs={0}).table_inputs == [0]
