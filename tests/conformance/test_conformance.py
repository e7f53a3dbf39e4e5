"""ONNX node conformance: every case stock IREE passes must pass on npu-sim too, and
the f32 cases of the ops the NPU claims must run their dispatches on the NPU.

The per-case table (npu-sim pass/fail, stock pass/fail, NPU vs host dispatches) is
written to build/conformance/table.md at the end of the session.
"""
from pathlib import Path

import pytest

from . import cases as conformance_cases
from .runner import import_onnx, run_npu, run_stock

CASES = conformance_cases.collect()
TABLE = {}


@pytest.fixture(scope="module", autouse=True)
def write_table():
    yield
    out = Path(__file__).resolve().parents[2] / "build" / "conformance" / "table.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["| case | npu-sim | stock | npu dispatches | host dispatches | note |",
             "|---|---|---|---|---|---|"]
    for name in sorted(TABLE):
        npu, stock = TABLE[name]
        mark = lambda o: "pass" if o.passed else "fail"  # noqa: E731
        note = npu.error or (f"stock: {stock.error}" if not stock.passed else "")
        lines.append(f"| {name} | {mark(npu)} | {mark(stock)} | {npu.npu_dispatches} | "
                     f"{npu.host_dispatches} | {note} |")
    passed = sum(n.passed for n, _ in TABLE.values())
    stock_passed = sum(s.passed for _, s in TABLE.values())
    lines.append(f"\nnpu-sim {passed}/{len(TABLE)} passed; stock {stock_passed}/{len(TABLE)}")
    out.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case):
    mlir = import_onnx(case)
    stock = run_stock(case, mlir)
    npu = run_npu(case, mlir, isolated=not stock.compiled)
    TABLE[case.name] = (npu, stock)
    if stock.passed:
        assert npu.passed, f"stock passes, npu-sim fails: {npu.error}"
    dispatches = npu.npu_dispatches + npu.host_dispatches
    if npu.passed and dispatches and conformance_cases.npu_claims(case):
        assert npu.host_dispatches == 0, f"a claimed case ran on the host: {npu.report}"
