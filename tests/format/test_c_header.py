"""native/npu_isa.h is the generator's output for executable_format/isa.py."""
import pathlib

from executable_format.c_header import COMMAND, header

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_native_isa_header_is_current():
    committed = (ROOT / "native" / "npu_isa.h").read_text()
    assert committed == header(), f"native/npu_isa.h is stale: regenerate it ({COMMAND})"


def test_every_opcode_reads_its_fields_before_the_unused_ones():
    """The table's used_fields bounds the fields an opcode reads: those it leaves unused
    (p0/p1 of the unary ops without parameters) must come last."""
    assert "vrelu\", ENGINE_VECTOR, 11," in header()
    assert "vround\", ENGINE_VECTOR, 13," in header()
