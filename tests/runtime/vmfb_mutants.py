"""Mutation hardening: corrupt a vmfb that holds both an npu-fb executable and a
host-fallback ELF, run every mutant on npu-sim, and count how each one ends.

    python -m tests.runtime.vmfb_mutants [--elf 500] [--npu-fb 200] [--anywhere 300]

The model is samples/host_fallback (Gemm + Relu on the NPU, CumSum on the host).
Each mutant changes 1 to 4 random bytes inside the embedded ELF, inside the npu-fb
flatbuffer, or anywhere in the file (fixed seed). Mutants run in a worker process
through the Python runtime API (load, call the model's function); the parent classifies each as
    ok         the call returned (outputs may differ: weights can change)
    error      a StatusError (one clear line)
    traceback  any other exception
    signal     the worker died by a signal (segfault, abort, ...)
    exit       the worker exited on its own (e.g. the glibc loader's exit 127)
    hang       no answer within the parent's timeout
and restarts the worker after a death or a hang. The criterion (issue #12): 0 of the
last four.
"""
import argparse
import collections
import multiprocessing
import pathlib
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
MODEL = REPO / "samples" / "host_fallback" / "host_fallback.onnx"
# A worker answers each mutant within this; the device deadline below is shorter.
HANG_SECONDS = 60
DISPATCH_TIMEOUT_MS = 10_000
BAD_OUTCOMES = ("traceback", "signal", "exit", "hang")


def compile_model(directory: pathlib.Path) -> bytes:
    out = directory / "host_fallback.vmfb"
    subprocess.run([str(REPO / "bin" / "iree-compile"), "--iree-hal-target-backends=npu",
                    str(MODEL), "-o", str(out)], check=True)
    return out.read_bytes()


def executable_ranges(vmfb: bytes) -> dict[str, list[tuple[int, int]]]:
    """[start, end) in the file of each embedded ELF and each npu-fb flatbuffer (the
    rodata segments the bytecode module declares)."""
    from hal_driver.vm.container import parse_archive
    from hal_driver.vm.module_loader import load_module_def
    array = np.frombuffer(vmfb, np.uint8)
    base = array.ctypes.data
    ranges = {"elf": [], "npu-fb": []}
    for segment in load_module_def(parse_archive(array)).rodata:
        start = np.frombuffer(segment, np.uint8).ctypes.data - base
        data = bytes(segment)
        if data[:4] == b"\x7fELF":
            ranges["elf"].append((start, start + len(data)))
        elif data[4:8] == b"NPUF":
            ranges["npu-fb"].append((start, start + len(data)))
    return ranges


def entry_function(vmfb: bytes) -> str:
    """The model's one exported function (named after the ONNX graph)."""
    from hal_driver.runtime import load_vm_flatbuffer
    module = load_vm_flatbuffer(vmfb)
    try:
        [name] = [n for n in module.function_names if not n.startswith("__") and "$" not in n]
        return name
    finally:
        module.close()


def mutate(vmfb: bytes, ranges: list[tuple[int, int]], rng: random.Random) -> bytes:
    data = bytearray(vmfb)
    start, end = rng.choice(ranges)
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(start, end)] = rng.randrange(256)
    return bytes(data)


def worker(connection, function: str, x: np.ndarray) -> None:
    """Runs each mutant path it receives and sends back (outcome, detail)."""
    from hal_driver.runtime import load_vm_flatbuffer
    from hal_driver.status import StatusError
    while True:
        path = connection.recv()
        module = None
        try:
            module = load_vm_flatbuffer(pathlib.Path(path).read_bytes(),
                                        dispatch_timeout_ms=DISPATCH_TIMEOUT_MS)
            module.lookup(function)(x)
            answer = ("ok", "")
        except StatusError as e:
            answer = ("error", e.code.name)
        except Exception as e:  # noqa: BLE001 - the point is to count these
            answer = ("traceback", f"{type(e).__name__}: {str(e)[:200]}")
        finally:
            if module is not None:
                try:
                    module.close()
                except Exception as e:  # noqa: BLE001
                    answer = ("traceback", f"close: {type(e).__name__}: {str(e)[:200]}")
        connection.send(answer)


class Runner:
    """A worker process that is restarted after it dies or hangs."""

    def __init__(self, function: str, x: np.ndarray):
        self.function = function
        self.x = x
        self.process = None

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=worker, args=(child, self.function, self.x), daemon=True)
        self.process.start()

    def run(self, path: str) -> tuple[str, str]:
        if self.process is None or not self.process.is_alive():
            self.start()
        self.connection.send(path)
        if self.connection.poll(HANG_SECONDS):
            try:
                return self.connection.recv()
            except EOFError:
                pass
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
            self.process = None
            return ("hang", "")
        self.process.join()
        code = self.process.exitcode
        self.process = None
        return ("signal", f"{-code}") if code < 0 else ("exit", f"{code}")

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()


def run_mutants(counts: dict[str, int], seed: int = 0) -> dict[str, collections.Counter]:
    """{region: Counter of outcomes}; prints each bad outcome as it happens."""
    x = np.random.default_rng(seed).standard_normal((4, 64)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        vmfb = compile_model(directory)
        ranges = executable_ranges(vmfb)
        ranges["anywhere"] = [(0, len(vmfb))]
        rng = random.Random(seed)
        runner = Runner(entry_function(vmfb), x)
        results = {}
        try:
            for region, count in counts.items():
                results[region] = collections.Counter()
                for i in range(count):
                    path = directory / "mutant.vmfb"
                    path.write_bytes(mutate(vmfb, ranges[region], rng))
                    outcome, detail = runner.run(str(path))
                    results[region][outcome] += 1
                    if outcome in BAD_OUTCOMES:
                        kept = directory.parent / f"mutant_{region}_{i}.vmfb"
                        kept.write_bytes(path.read_bytes())
                        print(f"{region} #{i}: {outcome} {detail} (kept as {kept})",
                              flush=True)
        finally:
            runner.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elf", type=int, default=500)
    parser.add_argument("--npu-fb", type=int, default=200)
    parser.add_argument("--anywhere", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from tests.bench.measure import host_cpu, host_cpu_line
    print(host_cpu_line(host_cpu()))
    start = time.monotonic()
    results = run_mutants({"elf": args.elf, "npu-fb": args.npu_fb,
                           "anywhere": args.anywhere}, args.seed)
    print(f"| region | mutants | {' | '.join(('ok', 'error') + BAD_OUTCOMES)} |")
    print("|---|---|" + "---|" * (2 + len(BAD_OUTCOMES)))
    for region, counter in results.items():
        cells = [str(counter[o]) for o in ("ok", "error") + BAD_OUTCOMES]
        print(f"| {region} | {sum(counter.values())} | {' | '.join(cells)} |")
    bad = sum(c[o] for c in results.values() for o in BAD_OUTCOMES)
    print(f"{bad} bad outcomes; {time.monotonic() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
