"""`make demo`: the seed ONNX convolution compiled for the NPU and run on npu-sim.

Generates samples/onnx_conv (fixed seed), compiles it with bin/iree-compile for the npu
target (dispatch report, ASM and NPU IR dumps), runs it with
bin/iree-run-module --device=npu-sim against onnx's reference evaluator output, and
prints the NPU cycles and MAC utilization.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np

from executable_format.machine import DEFAULT_MACHINE

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "onnx_conv"
OUT = ROOT / "build" / "demo"


def step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def run(args: list, **kwargs) -> subprocess.CompletedProcess:
    print("$ " + " ".join(str(a) for a in args), flush=True)
    result = subprocess.run([str(a) for a in args], text=True, capture_output=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"demo: command failed (exit {result.returncode}):\n{result.stdout}{result.stderr}")
    return result


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    step("1. The model: SingleConv, X[1x3x500x500] conv W[8x3x3x3] + B[8] (onnx reference outputs)")
    run([sys.executable, SAMPLE / "make_model.py"])

    step("2. Compile for the NPU")
    vmfb = OUT / "single_conv.vmfb"
    compiled = run([ROOT / "bin" / "iree-compile", "--iree-hal-target-backends=npu",
                    SAMPLE / "single_conv.onnx", "-o", vmfb, "--iree-npu-dispatch-report",
                    f"--iree-npu-dump-asm={OUT / 'asm'}", f"--iree-npu-dump-ir={OUT / 'ir'}",
                    f"--iree-npu-dump-json={OUT / 'json'}"])
    print(compiled.stderr.rstrip())

    step(f"3. NPU assembly (full listing in {OUT / 'asm'}, IR after each stage in {OUT / 'ir'})")
    listing = sorted((OUT / "asm").glob("*.s"))[0].read_text().splitlines()
    code = [line for line in listing if not line.startswith((".npu_ir", ".constants"))]
    print("\n".join(code[:24]) + f"\n    ... {len(listing)} lines")

    step("4. Run on npu-sim and compare with onnx's reference evaluator")
    result_path = OUT / "y.npy"
    ran = run([ROOT / "bin" / "iree-run-module", "--device=npu-sim", f"--module={vmfb}",
               f"--input=@{SAMPLE / 'input_0.npy'}", f"--output=@{result_path}",
               "--npu_sim_stats"])
    print((ran.stdout + ran.stderr).rstrip())
    actual, expected = np.load(result_path), np.load(SAMPLE / "expected_0.npy")
    error = float(np.max(np.abs(actual - expected)))
    print(f"output {list(actual.shape)} {actual.dtype}: max abs error vs onnx reference {error:.3g}")
    if not np.allclose(actual, expected, rtol=1e-4, atol=1e-4):
        sys.exit("demo: npu-sim result does not match the onnx reference")

    step("5. Cycles and MAC utilization")
    stats = dict(line.split(": ", 1) for line in (ran.stdout + ran.stderr).splitlines()
                 if ": " in line)
    cycles = int(stats["npu cycles"].split()[0])
    macs = int(stats["macs"])
    peak = DEFAULT_MACHINE.peak_macs_per_cycle("f32")
    print(f"NPU cycles {cycles}, MACs {macs}, MAC utilization {macs / (cycles * peak):.2f} "
          f"of the {peak} f32 MAC/cycle peak")
    print("\ndemo: OK")


if __name__ == "__main__":
    main()
