"""An export's true roofline (cost.Roofline): recorded by the builder, read back,
printed and assembled as `.roofline`, and its cycles from the machine's peaks."""
import pytest

from executable_format.asm import assemble
from executable_format.builder import READ_ONLY, ExecutableBuilder
from executable_format.cost import Roofline
from executable_format.disasm import disassemble
from executable_format.errors import FormatError
from executable_format.machine import MachineConfig
from executable_format.reader import read_executable

from .helpers import TILE_BYTES, relu_program

BOUND = Roofline(useful_macs=1 << 20, mac_dtype="i8", read_bytes=4096, write_bytes=8192)


def executable(roofline) -> bytes:
    b = ExecutableBuilder()
    b.add_export("relu", bindings=[(READ_ONLY, TILE_BYTES), (0, TILE_BYTES)],
                 program=relu_program(), roofline=roofline)
    return b.finish()


def test_roofline_round_trips():
    data = executable(BOUND)
    assert read_executable(data).export("relu").roofline == BOUND
    text = disassemble(data)
    assert ".roofline macs=1048576, dtype=i8, read=4096, write=8192" in text
    assert assemble(text) == data
    assert read_executable(executable(None)).export("relu").roofline is None


def test_roofline_cycles_are_the_largest_bound():
    m = MachineConfig()
    assert BOUND.cycles(m) == max((1 << 20) / m.peak_macs_per_cycle("i8"),
                                  4096 / m.dram_bytes_per_cycle, 8192 / m.dram_bytes_per_cycle)
    assert BOUND.bound(m) == "MACs"
    memory_bound = Roofline(0, "f32", 1 << 20, 64)
    assert memory_bound.cycles(m) == (1 << 20) / m.dram_bytes_per_cycle
    assert memory_bound.bound(m) == "DRAM"
    assert memory_bound.fraction(m, 2 * round(memory_bound.cycles(m))) == pytest.approx(0.5)


def test_asm_roofline_needs_every_key():
    with pytest.raises(FormatError, match="<asm>:2: .roofline needs macs=N, dtype=DTYPE"):
        assemble(".export x bindings=[]\n.roofline macs=1, dtype=f32\n    end\n")
