"""The ONNX node cases' table, a pytest plugin (registered by tests/conftest.py, so that
it works whether pytest runs the whole suite or only tests/conformance), and their
`--conformance=default|all` option (conftest.py collects the cases). Each case writes
its table row to build/conformance/rows/, and the controlling process (not the
pytest-xdist workers) merges them into build/conformance/table.md at the end."""
import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "build" / "conformance"
ROWS = OUT / "rows"


def add_option(parser):
    parser.addoption("--conformance", choices=("default", "all"), default="default",
                     help="ONNX node cases: the claimed ops plus one case per op type "
                          "(default), or every case the onnx wheel ships (all)")


def _is_controller(config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session):
    if _is_controller(session.config):
        ROWS.mkdir(parents=True, exist_ok=True)
        for row in ROWS.glob("*.json"):
            row.unlink()


def write_row(name: str, npu, stock) -> None:
    row = {"name": name, "npu": npu.passed, "stock": stock.passed,
           "npu_dispatches": npu.npu_dispatches, "host_dispatches": npu.host_dispatches,
           "note": npu.error or (f"stock: {stock.error}" if not stock.passed else "")}
    (ROWS / f"{name}.json").write_text(json.dumps(row))


def pytest_sessionfinish(session):
    if not _is_controller(session.config) or not ROWS.exists():
        return
    rows = [json.loads(p.read_text()) for p in sorted(ROWS.glob("*.json"))]
    if not rows:
        return
    mark = {True: "pass", False: "fail"}
    lines = ["Dispatches: those the case's call ran on npu-sim (a dispatch in a loop counts "
             "each time), or for a call that failed, those compiled for it.\n",
             "| case | npu-sim | stock | npu dispatches | host dispatches | note |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {mark[r['npu']]} | {mark[r['stock']]} | {r['npu_dispatches']} | "
              f"{r['host_dispatches']} | {r['note'][:200].replace('|', '/')} |" for r in rows]
    lost = [r["name"] for r in rows if r["stock"] and not r["npu"]]
    lines.append(f"\nnpu-sim {sum(r['npu'] for r in rows)}/{len(rows)} passed; stock "
                 f"{sum(r['stock'] for r in rows)}/{len(rows)}; stock passes and npu-sim "
                 f"fails: {len(lost)} {' '.join(lost)}")
    (OUT / "table.md").write_text("\n".join(lines) + "\n")
