"""The native core re-implements the verifier's checks (npu_core.c's pre-pass mirrors
executable_format/verifier.py, its run-time range checks ranges.py): random valid programs
and mutants of them get the same verdict from both, accepted or rejected.

Three rules are the verifier's alone, so the programs here stay clear of them: every
binding is writable (the core does not see binding flags), the program declares the
machine's SRAM size, and both judge the program up to its first `end` (the core runs that
far; the verifier also requires `end` to be the last instruction). The per-program work
limit, which the core leaves to its deadline, is out of reach of a few mutated fields.
One rule is the core's alone: vrequant's records are data in SRAM, which the core checks
as it reads them ("instruction I (vrequant): record N: ..."); a mutant whose records it rejects is counted apart.
"""
import random

import numpy as np

from executable_format.builder import ExecutableBuilder, ProgramBuilder
from executable_format.errors import FormatError
from executable_format.isa import (INSTRUCTION_BYTES, INSTRUCTION_DTYPE, OPCODE_LIST,
                                   OPCODES, OPCODES_BY_NAME, OPERAND_COUNT, pack_pair)
from executable_format.machine import MachineConfig
from executable_format.verifier import verify
from hal_driver.device.npu_core import NpuCore
from hal_driver.status import StatusError
from tests.format.random_programs import BINDINGS, CONSTANTS_BYTES, emit_random
from tests.format.test_verifier import instructions_at

MACHINE = MachineConfig()
BINDING_SIZES = [size for _, size in BINDINGS]
CONSTANT_COUNT = 2
PROGRAMS = 150
MUTANTS = 2000
END = OPCODES_BY_NAME["end"].code
SRAM = MACHINE.sram_bytes
FIELD_VALUES = (0, 1, 2, 3, 4, 7, 8, 16, 63, 64, 255, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF,
                0x80000000, 0xFFFFFFFC, 0xFFFFFFFF, SRAM - 64, SRAM - 4, SRAM, SRAM + 4,
                pack_pair(1, 1), pack_pair(0, 1), pack_pair(1, 0), pack_pair(3, 3),
                pack_pair(0xFFFF, 1), 0x3F800000, 0x7FC00000)


def random_records(rng: random.Random) -> bytes:
    p = ProgramBuilder()
    emit_random(p, rng, MACHINE.semaphores, rng.randint(1, 30))
    p.end()
    return p.instructions()


def mutate(records: bytes, rng: random.Random) -> bytes:
    """1 to 3 changes of opcode, dtype, flags or operand fields of random records."""
    array = np.frombuffer(records, INSTRUCTION_DTYPE).copy()
    for _ in range(rng.randint(1, 3)):
        record = array[rng.randrange(len(array))]
        kind = rng.randrange(8)
        if kind == 0:
            record["opcode"] = rng.choice([rng.randrange(256), rng.choice(OPCODE_LIST).code])
        elif kind == 1:
            record["dtype"] = rng.randrange(8)
        elif kind == 2:
            record["flags"] = rng.choice([1 << rng.randrange(16), rng.randrange(16),
                                          record["flags"] ^ (1 << rng.randrange(4))])
        else:     # mostly a field the opcode has (the others are simply nonzero)
            info = OPCODES.get(int(record["opcode"]))
            count = len(info.fields) if info and info.fields and rng.random() < 0.9 \
                else OPERAND_COUNT
            slot = rng.randrange(count)
            old = int(record["a"][slot])
            record["a"][slot] = rng.choice([rng.choice(FIELD_VALUES), rng.getrandbits(32),
                                            (old + rng.choice([-1, 1])) % (1 << 32),
                                            old ^ (1 << rng.randrange(32))])
    return array.tobytes()


def up_to_first_end(records: bytes) -> bytes:
    opcodes = np.frombuffer(records, INSTRUCTION_DTYPE)["opcode"]
    ends = np.flatnonzero(opcodes == END)
    return records[:(int(ends[0]) + 1) * INSTRUCTION_BYTES] if len(ends) else records


def verifier_verdict(records: bytes, constants: bytes) -> str | None:
    """None if the verifier accepts an executable running `records`, else its message."""
    placeholder = ProgramBuilder(sram_bytes=SRAM)
    for _ in range(len(records) // INSTRUCTION_BYTES):
        placeholder.emit("barrier")
    b = ExecutableBuilder(machine=MACHINE)
    b.add_constants(constants)
    b.add_export("e", [(0, size) for size in BINDING_SIZES], constant_count=CONSTANT_COUNT,
                 program=placeholder)
    data = bytearray(b.finish(verify_output=False))
    start = instructions_at(bytes(data))
    data[start:start + len(records)] = records
    try:
        verify(bytes(data))
    except FormatError as error:
        return str(error)
    return None


class CoreJudge:
    def __init__(self, constants: bytes):
        self.core = NpuCore(MACHINE)
        self.constants = constants
        self.bindings = [np.zeros(size, np.uint8) for size in BINDING_SIZES]

    def verdict(self, records: bytes) -> str | None:
        """None if the core runs `records`, else its message."""
        try:
            self.core.execute(records, self.bindings, constants=[0] * CONSTANT_COUNT,
                              const_pool=self.constants)
        except StatusError as error:
            return error.message
        return None


def _compare(programs) -> dict:
    rng = random.Random(20261125)
    constants = rng.randbytes(CONSTANTS_BYTES)
    core = CoreJudge(constants)
    verdicts = {"accepted": 0, "rejected": 0}
    for records in programs(rng):
        records = up_to_first_end(records)
        expected, got = verifier_verdict(records, constants), core.verdict(records)
        if expected is None and got is not None and ": record " in got:
            verdicts["record data"] = verdicts.get("record data", 0) + 1
            continue
        assert (expected is None) == (got is None), (
            f"verifier: {expected or 'accepts'}; core: {got or 'accepts'}\n"
            f"{np.frombuffer(records, INSTRUCTION_DTYPE)}")
        verdicts["accepted" if got is None else "rejected"] += 1
    return verdicts


def test_random_programs_are_accepted_by_both():
    verdicts = _compare(lambda rng: (random_records(rng) for _ in range(PROGRAMS)))
    assert verdicts == {"accepted": PROGRAMS, "rejected": 0}


def test_mutated_programs_get_the_same_verdict():
    verdicts = _compare(lambda rng: (mutate(random_records(rng), rng) for _ in range(MUTANTS)))
    assert verdicts.get("record data", 0) < MUTANTS // 50, verdicts
    assert verdicts["accepted"] > MUTANTS // 10 and verdicts["rejected"] > MUTANTS // 3, verdicts
