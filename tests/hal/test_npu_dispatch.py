"""npu-fb executables on the npu-sim device: dispatch, statistics, trace, verification."""
import dataclasses
import json

import numpy as np
import pytest

from executable_format.machine import DEFAULT_MACHINE
from hal_driver.device.driver import create_device
from hal_driver.device.trace import TID
from hal_driver.hal import create_hal_module
from hal_driver.status import StatusCode, StatusError
from native._npu_core import ffi as core_ffi
from tests.format.helpers import TILE_BYTES, relu_executable, relu_view_executable
from tests.hal.conftest import FakeVmBuffer, vm_str

USAGE = 0xC03 | 0x9000000
DEVICE_LOCAL = 0x30


def hal_functions(device):
    return {name: f.fn for name, f in create_hal_module([device]).functions.items()}


def run_relu(hal, device, values: np.ndarray, output_bytes: int = TILE_BYTES,
             source=None, executable: bytes | None = None) -> np.ndarray:
    exe = hal["executable.create"](device, -1, vm_str("npu-fb"),
                                   FakeVmBuffer(executable or relu_executable()), None)
    allocator = hal["device.allocator"](device)
    if source is None:
        source = hal["allocator.allocate"](allocator, -1, DEVICE_LOCAL, USAGE, TILE_BYTES)
        source.write(0, values.tobytes())
    target = hal["allocator.allocate"](allocator, -1, DEVICE_LOCAL, USAGE, output_bytes)
    cb = hal["command_buffer.create"](device, 1, 3, -1, 0)
    hal["command_buffer.dispatch"](
        cb, exe, hal["executable.lookup.function"](exe, vm_str("relu")), 1, 1, 1, 0, [],
        [(0, 0, source, 0, TILE_BYTES), (0, 0, target, 0, output_bytes)])
    hal["command_buffer.finalize"](cb)
    fence = hal["fence.create"](device, 0)
    hal["device.queue.execute"](device, -1, None, fence, cb, 0)
    hal["fence.await"](-1, 0, [(fence,)])
    return np.frombuffer(target.read(), dtype=np.float32)


def test_npu_dispatch_runs_on_the_core_and_counts_cycles(device):
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    np.testing.assert_array_equal(run_relu(hal, device, values), np.maximum(values, 0))
    stats = device.statistics.snapshot()
    assert stats.dispatches == stats.npu_dispatches == 1 and stats.host_dispatches == 0
    assert stats.npu_cycles > 0 and stats.dram_bytes == 2 * TILE_BYTES


