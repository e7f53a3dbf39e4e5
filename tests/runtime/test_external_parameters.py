"""A model whose weights live outside the vmfb: samples/small_cnn imported with
iree-import-onnx --externalize-params (weights in an .irpa, scope `model`), compiled
for npu, runs on npu-sim with --parameters and through the Python API, and agrees with
the stock runtime running the llvm-cpu build against the same archive."""
import pathlib
import subprocess
import sys

import iree.runtime
import numpy as np
import pytest

import hal_driver.iree_runtime_api as npu_runtime
from hal_driver.tools import run_module
from tests.runtime.conftest import BIN, LLVM_CPU

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    directory = tmp_path_factory.mktemp("external")
    subprocess.run([sys.executable, str(REPO / "samples/small_cnn/make_model.py"), str(directory)],
                   check=True, capture_output=True)
    mlir, archive = directory / "cnn.mlir", directory / "cnn.irpa"
    subprocess.run([str(BIN / "iree-import-onnx"), str(directory / "small_cnn.onnx"),
                    "--externalize-params", "--num-elements-threshold=16",
                    f"--save-params-to={archive}", "-o", str(mlir)], check=True)
    assert "parameter.named<\"model\"" in mlir.read_text()
    npu, local = directory / "cnn_npu.vmfb", directory / "cnn_local.vmfb"
    subprocess.run([str(REPO / "bin/iree-compile"), "--iree-hal-target-backends=npu", str(mlir),
                    "-o", str(npu)], check=True)
    subprocess.run([str(BIN / "iree-compile"), str(mlir), *LLVM_CPU, "-o", str(local)], check=True)
    return directory, archive, npu, local


def run(rt, driver, vmfb, archive, x):
    config = rt.Config(driver)
    index = rt.ParameterIndex()
    index.load(str(archive))
    params = rt.create_io_parameters_module(config.vm_instance,
                                            index.create_provider(scope="model"))
    module = rt.load_vm_modules(params, rt.VmModule.mmap(config.vm_instance, str(vmfb)),
                                config=config)[-1]
    return module.SmallCNN(x).to_host()


def test_externalised_weights_on_npu_sim(external, capsys):
    directory, archive, npu, local = external
    code = run_module.main(["--device=npu-sim", f"--module={npu}",
                            f"--parameters=model={archive}", f"--input=@{directory}/input_0.npy",
                            f"--expected_output=@{directory}/expected_0.npy", "--npu_sim_stats"])
    captured = capsys.readouterr()
    assert code == 0 and "[SUCCESS]" in captured.out, captured.err
    assert "host fallback: 0" in captured.err
    x = np.load(directory / "input_0.npy")
    ours = run(npu_runtime, "npu-sim", npu, archive, x)
    stock = run(iree.runtime, "local-task", local, archive, x)
    np.testing.assert_allclose(ours, stock, rtol=1e-4, atol=1e-5)
