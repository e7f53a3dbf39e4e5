"""link_npu_fb: the npu-fb executables of the NPU dispatches the stock linker put in one
hal.executable become one npu-fb executable."""
import random

import numpy as np
import pytest

from compiler_target.errors import CompileError
from compiler_target.hal_binaries import link_npu_fb
from executable_format.builder import ExecutableBuilder, ProgramBuilder
from executable_format.isa import CONST_POOL, OPCODES_BY_NAME
from executable_format.machine import MachineConfig
from executable_format.reader import read_executable
from hal_driver.device.npu_core import NpuCore
from tests.format.random_programs import BINDINGS, CONSTANTS_BYTES, emit_random

MACHINE = MachineConfig()
DMA_LOAD = OPCODES_BY_NAME["dma.load"].code


def random_part(rng: random.Random, names: list[str]) -> bytes:
    """Exports `names` over BINDINGS and a constant pool of CONSTANTS_BYTES or more (so
    that the next part's pool starts at some multiple of 64): random programs that end
    copying 256 bytes of the pool to binding 1."""
    builder = ExecutableBuilder(machine=MACHINE)
    builder.add_constants(rng.randbytes(CONSTANTS_BYTES + rng.randint(1, 100)))
    for name in names:
        program = ProgramBuilder()
        emit_random(program, rng, MACHINE.semaphores, 40)
        box = dict(dtype="u8", sram_addr=0, n0=1, n1=1, n2=1, n3=256, dram_s0=0, dram_s1=0,
                   dram_s2=0, dram_s3=1, sram_s0=0, sram_s1=0, sram_s2=0, sram_s3=1)
        program.emit("barrier")
        program.emit("dma.load", binding="const", dram_offset=rng.randrange(0, 1024), **box)
        program.emit("barrier")
        program.emit("dma.store", binding=1, dram_offset=0, **box)
        program.end()
        builder.add_export(name, BINDINGS, constant_count=2, program=program,
                           workgroup_count=(rng.randint(1, 3), 1, 1),
                           debug={"dispatch_name": name, "source_location": f"loc({name})"})
    return builder.finish()


def run(program, pool: bytes, seed: int) -> list[bytes]:
    """The bindings after running `program` on a fresh core from seeded contents."""
    data = np.random.default_rng(seed)
    bindings = [data.integers(0, 256, size, dtype=np.uint8) for _, size in BINDINGS]
    NpuCore(MACHINE).execute(program.instructions, bindings, constants=[3, 5], const_pool=pool)
    return [b.tobytes() for b in bindings]


def test_linked_exports_run_as_their_parts_did():
    rng = random.Random(11)
    names = [["main_dispatch_0"], ["main_dispatch_1", "main_dispatch_2"], ["main_dispatch_3"]]
    parts = [random_part(rng, part_names) for part_names in names]
    linked = read_executable(link_npu_fb(parts))

    assert [e.name for e in linked.exports] == [n for part_names in names for n in part_names]
    assert [e.ordinal for e in linked.exports] == [0, 1, 2, 3]
    relocated = 0
    for part in map(read_executable, parts):
        for export in part.exports:
            after = linked.export(export.name)
            assert (after.bindings, after.constant_count, after.workgroup_count, after.debug) == \
                (export.bindings, export.constant_count, export.workgroup_count, export.debug)
            before_records, after_records = export.program.records(), after.program.records()
            from_pool = (before_records["opcode"] == DMA_LOAD) & \
                (before_records["a"][:, 0] == CONST_POOL)
            relocated += int(np.count_nonzero(
                before_records["a"][from_pool, 1] != after_records["a"][from_pool, 1]))
            for seed in range(3):
                assert run(after.program, linked.constants, seed) == \
                    run(export.program, part.constants, seed), (export.name, seed)
    assert relocated > 0


def test_a_part_links_to_itself():
    part = random_part(random.Random(3), ["a", "b"])
    assert link_npu_fb([part]) == part


def test_export_names_must_be_unique():
    rng = random.Random(5)
    with pytest.raises(CompileError, match="two npu-fb exports named 'x'"):
        link_npu_fb([random_part(rng, ["x"]), random_part(rng, ["x"])])
