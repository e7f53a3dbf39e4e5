"""--iree-npu-codegen-jobs: the dispatches' lowerings run on forked processes, with the
bytes one process gives; a process that dies is a clear compile error."""
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from compiler_target import codegen, compile_file
from compiler_target.errors import CompileError

SMALL_CNN = str(Path(__file__).parents[2] / "samples/small_cnn/small_cnn.onnx")  # 9 dispatches


class CountingPool(ProcessPoolExecutor):
    created = 0

    def __init__(self, *args, **kwargs):
        CountingPool.created += 1
        super().__init__(*args, **kwargs)


def test_forked_lowerings_give_the_bytes_of_one_process(monkeypatch):
    monkeypatch.setattr(codegen, "ProcessPoolExecutor", CountingPool)
    one = compile_file(SMALL_CNN, extra_args=["--iree-npu-codegen-jobs=1"])
    assert CountingPool.created == 0
    two = compile_file(SMALL_CNN, extra_args=["--iree-npu-codegen-jobs=2"])
    assert CountingPool.created == 1
    assert one == two


def test_a_dying_process_is_a_compile_error(monkeypatch):
    monkeypatch.setattr(codegen.PendingCompile, "run", lambda self, tiling=None: os._exit(3))
    with pytest.raises(CompileError, match="code generation process stopped.*"
                                           "--iree-npu-codegen-jobs=1"):
        compile_file(SMALL_CNN, extra_args=["--iree-npu-codegen-jobs=2"])


@pytest.mark.parametrize("flag", ["--iree-npu-codegen-jobs=", "--iree-npu-codegen-jobs=-1",
                                  "--iree-npu-codegen-jobs=two"])
def test_jobs_must_be_a_count(flag):
    with pytest.raises(CompileError, match="expected --iree-npu-codegen-jobs=N"):
        compile_file(SMALL_CNN, extra_args=[flag])
