"""Measurements: compile times (subprocess wall time), call wall times (in-process, both
runtimes through their Python APIs), per-dispatch cycle-model statistics (from a
traced npu-sim run) and the benchmark tools' per-iteration times."""
import json
import platform
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hal_driver import runtime as rt

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NPU_COMPILE = ROOT / "bin" / "iree-compile"
NPU_BENCHMARK = ROOT / "bin" / "iree-benchmark-module"
STOCK_COMPILE = BIN / "iree-compile"
STOCK_IMPORT_ONNX = BIN / "iree-import-onnx"
STOCK_BENCHMARK = BIN / "iree-benchmark-module"
# The CPU stock llvm-cpu compiles for: this machine's, or another LLVM CPU name, e.g.
# NPU_BENCH_STOCK_CPU=znver3 with a core built by NPU_SIM_MARCH=znver3
# native/build_npu_core.py: both sides' code as on a Zen 3, AVX2 without AVX-512
# (docs/performance.md; stock's code for the generic x86-64-v3 is far slower than a real
# AVX2 machine's).
STOCK_CPU = os.environ.get("NPU_BENCH_STOCK_CPU", "host")
STOCK_FLAGS = ["--iree-hal-target-backends=llvm-cpu", f"--iree-llvmcpu-target-cpu={STOCK_CPU}"]
STOCK_DRIVER = "local-task"
DTYPES = ("f32", "f16", "bf16", "i8")
# Python tools keep their bytecode cache (in build/, not the source tree), as on a user's
# machine: without it every compile would first byte-compile the compiler's sources.
TOOL_ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPYCACHEPREFIX": str(ROOT / "build" / "bench" / "pycache")}


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list) -> tuple[float, float]:
    """Runs `command`; returns its wall and CPU (user + system) seconds; raises on failure."""
    cpu, start = children_cpu_seconds(), time.perf_counter()
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=TOOL_ENV)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{result.stderr[-2000:]}")
    return wall, children_cpu_seconds() - cpu


def compile_npu(source: Path, vmfb: Path, report: Path) -> tuple[float, float]:
    return run([NPU_COMPILE, "--iree-hal-target-backends=npu", source, "-o", vmfb,
                f"--iree-npu-dispatch-report={report}"])


def compile_stock(source: Path, vmfb: Path) -> tuple[float, float]:
    """Stock iree-compile for llvm-cpu; an ONNX model is imported with the stock
    iree-import-onnx first (stock iree-compile cannot read .onnx), timed together."""
    wall = cpu = 0.0
    if source.suffix == ".onnx":
        mlir = vmfb.with_suffix(".mlir")
        wall, cpu = run([STOCK_IMPORT_ONNX, source, "-o", mlir])
        source = mlir
    compile_wall, compile_cpu = run([STOCK_COMPILE, *STOCK_FLAGS, source, "-o", vmfb])
    return wall + compile_wall, cpu + compile_cpu


def interleaved_times(functions: dict, repetitions: int) -> dict:
    """{name: (median wall seconds, median process CPU seconds)} per call: one warm-up
    each, then the functions take turns, so that both see the same machine load.
    Process CPU time counts every thread of this process (npu-sim's queue worker, the
    stock runtime's task workers)."""
    samples = {name: [] for name in functions}
    for function in functions.values():
        function()
    for _ in range(repetitions):
        for name, function in functions.items():
            cpu, start = time.process_time(), time.perf_counter()
            function()
            samples[name].append((time.perf_counter() - start, time.process_time() - cpu))
    return {name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
            for name, runs in samples.items()}


def entry_function(names) -> str:
    """The single user export, as iree-run-module chooses it."""
    user = [n for n in names if not n.startswith("__") and "$" not in n]
    if len(user) != 1:
        raise RuntimeError(f"expected one exported function, got {user}")
    return user[0]


def npu_callable(vmfb: Path, inputs: list, trace: bool = False):
    module = rt.load_vm_flatbuffer(vmfb.read_bytes(), driver="npu-sim", trace=trace)
    function = module.lookup(entry_function(module.function_names))
    return module, lambda: function(*inputs)


