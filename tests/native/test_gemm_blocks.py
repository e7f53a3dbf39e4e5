"""The GEMM kernel's blocking (npu_mac.c: blocks of rows by columns by k, units of C split
over workers) leaves every output's sum as on one thread, in k order: shapes that span
several row, column and k blocks, none a multiple of a block, tile or panel."""
import numpy as np
import pytest

from executable_format import isa
from executable_format.machine import MachineConfig
from hal_driver.device.npu_core import NpuCore
from tests.native.programs import SramImage, instr, random_values, run_on_sram
from tests.native.test_mac import _k_order_operands, _sequential_fma

F = isa.Flag
MACHINE = MachineConfig(sram_bytes=8 * 1024 * 1024)
THREADS = ("1", "2", "3")


def _run(monkeypatch, threads, image, record, out, acc, shape):
    monkeypatch.setenv("NPU_SIM_THREADS", threads)
    return run_on_sram(NpuCore(MACHINE), image, record).view(out, acc, shape)


@pytest.mark.parametrize("m, n, k", [(211, 389, 600), (29, 1100, 530), (700, 45, 300)])
def test_f32_blocks_sum_in_k_order_on_every_thread_count(monkeypatch, m, n, k):
    """Small integers in A make the sequential f64 reference exact (test_mac)."""
    rng = np.random.default_rng(m * n + k)
    a, b = _k_order_operands(rng, (m, k), (k, n))
    c = rng.uniform(0.0, 1.0, size=(m, n)).astype(np.float32)
    image = SramImage()
    a_addr, b_addr, o_addr = image.put(a), image.put(b), image.put(c)
    record = instr("matmul", "f32", F.ACCUMULATE, a=a_addr, b=b_addr, out=o_addr, m=m, n=n,
                   k=k, lda=k, ldb=n, ldo=n)
    expected = _sequential_fma(c, a.T, b)
    for threads in THREADS:
        out = _run(monkeypatch, threads, image, record, o_addr, "f32", (m, n))
        np.testing.assert_array_equal(out, expected, err_msg=f"NPU_SIM_THREADS={threads}")


@pytest.mark.parametrize("dtype, flags", [("i8", F.BIAS), ("f16", F.NARROW_SUM),
                                          ("bf16", F.NARROW_SUM | F.ACCUMULATE)])
def test_other_sums_agree_across_thread_counts(monkeypatch, dtype, flags):
    m, n, k = 203, 301, 530
    acc = "i32" if dtype == "i8" else "f32"
    rng = np.random.default_rng(7)
    image = SramImage()
    a = image.put(random_values(rng, dtype, (m, k)))
    b = image.put(random_values(rng, dtype, (k, n)))
    out = image.put(random_values(rng, acc, (m, n)))
    bias = image.put(random_values(rng, acc, n)) if flags & F.BIAS else 0
    record = instr("matmul", dtype, flags, a=a, b=b, out=out, m=m, n=n, k=k, lda=k, ldb=n,
                   ldo=n, bias=bias)
    results = [_run(monkeypatch, t, image, record, out, acc, (m, n)).tobytes() for t in THREADS]
    assert results[1:] == results[:1] * (len(THREADS) - 1)
