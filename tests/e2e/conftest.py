"""Session fixtures, each computed once per sample on first use (a failure is cached and
re-raised, so a broken build fails its tests without being retried):

- generated(name): the sample's model, input and onnx-reference output in a tmp dir;
- npu_build(name): compiled for npu with compiler_target.compile_file, with its
  dispatch report and task graph json;
- cpu_vmfb(name): compiled for stock llvm-cpu (iree-import-onnx, iree.compiler);
- npu_run(name) / cpu_run(name): one call on npu-sim (hal_driver.runtime, with the
  dispatch trace and statistics) / on the stock runtime (iree.runtime, local-task).
"""
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.samples import SAMPLES, Sample, generate

VENV_BIN = Path(sys.executable).parent
STOCK_CPU_FLAGS = ["--iree-llvmcpu-target-cpu=generic"]


@dataclass
class Generated:
    sample: Sample
    dir: Path
    onnx: Path
    input: Path               # input_0.npy
    expected: Path            # expected_0.npy (onnx reference evaluator)


@dataclass
class NpuBuild:
    vmfb: Path
    report: list[str]         # --iree-npu-dispatch-report lines
    tasks: list[dict]         # --iree-npu-dump-json tasks


@dataclass
class NpuRun:
    output: np.ndarray
    npu_dispatches: int
    host_dispatches: int
    npu_cycles: int
    npu_trace: list[str]      # names of the NPU dispatches in the order they ran


def compile_npu(g: Generated) -> NpuBuild:
    from compiler_target import compile_file
    vmfb, report, json_dir = g.dir / "npu.vmfb", g.dir / "report.txt", g.dir / "json"
    compile_file(g.onnx, target_backends=["npu"], output_file=vmfb,
                 extra_args=[f"--iree-npu-dispatch-report={report}",
                             f"--iree-npu-dump-json={json_dir}"])
    tasks = json.loads((json_dir / f"{g.sample.model}.npu.json").read_text())["tasks"]
    return NpuBuild(vmfb, report.read_text().splitlines(), tasks)


def compile_stock_cpu(g: Generated) -> Path:
    from iree.compiler import tools as stock_tools
    mlir, vmfb = g.dir / f"{g.sample.model}.mlir", g.dir / "cpu.vmfb"
    subprocess.run([VENV_BIN / "iree-import-onnx", g.onnx, "-o", mlir], check=True)
    stock_tools.compile_file(str(mlir), target_backends=["llvm-cpu"],
                             extra_args=STOCK_CPU_FLAGS, output_file=str(vmfb))
    return vmfb


def run_npu_sim(g: Generated, build: NpuBuild) -> NpuRun:
    from hal_driver import runtime as rt
    from hal_driver.device.trace import TID
    module = rt.load_vm_flatbuffer_file(str(build.vmfb), trace=True)
    try:
        output = getattr(module, g.sample.function)(np.load(g.input))
        stats = module.last_call_stats
        trace = [e["name"] for e in module.device.trace.events if e["tid"] == TID["npu"]]
    finally:
        module.close()
    return NpuRun(output, stats.npu_dispatches, stats.host_dispatches, stats.npu_cycles, trace)


def run_stock_cpu(g: Generated, vmfb: Path) -> np.ndarray:
    import iree.runtime
    module = iree.runtime.load_vm_flatbuffer_file(str(vmfb), driver="local-task")
    return getattr(module, g.sample.function)(np.load(g.input)).to_host()


def memoized(compute):
    """name -> compute(name), computed once; an exception is cached and re-raised."""
    results: dict = {}

    def get(name: str):
        if name not in results:
            try:
                results[name] = (True, compute(name))
            except Exception as e:   # noqa: BLE001 - re-raised on every later call
                results[name] = (False, e)
        ok, value = results[name]
        if not ok:
            raise value
        return value

    return get


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")

    def make(name: str) -> Generated:
        out = root / name
        onnx_path = generate(SAMPLES[name], out)
        return Generated(SAMPLES[name], out, onnx_path, out / "input_0.npy",
                         out / "expected_0.npy")

    return memoized(make)


@pytest.fixture(scope="session")
def npu_build(generated):
    return memoized(lambda name: compile_npu(generated(name)))


@pytest.fixture(scope="session")
def cpu_vmfb(generated):
    return memoized(lambda name: compile_stock_cpu(generated(name)))


@pytest.fixture(scope="session")
def npu_run(generated, npu_build):
    return memoized(lambda name: run_npu_sim(generated(name), npu_build(name)))


@pytest.fixture(scope="session")
def cpu_run(generated, cpu_vmfb):
    return memoized(lambda name: run_stock_cpu(generated(name), cpu_vmfb(name)))
