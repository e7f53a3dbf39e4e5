"""iree-benchmark-module for npu-sim: times a function in the style of the stock tool
(Google Benchmark table) and reports simulated NPU time per iteration next to the
wall time. Any device other than npu-sim execs the stock `iree-benchmark-module`.
"""
import json
import statistics
import sys
import time

from hal_driver.device.driver import create_device
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools.flags import (Flags, apply_device_flags, device_flags, exec_stock_tool,
                                    expand_flagfiles, machine_from_overrides, wants_npu_sim)
from hal_driver.tools.run_module import (annotate, choose_function, function_arguments,
                                         load_program, run_tool)

STOCK_TOOL = "iree-benchmark-module"
FLAGS = {"device": [], "module": [], "parameters": [], "function": "", "input": [],
         "benchmark_repetitions": 1, "benchmark_min_time": "0.5s", "print_statistics": False,
         "benchmark_out": "", "benchmark_out_format": "json", **device_flags()}
RULE = "-" * 112


def main(argv: list[str] | None = None) -> int:
    original = sys.argv[1:] if argv is None else argv
    return run_tool(lambda: _main(original))


def _main(original: list[str]) -> int:
    argv = expand_flagfiles(original, FLAGS)
    if not wants_npu_sim(argv):
        exec_stock_tool(STOCK_TOOL, original)
    return benchmark(Flags(argv, FLAGS))


def parse_min_time(text: str) -> tuple[float, int]:
    """`0.5s` / `0.5` (seconds) or `20x` (iterations) -> (seconds, iterations)."""
    try:
        if text.endswith("x"):
            return 0.0, max(1, int(text[:-1]))
        return float(text.rstrip("s")), 1
    except ValueError:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"--benchmark_min_time expects `<seconds>s` or `<n>x`, got `{text}`") from None


def benchmark(flags: Flags) -> int:
    device = create_device(flags.device[0], machine=machine_from_overrides(flags.machine_overrides))
    try:
        apply_device_flags(device, flags)
        try:
            bound = load_program(flags, device)
            function = choose_function(bound, flags.function)
            arguments = function_arguments(flags.input, function, device)
        except StatusError as status:
            raise annotate(status, "setting up the benchmark") from None
        min_seconds, min_iterations = parse_min_time(flags.benchmark_min_time)
        print(RULE)
        print(f"{'Benchmark':<40}{'Time':>15}{'CPU':>15}{'Iterations':>13} UserCounters...")
        print(RULE)
        name = f"BM_{function.name}/process_time/real_time"
        runs = [run_repetition(function, arguments, min_seconds, min_iterations)
                for _ in range(max(1, flags.benchmark_repetitions))]
        rows = [dict(run, name=name, run_type="iteration", repetition_index=i)
                for i, run in enumerate(runs)]
        if len(runs) > 1:
            rows += aggregates(name, runs)
        for row in rows:
            print_row(row)
        if flags.benchmark_out:
            write_json(flags, rows, len(runs))
        if flags.print_statistics:
            sys.stderr.write(f"Device: {device.id}\n{device.allocator.format_statistics()}\n")
        return 0
    finally:
        device.close()


def run_repetition(function, arguments: list, min_seconds: float, min_iterations: int) -> dict:
    wall = cpu = 0.0
    iterations = cycles = dispatches = 0
    while iterations < min_iterations or wall < min_seconds:
        cpu_start = time.process_time()
        function.invoke(arguments)
        cpu += time.process_time() - cpu_start
        stats = function.bound.last_call_stats
        wall += stats.wall_seconds
        cycles += stats.npu_cycles
        dispatches += stats.dispatches
        iterations += 1
    clock_hz = function.bound.device.machine.clock_hz
    return {"wall_ms": wall / iterations * 1e3, "cpu_ms": cpu / iterations * 1e3,
            "iterations": iterations, "npu_ms": cycles / iterations / clock_hz * 1e3,
            "npu_cycles": cycles // iterations, "dispatches": dispatches // iterations}


def print_row(row: dict) -> None:
    if row.get("aggregate_unit") == "percentage":
        times = f"{row['wall_ms'] * 100:>13.2f} %{row['cpu_ms'] * 100:>13.2f} %"
    else:
        times = f"{row['wall_ms']:>12.3f} ms{row['cpu_ms']:>12.3f} ms"
    print(f"{row['name']:<40}{times}{row['iterations']:>13} "
          f"simulated_time={row['npu_ms']:.6f}ms npu_cycles={_count(row['npu_cycles'])} "
          f"dispatches={_count(row['dispatches'])}")


def _count(value) -> str:
    """Counts print whole; the cv row's ratios with four digits."""
    return str(value) if isinstance(value, int) else f"{value:.4g}"


def aggregates(name: str, runs: list[dict]) -> list[dict]:
    """mean, median, stddev and cv (stddev / mean) rows, as Google Benchmark reports them."""
    rows = []
    for label, reduce in (("mean", statistics.mean), ("median", statistics.median),
                          ("stddev", statistics.stdev)):
        row = {key: reduce([r[key] for r in runs]) for key in COUNTERS}
        rows.append(dict(row, name=f"{name}_{label}", aggregate_name=label))
    mean, stddev = rows[0], rows[2]
    cv = {key: stddev[key] / mean[key] if mean[key] else 0.0 for key in COUNTERS}
    rows.append(dict(cv, name=f"{name}_cv", aggregate_name="cv", aggregate_unit="percentage"))
    for row in rows:
        row.update(run_type="aggregate", iterations=len(runs))
        if row["aggregate_name"] != "cv":
            row.update(npu_cycles=int(row["npu_cycles"]), dispatches=int(row["dispatches"]))
    return rows


COUNTERS = ("wall_ms", "cpu_ms", "npu_ms", "npu_cycles", "dispatches")


def write_json(flags: Flags, rows: list[dict], repetitions: int) -> None:
    """--benchmark_out: Google Benchmark's JSON report (times in ms; the simulated NPU
    time, cycles and dispatches per iteration as user counters)."""
    if flags.benchmark_out_format != "json":
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          f"--benchmark_out_format={flags.benchmark_out_format}: only json")
    benchmarks = []
    for row in rows:
        entry = {"name": row["name"], "run_name": rows[0]["name"], "run_type": row["run_type"],
                 "repetitions": repetitions, "threads": 1, "iterations": row["iterations"],
                 "real_time": row["wall_ms"], "cpu_time": row["cpu_ms"], "time_unit": "ms",
                 "simulated_time_ms": row["npu_ms"], "npu_cycles": row["npu_cycles"],
                 "dispatches": row["dispatches"]}
        for key in ("repetition_index", "aggregate_name", "aggregate_unit"):
            if key in row:
                entry[key] = row[key]
        benchmarks.append(entry)
    try:
        with open(flags.benchmark_out, "w") as f:
            json.dump({"context": {"executable": "iree-benchmark-module (npu-sim)"},
                       "benchmarks": benchmarks}, f, indent=2)
    except OSError as error:
        raise StatusError(StatusCode.UNKNOWN, f"unable to open file `{flags.benchmark_out}`: "
                          f"{error.strerror}") from None


if __name__ == "__main__":
    sys.exit(main())
