"""Elementwise dispatches: broadcasts as stride 0, activation chains named (relu, clamp,
sigmoid, tanh, leakyrelu), square roots, checked against onnx's reference evaluator."""
import numpy as np
import pytest
from onnx import helper

from compiler_target import codegen
from compiler_target.codegen.analysis import analyse
from compiler_target.codegen.ops import Elementwise
from executable_format.machine import DEFAULT_MACHINE

from .models import (analyses, executable_sources, executables, onnx_model, onnx_reference,
                     random, run_dispatch)

N = helper.make_node


def test_add_broadcast_relu(tmp_path):
    model = onnx_model([N("Add", ["x", "b"], ["s"]), N("Relu", ["s"], ["y"])],
                       {"x": (2, 4, 8, 8), "b": (4, 1, 1)})
    (ew,) = analyses(tmp_path, model)
    op = ew.op
    assert isinstance(op, Elementwise)
    assert ew.summary == "linalg.generic (elementwise add relu) 2x4x64 f32"
    assert op.expr == [("input", 0), ("input", 1), ("add", (0, 1)), ("relu", (2,))]
    assert op.inputs[1].shape == (2, 4, 64) and op.inputs[1].strides == (0, 1, 0)
    x, b = random(2, 4, 8, 8), random(4, 1, 1)
    expected = onnx_reference(model, {"x": x, "b": b})
    np.testing.assert_allclose(run_dispatch(ew, [x, b]).reshape(expected.shape), expected,
                               rtol=1e-6)


def test_activation_chain(tmp_path):
    nodes = [N("Mul", ["x", "z"], ["m"]), N("Clip", ["m", "lo", "hi"], ["c"]),
             N("Sigmoid", ["c"], ["s"]), N("Tanh", ["s"], ["t"]),
             N("LeakyRelu", ["t"], ["y"], alpha=0.1)]
    model = onnx_model(nodes, {"x": (4, 8, 8), "z": (8, 8)},
                       {"lo": np.array(-1, np.float32), "hi": np.array(2, np.float32)})
    (ew,) = analyses(tmp_path, model)
    assert [node[0] for node in ew.op.expr] == ["input", "input", "mul", "clamp", "sigmoid",
                                                "tanh", "leakyrelu"]
    assert ew.op.expr[3][2:] == (-1.0, 2.0)
    assert ew.op.expr[6][2] == pytest.approx(0.1)
    x, z = 3 * random(4, 8, 8), random(8, 8)
    expected = onnx_reference(model, {"x": x, "z": z})
    np.testing.assert_allclose(run_dispatch(ew, [x, z]).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)


def test_leakyrelu_on_negative_values(tmp_path):
    model = onnx_model([N("Sub", ["x", "z"], ["d"]), N("LeakyRelu", ["d"], ["y"], alpha=0.2)],
                       {"x": (16, 16), "z": (16, 16)})
    (ew,) = analyses(tmp_path, model)
    assert ew.op.expr[-1][0] == "leakyrelu"
    x, z = random(16, 16), random(16, 16)
    expected = onnx_reference(model, {"x": x, "z": z})
    np.testing.assert_allclose(run_dispatch(ew, [x, z]).reshape(16, 16), expected, rtol=1e-6)


def test_div_max_min_abs_neg_exp(tmp_path):
    nodes = [N("Div", ["x", "z"], ["d"]), N("Max", ["d", "x"], ["m"]), N("Min", ["m", "z"], ["n"]),
             N("Abs", ["n"], ["a"]), N("Neg", ["a"], ["g"]), N("Exp", ["g"], ["y"])]
    model = onnx_model(nodes, {"x": (8, 32), "z": (8, 32)})
    (ew,) = analyses(tmp_path, model)
    assert ew.op is not None, ew.problem
    x, z = random(8, 32), random(8, 32) + 2
    expected = onnx_reference(model, {"x": x, "z": z})
    np.testing.assert_allclose(run_dispatch(ew, [x, z]).reshape(8, 32), expected, rtol=1e-5)


