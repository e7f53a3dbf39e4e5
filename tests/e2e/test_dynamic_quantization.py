"""onnxruntime's dynamic quantization (MatMulInteger, after DynamicQuantizeLinear) on the
NPU: IREE lowers MatMulInteger to a matmul of i32 operands `ext(x) - ext(zp)` into i64
sums, which compiler_target.zero_point_contractions rewrites as a u8/i8 matmul plus the
zero-point terms. The integer results are checked bit for bit against the ONNX spec in
numpy, the dequantized one against stock IREE llvm-cpu on the same imported MLIR; every
matmul dispatch must run on the NPU."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, loaded_on_npu, stock_llvm_cpu

N = helper.make_node
ELEMENT = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _model(tmp_path, nodes, inputs, output, weights=()):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", *output)], list(weights))
    path = tmp_path / "g.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path



def _spec(a, a_zero, b, b_zero) -> np.ndarray:
    """MatMulInteger as the ONNX spec says: (a - a_zero) @ (b - b_zero), exact."""
    return ((a.astype(np.int64) - np.int64(a_zero)) @ (b.astype(np.int64) - b_zero)).astype(np.int32)


def _matmul_dispatches_on_npu(report: str) -> int:
    lines = [line for line in report.splitlines() if "matmul" in line and line.startswith("Dispatch")]
    assert lines and all("-> npu" in line for line in lines), report
    return len(lines)


@pytest.mark.parametrize("a_type, b_type, lhs_shape, per_column", [
    (np.uint8, np.int8, (8, 96), False),        # quantize_dynamic's default: u8 x s8
    (np.uint8, np.int8, (2, 12, 96), True),     # batched activations, per-column weights
    (np.int8, np.int8, (8, 96), True),
    (np.uint8, np.uint8, (3, 5, 96), False),
], ids=["u8s8", "u8s8_batched_per_column", "s8s8_per_column", "u8u8_batched"])
def test_matmul_integer_with_constant_weights(tmp_path, a_type, b_type, lhs_shape, per_column):
    rng = np.random.default_rng(7)
    k, n = lhs_shape[-1], 40
    info = np.iinfo(b_type)
    b = rng.integers(info.min, info.max + 1, (k, n)).astype(b_type)
    b_zero = (rng.integers(info.min, info.max + 1, n) if per_column else
              np.array(info.min // 2 + 7)).astype(b_type)
    path = _model(tmp_path, [N("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])],
                  [("a", ELEMENT[a_type], lhs_shape), ("a_zero", ELEMENT[a_type], ())],
                  (TensorProto.INT32, (*lhs_shape[:-1], n)),
                  [numpy_helper.from_array(b, "b"), numpy_helper.from_array(b_zero, "b_zero")])
    info = np.iinfo(a_type)
    a = rng.integers(info.min, info.max + 1, lhs_shape).astype(a_type)
    a_zero = np.array(info.min + 100, a_type)
    call = call_on_npu(path, "g", a, a_zero)
    _matmul_dispatches_on_npu(call.report)
    np.testing.assert_array_equal(call.output, _spec(a, a_zero, b, b_zero))


def test_matmul_integer_of_two_activations(tmp_path):
    """Both operands and both zero points at run time (attention's QK^T, quantized)."""
    rng = np.random.default_rng(8)
    shape_a, shape_b = (2, 16, 32), (2, 32, 24)
    path = _model(tmp_path, [N("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])],
                  [("a", TensorProto.UINT8, shape_a), ("b", TensorProto.UINT8, shape_b),
                   ("a_zero", TensorProto.UINT8, ()), ("b_zero", TensorProto.UINT8, ())],
                  (TensorProto.INT32, (2, 16, 24)))
    a = rng.integers(0, 256, shape_a).astype(np.uint8)
    b = rng.integers(0, 256, shape_b).astype(np.uint8)
    a_zero, b_zero = np.array(131, np.uint8), np.array(77, np.uint8)
    call = call_on_npu(path, "g", a, b, a_zero, b_zero)
    _matmul_dispatches_on_npu(call.report)
    np.testing.assert_array_equal(call.output, _spec(a, a_zero, b, b_zero))


def test_matmul_integer_over_a_dynamic_batch_and_sequence(tmp_path):
    """A transformer's MatMulInteger compiled once for any batch and sequence length: the
    rewrite keeps the dynamic extents (each tensor.empty sized by a tensor.dim of an
    operand), so the 8-bit matmul is on the NPU at every size (it stayed an i32 x i32
    matmul on the host before), bit for bit with the ONNX spec."""
    rng = np.random.default_rng(10)
    k, n = 96, 40
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    path = _model(tmp_path, [N("MatMulInteger", ["a", "b", "a_zero", "b_zero"], ["y"])],
                  [("a", TensorProto.UINT8, ("batch", "sequence", k)),
                   ("a_zero", TensorProto.UINT8, ())],
                  (TensorProto.INT32, ("batch", "sequence", n)),
                  [numpy_helper.from_array(b, "b"),
                   numpy_helper.from_array(np.array(-3, np.int8), "b_zero")])
    with loaded_on_npu(path) as module:
        for shape in ((1, 16, k), (3, 7, k)):
            a = rng.integers(0, 256, shape).astype(np.uint8)
            a_zero = np.array(119, np.uint8)
            got = np.asarray(module.g(a, a_zero))
            assert module.last_call_stats.host_dispatches == 0
            np.testing.assert_array_equal(got, _spec(a, a_zero, b, -3))


@pytest.mark.parametrize("low, high", [(-1.5, 2.5), (-3.0, 1.0)],
                         ids=["zero_point_below_128", "zero_point_above_127"])
def test_dynamically_quantized_linear_layer_matches_stock(tmp_path, low, high):
    """quantize_dynamic's pattern for one MatMul: DynamicQuantizeLinear(x), MatMulInteger
    with the int8 weights, Cast, Mul by both scales. The importer converts the u8 zero
    point with fptosi to i8, poison past 127 in MLIR's terms; stock keeps the low bits,
    and so does the NPU (an input mostly below 0 has a zero point above 127)."""
    rng = np.random.default_rng(9)
    k, n = 256, 64
    weights = rng.integers(-127, 128, (k, n)).astype(np.int8)
    nodes = [N("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             N("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
             N("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             N("Mul", ["xs", "ws"], ["s"]), N("Mul", ["accf", "s"], ["y"])]
    path = _model(tmp_path, nodes, [("x", TensorProto.FLOAT, (1, 12, k))],
                  (TensorProto.FLOAT, (1, 12, n)),
                  [numpy_helper.from_array(weights, "w"),
                   numpy_helper.from_array(np.array(3, np.int8), "wz"),
                   numpy_helper.from_array(np.array(0.01, np.float32), "ws")])
    x = rng.uniform(low, high, (1, 12, k)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    stock = stock_llvm_cpu(path)
    np.testing.assert_array_equal(call.output, np.asarray(stock(x).to_host()))
    scale = (max(0.0, x.max()) - min(0.0, x.min())) / np.float32(255)
    zero = np.clip(np.rint(-min(0.0, x.min()) / scale), 0, 255)
    assert (zero > 127) == (high < -low)
    quantized = np.clip(np.rint(x / scale) + zero, 0, 255)
    spec = _spec(quantized, zero, weights, 3) * (np.float32(scale) * np.float32(0.01))
    np.testing.assert_allclose(call.output, spec, rtol=1e-5, atol=1e-5 * np.abs(spec).max())


def _conv_spec(x, x_zero, w, w_zero, pad: int) -> np.ndarray:
    """ConvInteger as the ONNX spec says (stride 1): the input padded with its zero point."""
    shifted = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)),
                     constant_values=int(x_zero)) - int(x_zero)
    weights = w.astype(np.int64) - int(w_zero)
    _, _, kh, kw = w.shape
    windows = np.lib.stride_tricks.sliding_window_view(shifted, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, weights).astype(np.int32)


@pytest.mark.parametrize("w_zero", [0, 5], ids=["symmetric_weights", "weights_zero_point"])
def test_conv_integer_with_a_runtime_zero_point(tmp_path, w_zero):
    """ConvInteger of u8 data with its zero point at run time: the importer shifts both to
    i8 and pads with the zero point; the window sums are a conv of ones."""
    rng = np.random.default_rng(10)
    w = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
    path = _model(tmp_path, [N("ConvInteger", ["x", "w", "x_zero", "w_zero"], ["y"], pads=[1, 1, 1, 1])],
                  [("x", TensorProto.UINT8, (1, 8, 14, 14)), ("x_zero", TensorProto.UINT8, ())],
                  (TensorProto.INT32, (1, 16, 14, 14)),
                  [numpy_helper.from_array(w, "w"),
                   numpy_helper.from_array(np.array(w_zero, np.int8), "w_zero")])
    x = rng.integers(0, 256, (1, 8, 14, 14)).astype(np.uint8)
    x_zero = np.array(117, np.uint8)
    call = call_on_npu(path, "g", x, x_zero)
    conv_lines = [line for line in call.report.splitlines() if "conv" in line]
    assert conv_lines and all("-> npu" in line for line in conv_lines), call.report
    np.testing.assert_array_equal(call.output, _conv_spec(x, x_zero, w, w_zero, 1))


def test_dynamically_quantized_conv_matches_stock(tmp_path):
    """quantize_dynamic's pattern for a Conv: DynamicQuantizeLinear, ConvInteger, Cast, Mul.
    Every dispatch runs on the NPU, the quantizer's scalar one too (its scale and zero
    point: one elementwise dispatch with an f32 and an i8 result)."""
    rng = np.random.default_rng(11)
    w = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
    nodes = [N("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             N("ConvInteger", ["xq", "w", "xz"], ["acc"], pads=[1, 1, 1, 1]),
             N("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             N("Mul", ["xs", "ws"], ["s"]), N("Mul", ["accf", "s"], ["y"])]
    path = _model(tmp_path, nodes, [("x", TensorProto.FLOAT, (1, 8, 14, 14))],
                  (TensorProto.FLOAT, (1, 16, 14, 14)),
                  [numpy_helper.from_array(w, "w"),
                   numpy_helper.from_array(np.array(0.02, np.float32), "ws")])
    x = rng.normal(0.2, 1.0, (1, 8, 14, 14)).astype(np.float32)
    call = call_on_npu(path, "g", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))


SCALAR_READ_BACK = """
func.func @main(%x: tensor<64xf32>, %z: tensor<i8>, %s: tensor<f32>) -> tensor<64xf32> {
  %zero_point = tensor.extract %z[] : tensor<i8>
  %scale = tensor.extract %s[] : tensor<f32>
  %e = tensor.empty() : tensor<64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<64xf32>) outs(%e : tensor<64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %signed = arith.sitofp %zero_point : i8 to f32
    %unsigned = arith.uitofp %zero_point : i8 to f32
    %a = arith.divf %v, %scale : f32
    %b = arith.addf %a, %signed : f32
    %c = arith.mulf %b, %unsigned : f32
    linalg.yield %c : f32
  } -> tensor<64xf32>
  return %r : tensor<64xf32>
}
"""


@pytest.mark.parametrize("zero_point", [100, -56], ids=["below_128", "above_127_unsigned"])
def test_scalars_read_back_by_the_host_are_push_constants_on_the_npu(zero_point):
    """A dynamic quantizer's zero point and scale, extracted from device tensors: IREE
    passes the byte as a push constant truncated in the dispatch (read signed and
    unsigned) and the scale as a one-element binding read at constant indices."""
    from compiler_target import compile_str
    from hal_driver import runtime as rt
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    z, s = np.array(zero_point, np.int8), np.array(0.5, np.float32)
    module = rt.load_vm_flatbuffer(compile_str(SCALAR_READ_BACK, target_backends=["npu"]),
                                   driver="npu-sim")
    try:
        result = np.asarray(module.main(x, z, s))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.host_dispatches == 0 and stats.npu_dispatches == 1
    expected = (x / s + np.float32(zero_point)) * np.float32(zero_point % 256)
    np.testing.assert_array_equal(result, expected)
