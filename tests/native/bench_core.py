"""Throughput of the NPU core's MAC instructions on the host (not a test):
    .venv/bin/python -m tests.native.bench_core
Operands are already in SRAM; each program is one matmul or conv2d. Two rates: per wall
second (what a model run sees; the core splits heavy instructions over NPU_SIM_THREADS
threads, default the online CPUs) and per CPU second of this process, summed over its
threads; each the best of a few windows."""
import time

import numpy as np

from executable_format.machine import MachineConfig
from hal_driver.device.npu_core import NpuCore
from tests.native.programs import instr, program

KIB = 1024


def _measure(core, prog, flops, windows=5, seconds=0.2):
    """(wall, cpu) GFLOP/s of the best of `windows` runs of `seconds` (other processes
    on the machine take some windows' cores)."""
    core.execute(prog, [])
    best = (0.0, 0.0)
    for _ in range(windows):
        runs, wall, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - wall < seconds:
            core.execute(prog, [])
            runs += 1
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        best = max(best, (flops * runs / wall / 1e9, flops * runs / cpu / 1e9))
    return best


def main():
    core = NpuCore(MachineConfig(sram_bytes=16 * 1024 * KIB))
    cases = []
    for dtype, (m, n, k) in (("f32", (256, 256, 256)), ("f32", (64, 512, 128)),
                             ("f32", (1, 1024, 1024)), ("f32", (7, 512, 256)),
                             ("f16", (256, 256, 256)), ("i8", (256, 256, 256))):
        prog = program(instr("matmul", dtype, a=0, b=4096 * KIB, out=8192 * KIB, m=m, n=n,
                             k=k, lda=k, ldb=n, ldo=n))
        cases.append((f"matmul {dtype} {m}x{n}x{k}", prog, 2 * m * n * k))
    for dtype, (c, f, h, w, kk, groups) in (("f32", (64, 64, 56, 56, 3, 1)),
                                           ("f32", (128, 128, 28, 28, 3, 1)),
                                           ("f32", (256, 256, 14, 14, 1, 1)),
                                           ("f32", (128, 128, 56, 56, 3, 128)),
                                           ("i8", (64, 64, 56, 56, 3, 1))):
        prog = program(instr("conv2d", dtype, **{"in": 0}, w=4096 * KIB, out=8192 * KIB, c=c,
                             hi=h + kk - 1, wi=w + kk - 1, f=f, ho=h, wo=w, kh_kw=(kk, kk),
                             sh_sw=(1, 1), dh_dw=(1, 1), groups=groups))
        flops = 2 * h * w * f * (c // groups) * kk * kk
        cases.append((f"conv2d {dtype} c{c} f{f} {h}x{w} k{kk} g{groups}", prog, flops))
    print(f"{'GFLOP/s':40s} {'wall':>7s} {'cpu':>7s}")
    for name, prog, flops in cases:
        wall, cpu = _measure(core, prog, flops)
        print(f"{name:40s} {wall:7.2f} {cpu:7.2f}")


if __name__ == "__main__":
    main()
