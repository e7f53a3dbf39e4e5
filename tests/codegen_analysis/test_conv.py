"""Convolutions: ONNX Conv (NCHW; stride, dilation, pads, groups, depthwise) and MLIR
linalg.conv_2d_nhwc_hwcf / depthwise_conv_2d_nhwc_hwc, checked structurally and against
onnx's reference evaluator (or numpy) through the numpy NpuOp interpreter."""
import numpy as np
import pytest
from onnx import helper

from compiler_target.codegen.ops import Conv2D, Elementwise, Matmul

from .models import analyses, onnx_model, onnx_reference, random, run_dispatch


def conv_relu_model(c=3, h=12, w=12, f=8, k=3, **attributes):
    groups = attributes.get("group", 1)
    weight, bias = random(f, c // groups, k, k), random(f)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attributes),
             helper.make_node("Relu", ["c"], ["y"])]
    return onnx_model(nodes, {"x": (1, c, h, w)}, {"w": weight, "b": bias}), weight


def test_seed_single_conv_summary(tmp_path):
    """The seed model: 1x3x500x500 input, 8x3x3x3 weight, bias (no relu)."""
    weight, bias = random(8, 3, 3, 3), random(8)
    model = onnx_model([helper.make_node("Conv", ["x", "w", "b"], ["y"])], {"x": (1, 3, 500, 500)},
                       {"w": weight, "b": bias})
    (conv,) = analyses(tmp_path, model)
    assert conv.summary == ("linalg.generic (conv2d NCHW) N=1 C=3 H=500 W=500 F=8 KH=3 KW=3 "
                            "stride=1 f32")
    assert conv.macs == 8 * 498 * 498 * 3 * 3 * 3
    op = conv.op
    assert isinstance(op, Conv2D)
    assert op.input.shape == (1, 3, 500, 500) and op.input.strides == (0, 250000, 500, 1)
    assert op.weight.shape == (8, 3, 3, 3) and op.weight.binding == 1
    assert op.out.shape == (1, 8, 498, 498) and op.out.binding == 2
    assert op.epilogue == [("acc",), ("input", 0), ("add", (0, 1))]
    (bias_ref,) = op.epilogue_inputs
    assert bias_ref.binding == -1 and bias_ref.strides == (0, 1, 0, 0)
    np.testing.assert_array_equal(bias_ref.constant.reshape(-1), bias)
    assert [(b.role, b.subspans[0].shape) for b in conv.bindings] == [
        ("input", (3, 500, 500)), ("input", (8, 3, 3, 3)), ("output", (8, 498, 498))]


CASES = {
    "plain": {},
    "stride2": {"strides": [2, 2]},
    "stride2x1": {"strides": [2, 1]},
    "dilation2": {"dilations": [2, 2]},
    "pads_asymmetric": {"pads": [1, 0, 2, 1]},
    "pads_stride2": {"pads": [1, 1, 1, 1], "strides": [2, 2]},
}


@pytest.mark.parametrize("case", CASES)
def test_conv_matches_onnx(tmp_path, case):
    model, weight = conv_relu_model(**CASES[case])
    x = random(1, 3, 12, 12)
    dispatches = analyses(tmp_path, model)
    assert all(d.op is not None for d in dispatches), [d.problem for d in dispatches]
    feed = x
    if len(dispatches) == 2:                 # the pads: a copy into a zero-filled buffer
        assert isinstance(dispatches[0].op, Elementwise)
        feed = run_dispatch(dispatches[0], [x])
    conv = dispatches[-1]
    assert isinstance(conv.op, Conv2D)
    got = run_dispatch(conv, [feed, weight])
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


def test_conv_stride_and_dilation_fields(tmp_path):
    model, _ = conv_relu_model(h=20, w=20, strides=[2, 1], dilations=[1, 2])
    (conv,) = analyses(tmp_path, model)
    assert (conv.op.stride, conv.op.dilation) == ((2, 1), (1, 2))
    assert "stride=2x1 dilation=1x2" in conv.summary
    assert conv.op.epilogue == [("acc",), ("input", 0), ("add", (0, 1)), ("relu", (2,))]


