"""make bench's real-model table: each trained network of tests/real_models (fetched
into the model cache once) compiled for npu and for stock llvm-cpu (measure.compile_stock:
iree-import-onnx, then iree-compile --iree-llvmcpu-target-cpu=host) and run in one
process on npu-sim and on stock local-task: median wall time of CALLS alternating calls
each (after one warm-up each), and of the npu-sim calls the dispatches on npu/host, the
NPU MAC share and the simulated NPU time. The int8 rows are the QDQ versions of the
networks (tests/real_models/quantized.py), named NAME.int8; their roofline is at the
i8 peak.
"""
from pathlib import Path

from tests.bench import measure
from tests.real_models.fetch import prepared_model
from tests.real_models.measure import compile_npu, executed_macs, model_input
from tests.real_models.models import RealModel
from tests.real_models.quantized import quantized_model

CALLS = 5
QUANTIZED = ("ppocr_cls", "ppocrv4_det", "ppocrv4_rec", "ddddocr_det")   # the int8 rows
INT8_SUFFIX = ".int8"


def bench_real_model(model: RealModel, out: Path, quantized: bool = False) -> dict:
    """Compiles and times `model` (its int8 QDQ version if `quantized`); `out` is the
    bench's output directory (vmfb/ and reports/ hold the compiled modules and the npu
    task graph json)."""
    onnx_path = quantized_model(model) if quantized else prepared_model(model)
    name = model.name + (INT8_SUFFIX if quantized else "")
    x = model_input(model)
    build = compile_npu(onnx_path, out / "reports")
    npu_vmfb, stock_vmfb = out / "vmfb" / f"{name}.npu.vmfb", out / "vmfb" / f"{name}.cpu.vmfb"
    npu_vmfb.write_bytes(build.vmfb)
    measure.compile_stock(onnx_path, stock_vmfb)
    module, npu_call = measure.npu_callable(npu_vmfb, [x])
    stock_call = measure.stock_callable(stock_vmfb, [x])
    try:
        times = measure.interleaved_times({"npu": npu_call, "stock": stock_call}, CALLS)
        stats = module.last_call_stats
    finally:
        module.close()
    macs = executed_macs(build.tasks, stats.device.dispatch_counts)
    return {"name": name, "wheel": model.wheel, "member": model.member,
            "input_shape": list(model.input_shape),
            "npu_dispatches": stats.npu_dispatches, "host_dispatches": stats.host_dispatches,
            "npu_macs": macs.npu, "dispatch_macs": macs.total, "mac_share": macs.npu_share,
            "simulated_npu_s": stats.simulated_seconds,
            "roofline_fraction": stats.device.roofline_cycles / stats.npu_cycles
            if stats.npu_cycles else 0.0,
            "npu_sim_wall_s": times["npu"][0], "stock_cpu_wall_s": times["stock"][0],
            "wall_ratio": times["npu"][0] / times["stock"][0]}


def real_model_table(results: list[dict]) -> list[str]:
    lines = [f"{'real model':<19}{'input':<13}{'npu/host':>9}{'MAC share':>10}{'sim NPU ms':>11}"
             f"{'roofline':>9}"
             f"{'npu-sim ms':>11}{'stock ms':>10}{'ratio':>7}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['name']:<19}FAILED: {r['error'].splitlines()[-1]}")
            continue
        shape = "x".join(map(str, r["input_shape"]))
        lines.append(f"{r['name']:<19}{shape:<13}{r['npu_dispatches']:>5}/{r['host_dispatches']:<3}"
                     f"{r['mac_share']:>10.3f}{r['simulated_npu_s'] * 1e3:>11.3f}"
                     f"{r['roofline_fraction']:>9.2f}"
                     f"{r['npu_sim_wall_s'] * 1e3:>11.1f}{r['stock_cpu_wall_s'] * 1e3:>10.1f}"
                     f"{r['wall_ratio']:>7.1f}")
    return lines