def test_statistics_count_dispatches_per_export_and_per_call(device):
    """dispatch_counts: export name -> runs; a snapshot is a copy, and `minus` keeps the
    exports that ran since the earlier snapshot."""
    hal = hal_functions(device)
    values = np.ones(TILE_BYTES // 4, np.float32)
    run_relu(hal, device, values)
    before = device.statistics.snapshot()
    assert before.dispatch_counts == {"relu": 1}
    run_relu(hal, device, values)
    run_relu(hal, device, values)
    after = device.statistics.snapshot()
    assert after.dispatch_counts == {"relu": 3} and before.dispatch_counts == {"relu": 1}
    assert after.minus(before).dispatch_counts == {"relu": 2}
    assert after.minus(after).dispatch_counts == {}
    copied = after.copy()
    copied.dispatch_counts["relu"] += 1
    assert after.dispatch_counts == {"relu": 3}


def test_immutable_constant_is_staged_once_and_reused(device):
    """A read-only binding of an immutable import (a module constant) is copied to
    aligned memory on its first dispatch only (kept as the core's pointer to it)."""
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    allocator = hal["device.allocator"](device)
    constant = hal["allocator.import"](allocator, 0, -1, DEVICE_LOCAL, USAGE | (1 << 19),
                                       FakeVmBuffer(b"\0" + values.tobytes()), 1, TILE_BYTES)
    for _ in range(3):
        np.testing.assert_array_equal(run_relu(hal, device, values, source=constant),
                                      np.maximum(values, 0))
    [(key, staged)] = constant.allocation.staged_copies.items()
    assert key == (constant.byte_offset, TILE_BYTES)
    np.testing.assert_array_equal(np.frombuffer(core_ffi.buffer(staged), np.float32), values)


def test_binding_smaller_than_the_export_needs_fails_the_fence(device):
    hal = hal_functions(device)
    with pytest.raises(StatusError, match="binding 1 needs at least 128 bytes") as e:
        run_relu(hal, device, np.zeros(TILE_BYTES // 4, np.float32), output_bytes=64)
    assert e.value.code == StatusCode.INVALID_ARGUMENT


def test_trace_places_engine_events_inside_dispatches(tmp_path):
    device = create_device(trace=True)
    try:
        hal = hal_functions(device)
        run_relu(hal, device, np.ones(TILE_BYTES // 4, np.float32))
        run_relu(hal, device, np.ones(TILE_BYTES // 4, np.float32))
        device.trace.write(str(tmp_path / "trace.json"))
    finally:
        device.close()
    events = [e for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
              if e["ph"] == "X"]
    dispatches = [e for e in events if e["tid"] == TID["npu"]]
    assert [e["name"] for e in dispatches] == ["relu", "relu"]
    assert dispatches[1]["ts"] == pytest.approx(dispatches[0]["dur"])
    assert {e["tid"] for e in events} >= {TID[t] for t in ("npu", "dma_in", "vector", "dma_out")}


def test_corrupt_executable_is_rejected(hal, device):
    data = bytearray(relu_executable())
    data[4:8] = b"XXXX"
    with pytest.raises(StatusError) as e:
        hal["executable.create"](device, -1, vm_str("npu-fb"), FakeVmBuffer(bytes(data)), None)
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("executable npu-fb verification failed: ")


def test_lookup_of_a_damaged_name_quotes_a_short_excerpt(hal, device):
    """The looked-up name comes from the module's rodata: a damaged one is quoted escaped
    and cut, not as kilobytes of control bytes."""
    exe = hal["executable.create"](device, -1, vm_str("npu-fb"),
                                   FakeVmBuffer(relu_executable()), None)
    with pytest.raises(StatusError) as e:
        hal["executable.lookup.function"](exe, vm_str("relu\x00" + "\x07" * 5000))
    assert e.value.code == StatusCode.NOT_FOUND
    assert e.value.message == ("executable (npu-fb) has no export named 'relu\\x00" +
                               "\\x07" * 30 + "... (5005 characters)'")


def test_executable_for_another_machine_is_rejected():
    machine = dataclasses.replace(DEFAULT_MACHINE, sram_bytes=DEFAULT_MACHINE.sram_bytes // 2)
    device = create_device(machine=machine)
    try:
        with pytest.raises(StatusError) as e:
            hal_functions(device)["executable.create"](
                device, -1, vm_str("npu-fb"), FakeVmBuffer(relu_executable()), None)
    finally:
        device.close()
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    assert f"sram_bytes={DEFAULT_MACHINE.sram_bytes} (device: {machine.sram_bytes})" in str(e.value)


def run_relu_views(hal, device, values: np.ndarray, constants: list[int],
                   source_bytes: int, target_bytes: int, scales=(1, 1), bases=(0, 0),
                   source_step=0) -> bytes:
    """relu_view_executable over buffers whose input and output lie at the offsets the
    push constants (times `scales`) give (the input's window also moved by push constant
    1 x `source_step`; the rest of the source is -7, of the target 0xAB); returns the
    whole target buffer."""
    views = [(0, 0, TILE_BYTES, scales[0], bases[0], 1, source_step),
             (1, 1, TILE_BYTES, scales[1], bases[1])]
    exe = hal["executable.create"](device, -1, vm_str("npu-fb"),
                                   FakeVmBuffer(relu_view_executable(views)), None)
    allocator = hal["device.allocator"](device)
    source = hal["allocator.allocate"](allocator, -1, DEVICE_LOCAL, USAGE, source_bytes)
    padding = np.full(source_bytes // 4, -7.0, np.float32)
    start = (bases[0] + constants[0] * scales[0] + constants[1] * source_step) // 4
    if 0 <= start and start + len(values) <= len(padding):
        padding[start:start + len(values)] = values
    source.write(0, padding.tobytes())
    target = hal["allocator.allocate"](allocator, -1, DEVICE_LOCAL, USAGE, target_bytes)
    target.write(0, bytes([0xAB]) * target_bytes)
    cb = hal["command_buffer.create"](device, 1, 3, -1, 0)
    hal["command_buffer.dispatch"](
        cb, exe, hal["executable.lookup.function"](exe, vm_str("relu")), 1, 1, 1, 0,
        [(c,) for c in constants],
        [(0, 0, source, 0, source_bytes), (0, 0, target, 0, target_bytes)])
    hal["command_buffer.finalize"](cb)
    fence = hal["fence.create"](device, 0)
    hal["device.queue.execute"](device, -1, None, fence, cb, 0)
    hal["fence.await"](-1, 0, [(fence,)])
    return target.read()


def test_binding_views_start_at_their_push_constants(device):
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    target = run_relu_views(hal, device, values, [64, 192], 64 + TILE_BYTES + 64,
                            192 + TILE_BYTES + 64)
    np.testing.assert_array_equal(np.frombuffer(target[192:192 + TILE_BYTES], np.float32),
                                  np.maximum(values, 0))
    assert target[:192] == bytes([0xAB]) * 192 and target[192 + TILE_BYTES:] == bytes([0xAB]) * 64


def test_binding_view_offsets_scale_their_push_constants(device):
    """A push constant that indexes a slice (an LSTM's time step) times the slice's
    byte stride: input row 3 and output row 2 of TILE_BYTES each."""
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    target = run_relu_views(hal, device, values, [3, 2], 4 * TILE_BYTES, 3 * TILE_BYTES,
                            scales=(TILE_BYTES, TILE_BYTES))
    np.testing.assert_array_equal(np.frombuffer(target[2 * TILE_BYTES:], np.float32),
                                  np.maximum(values, 0))
    assert target[:2 * TILE_BYTES] == bytes([0xAB]) * 2 * TILE_BYTES


def test_binding_view_steps_inside_a_window_a_push_constant_places(device):
    """npu-fb 2.9: one dispatch shared by the layers of a stacked GRU reads row t of its
    layer's sequence: the window starts at push constant 0 (the layer's byte offset, 64
    here) plus push constant 1 (t = 2) x TILE_BYTES."""
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    target = run_relu_views(hal, device, values, [64, 2], 64 + 3 * TILE_BYTES, 3 * TILE_BYTES,
                            scales=(1, TILE_BYTES), source_step=TILE_BYTES)
    np.testing.assert_array_equal(np.frombuffer(target[2 * TILE_BYTES:], np.float32),
                                  np.maximum(values, 0))
    with pytest.raises(StatusError, match=rf"view 0: bytes \[.*\) of binding 0 \(push constant "
                                          rf"0 = 64, x 1 \+ push constant 1 = 3 x {TILE_BYTES}"):
        run_relu_views(hal, device, values, [64, 3], 64 + 3 * TILE_BYTES, 4 * TILE_BYTES,
                       scales=(1, TILE_BYTES), source_step=TILE_BYTES)


def test_binding_view_offsets_can_run_backwards_from_a_base(device):
    """Row 3 - t of the input (the reverse direction of a bidirectional LSTM): base
    3 x TILE_BYTES, scale -TILE_BYTES; t = 1 reads row 2."""
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    target = run_relu_views(hal, device, values, [1, 0], 4 * TILE_BYTES, TILE_BYTES,
                            scales=(-TILE_BYTES, 1), bases=(3 * TILE_BYTES, 0))
    np.testing.assert_array_equal(np.frombuffer(target, np.float32), np.maximum(values, 0))
    with pytest.raises(StatusError, match=r"bytes \[-128, 0\) of binding 0"):
        run_relu_views(hal, device, values, [4, 0], 4 * TILE_BYTES, TILE_BYTES,
                       scales=(-TILE_BYTES, 1), bases=(3 * TILE_BYTES, 0))


@pytest.mark.parametrize("constants, scales, message", [
    ([0, 128], (1, 1), f"view 1: bytes [128, {128 + TILE_BYTES}) of binding 1 (push "
                       f"constant 1 = 128, x 1, +0) lie outside its bound range of {TILE_BYTES + 64} bytes"),
    ([2, 0], (TILE_BYTES, 1), f"view 0: bytes [{2 * TILE_BYTES}, {3 * TILE_BYTES}) of binding 0"),
    ([0xFFFFFFFF, 0], (1 << 40, 1), "lie outside its bound range"),
])
def test_binding_view_outside_its_binding_fails_the_dispatch(device, constants, scales, message):
    hal = hal_functions(device)
    values = np.ones(TILE_BYTES // 4, np.float32)
    with pytest.raises(StatusError) as info:
        run_relu_views(hal, device, values, constants, TILE_BYTES + 64, TILE_BYTES + 64,
                       scales=scales)
    assert info.value.code == StatusCode.OUT_OF_RANGE and message in str(info.value), \
        str(info.value)


def test_statistics_report_cycles_against_the_exports_true_roofline(device):
    """npu-sim adds each dispatch's true roofline (recorded in its export) beside the
    cycles it simulated: executed MACs and moved bytes do not enter it."""
    from executable_format.builder import READ_ONLY, ExecutableBuilder
    from executable_format.cost import Roofline
    from tests.format.helpers import relu_program
    bound = Roofline(useful_macs=0, mac_dtype="f32", read_bytes=TILE_BYTES,
                     write_bytes=TILE_BYTES)
    b = ExecutableBuilder()
    b.add_export("relu", bindings=[(READ_ONLY, TILE_BYTES), (0, TILE_BYTES)],
                 program=relu_program(), roofline=bound)
    hal = hal_functions(device)
    values = np.ones(TILE_BYTES // 4, np.float32)
    run_relu(hal, device, values, executable=b.finish())
    run_relu(hal, device, values, executable=b.finish())
    stats = device.statistics.snapshot()
    assert stats.roofline_cycles == pytest.approx(2 * bound.cycles(DEFAULT_MACHINE))
    assert stats.useful_macs == 0 and stats.npu_cycles > stats.roofline_cycles
    run_relu(hal, device, values)          # an export without a roofline adds nothing
    assert device.statistics.snapshot().roofline_cycles == stats.roofline_cycles


def relu_into(hal, device, source, target, target_offset: int = 0) -> None:
    """Runs relu over TILE_BYTES of `source` into TILE_BYTES of `target` at `target_offset`."""
    exe = hal["executable.create"](device, -1, vm_str("npu-fb"),
                                   FakeVmBuffer(relu_executable()), None)
    cb = hal["command_buffer.create"](device, 1, 3, -1, 0)
    hal["command_buffer.dispatch"](
        cb, exe, hal["executable.lookup.function"](exe, vm_str("relu")), 1, 1, 1, 0, [],
        [(0, 0, source, 0, TILE_BYTES), (0, 0, target, target_offset, TILE_BYTES)])
    hal["command_buffer.finalize"](cb)
    fence = hal["fence.create"](device, 0)
    hal["device.queue.execute"](device, -1, None, fence, cb, 0)
    hal["fence.await"](-1, 0, [(fence,)])


def f32_source(hal, device, values: np.ndarray):
    source = hal["allocator.allocate"](hal["device.allocator"](device), -1, DEVICE_LOCAL, USAGE,
                                       values.nbytes)
    source.write(0, values.tobytes())
    return source


def test_unaligned_binding_is_staged_and_its_writes_reach_the_buffer(device):
    """The core takes 64-byte aligned bindings: a binding 16 bytes into its buffer runs
    on an aligned copy, written back into the bound range only."""
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    target = hal["allocator.allocate"](hal["device.allocator"](device), -1, DEVICE_LOCAL, USAGE,
                                       TILE_BYTES + 64)
    target.write(0, b"\x7f" * (TILE_BYTES + 64))
    relu_into(hal, device, f32_source(hal, device, values), target, target_offset=16)
    written = target.read()
    assert written[:16] == b"\x7f" * 16 and written[16 + TILE_BYTES:] == b"\x7f" * 48
    np.testing.assert_array_equal(np.frombuffer(written[16:16 + TILE_BYTES], np.float32),
                                  np.maximum(values, 0))


def test_dispatch_writing_an_imported_constant_writes_a_copy_of_its_own(device):
    """A binding the dispatch writes whose memory is the module's read-only data: the
    buffer gets storage of its own, which the writes reach; the module's bytes stay."""
    hal = hal_functions(device)
    values = np.linspace(-4, 4, TILE_BYTES // 4, dtype=np.float32)
    module_data = FakeVmBuffer(bytes(TILE_BYTES))
    target = hal["allocator.import"](hal["device.allocator"](device), 0, -1, DEVICE_LOCAL,
                                     USAGE | (1 << 19), module_data, 0, TILE_BYTES)
    relu_into(hal, device, f32_source(hal, device, values), target)
    np.testing.assert_array_equal(np.frombuffer(target.read(), np.float32), np.maximum(values, 0))
    assert bytes(module_data.data) == bytes(TILE_BYTES)


def test_dispatch_of_a_deallocated_buffer_fails(device):
    hal = hal_functions(device)
    values = np.ones(TILE_BYTES // 4, np.float32)
    source = f32_source(hal, device, values)
    target = f32_source(hal, device, values)
    hal["device.queue.dealloca"](device, -1, None, None, target, 0)
    with pytest.raises(StatusError, match="buffer used after its queue deallocation") as e:
        relu_into(hal, device, source, target)
    assert e.value.code == StatusCode.FAILED_PRECONDITION
