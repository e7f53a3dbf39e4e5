"""`make demo`: the seed ONNX convolution compiled for the NPU and run on npu-sim.

Generates samples/onnx_conv (fixed seed), compiles it with bin/iree-compile for the npu
target (dispatch report, ASM and NPU IR dumps), runs it with
bin/iree-run-module --device=npu-sim against onnx's reference evaluator output, and
prints the NPU cycles against the true roofline.
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

    step(f"3. NPU IR: SRAM/DRAM buffers after tiling, engine order after scheduling ({OUT / 'ir'})")
    show_ir_excerpt()

    step(f"4. NPU assembly (full listing in {OUT / 'asm'})")
    listing = sorted((OUT / "asm").glob("*.s"))[0].read_text().splitlines()
    code = [line for line in listing if not line.startswith((".npu_ir", ".constants"))]
    print("\n".join(code[:20]) + f"\n    ... {len(listing)} lines")

    step("5. Run on npu-sim and compare with onnx's reference evaluator")
    result_path = OUT / "y.npy"
    ran = run([ROOT / "bin" / "iree-run-module", "--device=npu-sim", f"--module={vmfb}",
               f"--input=@{SAMPLE / 'input_0.npy'}", f"--output=@{result_path}",
               "--npu_sim_stats", f"--npu_sim_trace={OUT / 'trace.json'}"])
    print((ran.stdout + ran.stderr).rstrip())
    actual, expected = np.load(result_path), np.load(SAMPLE / "expected_0.npy")
    error = float(np.max(np.abs(actual - expected)))
    print(f"output {list(actual.shape)} {actual.dtype}: max abs error vs onnx reference {error:.3g}")
    if not np.allclose(actual, expected, rtol=1e-4, atol=1e-4):
        sys.exit("demo: npu-sim result does not match the onnx reference")

    step(f"6. Cycles against the true roofline (engine timeline for ui.perfetto.dev: "
         f"{OUT / 'trace.json'})")
    stats = dict(line.split(": ", 1) for line in (ran.stdout + ran.stderr).splitlines()
                 if ": " in line)
    cycles = int(stats["npu cycles"].split()[0])
    executed, useful = (int(stats["macs"].split()[i]) for i in (0, 2))
    roofline = int(stats["roofline cycles"].split()[0])
    peak = DEFAULT_MACHINE.peak_macs_per_cycle("f32")
    print(f"NPU cycles {cycles}; useful MACs {useful} ({executed} executed, with the bias "
          f"row); true roofline {roofline} cycles (useful MACs at the {peak} f32 MAC/cycle "
          f"peak, or each input and output byte once at DRAM bandwidth): "
          f"{roofline / cycles:.2f} of it reached")

    step("7. A dispatch the NPU cannot run falls back to the host CPU")
    show_host_fallback()
    print("\ndemo: OK")


def excerpt(path: Path, keep, count: int) -> None:
    lines = [line.strip() for line in path.read_text().splitlines() if keep(line)]
    for line in lines[:count]:
        print("  " + (line if len(line) <= 150 else line[:147] + "..."))


def show_ir_excerpt() -> None:
    tiled = sorted((OUT / "ir").glob("*.01.tile.mlir"))[0]
    scheduled = sorted((OUT / "ir").glob("*.02.schedule.mlir"))[0]
    print(f"{tiled.name}:")
    excerpt(tiled, lambda line: "npu.alloc" in line, 7)
    print(f"{scheduled.name}:")
    excerpt(scheduled, lambda line: "order = " in line, 10)


def show_host_fallback() -> None:
    sample = ROOT / "samples" / "host_fallback"
    run([sys.executable, sample / "make_model.py"])
    vmfb = OUT / "host_fallback.vmfb"
    compiled = run([ROOT / "bin" / "iree-compile", "--iree-hal-target-backends=npu",
                    sample / "host_fallback.onnx", "-o", vmfb, "--iree-npu-dispatch-report"])
    print(compiled.stderr.rstrip())
    ran = run([ROOT / "bin" / "iree-run-module", "--device=npu-sim", f"--module={vmfb}",
               f"--input=@{sample / 'input_0.npy'}",
               f"--expected_output=@{sample / 'expected_0.npy'}", "--npu_sim_stats"])
    print("\n".join(line for line in (ran.stdout + ran.stderr).splitlines()
                    if line.startswith(("[SUCCESS]", "[FAILED]", "dispatches:"))))


if __name__ == "__main__":
    main()
