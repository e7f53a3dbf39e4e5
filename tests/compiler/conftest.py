import os
import pathlib
import subprocess
import sys

import onnx
import pytest

from compiler_target import pipeline
from tests.compiler import models, planners

REPO = pathlib.Path(__file__).resolve().parents[2]
IREE_COMPILE = REPO / "bin" / "iree-compile"
STOCK_IREE_COMPILE = pathlib.Path(sys.executable).parent / "iree-compile"
IREE_DUMP_MODULE = pathlib.Path(sys.executable).parent / "iree-dump-module"


@pytest.fixture
def planner(monkeypatch):
    """use(name) puts a test planner in place of codegen; returns the machine overrides seen."""
    machines = []

    def use(name: str):
        plan = planners.PLANNERS[name]

        def recording_plan(index, executable, machine, probes=()):
            machines.append(machine)
            return plan(index, executable, machine)

        monkeypatch.setattr(pipeline, "plan_dispatch", recording_plan)
        monkeypatch.setattr(pipeline, "build_machine", dict)
        return machines

    return use


@pytest.fixture(scope="session")
def seed_onnx(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("models") / "model.onnx"
    onnx.save(models.single_conv(500), path)
    return path


@pytest.fixture(scope="session")
def small_conv_onnx(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("models") / "small_conv.onnx"
    onnx.save(models.single_conv(16), path)
    return path


def run_cli(*args, planner: str | None = None, cwd=None, text=True) -> subprocess.CompletedProcess:
    """bin/iree-compile, or the npu CLI with a test planner, in a fresh process."""
    if planner is None:
        command = [str(IREE_COMPILE), *map(str, args)]
    else:
        command = [sys.executable, "-m", "tests.compiler.fake_planner_cli", planner, *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(command, capture_output=True, text=text, cwd=cwd or REPO, env=env,
                          timeout=120)


def dump_module(vmfb_path) -> str:
    return subprocess.run([str(IREE_DUMP_MODULE), str(vmfb_path)], capture_output=True,
                          text=True, check=True).stdout
