"""iree-benchmark-module for npu-sim: times a function in the style of the stock tool
(Google Benchmark table) and reports simulated NPU time per iteration next to the
wall time. Any device other than npu-sim execs the stock `iree-benchmark-module`.
"""
import statistics
import sys
import time

from hal_driver.device.driver import create_device
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools.flags import (Flags, exec_stock_tool, expand_flagfiles,
                                    machine_from_overrides, wants_npu_sim)
from hal_driver.tools.run_module import (annotate, choose_function, function_arguments,
                                         load_program, report)

STOCK_TOOL = "iree-benchmark-module"
FLAGS = {"device": [], "module": [], "parameters": [], "function": "", "input": [],
         "benchmark_repetitions": 1, "benchmark_min_time": "0.5s", "print_statistics": False}
RULE = "-" * 112


def main(argv: list[str] | None = None) -> int:
    original = sys.argv[1:] if argv is None else argv
    try:
        argv = expand_flagfiles(original, FLAGS)
        if not wants_npu_sim(argv):
            exec_stock_tool(STOCK_TOOL, original)
        return benchmark(Flags(argv, FLAGS))
    except StatusError as status:
        return report(status)
    except Exception as error:   # a bug of ours: still one line, never a traceback
        return report(StatusError(StatusCode.INTERNAL, f"{type(error).__name__}: {error}"))


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
        for run in runs:
            print_row(name, run)
        if len(runs) > 1:
            print_aggregates(name, runs)
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


def print_row(name: str, run: dict, iterations_column=None) -> None:
    iterations = run["iterations"] if iterations_column is None else iterations_column
    print(f"{name:<40}{run['wall_ms']:>12.3f} ms{run['cpu_ms']:>12.3f} ms{iterations:>13} "
          f"simulated_time={run['npu_ms']:.6f}ms npu_cycles={run['npu_cycles']} "
          f"dispatches={run['dispatches']}")


def print_aggregates(name: str, runs: list[dict]) -> None:
    for label, reduce in (("mean", statistics.mean), ("median", statistics.median),
                          ("stddev", statistics.stdev)):
        row = {key: reduce([r[key] for r in runs]) for key in runs[0]}
        row["npu_cycles"] = int(row["npu_cycles"])
        row["dispatches"] = int(row["dispatches"])
        print_row(f"{name}_{label}", row, iterations_column=len(runs))


if __name__ == "__main__":
    sys.exit(main())
