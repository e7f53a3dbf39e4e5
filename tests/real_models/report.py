"""The real-model table: one row per model with its input, dispatches on npu/host per
call, NPU MAC share, the dispatches' MACs next to the ONNX graph's Conv/ConvTranspose/
MatMul/Gemm MACs, max relative error against onnxruntime, simulated NPU time, the
fraction of the NPU dispatches' true roofline it reaches (executable_format.cost.Roofline
summed over the call / NPU cycles) and npu-sim wall time per call (median of CALLS calls).

    python -m tests.real_models.report [names...]     # default: every model
"""
import sys
import tempfile
from pathlib import Path

from tests.real_models.measure import Result, measure_model
from tests.real_models.models import MODELS

CALLS = 3
HEADER = (f"{'model':<19}{'input':<13}{'npu/host':>9}{'MAC share':>10}"
          f"{'dispatch/onnx MMAC':>20}{'max rel err':>12}{'sim NPU ms':>11}{'roofline':>9}"
          f"{'wall ms':>9}")


def row(result: Result) -> str:
    shape = "x".join(map(str, result.input_shape))
    macs = f"{result.macs.total / 1e6:.1f}/{result.onnx_macs / 1e6:.1f}"
    return (f"{result.name:<19}{shape:<13}"
            f"{result.npu_dispatches:>5}/{result.host_dispatches:<3}{result.macs.npu_share:>10.3f}"
            f"{macs:>20}{result.max_relative_error:>12.1e}"
            f"{result.simulated_seconds * 1e3:>11.3f}{result.roofline_fraction:>9.2f}"
            f"{result.wall_seconds * 1e3:>9.1f}")


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    print(HEADER, flush=True)
    failed = False
    with tempfile.TemporaryDirectory() as work_dir:
        for name in names or MODELS:
            try:
                print(row(measure_model(MODELS[name], Path(work_dir), calls=CALLS)), flush=True)
            except Exception as error:   # one model's failure is its row; the others go on
                lines = str(error).strip().splitlines() or [type(error).__name__]
                print(f"{name:<19}FAILED: {lines[-1]}", flush=True)
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
