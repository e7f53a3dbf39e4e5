"""Byte-mutated and truncated buffers: each verifies or raises FormatError, nothing else."""
import pathlib
import random
import struct
import time

from executable_format.asm import assemble
from executable_format.errors import FormatError
from executable_format.reader import read_executable

from .helpers import relu_executable

CONV = pathlib.Path(__file__).resolve().parents[2] / "samples" / "asm" / "conv_tile.s"

MUTANTS = 4000
INTERESTING = (0, 1, 2, 3, 4, 7, 8, 63, 64, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF,
               0x80000000, 0xFFFFFFFC, 0xFFFFFFFF)


def mutate(data: bytes, rng: random.Random) -> bytes:
    data = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:                                      # truncate
        return bytes(data[:rng.randrange(len(data))])
    if kind == 1:                                      # flip bits
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 2:                                    # random bytes
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 3:                                    # boundary u32 at an aligned spot
        at = rng.randrange(len(data) // 4) * 4
        struct.pack_into("<I", data, at, rng.choice(INTERESTING))
    else:                                              # boundary u16 (vtable entries)
        at = rng.randrange(len(data) // 2) * 2
        struct.pack_into("<H", data, at, rng.choice(INTERESTING) & 0xFFFF)
    return bytes(data)


def test_mutants_verify_or_raise_format_error():
    rng = random.Random(20261122)
    originals = [relu_executable(), assemble(CONV.read_text())]
    started = time.process_time()
    outcomes = {"valid": 0, "rejected": 0}
    for index in range(MUTANTS):
        mutant = mutate(originals[index % 2], rng)
        try:
            read_executable(mutant)
            outcomes["valid"] += 1
        except FormatError as error:
            assert "\n" not in str(error)
            outcomes["rejected"] += 1
    assert outcomes["rejected"] > MUTANTS // 4 and outcomes["valid"] > 0, outcomes
    assert time.process_time() - started < 15
