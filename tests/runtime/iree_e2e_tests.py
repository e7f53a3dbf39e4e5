"""IREE's own e2e op tests (tests/e2e/*/*.mlir, written against the `check` module) on
npu-sim: each file the pinned compiler accepts for llvm-cpu is compiled for npu and run
with bin/iree-check-module.

    python -m tests.runtime.iree_e2e_tests DIR [-j N]

DIR holds IREE's test directories (linalg, linalg_ext_ops, tensor_ops, tosa_ops,
stablehlo_ops, ...) with their .mlir files; the sources are IREE's and are not part of
this repository: copy them into DIR from an IREE checkout. Prints per directory the files
run, the test functions passed and failed, and where their dispatches ran (the npu
target's dispatch report), then every failure and every host dispatch of the kinds the
NPU code generator claims (conv, matmul, pooling, f32 elementwise) with its reason.
"""
import argparse
import collections
import concurrent.futures
import pathlib
import re
import subprocess
import sys
import tempfile

from tests.bench.measure import host_cpu, host_cpu_line

REPO = pathlib.Path(__file__).resolve().parents[2]
STOCK_COMPILE = pathlib.Path(sys.prefix) / "bin" / "iree-compile"
NPU_COMPILE = REPO / "bin" / "iree-compile"
CHECK_MODULE = REPO / "bin" / "iree-check-module"
CLAIMED = re.compile(r"_(conv|matmul|matmul_like|matvec_like|pooling)_|_elementwise_.*f32")
TIMEOUT_S = 600


def run_file(source: pathlib.Path, work: pathlib.Path) -> dict:
    """Compiles and runs one test file; a dict of what happened."""
    stem = f"{source.parent.name}_{source.stem}"
    stock = subprocess.run([str(STOCK_COMPILE), "--iree-hal-target-backends=llvm-cpu",
                            "--iree-llvmcpu-target-cpu=generic", str(source),
                            "-o", str(work / f"{stem}.cpu.vmfb")],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    if stock.returncode:
        return {"file": source, "status": "not accepted for llvm-cpu"}
    vmfb, report = work / f"{stem}.npu.vmfb", work / f"{stem}.report.txt"
    npu = subprocess.run([str(NPU_COMPILE), "--iree-hal-target-backends=npu", str(source),
                          "-o", str(vmfb), f"--iree-npu-dispatch-report={report}"],
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    if npu.returncode:
        return {"file": source, "status": "npu compile failed",
                "detail": (npu.stderr.strip().splitlines() or ["?"])[-1]}
    dispatches = report.read_text().splitlines() if report.exists() else []
    check = subprocess.run([str(CHECK_MODULE), "--device=npu-sim", f"--module={vmfb}"],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    passed = len(re.findall(r"^\[       OK \]", check.stdout, re.M))
    failed = re.findall(r"^\[  FAILED  \] (\S+) \(", check.stdout, re.M)
    return {"file": source, "status": "ran", "passed": passed, "failed": failed,
            "error": check.stderr.strip() if check.returncode and not failed else "",
            "npu": sum("-> npu" in line for line in dispatches),
            "host": [line for line in dispatches if "-> host" in line]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=pathlib.Path)
    parser.add_argument("-j", type=int, default=2)
    args = parser.parse_args()
    print(host_cpu_line(host_cpu()))
    sources = sorted(args.directory.glob("*/*.mlir"))
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        results = list(pool.map(lambda s: run_file(s, pathlib.Path(tmp)), sources))
    by_dir = collections.defaultdict(list)
    for result in results:
        by_dir[result["file"].parent.name].append(result)
    print("| directory | files | accepted for llvm-cpu | ran | tests passed | tests failed | "
          "npu dispatches | host dispatches |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in sorted(by_dir.items()):
        ran = [r for r in rows if r["status"] == "ran"]
        accepted = [r for r in rows if r["status"] != "not accepted for llvm-cpu"]
        print(f"| {name} | {len(rows)} | {len(accepted)} | {len(ran)} | "
              f"{sum(r['passed'] for r in ran)} | {sum(len(r['failed']) for r in ran)} | "
              f"{sum(r['npu'] for r in ran)} | {sum(len(r['host']) for r in ran)} |")
    problems = 0
    for r in results:
        where = f"{r['file'].parent.name}/{r['file'].name}"
        if r["status"] == "npu compile failed":
            problems += 1
            print(f"COMPILE {where}: {r['detail']}")
        elif r["status"] == "ran":
            for test in r["failed"]:
                problems += 1
                print(f"FAILED {where}: {test}")
            if r["error"]:
                problems += 1
                print(f"ERROR {where}: {r['error']}")
            for line in r["host"]:
                if CLAIMED.search(line.split(":")[0]):
                    print(f"HOST {where}: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