def test_hardsigmoid_is_a_clamp(tmp_path):
    model = onnx_model([N("HardSigmoid", ["x"], ["y"], alpha=0.25, beta=0.5)], {"x": (8, 16)})
    (ew,) = analyses(tmp_path, model)
    assert [node[0] for node in ew.op.expr][-1] == "clamp" and ew.op.expr[-1][2:] == (0.0, 1.0)
    x = 4 * random(8, 16)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(ew, [x]).reshape(8, 16), expected, rtol=1e-6)


@pytest.mark.parametrize("nodes,exponent,kind", [
    ([N("Sqrt", ["x"], ["y"])], None, "sqrt"),
    ([N("Pow", ["x", "e"], ["y"])], 0.5, "sqrt"),
    ([N("Pow", ["x", "e"], ["y"])], -0.5, "rsqrt"),
], ids=["sqrt", "pow_half", "pow_minus_half"])
def test_square_roots_run_on_the_npu(tmp_path, nodes, exponent, kind):
    """Sqrt, and Pow by ±0.5, are one sqrt / rsqrt node, lowered to vsqrt / vrsqrt."""
    constants = {} if exponent is None else {"e": np.array(exponent, np.float32)}
    model = onnx_model(nodes, {"x": (8, 16)}, constants)
    module, (executable,) = executables(executable_sources(tmp_path, model))
    ew = analyse(executable)
    assert ew.op.expr == [("input", 0), (kind, (0,))], ew.problem
    x = random(8, 16) + 1.5
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(ew, [x]).reshape(8, 16), expected, rtol=1e-6)
    plan = codegen.plan_dispatch(0, executable, DEFAULT_MACHINE)
    assert plan.target == "npu", plan.reason


@pytest.mark.parametrize("exponent", [0.75, 0.25, 1.5, -0.75, 2.25])
def test_powers_in_quarters_are_square_roots_and_products(tmp_path, exponent):
    """x ** n for n a multiple of 1/4 (LocalResponseNormalization's beta, 0.75, the
    usual) is x^a · sqrt(x)^b · sqrt(sqrt(x))^c on the vector engine, within a few
    ulp of the reference's pow."""
    model = onnx_model([N("Pow", ["x", "e"], ["y"])], {"x": (8, 16)},
                       {"e": np.array(exponent, np.float32)})
    module, (executable,) = executables(executable_sources(tmp_path, model))
    ew = analyse(executable)
    assert ew.op is not None, ew.problem
    assert {node[0] for node in ew.op.expr} <= {"input", "sqrt", "mul", "div", "const"}
    x = random(8, 16) + 1.5
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(ew, [x]).reshape(8, 16), expected, rtol=1e-6)
    plan = codegen.plan_dispatch(0, executable, DEFAULT_MACHINE)
    assert plan.target == "npu", plan.reason


def test_other_fractional_powers_stay_on_host(tmp_path):
    model = onnx_model([N("Pow", ["x", "e"], ["y"])], {"x": (8, 16)},
                       {"e": np.array(0.3, np.float32)})
    (ew,) = analyses(tmp_path, model)
    assert ew.op is None and "power with exponent" in ew.problem


def test_power_by_a_tensor_says_so(tmp_path):
    """An exponent the dispatch reads from a tensor (a graph input here; a dequantized
    constant in onnxruntime's quantized L2 normalization) is named as such."""
    model = onnx_model([N("Pow", ["x", "e"], ["y"])], {"x": (8, 16), "e": (1,)}, {})
    (ew,) = analyses(tmp_path, model)
    assert ew.op is None and "power with an exponent read from a tensor" in ew.problem


