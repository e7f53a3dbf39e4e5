"""hal_driver.io_parameters: .irpa archives as the wheel's tools write them and the
stock ParameterIndex reads them; the io_parameters imports on an npu-sim device."""
import json
import pathlib
import struct
import subprocess
import sys

import iree.runtime
import numpy as np
import pytest

from hal_driver.device.device import Device
from hal_driver.device.fence import Fence
from hal_driver.device.memory import BufferUsage, MemoryType
from hal_driver.io_parameters import ParameterIndex, create_io_parameters_module
from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import VmBuffer

BIN = pathlib.Path(sys.executable).parent


def entries(index) -> dict:
    """key -> (length, splat pattern or None, bytes or None) of a stock or our index."""
    return {key: (e.length, bytes(e.splat_pattern) if e.is_splat else None,
                  bytes(e.file_view) if e.is_file else None) for key, e in index.items()}


def test_archives_of_the_wheel_tools_read_as_the_stock_index_reads_them(tmp_path):
    created = tmp_path / "created.irpa"   # data with a pattern fails in the 3.13 tool (write error)
    subprocess.run([str(BIN / "iree-create-parameters"), "--data=a=4x8xf32",
                    "--data=b=3xi16", "--splat=c=2x16xi8=7", "--splat=d=4xf64=-2.25",
                    f"--output={created}"], check=True)
    saved = tmp_path / "saved.irpa"
    iree.runtime.save_archive_file({"w": np.arange(37, dtype=np.float32),
                                    "s": iree.runtime.SplatValue(np.int32(-3), 5)}, saved)
    converted = tmp_path / "converted.irpa"
    subprocess.run([str(BIN / "iree-convert-parameters"),
                    f"--parameters={write_safetensors(tmp_path / 'w.safetensors')}",
                    f"--output={converted}"], check=True, capture_output=True)
    for path in (created, saved, converted):
        stock, ours = iree.runtime.ParameterIndex(), ParameterIndex()
        stock.load(str(path))
        ours.load(str(path))
        assert entries(ours) == entries(stock) and len(ours) == len(stock)


def write_safetensors(path: pathlib.Path) -> pathlib.Path:
    """A two-tensor .safetensors file (u64 header length, JSON header, data)."""
    a, b = np.arange(12, dtype=np.float32), np.arange(5, dtype=np.int16)
    header = json.dumps({"a": {"dtype": "F32", "shape": [12], "data_offsets": [0, 48]},
                         "b": {"dtype": "I16", "shape": [5], "data_offsets": [48, 58]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + a.tobytes() + b.tobytes())
    return path


def test_a_file_that_is_not_an_archive(tmp_path):
    path = tmp_path / "x.irpa"
    path.write_bytes(b"\0" * 128)
    with pytest.raises(StatusError, match="not an IREE parameter archive") as error:
        ParameterIndex().load(str(path))
    assert error.value.code == StatusCode.INVALID_ARGUMENT


def spans_args(spans: list[tuple[str, int, int, int]]) -> tuple:
    """key_table, key_data, spans vm.buffers for (key, parameter offset, buffer offset, length)."""
    data, table, records = b"", b"", b""
    for key, parameter_offset, buffer_offset, length in spans:
        table += struct.pack("<II", len(data), len(key))
        data += key.encode()
        records += struct.pack("<QQQ", parameter_offset, buffer_offset, length)
    return VmBuffer(table), VmBuffer(data), VmBuffer(records)


@pytest.fixture
def device():
    device = Device()
    yield device
    device.close()


def signal_fence(device) -> Fence:
    return Fence([(device.create_semaphore(0), 1)])


def test_gather_and_scatter(device):
    index = ParameterIndex()
    index.add_buffer("w", np.arange(16, dtype=np.uint8).tobytes())
    index.add_splat("s", np.int16(0x0102), 8)
    table = bytearray(8)
    index.add_buffer("out", table, writable=True)
    module = create_io_parameters_module([index.create_provider(scope="m")])
    usage = int(BufferUsage.DEFAULT | BufferUsage.MAPPING)
    target = device.allocator.allocate(int(MemoryType.DEVICE_LOCAL), usage, 12)
    fence = signal_fence(device)
    module.functions["gather"].fn(device, -1, None, fence, VmBuffer(b"m"), target,
                                  *spans_args([("w", 4, 0, 6), ("s", 3, 8, 4)]))
    fence.wait()
    assert target.read() == bytes([4, 5, 6, 7, 8, 9, 0, 0, 1, 2, 1, 2])
    fence = signal_fence(device)
    module.functions["scatter"].fn(device, -1, None, fence, target, VmBuffer(b"m"),
                                   *spans_args([("out", 2, 1, 5)]))
    fence.wait()
    assert bytes(table) == bytes([0, 0, 5, 6, 7, 8, 9, 0])
    with pytest.raises(StatusError, match="parameter `w` is read-only") as error:
        module.functions["scatter"].fn(device, -1, None, signal_fence(device), target,
                                       VmBuffer(b"m"), *spans_args([("w", 0, 0, 2)]))
    assert error.value.code == StatusCode.PERMISSION_DENIED


def test_unknown_scope_key_and_range(device):
    index = ParameterIndex()
    index.add_buffer("w", bytes(8))
    load = create_io_parameters_module([index.create_provider(scope="m")]).functions["load"].fn
    memory, usage = int(MemoryType.DEVICE_LOCAL), int(BufferUsage.DEFAULT)
    cases = [(b"x", [("w", 0, 0, 8)], "no provider registered that handles scopes like 'x'"),
             (b"m", [("v", 0, 0, 8)], "no parameter found in index with key 'v'"),
             (b"m", [("w", 4, 0, 8)], "out of its 8 bytes")]
    for scope, spans, message in cases:
        with pytest.raises(StatusError, match=message):
            load(device, -1, None, None, VmBuffer(scope), -1, memory, usage, *spans_args(spans))


def test_exports_match_the_stock_module():
    stock_index = iree.runtime.ParameterIndex()
    stock = iree.runtime.create_io_parameters_module(iree.runtime.VmInstance(),
                                                     stock_index.create_provider(scope="m"))
    ours = create_io_parameters_module([])
    assert (ours.name, ours.version) == (stock.name, stock.version)
    assert sorted(ours.functions) == sorted(stock.function_names)
    for name, function in ours.functions.items():
        assert f"{name}({function.cconv})" in repr(stock.lookup_function(name))


def test_other_parameter_formats_point_to_the_converter(tmp_path):
    with pytest.raises(StatusError, match="convert it to .irpa with iree-convert-parameters") as e:
        ParameterIndex().load(str(tmp_path / "weights.safetensors"))
    assert e.value.code == StatusCode.UNIMPLEMENTED
