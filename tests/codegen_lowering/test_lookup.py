"""Parts of an expression as table lookups (codegen/lookup.py), run on the native core:
a fake quantization of an f32 tensor (x / s rounded, clamped, times s: the record's
steps and a table), a residual's dequantization (i8 - zero point, sitofp, times s: a
table of the byte's 256 values) and the quantization of their sum. The bits must be
those of the same expression as separate vector instructions, in fewer vector passes."""
import numpy as np

from compiler_target.codegen.lookup import Payoff, tabulated
from compiler_target.codegen.ops import Elementwise
from executable_format.machine import DEFAULT_MACHINE

from .helpers import Bindings, compile_and_run
from .test_requant import separate_instructions

SHAPE = (4, 30, 40)
EXPR = [
    ("input", 0), ("const", 0.05), ("div", (0, 1)), ("round", (2,), -128.0, 127.0),
    ("mul", (3, 1)),                                                  # 4: fake-quantized x
    ("input", 1), ("iconst", 3), ("isub", (5, 6)), ("itof", (7,)), ("const", 0.02),
    ("mul", (8, 9)),                                                  # 10: dequantized r
    ("add", (4, 10)), ("const", 0.07), ("div", (11, 12)), ("round", (13,), -120.0, 120.0),
    ("mul", (14, 12)),                                                # 15: quantized again
]


def _run(monkeypatch, lookups: bool):
    if not lookups:
        separate_instructions(monkeypatch)
    rng = np.random.default_rng(5)
    b = Bindings()
    x = (rng.standard_normal(SHAPE) * 4).astype(np.float32)
    x.flat[:4] = np.float32(0.05) * np.array([0.5, 1.5, -2.5, 1e4], np.float32)
    r = rng.integers(-128, 128, SHAPE, dtype=np.int8)
    out = b.output(SHAPE)
    compiled, stats = compile_and_run(Elementwise(out, [b.add(x), b.add(r)], EXPR), b)
    assert compiled.estimated_cycles == stats.total_cycles
    return b.read(out), compiled


def test_fake_quantization_and_dequantization_are_lookups(monkeypatch):
    looked_up, compiled = _run(monkeypatch, True)
    separate, reference = _run(monkeypatch, False)
    np.testing.assert_array_equal(looked_up, separate)
    assert compiled.asm.count("vrequant.f32 flags=src_f32") >= 2, compiled.asm
    assert "vrequant" not in reference.asm and "vdiv" in reference.asm
    assert compiled.estimated_cycles < reference.estimated_cycles


def test_tables_replace_only_what_reads_one_integer():
    """The byte input's dequantization is a table read at the input, the two roundings'
    steps and tails tables read at what precedes them; the add of the two reads both."""
    expr, tables = tabulated(EXPR, Payoff(int(np.prod(SHAPE)), DEFAULT_MACHINE),
                             {1: (-128, 127)}, {1})
    assert [t.source for t in tables] == ["i32", "f32", "f32"]
    assert [t.q_dtype for t in tables] == ["i32", "f32", "f32"]
    assert [node[0] for node in expr] == ["input", "lookup", "input", "lookup", "add",
                                          "lookup"]
    assert (tables[1].lo, tables[1].hi, tables[1].record["div"]) == (-128.0, 127.0,
                                                                     ("const", 0.05))


def test_a_small_dispatch_takes_no_table():
    """A table costs its values' load and its computation over 256 values: over a few
    dozen elements (a group norm's rows, a classifier head) the vector passes it saves
    do not pay for it."""
    expr, tables = tabulated(EXPR, Payoff(48, DEFAULT_MACHINE), {1: (-128, 127)}, {1})
    assert (expr, tables) == (EXPR, [])
