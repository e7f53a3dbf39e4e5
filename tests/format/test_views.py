"""Binding views: windows of a binding at a byte offset a push constant gives at dispatch
time (how IREE passes each call site's offsets to a deduplicated dispatch). Instructions
address view k as binding len(bindings) + k; the verifier checks every access against
the view's min_size and the view against the export's bindings and constants."""
import pytest

from executable_format.asm import assemble
from executable_format.disasm import disassemble
from executable_format.errors import FormatError
from executable_format.reader import BindingView, read_executable

from .helpers import TILE_BYTES, dma, relu_executable, relu_view_executable
from .test_verifier import rejects


def test_views_read_back_and_round_trip_through_asm():
    data = relu_view_executable()
    export = read_executable(data).export("relu")
    assert export.views == [BindingView(0, 0, TILE_BYTES), BindingView(1, 1, TILE_BYTES)]
    assert export.constant_count == 2 and export.binding_count == 2
    text = disassemble(data)
    assert f"views=[0+pc0:{TILE_BYTES},1+pc1:{TILE_BYTES}]" in text
    assert assemble(text) == data


def test_scaled_view_round_trips():
    data = relu_view_executable(views=((0, 0, TILE_BYTES, 512), (1, 1, TILE_BYTES, -64, 4096)))
    assert read_executable(data).export("relu").views[0] == BindingView(0, 0, TILE_BYTES, 512)
    text = disassemble(data)
    assert f"views=[0+pc0*512:{TILE_BYTES},1+pc1*-64+4096:{TILE_BYTES}]" in text
    assert assemble(text) == data


def test_stepped_view_round_trips():
    """npu-fb 2.9: a second term, push constant 0 x 1024 (a time step) inside a window at
    push constant 1 (a call site's offset)."""
    data = relu_view_executable(views=((0, 0, TILE_BYTES), (1, 1, TILE_BYTES, 1, 64, 0, 1024)))
    assert read_executable(data).export("relu").views[1] == \
        BindingView(1, 1, TILE_BYTES, 1, 64, 0, 1024)
    text = disassemble(data)
    assert f"views=[0+pc0:{TILE_BYTES},1+pc1+pc0*1024+64:{TILE_BYTES}]" in text
    assert assemble(text) == data


def test_view_step_from_a_missing_push_constant():
    rejects(relu_view_executable(views=((0, 0, TILE_BYTES), (1, 1, TILE_BYTES, 1, 0, 2, 8)),
                                 verify=False),
            "export 0 view 1 takes its step from push constant 2 (2 constants)")


def test_executable_without_views_has_none():
    assert read_executable(relu_executable()).export("relu").views == []


def test_view_of_a_missing_binding():
    rejects(relu_view_executable(views=((0, 0, TILE_BYTES), (2, 1, TILE_BYTES)), verify=False),
            "export 0 view 1 names binding 2 (2 bindings)")


def test_view_offset_from_a_missing_push_constant():
    rejects(relu_view_executable(views=((0, 0, TILE_BYTES), (1, 2, TILE_BYTES)), verify=False),
            "export 0 view 1 takes its offset from push constant 2 (2 constants)")


def test_access_beyond_a_view():
    rejects(relu_view_executable(views=((0, 0, TILE_BYTES - 4), (1, 1, TILE_BYTES)),
                                 verify=False),
            f"DRAM range [0, {TILE_BYTES}) of dram_offset exceeds binding 2 min_size "
            f"{TILE_BYTES - 4}")


def test_store_to_a_view_of_a_read_only_binding():
    rejects(relu_view_executable(extra=lambda p: dma(p, "dma.store", 2, sram_addr=0),
                                 verify=False),
            "stores to read-only binding 2")


def test_binding_index_past_the_views():
    rejects(relu_view_executable(extra=lambda p: dma(p, "dma.load", 4, sram_addr=0),
                                 verify=False),
            "binding 4 out of range (4 bindings)")


def test_asm_view_syntax_errors_name_the_line():
    with pytest.raises(FormatError, match=r"<asm>:1: view needs "
                                          r"BINDING\+pcK\[\*SCALE\]\[\+pcJ\*STEP\]\[\+BASE\]:SIZE, "
                                          r"got '0:64'"):
        assemble(".export x bindings=[ro:0] views=[0:64] constant_count=1\n    end\n")
