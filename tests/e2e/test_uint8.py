"""uint8 quantization (onnxruntime's QUInt8 activations): IREE keeps the tensors i8 and
zero-extends them (arith.extui, arith.uitofp) and quantizes with arith.fptoui. These
run on the NPU as u8: u8 x u8, u8 x i8 and i8 x u8 contractions on the MAC array, u8
sums, and a quantize / dequantize round trip on the vector engine; checked against numpy on the unsigned
values and against the dispatch counts."""
import numpy as np
import pytest

from compiler_target import compile_str
from hal_driver import runtime as rt

MATMUL = """
func.func @main(%a: tensor<24x40xi8>, %b: tensor<40x16xi8>) -> tensor<24x16xi32> {{
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<24x16xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%e : tensor<24x16xi32>) -> tensor<24x16xi32>
  %r = linalg.generic {{indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                        affine_map<(m, n, k) -> (k, n)>,
                                        affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}}
       ins(%a, %b : tensor<24x40xi8>, tensor<40x16xi8>) outs(%z : tensor<24x16xi32>) {{
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.{a} %x : i8 to i32
    %ye = arith.{b} %y : i8 to i32
    %p = arith.muli %xe, %ye : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  }} -> tensor<24x16xi32>
  return %r : tensor<24x16xi32>
}}
"""

# A 3x3 convolution of u8 activations by i8 weights (onnxruntime's default QDQ
# quantization), NCHW / FCHW.
CONV = """
func.func @main(%x: tensor<1x8x18x20xi8>, %w: tensor<16x8x3x3xi8>) -> tensor<1x16x16x18xi32> {
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<1x16x16x18xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%e : tensor<1x16x16x18xi32>) -> tensor<1x16x16x18xi32>
  %r = linalg.generic {indexing_maps = [
         affine_map<(n, f, y, x, c, ky, kx) -> (n, c, y + ky, x + kx)>,
         affine_map<(n, f, y, x, c, ky, kx) -> (f, c, ky, kx)>,
         affine_map<(n, f, y, x, c, ky, kx) -> (n, f, y, x)>],
       iterator_types = ["parallel", "parallel", "parallel", "parallel",
                         "reduction", "reduction", "reduction"]}
       ins(%x, %w : tensor<1x8x18x20xi8>, tensor<16x8x3x3xi8>)
       outs(%z : tensor<1x16x16x18xi32>) {
  ^bb0(%a: i8, %b: i8, %acc: i32):
    %ae = arith.extui %a : i8 to i32
    %be = arith.extsi %b : i8 to i32
    %p = arith.muli %ae, %be : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<1x16x16x18xi32>
  return %r : tensor<1x16x16x18xi32>
}
"""

SUM = """
func.func @main(%x: tensor<64x40xi8>) -> tensor<64xi32> {
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<64xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%e : tensor<64xi32>) -> tensor<64xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
       ins(%x : tensor<64x40xi8>) outs(%z : tensor<64xi32>) {
  ^bb0(%a: i8, %acc: i32):
    %w = arith.extui %a : i8 to i32
    %s = arith.addi %acc, %w : i32
    linalg.yield %s : i32
  } -> tensor<64xi32>
  return %r : tensor<64xi32>
}
"""

