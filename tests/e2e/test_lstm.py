"""An ONNX LSTM end to end: IREE fuses each time step's cell (gates, new c, new h) into
one elementwise dispatch with two results, and keeps the time loop on the host, passing
the step t as a push constant that indexes the step's slices (row t, and row SEQ-1-t
for the reverse direction of a bidirectional LSTM); every dispatch runs on the NPU and
the outputs match onnxruntime."""
import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler_target import compile_file
from hal_driver import runtime as rt

SEQ, INPUT, HIDDEN = 4, 8, 16
DIRECTIONS = {"forward": 1, "bidirectional": 2}


def outputs(directions: int) -> dict[str, list[int]]:
    return {"y": [SEQ, directions, 1, HIDDEN], "y_h": [directions, 1, HIDDEN],
            "y_c": [directions, 1, HIDDEN]}


def lstm_model(direction: str) -> onnx.ModelProto:
    rng = np.random.default_rng(11)
    d = DIRECTIONS[direction]
    weights = {"w": (d, 4 * HIDDEN, INPUT), "r": (d, 4 * HIDDEN, HIDDEN), "b": (d, 8 * HIDDEN)}
    node = helper.make_node("LSTM", ["x", "w", "r", "b"], list(outputs(d)), hidden_size=HIDDEN,
                            direction=direction)
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [SEQ, 1, INPUT])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
         for name, shape in outputs(d).items()],
        [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
         for name, shape in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lstm_cells_run_on_the_npu(tmp_path, direction):
    path = tmp_path / "lstm.onnx"
    onnx.save(lstm_model(direction), path)
    vmfb = compile_file(str(path), target_backends=["npu"],
                        extra_args=[f"--iree-npu-dump-json={tmp_path}"])
    tasks = json.loads((tmp_path / "lstm.npu.json").read_text())["tasks"]
    cells = [t for t in tasks if len(t["outputs"]) == 2]      # the new c and h
    assert cells and all((t["target"], t["reason"]) == ("npu", "") for t in cells), \
        [(t["summary"], t["target"], t["reason"]) for t in cells]
    # (the bidirectional output's reverse half is copied with a negative row stride,
    # y[t] = h_reverse[SEQ-1-t]: one DMA per reversed row)
    host = [t for t in tasks if t["target"] != "npu"]
    assert not host, [(t["summary"], t["reason"]) for t in host]

    x = np.random.default_rng(12).uniform(-1, 1, (SEQ, 1, INPUT)).astype(np.float32)
    expected = onnxruntime.InferenceSession(
        str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        results = module.lstm(x)
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.host_dispatches == 0 and stats.npu_dispatches > 0
    for name, actual, reference in zip(outputs(DIRECTIONS[direction]), results, expected):
        actual = np.asarray(actual)
        assert actual.shape == reference.shape, name
        assert np.abs(actual - reference).max() <= 1e-5 * np.abs(reference).max(), name