def stock_callable(vmfb: Path, inputs: list):
    import iree.runtime
    module = iree.runtime.load_vm_flatbuffer(vmfb.read_bytes(), driver=STOCK_DRIVER)
    function = module[entry_function(module.vm_module.function_names)]

    def call():
        result = function(*inputs)
        return tuple(np.asarray(r) for r in result) if isinstance(result, tuple) else np.asarray(result)
    return call


def max_abs_difference(a, b) -> float:
    pairs = zip(a, b) if isinstance(a, tuple) else [(a, b)]
    return max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
               for x, y in pairs)


def dtype_of(dispatch_name: str) -> str:
    """The element type in a dispatch name (`..._conv_64x56x56x64x3x3_f32`); f32 if none."""
    tokens = dispatch_name.split("_")
    return next((t for t in reversed(tokens) if t in DTYPES), "f32")


def dispatch_rows(trace_events: list[dict]) -> list[dict]:
    """One row per NPU dispatch event of a trace: cycles, true roofline (recorded in the
    export by the compiler: useful MACs, each input and output byte once), the fraction
    of it reached, and whether the MAC peak or DRAM bandwidth bounds it."""
    rows = []
    for event in trace_events:
        args = event.get("args", {})
        if event.get("ph") != "X" or "roofline_cycles" not in args:
            continue
        roofline = args["roofline_cycles"]
        rows.append({"name": event["name"], "dtype": dtype_of(event["name"]),
                     "npu_cycles": args["cycles"], "roofline_cycles": round(roofline),
                     "utilization": roofline / args["cycles"] if args["cycles"] else 0.0,
                     "compute_bound": args["roofline_bound"] == "MACs",
                     "macs": args["macs"], "useful_macs": args["useful_macs"],
                     "dram_bytes": args["dram_read_bytes"] + args["dram_write_bytes"],
                     "sram_peak_bytes": args["sram_peak_bytes"]})
    return rows


def traced_run(vmfb: Path, inputs: list, trace_path: Path) -> tuple[list[dict], object]:
    """One npu-sim call with tracing; returns the trace events (as written to
    `trace_path`, read back) and the call's statistics."""
    module, call = npu_callable(vmfb, inputs, trace=True)
    try:
        call()
        module.device.trace.write(str(trace_path))
        return json.loads(trace_path.read_text())["traceEvents"], module.last_call_stats
    finally:
        module.close()


BENCHMARK_ROW = re.compile(r"^BM_\S+_median\s+([\d.]+) (ns|us|ms|s)\s+([\d.]+) (ns|us|ms|s)\s+\d+\s*(.*)$")
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def benchmark_tool(tool: Path, device: str, vmfb: Path, inputs: list, iterations: int,
                   repetitions: int = 3) -> dict:
    """Runs an iree-benchmark-module; returns the median row: wall and CPU ms per
    iteration and the user counters (npu-sim: simulated_time, npu_cycles, dispatches)."""
    with tempfile.TemporaryDirectory() as tmp:
        flags = []
        for k, array in enumerate(inputs):
            np.save(Path(tmp) / f"in{k}.npy", array)
            flags.append(f"--input=@{Path(tmp) / f'in{k}.npy'}")
        result = subprocess.run(
            [str(tool), f"--device={device}", f"--module={vmfb}", "--function=main", *flags,
             f"--benchmark_min_time={iterations}x", f"--benchmark_repetitions={repetitions}"],
            capture_output=True, text=True, env=TOOL_ENV)
    if result.returncode != 0:
        raise RuntimeError(f"{tool.name} --device={device} failed:\n{result.stderr[-2000:]}")
    for line in result.stdout.splitlines():
        match = BENCHMARK_ROW.match(line.strip())
        if match:
            counters = dict(c.split("=", 1) for c in match.group(5).split())
            return {"wall_ms": float(match.group(1)) * UNIT_MS[match.group(2)],
                    "cpu_ms": float(match.group(3)) * UNIT_MS[match.group(4)],
                    "counters": counters}
    raise RuntimeError(f"{tool.name}: no median row in its output:\n{result.stdout}")


