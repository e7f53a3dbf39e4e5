"""The cffi declarations come from the C header (native/header_cdef.py)."""
from native.header_cdef import cdef_from_header
from native._npu_core import lib

HEADER = """/* A header. */
#ifndef EXAMPLE_H_
#define EXAMPLE_H_

#include <stdint.h>

#define EXAMPLE_LIMIT 4      /* a constant */
// a line comment
typedef struct example_t {
  uint64_t values[EXAMPLE_LIMIT];   /* per item */
} example_t;

int example_run(example_t* example);

#endif  /* EXAMPLE_H_ */
"""


def test_keeps_declarations_and_constants_only(tmp_path):
    header = tmp_path / "example.h"
    header.write_text(HEADER)
    assert cdef_from_header(header) == (
        "#define EXAMPLE_LIMIT 4\n"
        "typedef struct example_t {\n"
        "  uint64_t values[EXAMPLE_LIMIT];\n"
        "} example_t;\n"
        "int example_run(example_t* example);\n")


def test_core_constants_come_from_npu_core_h():
    assert (lib.NPU_ENGINE_COUNT, lib.NPU_CONST_POOL_BINDING, lib.NPU_INSTRUCTION_BYTES) == \
        (4, 0xFFFFFFFF, 64)
