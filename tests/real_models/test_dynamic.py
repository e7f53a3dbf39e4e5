"""Real networks compiled once with their dynamic input dims kept (tests/real_models/
dynamic.py), run at two of their sizes each: outputs match onnxruntime and the NPU runs
every Conv/MatMul/Gemm MAC at both; at the second, the simulated cycles stay within 10%
of a static build for that size (one static compile per network: a compile is most of
the test's minute). `python -m tests.real_models.dynamic` compares every size."""
import pytest

from tests.real_models.dynamic import DYNAMIC_MODELS, measure_dynamic

# max |npu - ort| / max |ort| per output; PP-OCRv4 det's map is near 0 for a random
# input (max 2e-3), so its relative error is that of numbers near 0 (see
# test_real_models.py): checked separately.
MAX_RELATIVE_ERROR = 1e-4
DET_MAX_RELATIVE_ERROR = 2e-4
MAX_CYCLE_RATIO = 1.10

SIZES = {"ppocr_cls": ((1, 3, 48, 192), (6, 3, 48, 192)),
         "ppocrv4_det": ((1, 3, 320, 320), (1, 3, 480, 640)),
         "ppocrv4_rec": ((1, 3, 48, 160), (1, 3, 48, 640)),
         "ddddocr_ocr": ((1, 1, 64, 128), (1, 1, 64, 512))}


@pytest.mark.parametrize("name", SIZES)
def test_one_dynamic_build_runs_every_size_on_the_npu(name, tmp_path):
    tolerance = DET_MAX_RELATIVE_ERROR if name == "ppocrv4_det" else MAX_RELATIVE_ERROR
    first, second = measure_dynamic(DYNAMIC_MODELS[name], tmp_path, SIZES[name],
                                    static_sizes=SIZES[name][1:])
    for r in (first, second):
        assert r.max_relative_error <= tolerance, f"{name} {r.shape}: {r.max_relative_error}"
        assert r.mac_share >= 0.99, f"{name} {r.shape}: {r}"
    assert first.static_cycles is None
    assert second.cycle_ratio <= MAX_CYCLE_RATIO, f"{name} {second.shape}: {second}"
