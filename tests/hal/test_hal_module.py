"""The hal imports called the way compiled programs call them."""
import pathlib
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from hal_driver.status import StatusCode, StatusError
from tests.hal.conftest import FakeVmBuffer, vm_str

F32 = 0x21000020
I32 = 0x10000020
SI32 = 0x11000020
DENSE = 1
USAGE = 0xC03 | 0x9000000   # DEFAULT | MAPPING
DEVICE_LOCAL = 0x30


def make_view(hal, device, values, element_type=F32, shape=None):
    data = np.asarray(values)
    allocator = hal["device.allocator"](device)
    buffer = hal["allocator.allocate"](allocator, -1, DEVICE_LOCAL, USAGE, data.nbytes)
    buffer.write(0, data.tobytes())
    shape = data.shape if shape is None else shape
    return hal["buffer_view.create"](buffer, 0, data.nbytes, element_type, DENSE,
                                     [(d,) for d in shape])


def test_device_query(hal, device):
    query = hal["device.query.i64"]
    assert query(device, vm_str("hal.device.id"), vm_str("npu*")) == (1, 1)
    assert query(device, vm_str("hal.device.id"), vm_str("npu-sim")) == (1, 1)
    assert query(device, vm_str("hal.device.id"), vm_str("local*")) == (1, 0)
    assert query(device, vm_str("hal.executable.format"), vm_str("npu-fb")) == (1, 1)
    assert query(device, vm_str("hal.executable.format"), vm_str("embedded-elf-x86_64")) == (1, 1)
    assert query(device, vm_str("hal.executable.format"), vm_str("vmvx-bytecode-fb")) == (1, 0)
    assert query(device, vm_str("hal.device"), vm_str("concurrency")) == (1, 1)
    assert query(device, vm_str("hal.nope"), vm_str("x")) == (0, 0)
    assert hal["devices.count"]() == 1
    assert hal["devices.get"](0) is device and hal["devices.get"](1) is None


def test_buffer_view_assert_messages_match_iree(hal, device):
    view = make_view(hal, device, np.zeros((3, 3), np.float32))
    check = hal["buffer_view.assert"]
    check(view, vm_str("input0"), F32, DENSE, [(3,), (3,)])
    with pytest.raises(StatusError) as e:
        check(view, vm_str("input0"), F32, DENSE, [(2,), (3,)])
    assert str(e.value) == ("INVALID_ARGUMENT; input0 shape dimension 0 mismatch; expected 2 but "
                            "have 3; expected shape `2x3`, actual shape `3x3`")
    with pytest.raises(StatusError) as e:
        check(view, vm_str("input0"), F32, DENSE, [(9,)])
    assert "input0 shape rank mismatch; expected 1 but have 2" in str(e.value)
    ints = make_view(hal, device, np.zeros((2, 3), np.int32), element_type=I32)
    with pytest.raises(StatusError) as e:
        check(ints, vm_str("input0"), F32, DENSE, [(2,), (3,)])
    assert str(e.value) == ("INVALID_ARGUMENT; input0 element type mismatch; expected f32 "
                            "(21000020) but have i32 (10000020)")
    check(ints, vm_str("input0"), SI32, DENSE, [(2,), (3,)])  # signedness is compatible
    with pytest.raises(StatusError, match="encoding mismatch; expected 00000002 but have 00000001"):
        check(ints, vm_str("input0"), I32, 2, [(2,), (3,)])


def test_buffer_assert(hal, device):
    view = make_view(hal, device, np.zeros(4, np.float32))
    buffer = hal["buffer_view.buffer"](view)
    allocator = hal["device.allocator"](device)
    hal["buffer.assert"](buffer, vm_str("tensor"), allocator, 16, 16, 3075)
    with pytest.raises(StatusError, match="tensor buffer byte length 16 less than expected minimum 24"):
        hal["buffer.assert"](buffer, vm_str("tensor"), allocator, 24, 16, 3075)
    with pytest.raises(StatusError, match="requested usage was not specified") as e:
        hal["buffer.assert"](buffer, vm_str("tensor"), allocator, 16, 16, 0x80000)
    assert e.value.code == StatusCode.PERMISSION_DENIED


def test_buffer_load_store_subspan(hal, device):
    buffer = hal["buffer_view.buffer"](make_view(hal, device, np.arange(4, dtype=np.int32)))
    assert hal["buffer.load"](buffer, 8, 4) == 2
    hal["buffer.store"](-5, buffer, 4, 4)
    assert hal["buffer.load"](buffer, 4, 4) == -5
    sub = hal["buffer.subspan"](buffer, 8, 8)
    assert hal["buffer.length"](sub) == 8 and hal["buffer.load"](sub, 4, 4) == 3
    with pytest.raises(StatusError, match="invalid subspan") as e:
        hal["buffer.subspan"](buffer, 12, 8)
    assert e.value.code == StatusCode.OUT_OF_RANGE
    with pytest.raises(StatusError, match="store out of bounds"):
        hal["buffer.store"](1, buffer, 14, 4)


