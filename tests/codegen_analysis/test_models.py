"""A small CNN end to end through analysis: which NpuOp each of its dispatches becomes."""
import numpy as np
from onnx import helper

from compiler_target.codegen.legalize import legalize
from executable_format.machine import DEFAULT_MACHINE

from .models import analyses, onnx_model, random

N = helper.make_node


def test_small_cnn(tmp_path):
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
             N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             N("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=2),
             N("Sigmoid", ["c2"], ["s2"]), N("Mul", ["c2", "s2"], ["sw"]),
             N("GlobalAveragePool", ["sw"], ["g"]), N("Flatten", ["g"], ["fl"]),
             N("Gemm", ["fl", "wf", "bf"], ["lo"], transB=1), N("Softmax", ["lo"], ["y"])]
    weights = {"w1": random(8, 3, 3, 3), "b1": random(8), "w2": random(16, 4, 3, 3),
               "b2": random(16), "wf": random(10, 16), "bf": random(10)}
    dispatches = analyses(tmp_path, onnx_model(nodes, {"x": (1, 3, 32, 32)}, weights))
    kinds = [(type(d.op).__name__ if d.op else None, legalize(d, DEFAULT_MACHINE))
             for d in dispatches]
    assert kinds == [
        ("Elementwise", ""),       # the input copied into a zero-padded buffer
        ("Conv2D", ""),            # conv + bias + relu
        ("Pool2D", ""),            # max pool
        ("Conv2D", ""),            # grouped conv + bias (its sigmoid is the next dispatch)
        ("Elementwise", ""),       # sigmoid
        ("Rowwise", ""),           # mean over H*W of c2 * sigmoid(c2): a dot product per row
        ("Matmul", ""),            # Gemm with B^T + bias
        ("Rowwise", ""),           # softmax
    ]
    dot = dispatches[5].op
    assert dot.out.shape == (16, 256) and [ref.shape for ref in dot.inputs] == [(16, 256)] * 2
    assert [node[0] for node in dot.expr] == ["input", "input", "mul", "reduce", "const", "div"]
    assert np.isclose(dot.expr[4][1], 256.0)
