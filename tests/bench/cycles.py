"""The simulated cycles of every bench model, to show that a change of the native core or
the cycle model leaves them as they were (not a test: it compiles every model):

    python -m tests.bench.cycles > before.json     # ... change ..., then again:
    python -m tests.bench.cycles > after.json && diff before.json after.json

For each model of make bench (tests/bench/models.py, then the real models and their
int8 versions of real_model_bench.py) one line of JSON: the digest of its npu vmfb,
the statistics of one npu-sim call (cycles, stalls, DRAM bytes, MACs, SRAM peak, busy
cycles per engine) and the digest of the call's outputs. `--only NAME` runs one model.
"""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from compiler_target import compile_file
from hal_driver import runtime as rt
from tests.bench import models, real_model_bench
from tests.bench.measure import entry_function
from tests.real_models.fetch import prepared_model
from tests.real_models.measure import model_input
from tests.real_models.models import MODELS as REAL_MODELS
from tests.real_models.quantized import quantized_model

OUT = models.ROOT / "build" / "bench"


def bench_models() -> list[tuple[str, object]]:
    """(name, () -> (source path, inputs)) for every model make bench runs."""
    entries = [(m.name, lambda m=m: (m.source, m.inputs)) for m in models.suite(OUT / "models")]
    for name, model in REAL_MODELS.items():
        entries.append((name, lambda model=model: (prepared_model(model), [model_input(model)])))
    for name in real_model_bench.QUANTIZED:
        model = REAL_MODELS[name]
        entries.append((name + real_model_bench.INT8_SUFFIX,
                        lambda model=model: (quantized_model(model), [model_input(model)])))
    return entries


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def model_cycles(name: str, source: Path, inputs: list) -> dict:
    vmfb = compile_file(str(source), target_backends=["npu"])
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        outputs = module.lookup(entry_function(module.function_names))(*inputs)
        stats = module.last_call_stats
    finally:
        module.close()
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    device = stats.device
    return {"model": name, "vmfb": digest(vmfb), "npu_cycles": stats.npu_cycles,
            "npu_dispatches": stats.npu_dispatches, "stall_cycles": device.stall_cycles,
            "dram_bytes": device.dram_bytes, "macs": device.macs,
            "sram_peak_bytes": device.sram_peak_bytes,
            "engine_busy_cycles": dict(sorted(device.engine_busy_cycles.items())),
            "outputs": digest(b"".join(np.ascontiguousarray(o).tobytes() for o in outputs))}


def main(argv: list[str]) -> int:
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    for name, load in bench_models():
        if only and name != only:
            continue
        try:
            row = model_cycles(name, *load())
        except Exception as error:    # a model that fails is a line too, to compare
            row = {"model": name, "error": str(error).strip().splitlines()[-1:]}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
