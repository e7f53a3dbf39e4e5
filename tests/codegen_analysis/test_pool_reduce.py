"""Pooling and reductions: MaxPool / AveragePool with pads (IREE copies the input into a
pre-filled padded buffer in a separate dispatch), GlobalAveragePool, ReduceSum/Max."""
import numpy as np
import pytest
from onnx import helper

from compiler_target.codegen.ops import Elementwise, Pool2D, Reduce

from .models import analyses, onnx_model, onnx_reference, random, run_dispatch

N = helper.make_node


def pool_model(kind, **attributes):
    return onnx_model([N(kind, ["x"], ["y"], **attributes)], {"x": (1, 4, 12, 12)})


def run_pool(dispatches, x, pad_fill):
    feed = x
    if len(dispatches) == 2:
        assert isinstance(dispatches[0].op, Elementwise), dispatches[0].problem
        feed = run_dispatch(dispatches[0], [x], fill=pad_fill)
    return run_dispatch(dispatches[-1], [feed])


def test_maxpool_with_pads(tmp_path):
    model = pool_model("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    copy, pool = analyses(tmp_path, model)
    assert copy.summary == "copy 4x12x12 f32"
    assert pool.summary == "linalg.generic (max pool2d) N=1 C=4 H=14 W=14 KH=3 KW=3 stride=2 f32"
    op = pool.op
    assert isinstance(op, Pool2D) and op.kind == "max" and op.kernel == (3, 3)
    x = random(1, 4, 12, 12)
    expected = onnx_reference(model, {"x": x})
    got = run_pool([copy, pool], x, pad_fill=-np.inf)
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-6, atol=1e-6)


def test_averagepool_count_include_pad(tmp_path):
    model = pool_model("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                       count_include_pad=1)
    copy, pool = analyses(tmp_path, model)
    op = pool.op
    assert (op.kind, op.count_include_pad, op.epilogue) == ("avg", True, [("acc",)])
    assert "(avg pool2d)" in pool.summary
    x = random(1, 4, 12, 12)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_pool([copy, pool], x, 0.0).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)


def test_averagepool_without_pads(tmp_path):
    model = pool_model("AveragePool", kernel_shape=[2, 2], strides=[2, 2])
    (pool,) = analyses(tmp_path, model)
    assert pool.op.kind == "avg" and pool.op.pads == (0, 0, 0, 0)
    x = random(1, 4, 12, 12)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(pool, [x]).reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)


def test_averagepool_count_exclude_pad(tmp_path):
    """The divisor depends on the output position (linalg.index arithmetic in the body)."""
    model = pool_model("AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                       count_include_pad=0)
    copy, pool = analyses(tmp_path, model)
    op = pool.op
    assert (op.kind, op.epilogue) == ("sum", [("acc",), ("input", 0), ("div", (0, 1))])
    divisor = op.epilogue_inputs[0]
    assert divisor.binding == -1 and divisor.shape == (1, 4, 6, 6) and divisor.strides == (0, 0, 6, 1)
    assert divisor.constant.reshape(6, 6)[0, 0] == 4 and divisor.constant.reshape(6, 6)[1, 1] == 9
    x = random(1, 4, 12, 12)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_pool([copy, pool], x, 0.0).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)


def test_global_average_pool(tmp_path):
    model = onnx_model([N("GlobalAveragePool", ["x"], ["y"])], {"x": (1, 4, 10, 10)})
    (gap,) = analyses(tmp_path, model)
    assert gap.summary == "linalg.generic (mean reduction) 4 over 100 f32"
    op = gap.op
    assert isinstance(op, Reduce) and op.kind == "mean"
    assert (op.input.shape, op.input.strides, op.out.shape) == ((4, 100), (100, 1), (4,))
    x = random(1, 4, 10, 10)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(gap, [x]).reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["ReduceSum", "ReduceMax"])
def test_reduce_last_axis(tmp_path, kind):
    model = onnx_model([N(kind, ["x", "axes"], ["y"], keepdims=0)] if kind == "ReduceSum" else
                       [N(kind, ["x"], ["y"], axes=[2], keepdims=0)], {"x": (3, 5, 16)},
                       {"axes": np.array([2], np.int64)} if kind == "ReduceSum" else {})
    (red,) = analyses(tmp_path, model)
    assert red.op is not None, red.problem
    assert red.op.kind == {"ReduceSum": "sum", "ReduceMax": "max"}[kind]
    assert red.op.input.shape == (15, 16)
    x = random(3, 5, 16)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(red, [x]).reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)


def test_product_pooled_per_channel_is_a_rowwise_dot_product(tmp_path):
    """GlobalAveragePool(a * b) (PP-LCNet's HardSwish x * f(x) before its pool): IREE
    fuses the product into the reduction, out[c] = sum over pixels of a * b, a body like
    a contraction's but with every output loop indexing both operands (no M or N loops,
    nothing the MAC array could reuse): a row-wise multiply and sum on the vector
    engine, not 64 separate 1x1x49 matmuls."""
    model = onnx_model([N("Mul", ["a", "b"], ["p"]), N("GlobalAveragePool", ["p"], ["y"])],
                       {"a": (1, 64, 7, 7), "b": (1, 64, 7, 7)})
    (dispatch,) = analyses(tmp_path, model)
    assert "rowwise mul sum" in dispatch.summary, dispatch.summary
    a, b = random(1, 64, 7, 7), random(1, 64, 7, 7)
    expected = onnx_reference(model, {"a": a, "b": b})
    np.testing.assert_allclose(run_dispatch(dispatch, [a, b]).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes,shape", [([2], (3, 5, 16)), ([0, 1, 2], (4, 37, 64))])
def test_reduce_min_is_minus_the_max_of_the_negation(tmp_path, axes, shape):
    """ReduceMin (efficientword's ResNet normalises by its input's minimum: one over all
    9536 elements): the walk writes min(x) = -max(-x) (the vector unit reduces by sum and
    max), recognised as a Reduce of kind min, which tile_reduce tiles as -max(-x)."""
    model = onnx_model([N("ReduceMin", ["x"], ["y"], axes=axes, keepdims=0)], {"x": shape})
    x = random(*shape)
    value = x
    for dispatch in analyses(tmp_path, model):     # IREE splits a long one in two
        assert dispatch.op is not None, dispatch.problem
        assert dispatch.op.kind == "min", dispatch.summary
        value = run_dispatch(dispatch, [value])
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_array_equal(value.reshape(expected.shape), expected)