def test_exact_gelu_runs_on_the_npu(tmp_path):
    """PyTorch's exact GELU, x·(1 + erf(x/√2))/2: erf is the vector unit's verf."""
    nodes = [N("Div", ["x", "r2"], ["d"]), N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["a"]),
             N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "half"], ["y"])]
    model = onnx_model(nodes, {"x": (8, 32)}, {"r2": np.array(np.sqrt(2), np.float32),
                                               "one": np.array(1, np.float32),
                                               "half": np.array(0.5, np.float32)})
    module, (executable,) = executables(executable_sources(tmp_path, model))
    ew = analyse(executable)
    assert ew.op is not None and "erf" in [node[0] for node in ew.op.expr], ew.problem
    x = 3 * random(8, 32)
    expected = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(run_dispatch(ew, [x]).reshape(8, 32), expected, rtol=2e-6,
                               atol=1e-7)
    assert codegen.plan_dispatch(0, executable, DEFAULT_MACHINE).target == "npu"


@pytest.mark.parametrize("op", ["Atan"])
def test_unsupported_math_stays_on_host(tmp_path, op):
    (ew,) = analyses(tmp_path, onnx_model([N(op, ["x"], ["y"])], {"x": (8, 16)}))
    assert ew.op is None
    assert ew.problem == f"linalg.generic: math.{op.lower()} in an elementwise body has no NPU equivalent"


@pytest.mark.parametrize("scales,shape", [((1, 1, 2, 2), (1, 6, 5, 7)), ((1, 1, 3, 2), (1, 4, 3, 5))])
def test_nearest_resize_is_a_strided_view(tmp_path, scales, shape):
    """Resize (nearest, asymmetric, floor) with a fused add: IREE gathers with
    tensor.extract at indices floor(position / scale); split into digits of a mixed
    radix, the gather is the input read with stride 0 along the repeat digits."""
    out_shape = tuple(n * s for n, s in zip(shape, scales))
    nodes = [N("Resize", ["x", "", "scales"], ["r"], mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             N("Add", ["r", "z"], ["y"])]
    model = onnx_model(nodes, {"x": shape, "z": out_shape},
                       {"scales": np.array(scales, np.float32)})
    (resize,) = analyses(tmp_path, model)
    op = resize.op
    assert isinstance(op, Elementwise), resize.problem
    assert 0 in op.inputs[0].strides or 0 in op.inputs[1].strides
    x, z = random(*shape), random(*out_shape)
    expected = onnx_reference(model, {"x": x, "z": z})
    got = run_dispatch(resize, [x, z])
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_resize_indices_are_evaluated_per_digit(tmp_path, monkeypatch):
    """IREE collapses a Resize's loops into one and recovers each dim with remsi/divsi by
    constants; the analysis evaluates the index arithmetic over those digits as open
    grids, so no index array spans the whole loop (a 768x512 MODNet matte has 12.5 M
    positions); nearest stays a view, bilinear is still refused, row by row."""
    from compiler_target.codegen.analysis import gather
    sizes = []

    def recorded(*args):
        result = index_arithmetic(*args)
        sizes.append(np.size(result))
        return result
    index_arithmetic = gather.index_arithmetic
    monkeypatch.setattr(gather, "index_arithmetic", recorded)
    for mode, supported in (("nearest", True), ("linear", False)):
        nodes = [N("Resize", ["x", "", "scales"], ["y"], mode=mode,
                   coordinate_transformation_mode="asymmetric", nearest_mode="floor")]
        model = onnx_model(nodes, {"x": (1, 6, 5, 7)},
                           {"scales": np.array((1, 1, 2, 2), np.float32)})
        sizes.clear()
        (tmp_path / mode).mkdir()
        (resize,) = analyses(tmp_path / mode, model)
        assert (resize.op is not None) == supported, resize.problem
        assert 14 <= max(sizes) <= 6 * 14, sizes      # the whole loop: 6 x 10 x 14
    assert "not affine over any mixed radix" in resize.problem


def test_gather_at_data_dependent_indices_stays_on_host(tmp_path):
    model = onnx_model([N("GatherElements", ["x", "i"], ["y"], axis=1)], {"x": (4, 6)},
                       {"i": np.array([[0, 5, 2]] * 4, np.int64)})
    (gather,) = analyses(tmp_path, model)
    assert gather.op is None and "gather" in gather.problem
