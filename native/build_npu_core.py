"""Builds native/_npu_core*.so (cffi, out-of-line API mode) from the core's sources:
one extension, its API declared once in npu_core.h.

Run from the repository root with the venv python (the Makefile does):
    .venv/bin/python native/build_npu_core.py
"""
import os
import pathlib
import subprocess
import tempfile

import cffi
from extension_install import compile_and_install
from header_cdef import cdef_from_header

NATIVE_DIR = pathlib.Path(__file__).resolve().parent
BUILD_DIR = NATIVE_DIR.parent / "build" / "npu_core"
# The core by concern (npu_core.c's header comment says what each holds).
SOURCES = ["npu_core.c", "npu_exec.c", "npu_validate.c", "npu_ranges.c", "npu_deferred.c",
           "npu_dma.c", "npu_mac.c", "npu_vector.c", "npu_requant.c", "npu_threads.c",
           "npu_stop.c", "npu_timeline.c"]

# -fwrapv: i8/i32 accumulation and vector integer arithmetic wrap.
# -fno-strict-aliasing: SRAM bytes are read and written as every dtype.
# -ffp-contract=fast: the GEMM kernel may use fused multiply-add.
# -pthread: heavy instructions are split over threads (NPU_SIM_THREADS, docs/performance.md).
# -fvisibility=hidden: the core's files call each other directly; the extension exports
# only its Python module.
BASE_FLAGS = ["-std=c11", "-O3", "-Wall", "-fwrapv", "-fno-strict-aliasing", "-ffp-contract=fast",
              "-fno-math-errno", "-pthread", "-fvisibility=hidden"]
# The MAC kernels' sums are one fused multiply-add per product (docs/npu-architecture.md)
# where the target has FMA. GCC's tuning for AMD Zen (-march=native there) declines to
# contract a tight chain of multiply-adds of vectors up to 256 bits into FMAs
# (avoid-fma-max-bits), which would round each product: with 0 it always contracts.
CONTRACT_FLAGS = ["--param=avoid-fma-max-bits=0"]


def _gcc_accepts(flags: list[str]) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "probe.c"
        source.write_text("int main(void) { return 0; }\n")
        probe = subprocess.run(["gcc", *flags, "-c", str(source), "-o",
                                str(pathlib.Path(tmp) / "probe.o")], capture_output=True)
    return probe.returncode == 0


def _native_arch_flags() -> list[str]:
    """-march=native when this gcc accepts it (the library is built where it runs).

    NPU_SIM_MARCH overrides it, to build (and measure) the core as another machine would
    get it: NPU_SIM_MARCH=x86-64-v3 (AVX2 + FMA), =x86-64 (SSE2 baseline), =none (no
    -march flag at all), or any other -march value gcc accepts."""
    march = os.environ.get("NPU_SIM_MARCH", "").strip()
    if march:
        return [] if march == "none" else [f"-march={march}"]
    return ["-march=native"] if _gcc_accepts(["-march=native"]) else []


def build() -> pathlib.Path:
    ffibuilder = cffi.FFI()
    ffibuilder.cdef(cdef_from_header(NATIVE_DIR / "npu_core.h"))   # checked against it
    ffibuilder.set_source(
        "native._npu_core",
        '#include "npu_core.h"',
        sources=[str(NATIVE_DIR / source) for source in SOURCES],
        include_dirs=[str(NATIVE_DIR)],
        libraries=["m"],
        extra_compile_args=BASE_FLAGS + (CONTRACT_FLAGS if _gcc_accepts(CONTRACT_FLAGS) else [])
        + _native_arch_flags(),
        extra_link_args=["-pthread"],
    )
    return compile_and_install(ffibuilder, BUILD_DIR, NATIVE_DIR)


if __name__ == "__main__":
    print(f"built {build()}")
