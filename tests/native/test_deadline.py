"""Bounded, interruptible dispatches: the verifier's bound on a program's work, the
core's deadline (DEADLINE_EXCEEDED), cancel from another thread and SIGINT (CANCELLED,
KeyboardInterrupt), on one and on several worker threads, through the core, the device
and bin/iree-run-module.

Long programs repeat one instruction at the per-instruction work cap: a conv2d.i8 of
2^32 MACs (about 1.5 s on two threads of the machine they were written on) or a vsigmoid
of 2^27 elements with zero strides (about 0.6 s, one thread, 4 bytes of SRAM)."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from executable_format.builder import READ_ONLY, ExecutableBuilder, ProgramBuilder
from executable_format.cost import instruction_work, program_work_limit
from executable_format.errors import FormatError
from executable_format.machine import MachineConfig
from executable_format.reader import read_executable
from executable_format.verifier import verify
from hal_driver.device.npu_core import DEFAULT_DISPATCH_TIMEOUT_MS, NpuCore
from hal_driver.status import StatusCode, StatusError

REPO = pathlib.Path(__file__).resolve().parents[2]
MACHINE = MachineConfig()
CAP_ELEMENTS = 64 * MACHINE.sram_bytes          # isa.ELEMENTS_PER_SRAM_BYTE
# Generous: a loaded machine may deschedule the process; a full run takes seconds to
# minutes, and the stop measured on an idle machine is within milliseconds.
MARGIN_S = 1.0

ZERO_STRIDES = dict(dst_s0=0, dst_s1=0, dst_s2=0, src_s0=0, src_s1=0, src_s2=0)


def heavy_conv(p: ProgramBuilder) -> None:
    """conv2d.i8 of exactly the per-instruction cap, 2^32 MACs (f = 1: one GEMM row; two
    input channels, so the im2col path, not the direct one of a single channel)."""
    p.emit("conv2d", dtype="i8", **{"in": 0}, w=0x80000, out=0x100000, c=2, hi=639, wi=383,
           f=1, ho=512, wo=256, kh_kw=(128, 128), sh_sw=(1, 1), dh_dw=(1, 1), groups=1)


def heavy_sigmoid(p: ProgramBuilder) -> None:
    """vsigmoid over 2^27 elements of one SRAM word: the element cap."""
    p.emit("vsigmoid", dst=0, src=0, n0=1024, n1=1024, n2=CAP_ELEMENTS // (1 << 20),
           **ZERO_STRIDES)


def program(emit, count: int) -> bytes:
    p = ProgramBuilder()
    for _ in range(count):
        emit(p)
    p.end()
    return p.instructions()


def timed(core: NpuCore, prog: bytes) -> tuple[StatusError | None, float]:
    start = time.perf_counter()
    try:
        core.execute(prog, [])
        return None, time.perf_counter() - start
    except StatusError as error:
        return error, time.perf_counter() - start


def stopped_after_ms(message: str) -> float:
    """The time a DEADLINE_EXCEEDED message says the dispatch ran: '... after 203.4 ms'."""
    return float(re.search(r" after (\d+\.\d) ms", message).group(1))


@pytest.fixture(params=["1", "2", "4"], ids=lambda t: f"threads{t}")
def threads(request, monkeypatch):
    """NPU_SIM_THREADS for cores created in the test (read by npu_core_create)."""
    monkeypatch.setenv("NPU_SIM_THREADS", request.param)
    return int(request.param)


# -- the verifier's bound on a program's work -----------------------------------------

def exported(prog: ProgramBuilder, verify_output: bool = True) -> bytes:
    b = ExecutableBuilder(machine=MACHINE)
    b.add_export("long", bindings=[(READ_ONLY, 64), (0, 64)], constant_count=0,
                 program=prog, workgroup_count=(1, 1, 1))
    return b.finish(verify_output=verify_output)


def builder(emit, count: int) -> ProgramBuilder:
    p = ProgramBuilder()
    for _ in range(count):
        emit(p)
    p.end()
    return p


def test_program_at_the_work_limit_verifies_and_one_more_instruction_does_not():
    limit = program_work_limit(MACHINE)
    assert limit == 16 * 2048 * MACHINE.sram_bytes
    sixteen = builder(heavy_sigmoid, 16)
    verify(exported(sixteen))
    over = exported(builder(heavy_sigmoid, 17), verify_output=False)
    with pytest.raises(FormatError) as error:
        verify(over)
    total = 17 * 32 * CAP_ELEMENTS
    assert str(error.value) == (
        f"npu-fb verification failed: export 0 program work {total} exceeds the per-program "
        f"limit {limit} (MACs + 32 x elements; 32768 per SRAM byte)")


def test_the_issues_sixteen_minute_program_is_refused():
    """100 conv2d.i8 at the per-instruction cap (7.4 KB, minutes of simulation)."""
    data = exported(builder(heavy_conv, 100), verify_output=False)
    assert len(data) < 8 * 1024
    with pytest.raises(FormatError, match=r"program work 429496729600 exceeds the "
                                          r"per-program limit 68719476736"):
        read_executable(data)


def test_work_counts_macs_and_weighted_elements():
    conv, sigmoid = ProgramBuilder(), ProgramBuilder()
    heavy_conv(conv)
    heavy_sigmoid(sigmoid)
    for p, expected in ((conv, 1 << 32), (sigmoid, 32 * CAP_ELEMENTS)):
        record = np.frombuffer(p.instructions(), dtype=np.uint32)
        opcode = p.instructions()[0]
        assert instruction_work(opcode, record[1:].tolist()) == expected


def test_honest_program_under_the_limit_runs():
    """A small tiled relu (tests/format/helpers) verifies and runs to the end."""
    from tests.format.helpers import TILE_BYTES, relu_executable
    exe = read_executable(relu_executable())
    export = exe.exports[0]
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    out = bytearray(TILE_BYTES)
    NpuCore(exe.machine).execute(export.program.instructions, [bytearray(values.tobytes()), out])
    np.testing.assert_array_equal(np.frombuffer(out, np.float32), np.maximum(values, 0))


# -- the deadline ----------------------------------------------------------------------

def test_default_deadline():
    assert DEFAULT_DISPATCH_TIMEOUT_MS == 60_000
    assert NpuCore(MACHINE).timeout_ms == DEFAULT_DISPATCH_TIMEOUT_MS
    with pytest.raises(StatusError) as error:
        NpuCore(MACHINE, timeout_ms=-1)
    assert error.value.code == StatusCode.INVALID_ARGUMENT


def test_long_conv_program_stops_at_the_deadline(threads):
    """100 conv2d at the cap (minutes of work) stop 200 ms after the start, on every
    thread count."""
    core = NpuCore(MACHINE, timeout_ms=200)
    error, seconds = timed(core, program(heavy_conv, 100))
    assert error is not None and error.code == StatusCode.DEADLINE_EXCEEDED, error
    assert 0.2 <= seconds < 0.2 + MARGIN_S
    message = str(error)
    assert message.startswith("DEADLINE_EXCEEDED; deadline of 200 ms exceeded; stopped at "
                              "instruction 0 (conv2d) after "), message
    assert 200 <= stopped_after_ms(message) < 200 + 1000 * MARGIN_S, message
    assert "\n" not in message


@pytest.mark.parametrize("emit", [
    heavy_sigmoid,
    lambda p: p.emit("vadd", dst=0, lhs=0, rhs=0, n0=1024, n1=1024, n2=128, dst_s0=0,
                     dst_s1=0, dst_s2=0, lhs_s0=0, lhs_s1=0, lhs_s2=0, rhs_s0=0, rhs_s1=0,
                     rhs_s2=0),
    lambda p: p.emit("vcopy", dst=0, src=0, n0=1, n1=1, n2=CAP_ELEMENTS, **ZERO_STRIDES),
    lambda p: p.emit("fill", sram_addr=0, n0=1, n1=1, n2=1, n3=CAP_ELEMENTS, s0=0, s1=0,
                     s2=0, s3=0, value=1.0),
    lambda p: p.emit("dma.load", binding=0, dram_offset=0, sram_addr=0, n0=1, n1=1, n2=1,
                     n3=CAP_ELEMENTS, dram_s0=0, dram_s1=0, dram_s2=0, dram_s3=0, sram_s0=0,
                     sram_s1=0, sram_s2=0, sram_s3=0),
    lambda p: p.emit("vcvt", dtype="i32", dst=0, src=0, n0=1024, n1=1024, n2=128,
                     src_dtype="f32", **ZERO_STRIDES),
], ids=["vsigmoid", "vadd", "vcopy_one_row", "fill_one_row", "dma_one_row", "vcvt"])
def test_every_long_loop_polls_the_deadline(emit):
    """16 instructions at the element cap (seconds of work; one row of 2^27 elements for
    vcopy, fill, dma) stop 30 ms after the start."""
    core = NpuCore(MACHINE, timeout_ms=30)
    start = time.perf_counter()
    try:
        core.execute(program(emit, 16), [bytearray(64)])
        pytest.fail("ran to the end")
    except StatusError as error:
        assert error.code == StatusCode.DEADLINE_EXCEEDED, error
    assert time.perf_counter() - start < 0.03 + MARGIN_S


def test_results_and_core_state_are_unchanged_by_a_stop():
    """After a stopped run the core runs the next program as a fresh one (same bits as
    a core that never stopped)."""
    from tests.format.helpers import TILE_BYTES, relu_executable
    export = read_executable(relu_executable()).exports[0]
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32).tobytes()
    stopped = NpuCore(MACHINE, timeout_ms=20)
    assert timed(stopped, program(heavy_conv, 3))[0].code == StatusCode.DEADLINE_EXCEEDED
    results = []
    for core in (stopped, NpuCore(MACHINE, timeout_ms=0)):
        out = bytearray(TILE_BYTES)
        stats = core.execute(export.program.instructions, [bytearray(values), out])
        results.append((bytes(out), stats.total_cycles))
    assert results[0] == results[1]


# -- cancel and SIGINT -----------------------------------------------------------------

def test_cancel_from_another_thread_stops_every_worker(threads):
    core = NpuCore(MACHINE, timeout_ms=0)
    timer = threading.Timer(0.15, core.cancel)
    timer.start()
    error, seconds = timed(core, program(heavy_conv, 100))
    timer.join()
    assert error is not None and error.code == StatusCode.CANCELLED, error
    assert "cancelled: stopped at instruction 0 (conv2d)" in str(error)
    assert 0.1 <= seconds < 0.15 + MARGIN_S
    assert timed(core, program(lambda p: None, 0))[0] is None   # the next run is not cancelled


CHILD = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.native.test_deadline import program, heavy_conv, MACHINE
from hal_driver.device.npu_core import NpuCore
core = NpuCore(MACHINE, timeout_ms=0)
prog = program(heavy_conv, 100)
print("running", flush=True)
try:
    core.execute(prog, [])
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.perf_counter(), flush=True)
"""


