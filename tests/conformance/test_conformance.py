"""ONNX node conformance: every case stock IREE passes must pass on npu-sim too, and
the f32 cases of the ops the NPU claims must run their dispatches on the NPU.

The per-case table (npu-sim pass/fail, stock pass/fail, NPU vs host dispatches) is
written to build/conformance/table.md at the end of the session (table.py). `make
conformance` runs every case the onnx wheel ships, in parallel (pytest-xdist).
"""
from . import cases as conformance_cases
from .runner import outcomes
from .table import write_row


def test_case(case):
    npu, stock = outcomes(case)
    write_row(case.name, npu, stock)
    if stock.passed:
        assert npu.passed, f"stock passes, npu-sim fails: {npu.error}"
    dispatches = npu.npu_dispatches + npu.host_dispatches
    if npu.passed and dispatches and conformance_cases.npu_claims(case):
        assert npu.host_dispatches == 0, f"a claimed case ran on the host: {npu.report}"
