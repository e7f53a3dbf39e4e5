"""A program compiled by the npu compiler target (bin/iree-compile
--iree-hal-target-backends=npu) runs its dispatch on the simulated NPU core."""
import json
import pathlib
import subprocess

import iree.runtime as rt
import numpy as np
import pytest

from hal_driver.device.trace import TID
from hal_driver.runtime import load_vm_flatbuffer_file
from hal_driver.tools import run_module
from tests.runtime.conftest import BIN, LLVM_CPU

REPO = pathlib.Path(__file__).resolve().parents[2]
MATMUL = """
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = arith.constant dense<0.0> : tensor<64x64xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%c : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}
"""


@pytest.fixture(scope="module")
def matmul(tmp_path_factory):
    directory = tmp_path_factory.mktemp("npu")
    (directory / "mm.mlir").write_text(MATMUL)
    subprocess.run([str(REPO / "bin/iree-compile"), "--iree-hal-target-backends=npu",
                    str(directory / "mm.mlir"), "-o", str(directory / "mm_npu.vmfb")], check=True)
    subprocess.run([str(BIN / "iree-compile"), str(directory / "mm.mlir"), *LLVM_CPU, "-o",
                    str(directory / "mm_local.vmfb")], check=True)
    return directory / "mm_npu.vmfb", directory / "mm_local.vmfb"


def test_npu_matmul_matches_the_stock_runtime(matmul):
    npu, local = matmul
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64), np.float32), rng.standard_normal((64, 64), np.float32)
    module = load_vm_flatbuffer_file(str(npu))
    try:
        result = module.main(a, b)
        stats = module.last_call_stats
    finally:
        module.close()
    expected = rt.load_vm_flatbuffer_file(str(local), driver="local-task").main(a, b).to_host()
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-4)
    assert (stats.npu_dispatches, stats.host_dispatches) == (1, 0)
    assert stats.npu_cycles > 0 and stats.simulated_seconds == stats.npu_cycles / 1e9
    assert stats.device.macs == 64 * 64 * 64


def test_cli_trace_and_machine_mismatch(capsys, matmul, tmp_path):
    npu = matmul[0]
    args = ["--device=npu-sim", f"--module={npu}", "--input=64x64xf32=1",
            "--input=64x64xf32=0.5"]
    assert run_module.main([*args, "--expected_output=64x64xf32=32",
                            f"--npu_sim_trace={tmp_path}/t.json", "--npu_sim_stats"]) == 0
    captured = capsys.readouterr()
    assert "[SUCCESS]" in captured.out and "dispatches: 1 (npu: 1, host fallback: 0)" in captured.err
    events = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
              if e["ph"] == "X"]
    tracks = {e["tid"] for e in events}
    assert {TID["queue"], TID["npu"], TID["dma_in"], TID["mac"], TID["dma_out"]} <= tracks
    assert run_module.main([*args, "--npu_sim_machine_sram_bytes=1048576"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("FAILED_PRECONDITION;") and err.count("\n") == 1
    assert ("executable npu-fb was compiled for a different NPU machine configuration: "
            "sram_bytes=2097152 (device: 1048576)") in err
