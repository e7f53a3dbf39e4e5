"""`make bench`: the benchmark suite (tests/bench/models.py) compiled for npu and for
stock llvm-cpu, run on npu-sim and on stock local-task in the same process (one
process per model, `run_bench --model NAME`, so that a crash only loses that model);
then the real trained networks of tests/real_models the same way, and int8 versions of
four of them (tests/bench/real_model_bench.py, `run_bench --real-model NAME[.int8]`).

Writes build/bench/results.json, results.txt (the table printed here) and
roofline.png (tests/bench/chart.py); traces of one npu-sim call per model in
build/bench/traces/ and their engine timelines in build/bench/timelines/. Times are medians over repetitions (the machine may be shared).
"""
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from executable_format.machine import DEFAULT_MACHINE
from tests.bench import chart, measure, models, real_model_bench
from tests.real_models.models import MODELS as REAL_MODELS

OUT = models.ROOT / "build" / "bench"
COMPILE_REPETITIONS = 3
RUN_REPETITIONS = 7
TINY_CALLS = 300
# utilization: of the true roofline, by every NPU dispatch whose roofline is at least
# UTILIZATION_MIN_ROOFLINE cycles (smaller ones are dominated by fixed latencies)
UTILIZATION_MIN_ROOFLINE = 10_000
# core_gemm_ratio: the native core's f32 GEMM against numpy.matmul, same shape and threads
TARGETS = {"utilization": 0.85, "wall_ratio": 2.0, "compile_ratio": 1.0, "tiny_call_ms": 0.2,
           "core_gemm_ratio": 0.5}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def compile_both(model: models.Model) -> dict:
    """Compiles for npu and stock llvm-cpu, alternating, COMPILE_REPETITIONS times."""
    npu_vmfb, stock_vmfb = OUT / "vmfb" / f"{model.name}.npu.vmfb", OUT / "vmfb" / f"{model.name}.cpu.vmfb"
    report = OUT / "reports" / f"{model.name}.txt"
    npu_times, stock_times = [], []
    for _ in range(COMPILE_REPETITIONS):
        npu_times.append(measure.compile_npu(model.source, npu_vmfb, report))
        stock_times.append(measure.compile_stock(model.source, stock_vmfb))
    return {"npu_vmfb": npu_vmfb, "stock_vmfb": stock_vmfb,
            "npu_compile_s": statistics.median(wall for wall, _ in npu_times),
            "stock_compile_s": statistics.median(wall for wall, _ in stock_times),
            "npu_compile_cpu_s": statistics.median(cpu for _, cpu in npu_times),
            "stock_compile_cpu_s": statistics.median(cpu for _, cpu in stock_times),
            "dispatch_report": report.read_text().splitlines()}


def run_both(model: models.Model, npu_vmfb: Path, stock_vmfb: Path) -> dict:
    module, npu_call = measure.npu_callable(npu_vmfb, model.inputs)
    stock_call = measure.stock_callable(stock_vmfb, model.inputs)
    try:
        difference = measure.max_abs_difference(npu_call(), stock_call())
        times = measure.interleaved_times({"npu": npu_call, "stock": stock_call}, RUN_REPETITIONS)
        return {"npu_sim_wall_s": times["npu"][0], "stock_cpu_wall_s": times["stock"][0],
                "npu_sim_process_cpu_s": times["npu"][1], "stock_process_cpu_s": times["stock"][1],
                "max_abs_difference_vs_stock": difference}
    finally:
        module.close()


