"""An int8 real network (tests/real_models/quantized.py): rapidocr's text direction
classifier quantized with onnxruntime's quantize_static (int8 weights and activations),
compiled for npu and run on npu-sim, against stock IREE llvm-cpu on the same imported
MLIR and onnxruntime's QDQ execution. The other networks, and uint8 activations, are
measured by `python -m tests.real_models.quantized [--uint8]` (a minute or more each:
too slow for every test run; tests/e2e/test_uint8.py covers the unsigned
contractions and conversions)."""
import pytest

from tests.real_models.models import MODELS
from tests.real_models.quantized import bound_by, measure_quantized

MIN_MAC_SHARE = 0.99            # of the integer contraction MACs
MIN_NPU_DISPATCH_SHARE = 1.00       # 128 of 128 when set; the issue asks for 0.90


def test_int8_classifier_matches_stock_and_runs_on_the_npu(tmp_path):
    result = measure_quantized(MODELS["ppocr_cls"], tmp_path, "int8")
    assert result.stock_mismatches == [0] * len(result.stock_mismatches), \
        f"elements differing from stock llvm-cpu per output: {result.stock_mismatches}"
    assert result.argmax_agreement == 1.0
    assert result.macs.npu_share >= MIN_MAC_SHARE, result.macs
    assert result.npu_dispatch_share >= MIN_NPU_DISPATCH_SHARE, \
        f"{result.npu_dispatches} npu / {result.host_dispatches} host dispatches"


@pytest.mark.parametrize("busy, cause", [
    ({"mac": 1001, "vector": 2000, "dma_in": 10, "dma_out": 10}, "mac"),
    ({"mac": 1000, "vector": 1001, "dma_in": 10, "dma_out": 10}, "vector"),
    ({"mac": 10, "vector": 10, "dma_in": 10, "dma_out": 1001}, "dma_out"),
    ({"mac": 1000, "vector": 1000, "dma_in": 1000, "dma_out": 1000}, "fill/drain"),
])
def test_a_dispatch_under_the_target_is_bound_by_an_engine_busy_beyond_it(busy, cause):
    """roofline 850 cycles at 0.85: an engine busy more than 1000 cycles keeps it under."""
    assert bound_by({"roofline_cycles": 850, "engine_busy_cycles": busy}) == cause
