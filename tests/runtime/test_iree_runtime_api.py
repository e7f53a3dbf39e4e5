"""hal_driver.iree_runtime_api against the stock iree.runtime: one script of the common
iree.runtime usage patterns runs with `iree.runtime` on local-task and with our module
on npu-sim (only the import and the driver name change; each driver loads the vmfb
compiled for it), and the outputs agree."""
import iree.runtime
import numpy as np
import pytest

import hal_driver.iree_runtime_api as npu_runtime


def user_script(rt, driver: str, files: dict) -> dict:
    """What an iree.runtime user writes. `files`: vmfb paths and the parameter archive."""
    out = {"drivers": driver in rt.query_available_drivers()}
    x = np.random.default_rng(3).standard_normal((4, 8), np.float32)

    # A SystemContext with two modules; det's result feeds rec on the device.
    config = rt.Config(driver)
    ctx = rt.SystemContext(config=config)
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, files["det"].read_bytes()))
    ctx.add_vm_module(rt.VmModule.mmap(ctx.instance, str(files["rec"])))
    features = ctx.modules.det["main"](x)
    out["features_is_device_array"] = isinstance(features, rt.DeviceArray)
    out["features_shape"] = list(features.shape)
    out["rec"] = ctx.modules.rec.main(features).to_host()
    out["features"] = np.asarray(features)

    # load_vm_flatbuffer_file: numpy in, DeviceArrays (and Python scalars) out.
    ew = rt.load_vm_flatbuffer_file(str(files["elementwise"]), driver=driver)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out["main"] = ew.main(a, a + 1).to_host()
    tensor, k, f = ew.scalar(np.array(2.5, np.float32), 7, 1.5)
    out["scalar"] = (tensor.to_host(), k, f)
    out["doubled_twice"] = np.asarray(ew.two(ew.two(np.arange(4, dtype=np.int32))[0])[0])
    with pytest.raises(ValueError, match="input0 shape dimension 0 mismatch"):
        ew.main(np.ones((3, 3), np.float32), a)
    with pytest.raises(KeyError):
        ew["missing"]

    # Two separately loaded modules chained through a DeviceArray made by asdevicearray.
    det = rt.load_vm_flatbuffer(files["det"].read_bytes(), driver=driver)
    rec = rt.load_vm_flatbuffer_file(str(files["rec"]), driver=driver)
    out["chained"] = rec.main(det.main(rt.asdevicearray(config.device, x))).to_host()

    # Externalised weights from a parameter archive.
    index = rt.ParameterIndex()
    index.load(str(files["irpa"]))
    params = rt.create_io_parameters_module(config.vm_instance,
                                            index.create_provider(scope="model"))
    model = rt.load_vm_modules(params, rt.VmModule.mmap(config.vm_instance, str(files["params"])),
                               config=config)[-1]
    out["params"] = model.main(x[:2, :4]).to_host()
    return out


def files_for(models, archive, which: int) -> dict:
    files = {name: models[name][which] for name in ("det", "rec", "elementwise", "params")}
    return {**files, "irpa": archive}


def test_the_same_script_on_local_task_and_on_npu_sim(models, parameter_archive):
    stock = user_script(iree.runtime, "local-task", files_for(models, parameter_archive, 0))
    ours = user_script(npu_runtime, "npu-sim", files_for(models, parameter_archive, 1))
    assert stock.keys() == ours.keys()
    for key, expected in stock.items():
        if key == "scalar":
            np.testing.assert_array_equal(ours[key][0], expected[0])
            assert ours[key][1:] == expected[1:]
        elif isinstance(expected, np.ndarray):
            assert ours[key].dtype == expected.dtype and ours[key].shape == expected.shape, key
            np.testing.assert_array_equal(ours[key], expected, err_msg=key)
        else:
            assert ours[key] == expected, key
    assert stock["drivers"] and stock["features_is_device_array"]


def test_other_drivers_are_the_stock_runtime(models, parameter_archive):
    """Our module with driver local-task hands everything to iree.runtime."""
    config = npu_runtime.Config("local-task")
    assert isinstance(config, iree.runtime.Config)
    ours = user_script(npu_runtime, "local-task", files_for(models, parameter_archive, 0))
    stock = user_script(iree.runtime, "local-task", files_for(models, parameter_archive, 0))
    np.testing.assert_array_equal(ours["chained"], stock["chained"])
    np.testing.assert_array_equal(ours["params"], stock["params"])