# QuantizeLinear to uint8 (scale 0.05, zero point 128) as IREE lowers it, and the
# DequantizeLinear of the result: f32 -> u8 -> f32.
ROUND_TRIP = """
func.func @main(%x: tensor<8x96xf32>) -> (tensor<8x96xi8>, tensor<8x96xf32>) {
  %scale = arith.constant 0.05 : f32
  %zp = arith.constant 128.0 : f32
  %lo = arith.constant 0.0 : f32
  %hi = arith.constant 255.0 : f32
  %zpi = arith.constant 128 : i16
  %eq = tensor.empty() : tensor<8x96xi8>
  %q = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%x : tensor<8x96xf32>) outs(%eq : tensor<8x96xi8>) {
  ^bb0(%in: f32, %out: i8):
    %d = arith.divf %in, %scale : f32
    %r = math.roundeven %d : f32
    %s = arith.addf %r, %zp : f32
    %c0 = arith.maxnumf %s, %lo : f32
    %c1 = arith.minnumf %c0, %hi : f32
    %u = arith.fptoui %c1 : f32 to i8
    linalg.yield %u : i8
  } -> tensor<8x96xi8>
  %ef = tensor.empty() : tensor<8x96xf32>
  %f = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%q : tensor<8x96xi8>) outs(%ef : tensor<8x96xf32>) {
  ^bb0(%in: i8, %out: f32):
    %w = arith.extui %in : i8 to i16
    %c = arith.subi %w, %zpi : i16
    %v = arith.sitofp %c : i16 to f32
    %m = arith.mulf %v, %scale : f32
    linalg.yield %m : f32
  } -> tensor<8x96xf32>
  return %q, %f : tensor<8x96xi8>, tensor<8x96xf32>
}
"""


def run(text: str, *args):
    module = rt.load_vm_flatbuffer(compile_str(text, target_backends=["npu"]), driver="npu-sim")
    try:
        outputs = module.main(*args)
        return outputs, module.last_call_stats
    finally:
        module.close()


def unsigned_bytes(rng, shape) -> np.ndarray:
    """Random bytes as the i8 tensors the program takes (their unsigned values span 0-255)."""
    return rng.integers(0, 256, shape).astype(np.uint8).view(np.int8)


EXTENSIONS = {"u8": "extui", "i8": "extsi"}
NUMPY = {"u8": np.uint8, "i8": np.int8}


@pytest.mark.parametrize("a_type, b_type", [("u8", "u8"), ("u8", "i8"), ("i8", "u8")])
def test_byte_matmul_runs_on_the_mac_array(a_type, b_type):
    rng = np.random.default_rng(0)
    a, b = unsigned_bytes(rng, (24, 40)), unsigned_bytes(rng, (40, 16))
    got, stats = run(MATMUL.format(a=EXTENSIONS[a_type], b=EXTENSIONS[b_type]), a, b)
    assert stats.npu_dispatches == stats.dispatches == 1
    expected = a.view(NUMPY[a_type]).astype(np.int64) @ b.view(NUMPY[b_type]).astype(np.int64)
    np.testing.assert_array_equal(np.asarray(got), expected.astype(np.int32))


def test_u8_by_i8_convolution_runs_on_the_mac_array():
    rng = np.random.default_rng(4)
    x, w = unsigned_bytes(rng, (1, 8, 18, 20)), unsigned_bytes(rng, (16, 8, 3, 3))
    got, stats = run(CONV, x, w)
    assert stats.npu_dispatches == stats.dispatches == 1
    xs, ws = x.view(np.uint8).astype(np.int64), w.astype(np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(xs[0], (3, 3), axis=(1, 2))
    expected = np.einsum("cyxij,fcij->fyx", windows, ws)[None]
    np.testing.assert_array_equal(np.asarray(got), expected.astype(np.int32))


def test_u8_sums_run_on_the_mac_array():
    x = unsigned_bytes(np.random.default_rng(1), (64, 40))
    got, stats = run(SUM, x)
    assert stats.npu_dispatches == stats.dispatches == 1
    np.testing.assert_array_equal(np.asarray(got),
                                  x.view(np.uint8).astype(np.int32).sum(axis=1))


@pytest.mark.parametrize("spread", [1.0, 20.0])        # 20: most values saturate
def test_uint8_quantize_dequantize_round_trip(spread):
    x = (np.random.default_rng(2).standard_normal((8, 96)) * spread).astype(np.float32)
    (q, f), stats = run(ROUND_TRIP, x)
    assert stats.npu_dispatches == stats.dispatches
    expected = np.clip(np.rint(x / np.float32(0.05)) + 128, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(q).view(np.uint8), expected)
    np.testing.assert_array_equal(
        np.asarray(f), (expected.astype(np.float32) - 128) * np.float32(0.05))
