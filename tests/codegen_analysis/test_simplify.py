"""Expression simplification (analysis.expressions.simplified): chains of scalar affine
steps folded into one scale node without changing a bit, and hardswish / hard-sigmoid
products in the fewest vector passes."""
import numpy as np
import pytest
from onnx import helper

from compiler_target.codegen.analysis.expressions import pruned, simplified

from .models import analyses, onnx_model, onnx_reference, random, run_dispatch

N = helper.make_node
X = ("input", 0)


def c(value):
    return ("const", float(np.float32(value)))


def simplify(expr):
    inputs = [None] * (1 + max((node[1] for node in expr if node[0] == "input"), default=0))
    return pruned(simplified(expr), inputs)[0]


@pytest.mark.parametrize("expr,folded", [
    # x*2 + 3: x*2 is exact, so one vscale rounds x*2 + 3 once whether fused or not
    ([X, c(2), ("mul", (0, 1)), c(3), ("add", (2, 3))], [X, ("scale", (0,), 2.0, 3.0)]),
    # (x + 3) / 4: scaling by a power of two commutes with rounding
    ([X, c(3), ("add", (0, 1)), c(4), ("div", (2, 3))], [X, ("scale", (0,), 0.25, 0.75)]),
    # x*c*0.5: no shift
    ([X, c(0.3), ("mul", (0, 1)), c(0.5), ("mul", (2, 3))],
     [X, ("scale", (0,), float(np.float32(0.3)) * 0.5, -0.0)]),
    # 1.5 - (-x), then / 2: the negation is exact, the halving too
    ([X, ("neg", (0,)), c(1.5), ("sub", (2, 1)), c(2), ("div", (3, 4))],
     [X, ("scale", (0,), 0.5, 0.75)]),
])
def test_affine_chain_folds_into_one_scale(expr, folded):
    assert simplify(expr) == folded


@pytest.mark.parametrize("expr", [
    [X, c(0.3), ("mul", (0, 1)), c(0.5), ("add", (2, 3))],   # x*c rounds before the add
    [X, c(3), ("add", (0, 1)), c(5), ("add", (2, 3))],        # two rounded adds
    [X, c(6), ("div", (0, 1)), c(0.5), ("add", (2, 3))],      # x/6 is not x*(1/6)
    [X, c(3), ("add", (0, 1)), ("neg", (2,))],                # -(x + 3) = -0 at x = -3
])
def test_affine_chain_that_would_round_differently_stays(expr):
    assert simplify(expr) == expr