def test_grouped_conv(tmp_path):
    """groups=2: the bias becomes the accumulator's initial value (a broadcast generic)
    and the input/weight/output bindings are (G, C/G, ...) reshapes."""
    model, weight = conv_relu_model(c=4, group=2)
    (conv,) = analyses(tmp_path, model)
    op = conv.op
    assert op.groups == 2 and op.input.shape == (1, 4, 12, 12) and op.weight.shape == (8, 2, 3, 3)
    assert "groups=2" in conv.summary
    x = random(1, 4, 12, 12)
    expected = onnx_reference(model, {"x": x})
    got = run_dispatch(conv, [x, weight])
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


def test_depthwise_conv(tmp_path):
    """Depthwise: the weight is inlined as a dense constant in the dispatch."""
    model, _ = conv_relu_model(c=4, f=4, group=4, strides=[2, 2])
    (conv,) = analyses(tmp_path, model)
    op = conv.op
    assert op.groups == 4 and op.weight.shape == (4, 1, 3, 3) and op.weight.binding == -1
    assert conv.summary.startswith("linalg.generic (depthwise conv2d NCHW) N=1 C=4")
    x = random(1, 4, 12, 12)
    expected = onnx_reference(model, {"x": x})
    got = run_dispatch(conv, [x])
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


NHWC = """
func.func @main(%x: tensor<2x11x13x3xf32>, %w: tensor<3x2x3x8xf32>) -> tensor<2x5x6x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x5x6x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x5x6x8xf32>) -> tensor<2x5x6x8xf32>
  %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
       ins(%x, %w : tensor<2x11x13x3xf32>, tensor<3x2x3x8xf32>) outs(%f : tensor<2x5x6x8xf32>) -> tensor<2x5x6x8xf32>
  return %r : tensor<2x5x6x8xf32>
}
"""


def test_nhwc_conv(tmp_path):
    (conv,) = analyses(tmp_path, mlir=NHWC)
    op = conv.op
    assert conv.summary == ("linalg.generic (conv2d NHWC) N=2 C=3 H=11 W=13 F=8 KH=3 KW=2 "
                            "stride=2 f32")
    assert op.input.strides == (11 * 13 * 3, 1, 13 * 3, 3)      # NHWC as strides
    assert op.weight.strides == (1, 8, 2 * 3 * 8, 3 * 8)         # HWCF as strides
    x, w = random(2, 11, 13, 3), random(3, 2, 3, 8)
    got = run_dispatch(conv, [x, w]).reshape(2, 5, 6, 8)
    expected = np.zeros((2, 5, 6, 8))
    for ky in range(3):
        for kx in range(2):
            expected += np.einsum("nhwc,cf->nhwf", x[:, ky:ky + 9:2, kx:kx + 11:2], w[ky, kx])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


DEPTHWISE_NHWC = """
func.func @main(%x: tensor<2x10x10x4xf32>, %w: tensor<3x3x4xf32>) -> tensor<2x8x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x8x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  %r = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<2x10x10x4xf32>, tensor<3x3x4xf32>) outs(%f : tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
  return %r : tensor<2x8x8x4xf32>
}
"""


def test_depthwise_nhwc_conv(tmp_path):
    (conv,) = analyses(tmp_path, mlir=DEPTHWISE_NHWC)
    assert conv.op.groups == 4 and conv.op.weight.strides == (1, 0, 12, 4)
    x, w = random(2, 10, 10, 4), random(3, 3, 4)
    got = run_dispatch(conv, [x, w]).reshape(2, 8, 8, 4)
    expected = sum(x[:, ky:ky + 8, kx:kx + 8] * w[ky, kx] for ky in range(3) for kx in range(3))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_splat_weight_is_a_stride_zero_constant(tmp_path):
    model = onnx_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": (1, 3, 8, 8)},
                       {"w": np.full((4, 3, 3, 3), 0.5, np.float32)})
    (conv,) = analyses(tmp_path, model)
    weight = conv.op.weight
    assert weight.binding == -1 and weight.strides == (0, 0, 0, 0) and weight.constant.size == 1
    x = random(1, 3, 8, 8)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(conv, [x]).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


