"""A conv's requantization fused into the ReduceMean after it, as onnxruntime's
`quantize_static` leaves a QDQ Conv -> ReduceMean (LPRNet's and CSRNet's global context):
the reduction's body dequantizes the conv's i32 sums, requantizes them to 8 bits and
dequantizes again before summing. The analysis refused every reduction body with
conversions and a product ('mixed-precision body'), meant for products of two data
operands; these products are by constants, and the reduction runs on the NPU. Checked
bit for bit against stock IREE llvm-cpu."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, quantized_static, stock_llvm_cpu

SHAPE = (1, 32, 4, 18)


@pytest.mark.parametrize("activations", ["QInt8", "QUInt8"], ids=["i8", "u8"])
def test_a_requantized_conv_summed_by_a_reduce_mean_runs_on_the_npu(tmp_path, activations):
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.normal(0, 0.3, (68, 32, 1, 1)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.normal(0, 0.1, 68).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]),
             helper.make_node("ReduceMean", ["c"], ["y"], axes=[2], keepdims=0)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 68, 18))], weights)
    f32 = onnx_file(graph, tmp_path / "mean.onnx")
    samples = np.random.default_rng(1).uniform(-1, 1, (4, *SHAPE)).astype(np.float32)
    path = quantized_static(f32, tmp_path / "mean_int8.onnx", [{"x": x} for x in samples],
                            activations)
    x = np.random.default_rng(2).uniform(-1, 1, SHAPE).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))


def test_a_mean_of_quantized_bytes_dequantizes_by_one_lookup(tmp_path):
    """A QDQ GlobalAveragePool reads int8 bytes: their widening to i32 and dequantize
    (isub, itof, mul) were a vector pass each over every tile of the row-wise reduction;
    they are one table lookup reading the bytes, the rest as before."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 48, 20, 30))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 48, 1, 1))])
    f32 = onnx_file(graph, tmp_path / "gap.onnx")
    samples = np.random.default_rng(1).uniform(-1, 1, (4, 1, 48, 20, 30)).astype(np.float32)
    path = quantized_static(f32, tmp_path / "gap_int8.onnx", [{"x": x} for x in samples])
    x = np.random.default_rng(2).uniform(-1, 1, (1, 48, 20, 30)).astype(np.float32)
    call = call_on_npu(path, "g", x, dump_asm=tmp_path / "asm")
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))
    [program] = [p for p in (tmp_path / "asm").iterdir() if "reduction" in p.name]
    passes = {line.split()[0] for line in program.read_text().splitlines()
              if line.lstrip().startswith("v") and tile_elements(line) > 256}
    assert {p.split(".")[0] for p in passes} <= {"vrequant", "vcvt", "vreduce"}, passes
    assert "vcvt.i32" not in passes, passes         # the bytes are read as they are


def tile_elements(instruction: str) -> int:
    fields = dict(f.split("=") for f in instruction.split("#")[0].replace(",", " ").split()
                  if "=" in f)
    return int(fields.get("n0", 1)) * int(fields.get("n1", 1)) * int(fields.get("n2", 1))
