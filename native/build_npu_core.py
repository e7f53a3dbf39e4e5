"""Builds native/_npu_core*.so (cffi, out-of-line API mode) from npu_core.c.

Run from the repository root with the venv python (the Makefile does):
    .venv/bin/python native/build_npu_core.py
"""
import os
import pathlib
import subprocess
import tempfile

import cffi
from extension_install import compile_and_install

NATIVE_DIR = pathlib.Path(__file__).resolve().parent
BUILD_DIR = NATIVE_DIR.parent / "build" / "npu_core"

# Our API from npu_core.h; cffi checks it against the header when compiling.
CDEF = """
#define NPU_STATUS_OK 0
#define NPU_STATUS_CANCELLED 1
#define NPU_STATUS_INVALID_ARGUMENT 3
#define NPU_STATUS_DEADLINE_EXCEEDED 4
#define NPU_STATUS_RESOURCE_EXHAUSTED 8
#define NPU_STATUS_OUT_OF_RANGE 11
#define NPU_ENGINE_COUNT 4
#define NPU_CONST_POOL_BINDING 0xFFFFFFFF
#define NPU_INSTRUCTION_BYTES 64

typedef struct npu_machine_config_t {
  uint64_t clock_hz;
  uint64_t mac_rows;
  uint64_t mac_cols;
  uint64_t f32_rate_divisor;
  uint64_t i8_rate_multiplier;
  uint64_t mac_latency_cycles;
  uint64_t sram_bytes;
  uint64_t sram_banks;
  uint64_t sram_bytes_per_cycle;
  uint64_t dram_bytes_per_cycle;
  uint64_t dma_burst_bytes;
  uint64_t dma_latency_cycles;
  uint64_t vector_bytes_per_cycle;
  uint64_t vector_latency_cycles;
  uint64_t transcendental_factor;
  uint64_t semaphores;
} npu_machine_config_t;

typedef struct npu_binding_t {
  uint8_t* data;
  size_t length;
} npu_binding_t;

typedef struct npu_stats_t {
  uint64_t total_cycles;
  uint64_t busy_cycles[4];
  uint64_t stall_cycles[4];
  uint64_t dram_read_bytes;
  uint64_t dram_write_bytes;
  uint64_t macs;
  uint64_t sram_peak_bytes;
  uint64_t instructions;
  uint64_t trace_count;
} npu_stats_t;

typedef struct npu_trace_event_t {
  uint64_t start;
  uint64_t end;
  uint32_t engine;
  uint32_t opcode;
  uint32_t index;
} npu_trace_event_t;

typedef struct npu_run_limits_t {
  uint64_t timeout_ns;
  uint32_t stop_on_sigint;
} npu_run_limits_t;

typedef struct npu_core_t npu_core_t;

npu_core_t* npu_core_create(const npu_machine_config_t* config);
void npu_core_destroy(npu_core_t* core);
void npu_core_cancel(npu_core_t* core);
int npu_core_execute(npu_core_t* core, const uint8_t* program, size_t program_bytes,
                     const npu_binding_t* bindings, size_t binding_count,
                     const uint8_t* const_pool, size_t const_pool_bytes,
                     const uint32_t* constants, size_t constant_count,
                     const npu_run_limits_t* limits, npu_stats_t* stats,
                     npu_trace_event_t* trace, size_t trace_capacity, char* error,
                     size_t error_capacity);
"""

# -fwrapv: i8/i32 accumulation and vector integer arithmetic wrap.
# -fno-strict-aliasing: SRAM bytes are read and written as every dtype.
# -ffp-contract=fast: the GEMM kernel may use fused multiply-add.
# -pthread: heavy instructions are split over threads (NPU_SIM_THREADS, docs/performance.md).
BASE_FLAGS = ["-std=c11", "-O3", "-Wall", "-fwrapv", "-fno-strict-aliasing", "-ffp-contract=fast",
              "-fno-math-errno", "-pthread"]


def _native_arch_flags() -> list[str]:
    """-march=native when this gcc accepts it (the library is built where it runs).

    NPU_SIM_MARCH overrides it, to build (and measure) the core as another machine would
    get it: NPU_SIM_MARCH=x86-64-v3 (AVX2 + FMA), =x86-64 (SSE2 baseline), =none (no
    -march flag at all), or any other -march value gcc accepts."""
    march = os.environ.get("NPU_SIM_MARCH", "").strip()
    if march:
        return [] if march == "none" else [f"-march={march}"]
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "probe.c"
        source.write_text("int main(void) { return 0; }\n")
        probe = subprocess.run(["gcc", "-march=native", "-c", str(source), "-o",
                                str(pathlib.Path(tmp) / "probe.o")], capture_output=True)
    return ["-march=native"] if probe.returncode == 0 else []


def build() -> pathlib.Path:
    ffibuilder = cffi.FFI()
    ffibuilder.cdef(CDEF)
    ffibuilder.set_source(
        "native._npu_core",
        '#include "npu_core.h"',
        sources=[str(NATIVE_DIR / "npu_core.c")],
        include_dirs=[str(NATIVE_DIR)],
        libraries=["m"],
        extra_compile_args=BASE_FLAGS + _native_arch_flags(),
        extra_link_args=["-pthread"],
    )
    return compile_and_install(ffibuilder, BUILD_DIR, NATIVE_DIR)


if __name__ == "__main__":
    print(f"built {build()}")
