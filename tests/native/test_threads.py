"""Heavy MAC instructions are split over NPU_SIM_THREADS threads: every thread count
gives the same bits and statistics, and a setting that is not a positive number falls
back to the online CPUs; a thread that cannot be created leaves its work to the caller;
a forked child (the compiler's planning workers) uses and destroys an inherited core
without its parent's threads."""
import os
import pathlib
import subprocess
import sys

import numpy as np

from executable_format import isa
from executable_format.machine import MachineConfig
from hal_driver.device.npu_core import NpuCore
from tests.native.programs import SramImage, instr, random_values, run_on_sram

F = isa.Flag
MACHINE = MachineConfig(sram_bytes=8 * 1024 * 1024)


def _matmul(rng, dtype, m, n, k, flags):
    acc = "i32" if dtype == "i8" else "f32"
    image = SramImage()
    a = image.put(random_values(rng, dtype, (m, k)))
    b = image.put(random_values(rng, dtype, (k, n)))
    out = image.put(random_values(rng, acc, (m, n)))
    bias = image.put(random_values(rng, acc, n)) if flags & F.BIAS else 0
    return image, instr("matmul", dtype, flags, a=a, b=b, out=out, m=m, n=n, k=k, lda=k,
                        ldb=n, ldo=n, bias=bias), (out, acc, (m, n))


def _matvec_transposed_b(rng, n, k, flags):
    """m = 1, f32, B transposed (rows of k, one per output column): its own kernel."""
    image = SramImage()
    a = image.put(random_values(rng, "f32", (1, k)))
    b = image.put(random_values(rng, "f32", (n, k)))
    out = image.put(random_values(rng, "f32", (1, n)))
    return image, instr("matmul", "f32", flags | F.TRANSPOSE_B, a=a, b=b, out=out, m=1, n=n,
                        k=k, lda=k, ldb=k, ldo=n), (out, "f32", (1, n))


def _conv(rng, dtype, c, f, ho, wo, kk, groups, flags):
    acc = "i32" if dtype == "i8" else "f32"
    hi, wi = ho + kk - 1, wo + kk - 1
    image = SramImage()
    x = image.put(random_values(rng, dtype, (c, hi, wi)))
    w = image.put(random_values(rng, dtype, (f, c // groups, kk, kk)))
    out = image.put(random_values(rng, acc, (f, ho, wo)))
    bias = image.put(random_values(rng, acc, f)) if flags & F.BIAS else 0
    return image, instr("conv2d", dtype, flags, **{"in": x}, w=w, out=out, c=c, hi=hi,
                        wi=wi, f=f, ho=ho, wo=wo, kh_kw=(kk, kk), sh_sw=(1, 1),
                        dh_dw=(1, 1), groups=groups, bias=bias), (out, acc, (f, ho, wo))


def _cases(rng):
    """Each large enough for two workers or more: split by columns, by rows, by chunks
    of output rows, or (one chunk) the chunk's GEMM; with edge tiles on both sides."""
    return [_matmul(rng, "f32", 97, 301, 163, F.ACCUMULATE),
            _matmul(rng, "i8", 301, 45, 331, F.BIAS),
            _matmul(rng, "f16", 130, 258, 255, 0),
            _matvec_transposed_b(rng, 1030, 1100, F.ACCUMULATE),
            _conv(rng, "f32", 35, 47, 31, 29, 3, 1, F.BIAS),
            _conv(rng, "bf16", 64, 64, 40, 40, 3, 4, F.ACCUMULATE),
            _conv(rng, "i8", 48, 40, 30, 30, 3, 1, 0),
            _conv(rng, "f32", 32, 50, 14, 14, 3, 1, F.BIAS)]


def _run_all(threads, monkeypatch):
    monkeypatch.setenv("NPU_SIM_THREADS", threads)
    core = NpuCore(MACHINE)
    results = []
    for image, record, (out, acc, shape) in _cases(np.random.default_rng(5)):
        result = run_on_sram(core, image, record)
        results.append((result.view(out, acc, shape).tobytes(), result.stats.total_cycles,
                        result.stats.macs))
    return results


def test_thread_counts_agree_bit_for_bit(monkeypatch):
    single = _run_all("1", monkeypatch)
    for threads in ("2", "3", "8", "0", "many"):
        assert _run_all(threads, monkeypatch) == single, threads


def test_one_pool_serves_a_program_of_large_instructions(monkeypatch):
    image, record, (out, acc, shape) = _matmul(np.random.default_rng(6), "f32", 64, 200, 96,
                                               F.ACCUMULATE)
    results = []
    for threads in ("1", "2", "4"):
        monkeypatch.setenv("NPU_SIM_THREADS", threads)
        result = run_on_sram(NpuCore(MACHINE), image, *[record] * 5)
        results.append(result.view(out, acc, shape).tobytes())
    assert results[1:] == results[:1] * 2


_NO_THREADS_SHIM = """
#include <errno.h>
#include <pthread.h>
int pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* arg) {
  (void)t; (void)a; (void)f; (void)arg;
  return EAGAIN;
}
"""

_RUN_CASES = """
import hashlib, numpy as np
from hal_driver.device.npu_core import NpuCore
from tests.native.programs import run_on_sram
from tests.native.test_threads import MACHINE, _cases
core = NpuCore(MACHINE)
digest = hashlib.sha256()
for image, record, (out, acc, shape) in _cases(np.random.default_rng(5)):
    digest.update(run_on_sram(core, image, record).view(out, acc, shape).tobytes())
print(digest.hexdigest())
"""


def test_failed_thread_creation_runs_on_the_caller(tmp_path):
    """With every pthread_create failing, a 4-thread core computes the same bits."""
    shim = tmp_path / "no_threads.so"
    source = tmp_path / "no_threads.c"
    source.write_text(_NO_THREADS_SHIM)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True)
    root = pathlib.Path(__file__).resolve().parents[2]
    digests = []
    for threads, preload in (("1", ""), ("4", str(shim))):
        env = dict(os.environ, NPU_SIM_THREADS=threads, LD_PRELOAD=preload,
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        run = subprocess.run([sys.executable, "-c", _RUN_CASES], cwd=root, env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        digests.append(run.stdout.strip())
    assert digests[0] == digests[1]


_FORK_CHILD = """
import gc, hashlib, os, time
import numpy as np
from hal_driver.device.npu_core import NpuCore
from tests.native.programs import run_on_sram
from tests.native.test_threads import MACHINE, _matmul

image, record, (out, acc, shape) = _matmul(np.random.default_rng(7), "f32", 96, 256, 128, 0)

def digest(core):
    return hashlib.sha256(run_on_sram(core, image, record).view(out, acc, shape).tobytes()).hexdigest()

core = NpuCore(MACHINE)
parent = digest(core)       # starts the core's pool
time.sleep(0.2)             # its threads stop spinning and wait on the pool's condition
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    child = digest(core)    # the child's own pool
    del core
    gc.collect()            # destroys the inherited core
    os.write(write, child.encode())
    os._exit(0)
os.close(write)
child = os.read(read, 64).decode()
_, status = os.waitpid(pid, 0)
del core
gc.collect()
print(status, parent == child)
"""


def test_a_forked_child_uses_and_destroys_an_inherited_core(tmp_path):
    """The child neither joins its parent's threads nor destroys the condition variable
    they wait on (that waited forever: the compiler's forked planning workers hung when
    a collection destroyed an NpuCore they had inherited)."""
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, NPU_SIM_THREADS="2", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", _FORK_CHILD], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "True"]