def bench_model(model: models.Model) -> dict:
    log(f"bench: {model.name}: compiling")
    compiled = compile_both(model)
    log(f"bench: {model.name}: running")
    timings = run_both(model, compiled["npu_vmfb"], compiled["stock_vmfb"])
    events, call = measure.traced_run(compiled["npu_vmfb"], model.inputs,
                                      OUT / "traces" / f"{model.name}.json")
    chart.timeline_chart(events, OUT / "timelines" / f"{model.name}.png", model.name)
    dispatches = measure.dispatch_rows(events)
    npu_cycles = sum(d["npu_cycles"] for d in dispatches)
    roofline = sum(d["roofline_cycles"] for d in dispatches)
    result = {
        "name": model.name, "kind": model.kind, "source": str(model.source.relative_to(models.ROOT)),
        "npu_cycles": npu_cycles, "roofline_cycles": roofline,
        "utilization": roofline / npu_cycles if npu_cycles else None,
        **timings,
        "wall_ratio": timings["npu_sim_wall_s"] / timings["stock_cpu_wall_s"],
        "npu_compile_s": compiled["npu_compile_s"], "stock_compile_s": compiled["stock_compile_s"],
        "compile_ratio": compiled["npu_compile_s"] / compiled["stock_compile_s"],
        "npu_compile_cpu_s": compiled["npu_compile_cpu_s"],
        "stock_compile_cpu_s": compiled["stock_compile_cpu_s"],
        "npu_dispatches": call.npu_dispatches, "host_dispatches": call.host_dispatches,
        "dram_bytes": sum(d["dram_bytes"] for d in dispatches),
        "sram_peak_bytes": max((d["sram_peak_bytes"] for d in dispatches), default=0),
        "dispatches": dispatches, "dispatch_report": compiled["dispatch_report"]}
    result["targets"] = model_targets(result)
    return result


def bench_or_error(name: str, kind: str, bench) -> dict:
    """bench(), or the model's failure (the suite goes on with the next model)."""
    try:
        return bench()
    except Exception as error:   # a failing compile or run is a result, reported as such
        message = str(error).strip().splitlines()
        log(f"bench: {name}: FAILED: {message[-1] if message else type(error).__name__}")
        return {"name": name, "kind": kind, "error": "\n".join(message[:1] + message[-1:])}


