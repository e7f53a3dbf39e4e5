"""QuantizeLinear and DequantizeLinear that IREE leaves in dispatches of their own (a
quantized graph's input, around ops it does not fuse) as one vrequant per tile: a byte
input's expression, whatever it is, is a table of its 256 values; an f32 input's
quantize (x / scale rounded) is the record's steps and its rest a table. Before, each
node was a vector pass (div, round, scale, two conversions: five passes against one DMA).
Stock llvm-cpu's bits on the same MLIR, the program using vrequant with the source flag,
and onnxruntime's values."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output
from tests.real_models.quantized import import_mlir, run_stock

SHAPE = (1, 8, 24, 40)
N = helper.make_node
ONNX_TYPES = {"i8": TensorProto.INT8, "u8": TensorProto.UINT8, "f32": TensorProto.FLOAT}
NUMPY = {"i8": np.int8, "u8": np.uint8, "f32": np.float32}


def _model(tmp_path, name: str, nodes, x: str, y: str, zero: str):
    zero_point = numpy_helper.from_array(np.array(3 if zero == "i8" else 131, NUMPY[zero]), "zp")
    scale = numpy_helper.from_array(np.array(0.0375, np.float32), "scale")
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", ONNX_TYPES[x], SHAPE)],
                              [helper.make_tensor_value_info("y", ONNX_TYPES[y], SHAPE)],
                              [scale, zero_point])
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


CASES = {
    # name: (nodes, input dtype, output dtype, zero point dtype, vrequant source flags)
    "quantize": ([N("QuantizeLinear", ["x", "scale", "zp"], ["y"])], "f32", "i8", "i8",
                 ["src_f32"]),
    "quantize_u8": ([N("QuantizeLinear", ["x", "scale", "zp"], ["y"])], "f32", "u8", "u8",
                    ["src_f32"]),
    "dequantize": ([N("DequantizeLinear", ["x", "scale", "zp"], ["y"])], "i8", "f32", "i8",
                   ["src_i8"]),
    "dequantize_u8": ([N("DequantizeLinear", ["x", "scale", "zp"], ["y"])], "u8", "f32", "u8",
                      ["src_u8"]),
    "fake_quantize": ([N("QuantizeLinear", ["x", "scale", "zp"], ["q"]),
                       N("DequantizeLinear", ["q", "scale", "zp"], ["y"])], "f32", "f32", "i8",
                      ["src_f32", "src_i8"]),   # IREE's two dispatches
}


def _input(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(6)
    if dtype != "f32":
        info = np.iinfo(NUMPY[dtype])
        return rng.integers(info.min, info.max + 1, SHAPE).astype(NUMPY[dtype])
    x = (rng.standard_normal(SHAPE) * 3).astype(np.float32)
    x.flat[:6] = np.float32(0.0375) * np.array([0.5, 1.5, -2.5, 200, -200, 0], np.float32)
    return x


@pytest.mark.parametrize("case", list(CASES))
def test_quantize_and_dequantize_are_one_table_lookup(tmp_path, case):
    nodes, x_dtype, y_dtype, zero, flags = CASES[case]
    path = _model(tmp_path, case, nodes, x_dtype, y_dtype, zero)
    mlir = import_mlir(path, tmp_path)
    x = _input(x_dtype)
    call = call_on_npu(mlir, case, x, dump_asm=tmp_path / "asm")
    assert call.stats.host_dispatches == 0 and \
        call.stats.npu_dispatches == len(flags), call.report
    for program, flag in zip(sorted((tmp_path / "asm").iterdir()), flags):
        asm = program.read_text()
        assert "vrequant" in asm and flag in asm and "vdiv" not in asm, asm[:3000]
    [stock] = run_stock(mlir, x, case)
    np.testing.assert_array_equal(call.output, stock)
    expected = onnxruntime_output(path, {"x": x})
    quantum = 0.0375 if y_dtype == "f32" else 1
    output = call.output.view(NUMPY[y_dtype])       # IREE's integers are signless
    assert np.abs(output.astype(np.float64) - expected).max() <= quantum * 1.0001
