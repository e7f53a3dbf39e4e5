"""The core runs what executable_format builds: its hand-copied opcode table is isa.py's,
the hand-written asm samples compute the right numbers, verifier-accepted random programs
run, and programs the core rejects for a static rule are rejected by the verifier too."""
import pathlib

import numpy as np
import pytest

from executable_format import cost, isa
from executable_format.asm import assemble
from executable_format.builder import ExecutableBuilder, ProgramBuilder
from executable_format.errors import FormatError
from executable_format.reader import read_executable
from hal_driver.device.npu_core import NpuCore
from hal_driver.status import StatusError
from tests.native import test_faults
from tests.native.programs import decode, instr
from tests.native.test_cycles import random_program
from tests.native.test_mac import conv_reference

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples" / "asm"


def _encoding_error(core, opcode: int, dtype: int = 0, flags: int = 0, field: int = -1) -> str:
    """The core's message for one instruction with all fields zero but `field` (1)."""
    record = np.zeros((), isa.INSTRUCTION_DTYPE)
    record["opcode"], record["dtype"], record["flags"] = opcode, dtype, flags
    if field >= 0:
        record["a"][field] = 1
    try:
        core.execute(record.tobytes() + instr("end").tobytes(), [np.zeros(64, np.uint8)])
    except StatusError as error:
        return error.message
    return ""


def test_core_knows_exactly_the_isa_opcodes(core):
    unknown = [code for code in range(256) if code not in isa.OPCODES]
    assert all(_encoding_error(core, code) == f"instruction 0: invalid opcode {code}"
               for code in unknown)


@pytest.mark.parametrize("info", isa.OPCODE_LIST, ids=lambda info: info.name)
def test_core_opcode_table_is_isa(core, info):
    """Name, dtypes, flag bits and the fields read (the rest must be zero) of every opcode
    in native/npu_core.c's table are those of isa.py."""
    at = f"instruction 0 ({info.name}): "
    assert _encoding_error(core, info.code, info.dtypes[0], flags=0x8000) == \
        f"{at}invalid flags 0x8000"
    for dtype in isa.DType:
        rejected = _encoding_error(core, info.code, dtype) == \
            f"{at}dtype {isa.DTYPE_NAMES[dtype]} is not allowed"
        assert rejected == (dtype not in info.dtypes), dtype
    allowed = sum(isa.OPCODE_FLAGS.get(info.name, {}).values())
    for bit in range(16):
        rejected = _encoding_error(core, info.code, info.dtypes[0], 1 << bit) == \
            f"{at}invalid flags 0x{1 << bit:x}"
        assert rejected == (not allowed & (1 << bit)), bit
    used = isa.used_fields(info.name)
    assert info.fields[:len(used)] == used          # the unused fields are the last ones
    for field in range(isa.OPERAND_COUNT):
        rejected = _encoding_error(core, info.code, info.dtypes[0], field=field) == \
            f"{at}unused field a[{field}] must be zero, got 1"
        assert rejected == (field >= len(used)), field


def _run_sample(name, inputs):
    exe = read_executable(assemble((SAMPLES / name).read_text(), name))
    export = exe.exports[0]
    core = NpuCore(exe.machine)
    buffers = [np.zeros(b.min_size, np.uint8) for b in export.bindings]
    for index, array in inputs.items():
        buffers[index][:] = np.ascontiguousarray(array).view(np.uint8).ravel()
    stats = core.execute(export.program.instructions, buffers, const_pool=exe.constants,
                         trace=True)
    ref = cost.simulate_timeline(exe.machine, decode(export.program.instructions), True)
    assert (stats.total_cycles, stats.events) == (ref.total_cycles, ref.events)
    assert stats.sram_peak_bytes <= export.program.sram_bytes
    return exe, buffers


def test_conv_tile_sample(rng):
    x = rng.standard_normal((8, 16, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    exe, buffers = _run_sample("conv_tile.s", {0: x, 1: w})
    bias = np.frombuffer(exe.constants[:64], np.float32)
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1))).astype(np.float64)
    ref = conv_reference(padded, w.astype(np.float64), 1, (1, 1), (1, 1), 16, 16)
    ref = np.maximum(ref + bias[:, None, None], 0)
    np.testing.assert_allclose(buffers[2].view(np.float32).reshape(16, 16, 16), ref,
                               rtol=1e-4, atol=1e-4)


def test_matmul_tile_sample(rng):
    a = rng.standard_normal((32, 128)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    _, buffers = _run_sample("matmul_tile.s", {0: a, 1: b, 2: bias})
    ref = np.clip(a.astype(np.float64) @ b + bias, 0, 6)
    np.testing.assert_allclose(buffers[3].view(np.float32).reshape(32, 64), ref, rtol=1e-4,
                               atol=1e-4)


def _build(records: bytes, binding_bytes: int = 8192) -> bytes:
    program = ProgramBuilder()
    for r in np.frombuffer(records, dtype=isa.INSTRUCTION_DTYPE):
        program.emit_raw(int(r["opcode"]), int(r["dtype"]), int(r["flags"]), r["a"].tolist())
    builder = ExecutableBuilder()
    builder.add_export("e", bindings=[(0, binding_bytes), (0, binding_bytes)], program=program)
    return builder.finish()


def test_verifier_accepts_random_programs_the_core_runs(core, rng):
    bindings = [np.zeros(1 << 16, np.uint8), np.zeros(1 << 16, np.uint8)]
    for _ in range(20):
        prog = random_program(rng, int(rng.integers(1, 30)))
        exe = read_executable(_build(prog, 1 << 16))
        core.execute(exe.exports[0].program.instructions, bindings)


# Program size is the reader's business, not the verifier's.
RUN_TIME_ONLY = ("program size",)


@pytest.mark.parametrize("prog,message", test_faults.MALFORMED_CASES)
def test_verifier_rejects_what_the_core_rejects(prog, message):
    if any(rule in message for rule in RUN_TIME_ONLY):
        pytest.skip("checked at run time only")
    with pytest.raises((FormatError, StatusError)):
        _build(prog)