VECTOR_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                   "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "asimd", "sve")


def host_cpu() -> dict:
    """The machine the figures come from: CPU model, the vector features that decide
    how fast numpy, the native core and stock IREE's llvm-cpu code run, and the CPUs
    this process may use."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    return {"model": fields.get("model name") or platform.processor() or platform.machine(),
            "vector_features": [f for f in VECTOR_FEATURES if f in flags],
            "cpus": len(os.sched_getaffinity(0))}


def host_cpu_line(cpu: dict) -> str:
    """The machine, and the code each side runs where it is not this machine's best."""
    code = [f"stock code for {STOCK_CPU}"] if STOCK_CPU != "host" else []
    if os.environ.get("NPU_SIM_MARCH"):
        code.append(f"NPU_SIM_MARCH={os.environ['NPU_SIM_MARCH']}")
    return (f"host CPU: {cpu['model']}, {cpu['cpus']} CPUs, vector features: "
            f"{' '.join(cpu['vector_features']) or 'none found'}"
            + (f" ({', '.join(code)})" if code else ""))


CORE_GEMM_SHAPE = (512, 512, 512)  # M x N x K, as the suite's matmul_512x512x512 layer


def core_gemm_vs_numpy(m: int, n: int, k: int, windows: int = 5, seconds: float = 0.2) -> dict:
    """GMAC/s of the native core's f32 GEMM (one matmul instruction, operands already in
    SRAM: tests/native/bench_core.py) and of numpy.matmul on the same f32 operands, in
    this process: windows of `seconds` alternating the two, the best window of each (the
    machine may be shared). Thread counts are this process's: NPU_SIM_THREADS and the
    BLAS's (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS), both read at start-up, so the
    caller sets them in a child's environment (core_gemm_in_subprocess)."""
    from executable_format.machine import MachineConfig
    from hal_driver.device.npu_core import NpuCore
    from tests.native.programs import SramImage, instr, program, run_on_sram

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    image = SramImage()
    a_addr, b_addr, out = image.put(a), image.put(b), image.reserve(m * n * 4)
    core = NpuCore(MachineConfig(sram_bytes=-(-len(image.data) // (1 << 20)) << 20))
    record = instr("matmul", "f32", a=a_addr, b=b_addr, out=out, m=m, n=n, k=k, lda=k, ldb=n,
                   ldo=n)
    matmul = program(record)
    result = run_on_sram(core, image, record)  # loads the operands into SRAM
    np.testing.assert_allclose(result.view(out, "f32", (m, n)), a @ b, rtol=1e-3, atol=1e-3)
    calls = {"core": lambda: core.execute(matmul, []), "numpy": lambda: np.matmul(a, b)}
    best = dict.fromkeys(calls, 0.0)
    for call in calls.values():
        call()
    for _ in range(windows):
        for name, call in calls.items():
            runs, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                call()
                runs += 1
            best[name] = max(best[name], m * n * k * runs / (time.perf_counter() - start) / 1e9)
    return {"core_gmacs": best["core"], "numpy_gmacs": best["numpy"],
            "ratio": best["core"] / best["numpy"]}


def core_gemm_in_subprocess(threads: int, shape=CORE_GEMM_SHAPE) -> dict:
    """core_gemm_vs_numpy in a child with NPU_SIM_THREADS and the BLAS threads = threads."""
    env = {**os.environ, **{v: str(threads) for v in ("NPU_SIM_THREADS", "OMP_NUM_THREADS",
                                                     "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}}
    code = ("import json, sys; from tests.bench.measure import core_gemm_vs_numpy; "
            f"print(json.dumps(core_gemm_vs_numpy(*{tuple(shape)!r})))")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=ROOT, check=True)
    return {"threads": threads, "m": shape[0], "n": shape[1], "k": shape[2],
            **json.loads(child.stdout.splitlines()[-1])}