def test_conv_batchnorm_relu_epilogue_reads_two_tensors_of_one_binding(tmp_path):
    """BatchNormalization after a conv fuses into the epilogue; IREE packs the weight and
    a folded BN vector into one constant binding at two offsets."""
    channel = lambda: random(8)  # noqa: E731
    weight = random(8, 3, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    model = onnx_model(nodes, {"x": (1, 3, 10, 10)},
                       {"w": weight, "s": channel(), "b": channel(), "m": channel(),
                        "v": np.abs(channel()) + 0.5})
    copy, conv = analyses(tmp_path, model)
    (binding,) = [b for b in conv.bindings if len(b.subspans) == 2]
    assert sorted(s.shape for s in binding.subspans) == [(8,), (8, 3, 3, 3)]
    assert binding.size_bytes == max(s.end for s in binding.subspans)
    assert conv.op.weight.binding == binding.index
    assert any(ref.binding == binding.index for ref in conv.op.epilogue_inputs)
    assert conv.op.epilogue[-1] == ("relu", (len(conv.op.epilogue) - 2,))
    assert conv.op.pads == (0, 0, 0, 0) and conv.op.input.shape == (1, 3, 12, 12)


def test_pointwise_conv_is_a_contraction_over_rows_and_cols(tmp_path):
    """A 1x1 convolution in NCHW whose result is stored into the zero-padded input of
    the next convolution is a contraction whose M spans two loops (rows x cols): IREE's
    `matmul_like` dispatch, roles from linalg.infer_contraction_dimensions."""
    w1, w2 = random(16, 8, 1, 1), random(4, 16, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    model = onnx_model(nodes, {"x": (1, 8, 6, 20)}, {"w1": w1, "w2": w2})
    pointwise = analyses(tmp_path, model)[0]
    op = pointwise.op
    assert isinstance(op, Matmul) and op.dims == (1, 2, 1, 1)
    assert pointwise.summary == "linalg.generic (matmul) M=6x20 N=16 K=8 a^T b^T f32"
    assert op.a.shape == (1, 6, 20, 8) and op.a.strides == (0, 20, 1, 120)
    assert op.out.shape == (1, 6, 20, 16) and op.out.strides == (0, 22, 1, 8 * 22)
    assert pointwise.macs == 6 * 20 * 16 * 8
    x = random(1, 8, 6, 20)
    got = run_dispatch(pointwise, [x, w1]).reshape(16, 8, 22)[:, 1:7, 1:21]
    expected = np.maximum(np.einsum("chw,fc->fhw", x[0], w1[:, :, 0, 0]), 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_one_dimensional_conv_is_a_2d_conv_of_height_one(tmp_path):
    weight, bias = random(6, 4, 3), random(6)
    model = onnx_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1],
                                         strides=[2])],
                       {"x": (1, 4, 17)}, {"w": weight, "b": bias})
    dispatches = analyses(tmp_path, model)
    conv = dispatches[-1]
    assert isinstance(conv.op, Conv2D)
    assert conv.op.input.shape[2] == 1 and conv.op.weight.shape[2:] == (1, 3)
    assert conv.op.stride == (1, 2)
    x = random(1, 4, 17)
    feed = run_dispatch(dispatches[0], [x]) if len(dispatches) == 2 else x
    expected = onnx_reference(model, {"x": x})
    got = run_dispatch(conv, [feed, weight])
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)
