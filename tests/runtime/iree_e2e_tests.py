"""IREE's own e2e op tests (tests/e2e/*/*.mlir, written against the `check` module) on
npu-sim: each file the pinned compiler accepts for llvm-cpu is compiled for npu
(bin/iree-compile --iree-hal-target-backends=npu) and run with
`bin/iree-check-module --device=npu-sim --npu_sim_stats`.

    python -m tests.runtime.iree_e2e_tests DIR [-j N] [--work WORKDIR]

DIR holds IREE's test directories (linalg, linalg_ext_ops, math, tensor_ops, tosa_ops,
stablehlo_ops, ...) with their .mlir files. The sources are IREE's and are not part of
this repository: copy them into DIR from an IREE checkout (docs/user-guide.md, "IREE's
e2e op tests"). Needs no network. `--work` keeps the compiled modules, dispatch reports
and test output there (default: a temporary directory).

Prints per directory the files, those accepted for llvm-cpu, the test functions passed
and failed, and the dispatches compiled for the NPU and the host; then the dispatches of
the kinds the NPU code generator handles (conv, matmul, pooling, f32 elementwise: by the
dispatch's name) split into: on the NPU, on the host because the code generator does not
claim them (`not supported on npu: <reason>`, grouped by reason), on the host although
claimed (`not lowerable on npu`, a problem), and NPU dispatches that never ran. Exits 1
if any test failed, any accepted file did not compile for npu or run, or any claimed
dispatch stayed on the host or never ran.
"""
import argparse
import collections
import concurrent.futures
import pathlib
import re
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
STOCK_COMPILE = pathlib.Path(sys.executable).parent / "iree-compile"
NPU_COMPILE = REPO / "bin" / "iree-compile"
CHECK_MODULE = REPO / "bin" / "iree-check-module"
KINDS = re.compile(r"_(conv|matmul|matmul_like|matvec_like|pooling)_|_elementwise_.*f32")
REPORT_LINE = re.compile(r"^Dispatch #\d+ (\S+): .*? -> (?:(npu) \(|host: (.*))")
STATS_LINE = re.compile(r"^\[ npu-sim  \] \S+: .*; ran: (.*)$")
TIMEOUT_S = 900


def run_file(source: pathlib.Path, work: pathlib.Path) -> dict:
    """Compiles and runs one test file; a dict of what happened."""
    stem = f"{source.parent.name}_{source.stem}"
    result = {"file": f"{source.parent.name}/{source.name}", "dir": source.parent.name}
    stock = subprocess.run([str(STOCK_COMPILE), "--iree-hal-target-backends=llvm-cpu",
                            "--iree-llvmcpu-target-cpu=generic", str(source),
                            "-o", str(work / f"{stem}.cpu.vmfb")],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    if stock.returncode:
        return {**result, "status": "not accepted for llvm-cpu", "detail": _first_error(stock)}
    vmfb, report = work / f"{stem}.npu.vmfb", work / f"{stem}.report.txt"
    npu = subprocess.run([str(NPU_COMPILE), "--iree-hal-target-backends=npu", str(source),
                          "-o", str(vmfb), f"--iree-npu-dispatch-report={report}"],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    if npu.returncode:
        return {**result, "status": "npu compile failed", "detail": _first_error(npu)}
    dispatches = [(m[1], m[2] or "host", m[3])   # (name, npu or host, host reason)
                  for m in map(REPORT_LINE.match, report.read_text().splitlines()) if m]
    check = subprocess.run([str(CHECK_MODULE), "--device=npu-sim", f"--module={vmfb}",
                            "--npu_sim_stats"], capture_output=True, text=True, timeout=TIMEOUT_S)
    (work / f"{stem}.check.txt").write_text(check.stdout + check.stderr)
    ran = collections.Counter()
    for line in check.stderr.splitlines():
        stats = STATS_LINE.match(line)
        if stats:
            ran.update(name.rsplit(" x", 1)[0] for name in stats[1].split(", "))
    return {**result, "status": "ran",
            "passed": len(re.findall(r"^\[       OK \]", check.stdout, re.M)),
            "failed": re.findall(r"^\[  FAILED  \] (\S+), where .* ms\)$", check.stdout, re.M),
            "error": check.stdout.strip().splitlines()[-1] if check.returncode and
            "FAILED TEST" not in check.stdout else "",
            "dispatches": dispatches, "ran": ran}


def _first_error(process: subprocess.CompletedProcess) -> str:
    lines = process.stderr.strip().splitlines() or ["?"]
    return next((line for line in lines if "error" in line), lines[-1])[:300]


def print_table(results: list[dict]) -> None:
    print("| directory | files | accepted for llvm-cpu | ran | tests passed | tests failed | "
          "npu dispatches | host dispatches |")
    print("|---|---|---|---|---|---|---|---|")
    by_dir = collections.defaultdict(list)
    for r in results:
        by_dir[r["dir"]].append(r)
    rows = sorted(by_dir.items()) + [("total", results)]
    for name, group in rows:
        ran = [r for r in group if r["status"] == "ran"]
        accepted = [r for r in group if r["status"] != "not accepted for llvm-cpu"]
        dispatches = [d for r in ran for d in r["dispatches"]]
        print(f"| {name} | {len(group)} | {len(accepted)} | {len(ran)} | "
              f"{sum(r['passed'] for r in ran)} | {sum(len(r['failed']) for r in ran)} | "
              f"{sum(d[1] == 'npu' for d in dispatches)} | "
              f"{sum(d[1] == 'host' for d in dispatches)} |")


def claimed_kinds(results: list[dict]) -> int:
    """Prints where the conv/matmul/pooling/f32 elementwise dispatches ran; the number of
    problems (claimed but on the host, or on the NPU but never run)."""
    on_npu, not_claimed, problems = 0, collections.Counter(), []
    for r in (r for r in results if r["status"] == "ran"):
        for name, target, reason in r["dispatches"]:
            if not KINDS.search(name):
                continue
            if target == "npu":
                on_npu += 1
                if not r["ran"].get(name):
                    problems.append(f"NEVER RAN {r['file']}: {name}")
            elif reason.startswith("not supported on npu: "):
                not_claimed[re.sub(r"\d+", "N", reason.removeprefix("not supported on npu: "))] += 1
            else:
                problems.append(f"HOST {r['file']}: {name}: {reason}")
    print(f"\nconv/matmul/pooling/f32 elementwise dispatches: {on_npu} on the NPU, "
          f"{sum(not_claimed.values())} on the host not claimed by the code generator, "
          f"{len(problems)} problems")
    for reason, count in not_claimed.most_common():
        print(f"  {count:3d} not claimed: {reason}")
    for problem in problems:
        print(problem)
    return len(problems)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=pathlib.Path)
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("--work", type=pathlib.Path, help="keep the artefacts here")
    args = parser.parse_args()
    sources = sorted(args.directory.glob("*/*.mlir"))
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or pathlib.Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
            results = list(pool.map(lambda s: run_file(s, work), sources))
    print_table(results)
    problems = claimed_kinds(results)
    for r in results:
        if r["status"] == "not accepted for llvm-cpu":
            print(f"NOT ACCEPTED {r['file']}: {r['detail']}")
        elif r["status"] == "npu compile failed":
            problems += 1
            print(f"COMPILE {r['file']}: {r['detail']}")
        else:
            problems += len(r["failed"]) + bool(r["error"])
            print("".join(f"FAILED {r['file']}: {test}\n" for test in r["failed"]), end="")
            if r["error"]:
                print(f"ERROR {r['file']}: {r['error']}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