# Seconds from the SIGINT to the child's exit, interpreter teardown included: the runs
# it stops take seconds; a 2-CPU machine running 4 core threads needs about 0.5 s.
STOPPED_WITHIN = 1.5


def default_sigint() -> None:
    """A child of a background job inherits SIGINT ignored (a shell's `make test &`),
    and a Python started so installs no KeyboardInterrupt: the child gets SIGINT's
    default disposition, as from a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(command: list[str], ready: bytes, delay: float, env=None):
    """Starts `command`, waits for `ready` on its stdout and `delay` more, sends SIGINT;
    (returncode, seconds from the signal to the exit, stdout, stderr)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, preexec_fn=default_sigint)
    assert process.stdout.readline().startswith(ready)
    time.sleep(delay)
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    return process.returncode, time.perf_counter() - sent, out, err


def test_sigint_stops_a_running_core_and_raises_keyboard_interrupt(threads):
    env = dict(os.environ, NPU_SIM_THREADS=str(threads))
    code, seconds, out, err = interrupt([sys.executable, "-c", CHILD.format(repo=str(REPO))],
                                        b"running", 0.3, env)
    assert code == 0 and b"KeyboardInterrupt" in out, (out, err)
    assert seconds < STOPPED_WITHIN, seconds


def test_a_custom_sigint_handler_does_not_stop_the_core():
    """Only Python's default handler (KeyboardInterrupt) is chained: a program with its
    own SIGINT handler keeps its dispatch running."""
    core = NpuCore(MACHINE, timeout_ms=400)
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        timer = threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        error, _ = timed(core, program(heavy_conv, 100))
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert error.code == StatusCode.DEADLINE_EXCEEDED
    assert signal.getsignal(signal.SIGINT) is previous


