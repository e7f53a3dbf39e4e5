"""Corrupted or truncated vmfb files either load or raise StatusError: never another
exception, never a hang."""
import random
import time

import pytest

from hal_driver.status import StatusError
from hal_driver.vm import BytecodeModule
from hal_driver.vm.container import parse_archive
from hal_driver.vm.context import ModuleState

from .test_real_model import LLVM_CPU


def _mutants(data: bytes, rng: random.Random, count: int, region: tuple):
    start, end = region
    for i in range(count):
        mutant = bytearray(data)
        kind = i % 4
        if kind == 0:                      # flip a few bytes
            for _ in range(rng.randrange(1, 6)):
                mutant[rng.randrange(start, end)] = rng.randrange(256)
        elif kind == 1:                    # overwrite a 32-bit word (offsets, lengths)
            at = rng.randrange(start, end - 4)
            mutant[at:at + 4] = rng.choice([b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\xff\xff\xff\xff",
                                            rng.randbytes(4)])
        elif kind == 2:                    # truncate
            del mutant[rng.randrange(0, len(mutant)):]
        else:                              # single bit flip
            at = rng.randrange(start, end)
            mutant[at] ^= 1 << rng.randrange(8)
        yield bytes(mutant)


def _check(data: bytes, count: int, seed: int) -> dict:
    archive = parse_archive(data)
    region = (archive.flatbuffer_offset, archive.flatbuffer_offset + len(archive.flatbuffer))
    rng = random.Random(seed)
    outcomes = {}
    for mutant in _mutants(data, rng, count, region):
        started = time.monotonic()
        try:
            module = BytecodeModule.from_bytes(mutant)
            state = ModuleState(module)
            for ordinal in range(len(module.functions)):
                state.function(ordinal)        # building handlers must not fail either
            outcome = "loaded"
        except StatusError as e:
            outcome = e.code.name
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert time.monotonic() - started < 5, "loading a mutant took over 5 s (hang?)"
    return outcomes


@pytest.fixture(scope="module")
def program_bytes(compile_mlir):
    return compile_mlir.module_file("program.mlir").read_bytes()


def test_corrupted_real_model(compile_mlir):
    data = compile_mlir.module_file("matmul.mlir", LLVM_CPU).read_bytes()
    outcomes = _check(data, 250, seed=1)
    assert len(outcomes) > 1, outcomes     # some mutants must be rejected


def test_corrupted_bytecode_heavy_module(program_bytes):
    outcomes = _check(program_bytes, 250, seed=2)
    assert len(outcomes) > 1, outcomes
