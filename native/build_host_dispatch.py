"""Builds native/_host_dispatch*.so (cffi, out-of-line API mode) from host_dispatch.c,
elf_loader.c, fault_guard.c and guarded_memory.c.

Run from the repository root with the venv python (the Makefile does):
    .venv/bin/python native/build_host_dispatch.py
"""
import pathlib

import cffi
from extension_install import compile_and_install

NATIVE_DIR = pathlib.Path(__file__).resolve().parent
BUILD_DIR = NATIVE_DIR.parent / "build" / "host_dispatch"

# Our API from host_dispatch.h; cffi checks it against the header when compiling.
CDEF = """
typedef struct hd_library hd_library;

typedef struct hd_export_info {
  const char* name;
  uint64_t flags;
  uint32_t local_memory_pages;
  uint32_t constant_count;
  uint32_t binding_count;
  uint32_t workgroup_size[3];
} hd_export_info;

typedef struct hd_dispatch_failure {
  int result;
  uint32_t workgroup_id[3];
  int signal;
  uintptr_t address;
} hd_dispatch_failure;

#define HD_ERROR_CAPACITY 512
#define HD_DISPATCH_OK 0
#define HD_DISPATCH_WORKGROUP_FAILED 1
#define HD_DISPATCH_OUT_OF_MEMORY 2
#define HD_DISPATCH_FAULTED 3
#define HD_DISPATCH_DEADLINE_EXCEEDED 4
#define HD_DISPATCH_GUARD_FAILED 5

void* gm_acquire(size_t length, int zeroed);
void gm_release(void* p, size_t length);

int hd_library_load(const uint8_t* data, size_t size,
                    const uint32_t* constants, uint32_t constant_count,
                    hd_library** out, char* error);
void hd_library_free(hd_library* library);
const char* hd_library_name(const hd_library* library);
uint32_t hd_library_export_count(const hd_library* library);
void hd_library_export_info(const hd_library* library, uint32_t ordinal,
                            hd_export_info* out);
int hd_dispatch(const hd_library* library, uint32_t ordinal,
                uint32_t count_x, uint32_t count_y, uint32_t count_z,
                const uint32_t* constants, uint32_t constant_count,
                void* const* binding_ptrs, const size_t* binding_lengths,
                uint32_t binding_count, uint64_t timeout_ns,
                hd_dispatch_failure* failure);
"""


def build() -> pathlib.Path:
    ffibuilder = cffi.FFI()
    ffibuilder.cdef(CDEF)
    ffibuilder.set_source(
        "native._host_dispatch",
        '#include "host_dispatch.h"\n#include "guarded_memory.h"',
        sources=[str(NATIVE_DIR / name)
                 for name in ("host_dispatch.c", "elf_loader.c", "fault_guard.c",
                              "guarded_memory.c")],
        include_dirs=[str(NATIVE_DIR)],
        libraries=["dl", "rt"],
        extra_compile_args=["-std=c11", "-O2", "-Wall"],
    )
    return compile_and_install(ffibuilder, BUILD_DIR, NATIVE_DIR)


if __name__ == "__main__":
    print(f"built {build()}")