# -- the device and bin/iree-run-module ------------------------------------------------

@pytest.fixture(scope="module")
def long_vmfbs(tmp_path_factory):
    """A relu over 512x1024 f32 compiled for npu, its NPU program then overwritten in
    place (same length) with N vsigmoid at the element cap, barriers and end: 16 (the
    most the verifier allows, seconds) and 17 (refused)."""
    directory = tmp_path_factory.mktemp("deadline")
    mlir = directory / "relu.mlir"
    mlir.write_text(RELU)
    vmfb = directory / "relu.vmfb"
    subprocess.run([str(REPO / "bin/iree-compile"), "--iree-hal-target-backends=npu",
                    str(mlir), "-o", str(vmfb)], check=True)
    data = vmfb.read_bytes()
    start = data.find(b"NPUF") - 4
    export = read_executable(data[start:]).exports[0]
    instructions = export.program.instructions
    assert data.count(instructions) == 1 and export.program.instruction_count > 20
    paths = {}
    for count in (16, 17):
        p = ProgramBuilder()
        for _ in range(count):
            heavy_sigmoid(p)
        while p.instruction_count < export.program.instruction_count - 1:
            p.emit("barrier")
        p.end()
        patched = data.replace(instructions, p.instructions())
        paths[count] = directory / f"long{count}.vmfb"
        paths[count].write_bytes(patched)
    return export.name, paths


