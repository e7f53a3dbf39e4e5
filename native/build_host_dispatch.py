"""Builds native/_host_dispatch*.so (cffi, out-of-line API mode) from host_dispatch.c,
elf_loader.c, fault_guard.c and guarded_memory.c.

Run from the repository root with the venv python (the Makefile does):
    .venv/bin/python native/build_host_dispatch.py
"""
import pathlib

import cffi
from extension_install import compile_and_install
from header_cdef import cdef_from_header

NATIVE_DIR = pathlib.Path(__file__).resolve().parent
BUILD_DIR = NATIVE_DIR.parent / "build" / "host_dispatch"

def build() -> pathlib.Path:
    ffibuilder = cffi.FFI()
    ffibuilder.cdef(cdef_from_header(NATIVE_DIR / "host_dispatch.h") +
                    cdef_from_header(NATIVE_DIR / "guarded_memory.h"))
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
