"""Two stacked GRUs of one shape, as DeepFilterNet3's decoders have them (a public
wheel's network): IREE makes one recurrent matrix-vector dispatch for both layers, placed
at each layer's sequence by a push constant binding offset, and reads step t of it by a
second push constant. Both terms go into one binding view (npu-fb 2.9), so every step of
both layers runs on the NPU; the outputs match onnxruntime."""
import json

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from compiler_target import compile_file
from hal_driver import runtime as rt

STEPS, HIDDEN = 12, 64


def stacked_gru_model() -> onnx.ModelProto:
    """x [1, STEPS, HIDDEN] -> relu(x W) -> GRU -> GRU -> + x S (a skip branch computed
    before the GRUs and added after them keeps their sequences live together)."""
    rng = np.random.default_rng(21)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32),
                                       name)

    inits = [weight("w_skip", (HIDDEN, HIDDEN)), weight("w_in", (HIDDEN, HIDDEN)),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [helper.make_node("MatMul", ["x", "w_skip"], ["skip"]),
             helper.make_node("MatMul", ["x", "w_in"], ["xw"]),
             helper.make_node("Relu", ["xw"], ["xr"]),
             helper.make_node("Transpose", ["xr"], ["seq0"], perm=[1, 0, 2])]
    for layer in range(2):
        inits += [weight(f"w{layer}", (1, 3 * HIDDEN, HIDDEN)),
                  weight(f"r{layer}", (1, 3 * HIDDEN, HIDDEN)),
                  weight(f"b{layer}", (1, 6 * HIDDEN)),
                  numpy_helper.from_array(np.zeros((1, 1, HIDDEN), np.float32), f"h{layer}")]
        nodes += [helper.make_node("GRU", [f"seq{layer}", f"w{layer}", f"r{layer}", f"b{layer}",
                                           "", f"h{layer}"], [f"y{layer}", f"yh{layer}"],
                                   hidden_size=HIDDEN, linear_before_reset=1),
                  helper.make_node("Squeeze", [f"y{layer}", "axis1"], [f"seq{layer + 1}"])]
    nodes += [helper.make_node("Transpose", ["seq2"], ["out_t"], perm=[1, 0, 2]),
              helper.make_node("Add", ["out_t", "skip"], ["y"])]
    graph = helper.make_graph(
        nodes, "stacked_gru",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, STEPS, HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, STEPS, HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_stacked_gru_steps_run_on_the_npu(tmp_path):
    path = tmp_path / "stacked_gru.onnx"
    onnx.save(stacked_gru_model(), path)
    vmfb = compile_file(str(path), target_backends=["npu"],
                        extra_args=[f"--iree-npu-dump-json={tmp_path}"])
    tasks = json.loads((tmp_path / "stacked_gru.npu.json").read_text())["tasks"]
    host = [(t["summary"], t["reason"]) for t in tasks if t["target"] != "npu"]
    assert not host, host

    x = np.random.default_rng(22).uniform(-1, 1, (1, STEPS, HIDDEN)).astype(np.float32)
    expected, = onnxruntime.InferenceSession(
        str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        actual = np.asarray(module.stacked_gru(x))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.host_dispatches == 0 and stats.npu_dispatches > 2 * STEPS
    assert np.abs(actual - expected).max() <= 1e-5 * np.abs(expected).max()