RELU = """
func.func @main(%x: tensor<512x1024xf32>) -> tensor<512x1024xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x1024xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%x : tensor<512x1024xf32>) outs(%e : tensor<512x1024xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.maximumf %a, %c0 : f32
    linalg.yield %m : f32
  } -> tensor<512x1024xf32>
  return %r : tensor<512x1024xf32>
}
"""
RUN = [str(REPO / "bin/iree-run-module"), "--device=npu-sim", "--input=512x1024xf32=1"]


def test_cli_deadline_flag_fails_the_dispatch_naming_export_and_deadline(long_vmfbs):
    name, paths = long_vmfbs
    start = time.perf_counter()
    result = subprocess.run(RUN + [f"--module={paths[16]}", "--npu_sim_dispatch_timeout_ms=300"],
                            capture_output=True, text=True)
    seconds = time.perf_counter() - start
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert re.match(
        f"DEADLINE_EXCEEDED; npu-sim dispatch of export '{re.escape(name)}' exceeded its "
        r"deadline of 300 ms \(--npu_sim_dispatch_timeout_ms\); stopped at instruction "
        r"\d+ \(vsigmoid\) after \d+\.\d ms;", lines[0]), lines[0]
    assert 300 <= stopped_after_ms(lines[0]) < 300 + 1000 * MARGIN_S, lines[0]
    assert seconds < 5    # the program would run seconds; startup is about 1 s


def test_benchmark_module_takes_the_deadline_flag(long_vmfbs):
    _, paths = long_vmfbs
    start = time.perf_counter()
    result = subprocess.run([str(REPO / "bin/iree-benchmark-module"), *RUN[1:],
                             f"--module={paths[16]}", "--npu_sim_dispatch_timeout_ms=300"],
                            capture_output=True, text=True)
    seconds = time.perf_counter() - start
    assert result.returncode != 0
    assert "DEADLINE_EXCEEDED" in result.stderr, result.stderr
    assert seconds < 5    # the program would run seconds per iteration


def test_cli_refuses_an_over_limit_program(long_vmfbs):
    _, paths = long_vmfbs
    result = subprocess.run(RUN + [f"--module={paths[17]}"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "executable npu-fb verification failed: " \
           "export 0 program work 73014444032 exceeds the per-program " \
           "limit 68719476736 (MACs + 32 x elements; 32768 per SRAM byte)" in result.stderr
    assert result.stderr.startswith("INVALID_ARGUMENT; ") and result.stderr.count("\n") == 1


def test_cli_rejects_a_negative_timeout(long_vmfbs):
    _, paths = long_vmfbs
    result = subprocess.run(RUN + [f"--module={paths[16]}", "--npu_sim_dispatch_timeout_ms=-5"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.startswith("INVALID_ARGUMENT; dispatch timeout must be a non-negative")


def test_cli_ctrl_c_stops_the_dispatch_and_exits_like_the_stock_tool(long_vmfbs):
    """SIGINT during the 10 s dispatch: the process is gone within STOPPED_WITHIN, killed by
    SIGINT as the stock tool is (a shell shows 130), with nothing on stderr."""
    _, paths = long_vmfbs
    code, seconds, out, err = interrupt(RUN + [f"--module={paths[16]}"], b"EXEC @main", 0.5)
    assert code == -signal.SIGINT, (code, err)
    assert err == b"" and out == b"", (out, err)
    assert seconds < STOPPED_WITHIN, seconds


def test_python_api_dispatch_timeout(long_vmfbs):
    from hal_driver.runtime import load_vm_flatbuffer_file
    name, paths = long_vmfbs
    module = load_vm_flatbuffer_file(str(paths[16]), dispatch_timeout_ms=100)
    try:
        assert module.device.dispatch_timeout_ms == 100
        with pytest.raises(StatusError) as error:
            module.main(np.ones((512, 1024), np.float32))
        assert error.value.code == StatusCode.DEADLINE_EXCEEDED
        assert f"dispatch of export '{name}' exceeded its deadline of 100 ms" in str(error.value)
    finally:
        module.close()
    with pytest.raises(StatusError):
        load_vm_flatbuffer_file(str(paths[16]), dispatch_timeout_ms="soon")
