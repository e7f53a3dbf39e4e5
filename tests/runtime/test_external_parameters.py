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


HEAD = """
module @head {
func.func @main(%x: tensor<1x10xf32>) -> tensor<1x4xf32> {
  %w = arith.constant dense<0.25> : tensor<10x4xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<1x4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<1x4xf32>) -> tensor<1x4xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<1x10xf32>, tensor<10x4xf32>)
                      outs(%fill : tensor<1x4xf32>) -> tensor<1x4xf32>
  return %mm : tensor<1x4xf32>
}
}
"""


def test_a_pipeline_on_the_npu_keeps_its_intermediate_on_the_device(external):
    """small_cnn (weights from the archive) then a matmul head, both compiled for npu:
    the 1x10 intermediate never reaches the host; the result equals the stock pipeline's."""
    directory, archive, npu, local = external
    (directory / "head.mlir").write_text(HEAD)
    head_npu, head_local = directory / "head_npu.vmfb", directory / "head_local.vmfb"
    subprocess.run([str(REPO / "bin/iree-compile"), "--iree-hal-target-backends=npu",
                    str(directory / "head.mlir"), "-o", str(head_npu)], check=True)
    subprocess.run([str(BIN / "iree-compile"), str(directory / "head.mlir"), *LLVM_CPU, "-o",
                    str(head_local)], check=True)
    x = np.load(directory / "input_0.npy")

    def pipeline(rt, driver, cnn_vmfb, head_vmfb):
        config = rt.Config(driver)
        index = rt.ParameterIndex()
        index.load(str(archive))
        params = rt.create_io_parameters_module(config.vm_instance,
                                                index.create_provider(scope="model"))
        cnn = rt.load_vm_modules(params, rt.VmModule.mmap(config.vm_instance, str(cnn_vmfb)),
                                 config=config)[-1]
        head = rt.load_vm_flatbuffer_file(str(head_vmfb), driver=driver)
        return head.main(cnn.SmallCNN(x))

    device = npu_runtime.get_device("npu-sim")
    before = device.statistics.snapshot()
    ours = pipeline(npu_runtime, "npu-sim", npu, head_npu)
    moved = device.statistics.snapshot().minus(before)
    assert (moved.host_to_device_bytes, moved.device_to_host_bytes) == (x.nbytes, 0)
    assert moved.npu_dispatches == moved.dispatches > 0
    stock = pipeline(iree.runtime, "local-task", local, head_local)
    np.testing.assert_allclose(ours.to_host(), stock.to_host(), rtol=1e-4, atol=1e-5)