def test_affine_chain_folds_bit_exactly():
    """numpy as a core that rounds every op (and x*m + a twice) and one that fuses x*m + a:
    the folded chain gives the raw chain's bits in both."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(20000) * 10.0 ** rng.integers(-4, 5, 20000)).astype(np.float32)
    x[:6] = [0.0, -0.0, -1.5, 1.5, -3.0, 3.0]
    expr = [X, c(0.5), ("mul", (0, 1)), c(-1.5), ("add", (2, 3)), c(0.25), ("mul", (4, 5)),
            ("neg", (6,)), c(3), ("sub", (8, 7)), c(4), ("div", (9, 10))]
    ops = {"mul": np.multiply, "add": np.add, "sub": np.subtract, "div": np.divide}

    def evaluate(nodes, fused):
        values = []
        for node in nodes:
            if node[0] == "input":
                values.append(x)
            elif node[0] == "const":
                values.append(np.float32(node[1]))
            elif node[0] == "neg":
                values.append(-values[node[1][0]])
            elif node[0] == "scale":
                v, m, a = values[node[1][0]].astype(np.float64), node[2], node[3]
                values.append((v * m + a).astype(np.float32) if fused else
                              (v * m).astype(np.float32) + np.float32(a))
            else:
                values.append(ops[node[0]](values[node[1][0]], values[node[1][1]]))
        return values[-1].view(np.uint32)

    folded = simplify(expr)
    assert len(folded) == 3
    for fused in (False, True):
        np.testing.assert_array_equal(evaluate(folded, fused), evaluate(expr, False))


# PP-OCRv4's depthwise epilogue: conv bias, a constant scale and shift, x*relu6(x + 3)/6,
# then another constant scale and shift (PaddlePaddle's LearnableAffineBlock)
PADDLE_HARDSWISH = [("acc",), ("input", 0), ("add", (0, 1)), c(3.7258), ("mul", (2, 3)),
                    c(-0.364), ("add", (4, 5)), c(3), ("add", (6, 7)), c(6),
                    ("clamp", (8,), 0.0, 6.0), ("mul", (6, 10)), ("div", (11, 9)), c(3.3485),
                    ("mul", (12, 13)), c(-0.0717), ("add", (14, 15))]


def test_paddle_hardswish_with_scale_and_shift_is_two_passes():
    """y·relu6(y + 3)/6·s + t: a hard swish, then one scale by s and shift by t."""
    s = float(np.float32(3.3485))
    assert simplify(PADDLE_HARDSWISH)[7:] == [
        ("hswish", (6,), 1 / 6, 0.5), ("scale", (7,), s, float(np.float32(-0.0717)))]


def test_hard_sigmoid_gate_is_three_passes():
    gate = [("input", 0), ("input", 1), ("add", (0, 1)), c(0.2), ("mul", (2, 3)), c(0.5),
            ("add", (4, 5)), ("clamp", (6,), 0.0, 1.0), ("input", 2), ("mul", (8, 7))]
    assert simplify(gate) == [("input", 0), ("input", 1), ("add", (0, 1)),
                              ("scale", (2,), float(np.float32(0.2)), 0.5),
                              ("clamp", (3,), 0.0, 1.0), ("input", 2), ("mul", (5, 4))]


def test_clamp_product_keeps_stored_values():
    """x*relu6(x + 3)/6 is one hswish node; where x*relu6(x + 3) is also stored (kept), its
    node keeps that value: 6·hswish(x), and the division stays."""
    hardswish = [X, c(3), ("add", (0, 1)), ("clamp", (2,), 0.0, 6.0), ("mul", (0, 3)), c(6),
                 ("div", (4, 5))]
    assert simplify(hardswish) == [X, ("hswish", (0,), 1 / 6, 0.5)]
    assert simplified(hardswish, kept=[4]) == hardswish[:3] + [
        ("hswish", (0,), 1 / 6, 0.5), ("scale", (3,), 6.0, -0.0)] + hardswish[5:]


def test_depthwise_conv_hardswish_scale_shift_epilogue(tmp_path):
    """ONNX HardSwish (x * (relu6(x + 3) / 6)) and a constant scale and shift after a
    depthwise conv: 6 vector nodes after the bias become 2, and the dispatch still
    computes onnx's result."""
    w, b = random(8, 1, 3, 3), random(8)
    nodes = [N("Conv", ["x", "w", "b"], ["c"], group=8, pads=[1, 1, 1, 1]),
             N("HardSwish", ["c"], ["h"]), N("Mul", ["h", "s"], ["m"]), N("Add", ["m", "t"], ["y"])]
    model = onnx_model(nodes, {"x": (1, 8, 10, 12)},
                       {"w": w, "b": b, "s": np.array(1.7, np.float32),
                        "t": np.array(0.3, np.float32)})
    (conv,) = [a for a in analyses(tmp_path, model) if a.op is not None and "conv" in a.summary]
    kinds = [node[0] for node in conv.op.epilogue]
    assert kinds == ["acc", "input", "add", "hswish", "scale"]
    x = 4 * random(1, 8, 10, 12)
    expected = onnx_reference(model, {"x": x})
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    np.testing.assert_allclose(run_dispatch(conv, [padded, w]).reshape(expected.shape), expected,
                               rtol=1e-5, atol=1e-6)