def test_fences(hal, device):
    fence = hal["fence.create"](device, 0)
    assert hal["fence.query"](fence) == StatusCode.DEFERRED
    assert hal["fence.await"](10, 0, [(fence,)]) == StatusCode.DEADLINE_EXCEEDED
    assert hal["fence.join"](0, [(None,)]) is None
    joined = hal["fence.join"](0, [(fence,), (hal["fence.create"](device, 0),)])
    hal["fence.signal"](fence)
    assert hal["fence.query"](fence) == 0
    assert hal["fence.await"](-1, 0, [(fence,), (None,)]) == 0
    assert hal["fence.query"](joined) == StatusCode.DEFERRED
    failing = hal["fence.create"](device, 0)
    hal["fence.fail"](failing, int(StatusCode.ABORTED))
    assert hal["fence.query"](failing) == StatusCode.ABORTED
    with pytest.raises(StatusError) as e:
        hal["fence.await"](-1, 0, [(failing,)])
    assert e.value.code == StatusCode.ABORTED


def test_channels_are_unimplemented(hal, device):
    with pytest.raises(StatusError) as e:
        hal["channel.create"](device, -1, 0, None, None, 0, 1)
    assert e.value.code == StatusCode.UNIMPLEMENTED


def test_file_from_memory_and_queue_read(hal, device):
    contents = FakeVmBuffer(bytes(range(32)))
    file = hal["ex.file.from_memory"](device, -1, 1, contents, 8, 16, 0)
    target = hal["buffer_view.buffer"](make_view(hal, device, np.zeros(4, np.int32)))
    signal = hal["fence.create"](device, 0)
    hal["device.queue.read"](device, -1, None, signal, file, 4, target, 0, 8, 0)
    assert hal["fence.await"](-1, 0, [(signal,)]) == 0
    assert target.read(0, 8) == bytes(range(12, 20))
    with pytest.raises(StatusError) as e:
        hal["ex.file.from_memory"](device, -1, 3, contents, 0, 4, 0)
    assert e.value.code == StatusCode.PERMISSION_DENIED


@pytest.fixture(scope="module")
def add_mul_library(tmp_path_factory) -> bytes:
    """The embedded-ELF executable of `(a + b) * a` on 2x3xf32, from stock iree-compile."""
    tmp = tmp_path_factory.mktemp("lib")
    source = tmp / "m.mlir"
    source.write_text(
        "func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
        "  %0 = arith.addf %a, %b : tensor<2x3xf32>\n"
        "  %1 = arith.mulf %0, %a : tensor<2x3xf32>\n"
        "  return %1 : tensor<2x3xf32>\n}\n")
    compiler = pathlib.Path(sys.executable).parent / "iree-compile"
    subprocess.run([str(compiler), str(source), "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=generic", "-o", str(tmp / "m.vmfb")], check=True)
    with zipfile.ZipFile(tmp / "m.vmfb") as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".so")]
        return archive.read(name)


def test_host_fallback_dispatch_through_a_reusable_command_buffer(hal, device, add_mul_library):
    exe = hal["executable.create"](device, -1, vm_str("embedded-elf-x86_64"),
                                   FakeVmBuffer(add_mul_library), None)
    function = hal["executable.lookup.function"](exe, vm_str("main_dispatch_0_elementwise_6_f32"))
    cb = hal["command_buffer.create"](device, 0, 3, -1, 3)
    hal["command_buffer.dispatch"](cb, exe, function, 1, 1, 1, 0, [],
                                   [(0, slot, None, 0, 24) for slot in range(3)])
    hal["command_buffer.execution_barrier"](cb, 28, 13, 0)
    hal["command_buffer.finalize"](cb)
    for scale in (1.0, 2.0):
        a = np.arange(6, dtype=np.float32).reshape(2, 3) * scale
        b = np.ones((2, 3), np.float32)
        views = [make_view(hal, device, x) for x in (a, b, np.zeros((2, 3), np.float32))]
        table = [(hal["buffer_view.buffer"](v), 0, 24) for v in views]
        signal = hal["fence.create"](device, 0)
        hal["device.queue.execute.indirect"](device, -1, None, signal, cb, 0, table)
        assert hal["fence.await"](-1, 0, [(signal,)]) == 0
        np.testing.assert_array_equal(views[2].to_numpy(), (a + b) * a)
    stats = device.statistics.snapshot()
    assert stats.dispatches == 2 and stats.host_dispatches == 2 and stats.npu_cycles == 0
    assert stats.dispatch_counts == {"main_dispatch_0_elementwise_6_f32": 2}
    with pytest.raises(StatusError) as e:
        hal["executable.lookup.function"](exe, vm_str("nope"))
    assert e.value.code == StatusCode.NOT_FOUND
    with pytest.raises(StatusError, match="takes 0 constants and 3 bindings"):
        hal["command_buffer.dispatch"](hal["command_buffer.create"](device, 0, 3, -1, 0), exe,
                                       function, 1, 1, 1, 0, [], [])


def test_unknown_executable_format(hal, device):
    with pytest.raises(StatusError, match="no executable loader for format 'vmvx-bytecode-fb'"):
        hal["executable.create"](device, -1, vm_str("vmvx-bytecode-fb"), FakeVmBuffer(b"x"), None)
