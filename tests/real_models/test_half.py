"""A real network in f16 (tests/real_models/half.py): rapidocr's text direction
classifier through onnxruntime's float16 converter, compiled for npu and run on
npu-sim, against onnxruntime's execution of the f16 model and stock IREE llvm-cpu on
the same imported MLIR. Every dispatch runs on the NPU; the outputs are as close to
onnxruntime's f16 execution as f16 itself is to the f32 network, and within f16
rounding of stock (contraction sums add in another order). The other networks are
measured by `python -m tests.real_models.half`."""
from tests.real_models.half import measure_half
from tests.real_models.models import MODELS

F16_STEP = 2.0 ** -10        # an f16 ulp at 1, relative


def test_f16_classifier_runs_on_the_npu_within_f16_precision(tmp_path):
    result = measure_half(MODELS["ppocr_cls"], tmp_path)
    assert result.host_dispatches == 0, result
    assert result.macs.npu_share == 1.0, result.macs
    assert result.npu_vs_ort <= result.ort_f16_vs_f32, result
    assert result.npu_vs_stock <= 4 * F16_STEP, result
    assert result.argmax_agreement == 1.0