def test_chained_models_copy_no_intermediate_to_the_host(models):
    det = npu_runtime.load_vm_flatbuffer_file(str(models["det"][1]), driver="npu-sim")
    rec = npu_runtime.load_vm_flatbuffer_file(str(models["rec"][1]), driver="npu-sim")
    device = npu_runtime.get_device("npu-sim")
    x = np.ones((4, 8), np.float32)
    before = device.statistics.snapshot()
    features = det.main(x)
    scores = rec.main(features)
    moved = device.statistics.snapshot().minus(before)
    assert (moved.host_to_device_bytes, moved.device_to_host_bytes) == (x.nbytes, 0)
    assert not features.is_host_accessible and moved.dispatches >= 2
    host = scores.to_host()
    moved = device.statistics.snapshot().minus(before)
    assert (moved.host_to_device_bytes, moved.device_to_host_bytes) == (x.nbytes, host.nbytes)


def test_device_arrays_behave_like_the_stock_ones():
    device = npu_runtime.get_device("npu-sim")
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    ours = npu_runtime.asdevicearray(device, x)
    stock = iree.runtime.asdevicearray(iree.runtime.get_device("local-task"), x)
    assert (ours.shape, ours.dtype, repr(ours)) == (stock.shape, stock.dtype, repr(stock))
    with pytest.raises(ValueError, match="cannot be implicitly transferred"):
        np.asarray(ours)
    np.testing.assert_array_equal(ours.to_host(), stock.to_host())
    assert npu_runtime.asdevicearray(device, ours) is ours
    assert npu_runtime.get_device("npu-sim") is device


def test_drivers_and_errors():
    assert "npu-sim" in npu_runtime.query_available_drivers()
    assert set(iree.runtime.query_available_drivers()) < set(npu_runtime.query_available_drivers())
    driver = npu_runtime.get_driver("npu-sim")
    assert driver.query_available_devices()[0]["device_id"] == 0
    with pytest.raises(ValueError, match="NOT_FOUND"):
        driver.create_device_by_uri("npu-sim://7")
    with pytest.raises(ValueError, match="Error creating vm module"):
        npu_runtime.VmModule.copy_buffer(npu_runtime.VmInstance(), b"garbage")
    with pytest.raises(ValueError):
        npu_runtime.load_vm_flatbuffer(b"", driver=None)
    assert npu_runtime.HalElementType is iree.runtime.HalElementType


def test_benchmark_module_reports_the_same_rows(models):
    """benchmark_module on both runtimes: the same rows (Google Benchmark JSON); npu-sim's
    also carry the simulated NPU time and dispatches per iteration."""
    def rows(rt, driver, vmfb):
        module = rt.VmModule.mmap(rt.Config(driver).vm_instance, str(vmfb))
        results = rt.benchmark_module(module, "two", inputs=[np.arange(4, dtype=np.int32)],
                                      device=driver, benchmark_repetitions=2,
                                      benchmark_min_time="3x")
        return results
    stock = rows(iree.runtime, "local-task", models["elementwise"][0])
    ours = rows(npu_runtime, "npu-sim", models["elementwise"][1])
    assert [r.benchmark_name for r in ours] == [r.benchmark_name for r in stock]
    assert [r.iterations for r in ours] == [r.iterations for r in stock]
    assert ours[0].time.endswith(" ms") and ours[-1].time.endswith(" %")
    assert ours[0].report["dispatches"] == 1 and "simulated_time_ms" in ours[0].report


def test_arrays_of_another_runtime_are_copied_in(models):
    """A local-task result fed to an npu-sim function is read once and copied in."""
    stock = iree.runtime.load_vm_flatbuffer_file(str(models["det"][0]), driver="local-task")
    rec = npu_runtime.load_vm_flatbuffer_file(str(models["rec"][1]), driver="npu-sim")
    features = stock.main(np.ones((4, 8), np.float32))
    device = npu_runtime.get_device("npu-sim")
    before = device.statistics.snapshot()
    scores = rec.main(features)
    assert device.statistics.snapshot().minus(before).host_to_device_bytes == 4 * 16 * 4
    expected = iree.runtime.load_vm_flatbuffer_file(str(models["rec"][0]), driver="local-task")
    np.testing.assert_array_equal(scores.to_host(), expected.main(features).to_host())


def test_vm_module_constructors(models):
    path = models["elementwise"][1]
    instance = npu_runtime.VmInstance()
    released = []
    mapped = npu_runtime.VmModule.mmap(instance, str(path),
                                       destroy_callback=lambda: released.append(1))
    assert released == [1]    # the module holds its own copy
    for make in (npu_runtime.VmModule.copy_buffer, npu_runtime.VmModule.from_flatbuffer,
                 npu_runtime.VmModule.from_buffer):
        module = make(instance, path.read_bytes())
        assert (module.name, module.function_names) == (mapped.name, mapped.function_names)
    stock = iree.runtime.VmModule.mmap(iree.runtime.VmInstance(), str(models["elementwise"][0]))
    assert repr(mapped) == repr(stock)
    assert mapped.lookup_function("nope") is None and stock.lookup_function("nope") is None
    assert mapped.lookup_function("main").reflection == stock.lookup_function("main").reflection
