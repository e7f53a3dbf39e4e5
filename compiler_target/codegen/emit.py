"""Stage 4, emit: the scheduled program as a verified npu-fb executable and its listing.

Instructions are encoded as isa records through executable_format's ProgramBuilder; the
constant pool holds the inlined constants lowering placed; the export's bindings carry
the HAL binding flags and sizes, its views the push-constant-offset windows (each as
large as the program's reach in it); debug info keeps the dispatch name, source location and
the final NPU IR. The assembly listing is the format's own disassembly under a header
naming the dispatch, made when first read (dumps and tests read it; a compile does not:
disassembling re-reads and re-verifies the executable, 10-20 ms a dispatch).
"""
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from executable_format.builder import READ_ONLY, ExecutableBuilder, ProgramBuilder
from executable_format.cost import TimelineStats, simulate_timeline
from executable_format.disasm import disassemble
from executable_format.errors import FormatError
from executable_format.machine import MachineConfig
from executable_format.isa import INSTRUCTION_DTYPE
from executable_format.ranges import program_accesses

from .lower import NotLowerable
from .npu_ir import Instr, records


@dataclass
class Emitted:
    npu_fb: bytes
    header: list[str]
    stats: TimelineStats

    @cached_property
    def asm(self) -> str:
        return "".join(f"// {line}\n" for line in self.header) + disassemble(self.npu_fb)


def timeline(instrs: list[Instr], machine: MachineConfig, events: bool = False) -> TimelineStats:
    return simulate_timeline(machine, records(instrs), record_events=events)


def emit(instrs: list[Instr], *, name: str, bindings, views, roofline, constant_count: int,
         constants: bytes, machine: MachineConfig, source_location: str, npu_ir: str,
         header: list[str]) -> Emitted:
    program = ProgramBuilder()
    encoded = records(instrs)
    try:
        for opcode, dtype, flags, a in encoded:
            program.emit_raw(opcode, dtype, flags, a)
    except FormatError as error:     # a field the record cannot hold: a lowering limit
        raise NotLowerable(str(error)) from error
    builder = ExecutableBuilder(machine)
    if constants:
        builder.add_constants(constants)
    sizes = dram_reach(program.instructions())
    builder.add_export(name, bindings=[(READ_ONLY if b.read_only else 0, b.size_bytes)
                                       for b in bindings],
                       views=[(binding, constant, sizes.get(len(bindings) + k, 0), scale, base,
                               step_constant, step)
                              for k, ((binding, constant, scale, step_constant, step), base)
                              in enumerate(zip(views.keys, views.bases))],
                       constant_count=constant_count, program=program, roofline=roofline,
                       debug={"dispatch_name": name, "source_location": source_location,
                              "npu_ir": npu_ir})
    try:
        npu_fb = builder.finish()
    except FormatError as error:
        # A binding smaller than the op's tensors, or a lowering bug: either way the
        # dispatch cannot run on the NPU, and the reason says why.
        raise NotLowerable(str(error)) from error
    stats = simulate_timeline(machine, encoded)
    return Emitted(npu_fb, header, stats)


def dram_reach(instructions: bytes) -> dict[int, int]:
    """Program binding -> one past the highest DRAM byte the instructions touch in it."""
    records = np.frombuffer(instructions, dtype=INSTRUCTION_DTYPE)
    reach: dict[int, int] = {}
    for x in program_accesses(records):
        if x.memory == "dram":
            for binding, end in zip(x.binding.tolist(), x.end.tolist()):
                reach[binding] = max(reach.get(binding, 0), end)
    return reach
