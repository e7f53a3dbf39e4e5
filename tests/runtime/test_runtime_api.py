"""hal_driver.runtime: programs compiled by stock iree-compile (llvm-cpu, retargeted
to npu-sim) against the stock runtime on local-task."""
import iree.runtime as rt
import numpy as np
import pytest

from hal_driver.runtime import load_vm_flatbuffer, load_vm_flatbuffer_file
from hal_driver.status import StatusCode, StatusError


@pytest.fixture(scope="module")
def elementwise(models):
    stock, npu = models["elementwise"]
    ours = load_vm_flatbuffer_file(str(npu))
    yield ours, rt.load_vm_flatbuffer_file(str(stock), driver="local-task")
    ours.close()


def test_results_match_the_stock_runtime_bit_exactly(elementwise):
    ours, stock = elementwise
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3), np.float32), rng.standard_normal((2, 3), np.float32)
    np.testing.assert_array_equal(ours.main(a, b), stock.main(a, b).to_host())
    x = rng.standard_normal(37).astype(np.float32)
    np.testing.assert_array_equal(ours.dynamic(x), stock.dynamic(x).to_host())
    doubled, same = ours.two(np.arange(4, dtype=np.int32))
    assert doubled.tolist() == [0, 2, 4, 6] and same.tolist() == [0, 1, 2, 3]
    tensor, k, x = ours.scalar(np.array(2.5, np.float32), 7, 1.5)
    assert tensor.shape == () and tensor == 5 and (k, x) == (14, 2.25)


def test_constants_and_matmul_match_the_stock_runtime(models):
    stock_path, npu_path = models["mlp"]
    ours = load_vm_flatbuffer(npu_path.read_bytes())
    try:
        x = np.random.default_rng(1).standard_normal((4, 8), np.float32)
        stock = rt.load_vm_flatbuffer_file(str(stock_path), driver="local-task")
        np.testing.assert_array_equal(ours.main(x), stock.main(x).to_host())
    finally:
        ours.close()


def test_constants_read_through_a_hal_file_when_import_is_declined(models, monkeypatch):
    """Programs fall back to hal.ex.file.from_memory + device.queue.read for their
    constants when hal.allocator.import (a `try` import) returns null."""
    import hal_driver.hal.module as hal_module
    calls = []
    monkeypatch.setitem(hal_module._IMPLEMENTATIONS, "allocator.import", lambda *a: None)
    read = hal_module._IMPLEMENTATIONS["device.queue.read"]
    monkeypatch.setitem(hal_module._IMPLEMENTATIONS, "device.queue.read",
                        lambda *a: calls.append(a) or read(*a))
    stock_path, npu_path = models["mlp"]
    ours = load_vm_flatbuffer_file(str(npu_path))
    try:
        x = np.random.default_rng(2).standard_normal((4, 8), np.float32)
        stock = rt.load_vm_flatbuffer_file(str(stock_path), driver="local-task")
        np.testing.assert_array_equal(ours.main(x), stock.main(x).to_host())
    finally:
        ours.close()
    assert len(calls) == 1


def test_per_call_statistics(elementwise):
    ours, _ = elementwise
    ours.main(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    stats = ours.last_call_stats
    assert (stats.dispatches, stats.host_dispatches, stats.npu_dispatches) == (1, 1, 0)
    assert stats.npu_cycles == 0 and stats.simulated_seconds == 0 and stats.wall_seconds > 0
    ours.two(np.zeros(4, np.int32))
    assert ours.last_call_stats.dispatches == 1


def test_wrong_shape_and_dtype_fail_in_the_program(elementwise):
    ours, _ = elementwise
    with pytest.raises(StatusError) as e:
        ours.main(np.ones((3, 3), np.float32), np.ones((2, 3), np.float32))
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    assert ("input0 shape dimension 0 mismatch; expected 2 but have 3; expected shape `2x3`, "
            "actual shape `3x3`") in str(e.value)
    with pytest.raises(StatusError, match=r"input1 element type mismatch; expected f32 "
                                          r"\(21000020\) but have i32 \(10000020\)"):
        ours.main(np.ones((2, 3), np.float32), np.ones((2, 3), np.int32))
    with pytest.raises(StatusError, match="takes 2 arguments, 1 given"):
        ours.main(np.ones((2, 3), np.float32))


def test_attribute_access_and_other_drivers(elementwise, models):
    ours, _ = elementwise
    assert {"main", "two", "dynamic"} <= set(ours.function_names)
    with pytest.raises(AttributeError, match="exports no function `nope`"):
        ours.nope
    stock = load_vm_flatbuffer_file(str(models["elementwise"][0]), driver="local-task")
    assert type(stock).__module__.startswith("iree.runtime")
    uri = load_vm_flatbuffer_file(str(models["elementwise"][1]), driver="npu-sim://0")
    try:   # a device URI of npu-sim runs here, not in the stock runtime
        assert uri.main(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)).tolist() == \
            [[2.0] * 3] * 2
        assert type(uri).__module__ == "hal_driver.runtime" and uri.last_call_stats.dispatches == 1
    finally:
        uri.close()


def test_async_functions_get_their_fences(models):
    stock_path, npu_path = models["async"]
    ours = load_vm_flatbuffer_file(str(npu_path))
    try:
        assert ours.main.is_async and ours.main.declaration.startswith("async func @main")
        a, b = np.full((2, 3), 1.5, np.float32), np.full((2, 3), 2, np.float32)
        stock = rt.load_vm_flatbuffer_file(str(stock_path), driver="local-task")
        np.testing.assert_array_equal(ours.main(a, b), (a + b) * a)
        del stock
    finally:
        ours.close()