def bench_in_subprocess(option: str, name: str, kind: str) -> dict:
    """`run_bench OPTION NAME` (bench_one) in a child process; a crash (e.g. a native
    fault) becomes the error."""
    path = OUT / "results" / f"{name}.json"
    path.unlink(missing_ok=True)
    child = subprocess.run([sys.executable, "-m", "tests.bench.run_bench", option, name],
                           stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    sys.stderr.write(child.stderr)
    if child.returncode == 0 and path.exists():
        return json.loads(path.read_text())
    reason = (f"killed by {signal.Signals(-child.returncode).name}" if child.returncode < 0
              else f"exit code {child.returncode}")
    log(f"bench: {name}: FAILED: {reason}")
    return {"name": name, "kind": kind, "error": f"bench process {reason}"}


def bench_one(option: str, name: str) -> int:
    """The child's side: benchmarks the suite's model (--model) or the real model
    (--real-model) `name` into results/NAME.json."""
    if option == "--model":
        [model] = [m for m in models.suite(OUT / "models") if m.name == name]
        result = bench_or_error(name, model.kind, lambda: bench_model(model))
    else:
        log(f"bench: {name}: compiling and running")
        base = name.removesuffix(real_model_bench.INT8_SUFFIX)
        result = bench_or_error(name, "real", lambda: real_model_bench.bench_real_model(
            REAL_MODELS[base], OUT, quantized=base != name))
    (OUT / "results" / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


def model_targets(result: dict) -> dict:
    """Which targets a model meets; utilization over the dispatches whose true roofline
    is at least UTILIZATION_MIN_ROOFLINE cycles, compute- or memory-bound."""
    bound = [d for d in result["dispatches"] if d["roofline_cycles"] >= UTILIZATION_MIN_ROOFLINE]
    return {"utilization": all(d["utilization"] >= TARGETS["utilization"] for d in bound) if bound else None,
            "wall_ratio": result["wall_ratio"] <= TARGETS["wall_ratio"],
            "compile_ratio": result["compile_ratio"] <= TARGETS["compile_ratio"]}


def bench_tiny() -> dict:
    """Per-call overhead on a 4-element add, in process and with the benchmark tools."""
    model = models.tiny_model(OUT / "models")
    npu_vmfb, stock_vmfb = OUT / "vmfb" / "add4.npu.vmfb", OUT / "vmfb" / "add4.cpu.vmfb"
    measure.compile_npu(model.source, npu_vmfb, OUT / "reports" / "add4.txt")
    measure.compile_stock(model.source, stock_vmfb)
    module, npu_call = measure.npu_callable(npu_vmfb, model.inputs)
    stock_call = measure.stock_callable(stock_vmfb, model.inputs)
    try:
        times = measure.interleaved_times({"npu": npu_call, "stock": stock_call}, TINY_CALLS)
    finally:
        module.close()
    return {"tiny_call_overhead_ms": times["npu"][0] * 1e3, "tiny_stock_call_ms": times["stock"][0] * 1e3,
            "tiny_npu_process_cpu_ms": times["npu"][1] * 1e3,
            "tiny_stock_process_cpu_ms": times["stock"][1] * 1e3,
            "benchmark_module": {
                "npu-sim": measure.benchmark_tool(measure.NPU_BENCHMARK, "npu-sim", npu_vmfb,
                                                  model.inputs, TINY_CALLS),
                measure.STOCK_DRIVER: measure.benchmark_tool(measure.STOCK_BENCHMARK,
                                                             measure.STOCK_DRIVER, stock_vmfb,
                                                             model.inputs, TINY_CALLS)}}


def bench_core_gemm(cpus: int) -> list[dict]:
    """The native core's f32 GEMM against numpy.matmul (measure.core_gemm_vs_numpy) on one
    thread and on every CPU, each in a child process with both thread counts set."""
    rows = []
    for threads in sorted({1, cpus}):
        try:
            rows.append(measure.core_gemm_in_subprocess(threads))
        except subprocess.CalledProcessError as e:
            log(f"bench: core GEMM, {threads} threads: FAILED: {e.stderr.strip().splitlines()[-1:]}")
            rows.append({"threads": threads, "error": e.stderr})
    return rows


def core_gemm_line(rows: list[dict]) -> str:
    m, n, k = measure.CORE_GEMM_SHAPE
    parts = []
    for r in rows:
        if "error" in r:
            parts.append(f"{r['threads']} threads FAILED")
            continue
        parts.append(f"{r['threads']} thread{'s' if r['threads'] > 1 else ''} "
                     f"core {r['core_gmacs']:.1f} vs numpy {r['numpy_gmacs']:.1f} GMAC/s = "
                     f"{r['ratio']:.2f}x {mark(r['ratio'] >= TARGETS['core_gemm_ratio'])}")
    return (f"native core f32 GEMM {m}x{n}x{k} (matmul instruction, operands in SRAM) vs "
            f"numpy.matmul, same threads: {'; '.join(parts)} (target >= "
            f"{TARGETS['core_gemm_ratio']}x)")


def mark(ok) -> str:
    return "-" if ok is None else "ok" if ok else "MISS"


def model_table(results: list[dict]) -> list[str]:
    lines = [f"{'model':<26}{'npu/host':>9}{'npu cycles':>12}{'roofline':>11}{'util':>6}{'':>5}"
             f"{'npu-sim ms':>11}{'stock ms':>10}{'ratio':>7}{'':>5}{'cpu ms npu/stock':>18}"
             f"{'npu comp s':>11}{'stock s':>8}{'ratio':>7}{'':>5}{'cpu s npu/stock':>16}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['name']:<26}FAILED: {r['error'].splitlines()[-1]}")
            continue
        t = r["targets"]
        util = "-" if r["utilization"] is None else f"{r['utilization']:.2f}"
        lines.append(
            f"{r['name']:<26}{r['npu_dispatches']:>5}/{r['host_dispatches']:<3}{r['npu_cycles']:>12}"
            f"{r['roofline_cycles']:>11}{util:>6}{mark(t['utilization']):>5}"
            f"{r['npu_sim_wall_s'] * 1e3:>11.1f}{r['stock_cpu_wall_s'] * 1e3:>10.1f}{r['wall_ratio']:>7.1f}"
            f"{mark(t['wall_ratio']):>5}"
            f"{r['npu_sim_process_cpu_s'] * 1e3:>11.1f}/{r['stock_process_cpu_s'] * 1e3:<6.1f}"
            f"{r['npu_compile_s']:>11.2f}{r['stock_compile_s']:>8.2f}"
            f"{r['compile_ratio']:>7.2f}{mark(t['compile_ratio']):>5}"
            f"{r['npu_compile_cpu_s']:>10.2f}/{r['stock_compile_cpu_s']:<5.2f}")
    return lines


def dispatch_table(results: list[dict]) -> list[str]:
    lines = [f"{'#':>3} {'model':<26}{'dispatch':<64}{'cycles':>10}{'roofline':>10}{'util':>6}"
             f"{'bound':>9}{'DRAM bytes':>12}{'SRAM peak':>11}"]
    k = 0
    for r in results:
        for d in r.get("dispatches", []):
            bound = "compute" if d["compute_bound"] else "memory"
            target = mark(d["utilization"] >= TARGETS["utilization"]) \
                if d["roofline_cycles"] >= UTILIZATION_MIN_ROOFLINE else ""
            lines.append(f"{k:>3} {r['name']:<26}{d['name'][-63:]:<64}{d['npu_cycles']:>10}"
                         f"{d['roofline_cycles']:>10}{d['utilization']:>6.2f}{bound:>9}"
                         f"{d['dram_bytes']:>12}{d['sram_peak_bytes']:>11} {target}")
            k += 1
    return lines


def tiny_lines(tiny: dict) -> list[str]:
    tools = tiny["benchmark_module"]
    npu, stock = tools["npu-sim"], tools[measure.STOCK_DRIVER]
    return [f"tiny model (4-element add), per call: npu-sim {tiny['tiny_call_overhead_ms']:.3f} ms "
            f"{mark(tiny['tiny_call_overhead_ms'] <= TARGETS['tiny_call_ms'])} (target <= "
            f"{TARGETS['tiny_call_ms']} ms), stock {measure.STOCK_DRIVER} {tiny['tiny_stock_call_ms']:.3f} ms "
            f"(Python APIs, median of {TINY_CALLS}; process CPU per call npu-sim "
            f"{tiny['tiny_npu_process_cpu_ms']:.3f} ms, stock {tiny['tiny_stock_process_cpu_ms']:.3f} ms)",
            f"iree-benchmark-module median per iteration: npu-sim wall {npu['wall_ms']:.3f} ms "
            f"cpu {npu['cpu_ms']:.3f} ms simulated {npu['counters'].get('simulated_time', '?')}; "
            f"stock {measure.STOCK_DRIVER} wall {stock['wall_ms']:.3f} ms cpu {stock['cpu_ms']:.3f} ms"]


def main(argv: list[str]) -> int:
    for sub in ("models", "vmfb", "reports", "traces", "timelines", "results"):
        (OUT / sub).mkdir(parents=True, exist_ok=True)
    if argv[:1] in (["--model"], ["--real-model"]):
        return bench_one(argv[0], argv[1])
    cpu = measure.host_cpu()
    log(measure.host_cpu_line(cpu))
    results = [bench_in_subprocess("--model", model.name, model.kind)
               for model in models.suite(OUT / "models")]
    real_names = [*REAL_MODELS, *(name + real_model_bench.INT8_SUFFIX
                                  for name in real_model_bench.QUANTIZED)]
    real_results = [bench_in_subprocess("--real-model", name, "real") for name in real_names]
    log("bench: tiny model")
    tiny = bench_tiny()
    log("bench: native core GEMM against numpy.matmul")
    core_gemm = bench_core_gemm(cpu["cpus"])
    summary = {"machine": DEFAULT_MACHINE.as_dict(), "host": platform.node(), "host_cpu": cpu,
               "targets": TARGETS, "stock": {"flags": measure.STOCK_FLAGS, "driver": measure.STOCK_DRIVER},
               "repetitions": {"compile": COMPILE_REPETITIONS, "run": RUN_REPETITIONS,
                               "tiny_calls": TINY_CALLS},
               "real_model_calls": real_model_bench.CALLS,
               **tiny, "core_gemm": core_gemm, "models": results, "real_models": real_results}
    (OUT / "results.json").write_text(json.dumps(summary, indent=1, default=str))
    table = ([measure.host_cpu_line(cpu), ""] + model_table(results) + [""] + dispatch_table(results) + [""]
             + real_model_bench.real_model_table(real_results) + [""] + tiny_lines(tiny)
             + [core_gemm_line(core_gemm)])
    (OUT / "results.txt").write_text("\n".join(table) + "\n")
    chart.roofline_chart([d for r in results for d in r.get("dispatches", [])],
                         DEFAULT_MACHINE, OUT / "roofline.png", UTILIZATION_MIN_ROOFLINE)
    print("\n".join(table))
    print(f"\nwrote {OUT / 'results.json'}, {OUT / 'results.txt'}, {OUT / 'roofline.png'}, "
          f"{OUT / 'timelines'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
