"""Reductions whose results are read back along the reduced rows (softmax, layer norm,
x - mean(x)) and reductions of computed values (sum of squares): Rowwise ops, checked
structurally and against onnx's reference evaluator through the numpy NpuOp interpreter."""
import numpy as np
import pytest
from onnx import helper

from compiler_target.codegen.ops import Reduce, Rowwise

from .models import analyses, onnx_model, onnx_reference, random, run_dispatch

N = helper.make_node


@pytest.mark.parametrize("shape", [(4, 16), (3, 5, 7)])
def test_softmax(tmp_path, shape):
    model = onnx_model([N("Softmax", ["x"], ["y"], axis=-1)], {"x": shape})
    (softmax,) = analyses(tmp_path, model)
    op = softmax.op
    assert isinstance(op, Rowwise), softmax.problem
    rows = "x".join(map(str, shape[:-1]))
    assert softmax.summary == f"linalg.softmax (rowwise max sub exp sum div) {rows}x{shape[-1]} f32"
    assert op.out.shape == (int(np.prod(shape[:-1])), shape[-1])
    x = random(*shape)
    expected = onnx_reference(model, {"x": x})
    got = run_dispatch(softmax, [x])
    np.testing.assert_allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)


def test_layer_normalization(tmp_path):
    """ONNX LayerNormalization: IREE forms x - mean(x) and the normalization by the
    variance as reductions whose results are read back along the row."""
    scale, bias = random(24), random(24)
    model = onnx_model([N("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
                       {"x": (6, 24)}, {"s": scale, "b": bias})
    dispatches = analyses(tmp_path, model)
    assert all(d.op is not None for d in dispatches), [d.problem for d in dispatches]
    assert any(isinstance(d.op, Rowwise) for d in dispatches)
    x = random(6, 24)
    feeds = {"x": x, "s": scale, "b": bias}
    value = x
    for dispatch in dispatches:
        inputs = [value] + [feeds[name] for name in ("s", "b")][:sum(
            b.read_only for b in dispatch.bindings) - 1]
        value = run_dispatch(dispatch, inputs)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(value.reshape(expected.shape), expected, rtol=1e-4, atol=1e-5)


def test_mean_subtraction_reads_the_mean_back_along_the_row(tmp_path):
    nodes = [N("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), N("Sub", ["x", "m"], ["y"])]
    model = onnx_model(nodes, {"x": (5, 32)})
    (dispatch,) = analyses(tmp_path, model)
    op = dispatch.op
    assert isinstance(op, Rowwise), dispatch.problem
    assert [node[0] for node in op.expr].count("reduce") == 1
    x = random(5, 32)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(dispatch, [x]).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)


def test_sum_of_squares_reduces_a_computed_value(tmp_path):
    model = onnx_model([N("ReduceSumSquare", ["x"], ["y"], axes=[1], keepdims=0)], {"x": (4, 32)})
    (red,) = analyses(tmp_path, model)
    op = red.op
    assert isinstance(op, Rowwise), red.problem
    assert op.out.strides[1] == 0            # one result per row
    assert [node[0] for node in op.expr] == ["input", "mul", "reduce"]
    x = random(4, 32)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(red, [x]).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)


def test_plain_reduction_stays_a_reduce(tmp_path):
    model = onnx_model([N("ReduceMax", ["x"], ["y"], axes=[1], keepdims=0)], {"x": (4, 32)})
    (red,) = analyses(tmp_path, model)
    assert isinstance(red.op, Reduce) and red.op.kind == "max"
    assert red.summary == "linalg.generic (max reduction) 4 over 32 f32"


def test_variance_with_pow_reduces_squares(tmp_path):
    """ReduceMean(Pow(x - mean, 2)): the power is a product on the vector engine."""
    nodes = [N("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), N("Sub", ["x", "m"], ["d"]),
             N("Pow", ["d", "two"], ["p"]), N("ReduceMean", ["p"], ["v"], axes=[1], keepdims=1),
             N("Sqrt", ["v"], ["y"])]
    model = onnx_model(nodes, {"x": (6, 20)}, {"two": np.array(2.0, np.float32)})
    dispatches = analyses(tmp_path, model)
    assert all(d.op is not None for d in dispatches), [d.problem for d in dispatches]
    x = random(6, 20)
    by_size = {x.size: x}                 # each dispatch reads x and what the one before wrote
    for dispatch in dispatches:
        inputs = [by_size[b.size_bytes // 4] for b in dispatch.bindings if b.read_only]
        value = run_dispatch(dispatch, inputs)
        by_size[value.size] = value
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(value.reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)
