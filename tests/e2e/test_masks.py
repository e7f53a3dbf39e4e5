"""Selects on a condition that is neither a max, a min nor a compared value kept, on
the NPU against onnxruntime (vcmp, vselect, vand):
- an attention's bool padding mask. IREE keeps the bool tensor as i8 bytes and truncates
  it to i1 where it is read; the mask becomes 0 or -inf, added to the scores in the
  QK^T matmul's dispatch (a transformer's export, khmersm's) or selected with them. An
  i1 the NPU could not read sent the attention's matmul, and its MACs, to the host.
- a division that is 0 where the divisor is (div_no_nan: `cmpf oeq`);
- compares combined by And, Or and Not, and cast to float.
The mask hides the last key positions of every query row (each row keeps some)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.e2e.onnx_on_npu import call_on_npu, onnxruntime_output

HEADS, TOKENS, HEAD = 2, 24, 16
N = helper.make_node


def _model(tmp_path, name, nodes, inputs, output_shape, weights=()):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)], list(weights))
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def _attention(tmp_path, additive: bool):
    """softmax(q k^T + mask) v with mask = Where(pad, 0, -inf) added (additive) or
    Where(pad, q k^T, -inf)."""
    minus_inf = numpy_helper.from_array(np.array(-np.inf, np.float32), "minus_inf")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    shape = numpy_helper.from_array(np.array([1, 1, 1, TOKENS], np.int64), "shape")
    nodes = [N("MatMul", ["q", "kt"], ["s"]), N("Reshape", ["pad", "shape"], ["m"])]
    if additive:
        nodes += [N("Where", ["m", "zero", "minus_inf"], ["bias"]),
                  N("Add", ["s", "bias"], ["masked"])]
    else:
        nodes += [N("Where", ["m", "s", "minus_inf"], ["masked"])]
    nodes += [N("Softmax", ["masked"], ["p"], axis=-1), N("MatMul", ["p", "v"], ["y"])]
    qv = (1, HEADS, TOKENS, HEAD)
    inputs = [("q", TensorProto.FLOAT, qv), ("kt", TensorProto.FLOAT, (1, HEADS, HEAD, TOKENS)),
              ("v", TensorProto.FLOAT, qv), ("pad", TensorProto.BOOL, (1, TOKENS))]
    return _model(tmp_path, "masked_attention", nodes, inputs, qv, (minus_inf, zero, shape))


@pytest.mark.parametrize("additive", [True, False], ids=["mask_added", "scores_selected"])
def test_attention_with_a_padding_mask_runs_on_the_npu(tmp_path, additive):
    path = _attention(tmp_path, additive)
    rng = np.random.default_rng(3)
    q, v = (rng.normal(0, 1, (1, HEADS, TOKENS, HEAD)).astype(np.float32) for _ in range(2))
    kt = rng.normal(0, 1, (1, HEADS, HEAD, TOKENS)).astype(np.float32)
    pad = np.ones((1, TOKENS), bool)
    pad[0, 17:] = False
    call = call_on_npu(path, "masked_attention", q, kt, v, pad)
    assert call.stats.host_dispatches == 0 and call.stats.npu_dispatches >= 2, call.report
    expected = onnxruntime_output(path, {"q": q, "kt": kt, "v": v, "pad": pad})
    unmasked = onnxruntime_output(path, {"q": q, "kt": kt, "v": v, "pad": np.ones_like(pad)})
    assert np.abs(expected - unmasked).max() > 0.1     # the mask changes the result
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-5)


def test_division_that_is_zero_where_the_divisor_is_runs_on_the_npu(tmp_path):
    """y = d == 0 ? 0 : n / d, after a convolution (its epilogue)."""
    rng = np.random.default_rng(8)
    weights = [numpy_helper.from_array(rng.normal(0, 1, (8, 4, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    nodes = [N("Conv", ["x", "w"], ["n"], pads=[1, 1, 1, 1]),
             N("Equal", ["d", "zero"], ["is_zero"]), N("Div", ["n", "d"], ["q"]),
             N("Where", ["is_zero", "zero", "q"], ["y"])]
    shape = (1, 8, 10, 10)
    path = _model(tmp_path, "div_no_nan", nodes, [("x", TensorProto.FLOAT, (1, 4, 10, 10)),
                                                   ("d", TensorProto.FLOAT, shape)], shape, weights)
    x = rng.normal(0, 1, (1, 4, 10, 10)).astype(np.float32)
    d = rng.normal(0, 1, shape).astype(np.float32)
    d[rng.random(shape) < 0.3] = 0.0
    d[0, 0, 0, :3] = -0.0
    call = call_on_npu(path, "div_no_nan", x, d)
    assert call.stats.host_dispatches == 0, call.report
    expected = onnxruntime_output(path, {"x": x, "d": d})
    assert np.count_nonzero(expected == 0) >= 0.25 * expected.size
    np.testing.assert_allclose(call.output, expected, rtol=1e-5, atol=1e-5)


def test_compares_combined_and_cast_to_float_run_on_the_npu(tmp_path):
    """y = float((x > a and not x < b) or x == c) · x, with NaNs in x: NaN compares
    false, so its Not is true."""
    consts = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("a", -0.25), ("b", 0.5), ("c", 2.0))]
    nodes = [N("Greater", ["x", "a"], ["gt"]), N("Less", ["x", "b"], ["lt"]),
             N("Not", ["lt"], ["ge"]), N("And", ["gt", "ge"], ["inside"]),
             N("Equal", ["x", "c"], ["eq"]), N("Or", ["inside", "eq"], ["picked"]),
             N("Cast", ["picked"], ["f"], to=TensorProto.FLOAT), N("Mul", ["f", "x"], ["y"])]
    shape = (4, 64)
    path = _model(tmp_path, "compares", nodes, [("x", TensorProto.FLOAT, shape)], shape, consts)
    x = np.random.default_rng(2).normal(0, 1, shape).astype(np.float32)
    x[0, :4] = [2.0, np.nan, 0.5, -0.25]
    call = call_on_npu(path, "compares", x)
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, onnxruntime_output(path, {"x": x}))
