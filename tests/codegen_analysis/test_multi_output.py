"""Dispatches storing several results of one elementwise computation (an LSTM cell's
new c and h) become one Elementwise op with extra outputs; several results of anything
else stay on the host."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from compiler_target.codegen.analysis import analyse
from compiler_target.codegen.ops import Elementwise, Matmul, TensorRef

from .models import (analyses, executables, onnx_model, random, run_dispatch_outputs,
                     value_info)

N = helper.make_node


def stored(binding: np.ndarray, ref: TensorRef, shape) -> np.ndarray:
    """The dense tensor of `shape` a result was stored as, at `ref`'s offset."""
    start = ref.offset // 4
    return binding[start:start + int(np.prod(shape))].reshape(shape)


def test_lstm_cell_state_and_output(tmp_path):
    """c = f·c0 + i·g and h = tanh(c)·o, both graph outputs: one generic with 2 results."""
    nodes = [N("Mul", ["f", "c0"], ["fc"]), N("Mul", ["i", "g"], ["ig"]),
             N("Add", ["fc", "ig"], ["c"]), N("Tanh", ["c"], ["tc"]), N("Mul", ["tc", "o"], ["h"])]
    names = ["f", "c0", "i", "g", "o"]
    model = onnx_model(nodes, {name: (4, 32) for name in names})
    model.graph.output.insert(0, value_info("c", (4, 32)))
    (cell,) = analyses(tmp_path, model)
    op = cell.op
    assert isinstance(op, Elementwise), cell.problem
    assert cell.summary == "linalg.generic (elementwise mul mul add tanh mul, 2 results) 128 f32"
    (c_ref, c_node), = op.extra_outputs
    assert op.expr[c_node][0] == "add" and op.expr[-1][0] == "mul"
    assert c_ref.binding != op.out.binding and c_ref.shape == op.out.shape == (128,)
    feeds = {name: random(4, 32) for name in names}
    expected_c, expected_h = ReferenceEvaluator(model).run(None, feeds)
    c, h = run_dispatch_outputs(cell, [feeds[name] for name in names], fill=np.nan)
    np.testing.assert_allclose(stored(c, c_ref, (4, 32)), expected_c, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(stored(h, op.out, (4, 32)), expected_h, rtol=1e-5, atol=1e-7)


TWO_RESULTS = """
func.func @main(%a: tensor<4x64xf32>, %b: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<64x4xf32>) {
  %e = tensor.empty() : tensor<4x64xf32>
  %et = tensor.empty() : tensor<64x4xf32>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                          affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j, i)>],
                         iterator_types = ["parallel", "parallel"]}
       ins(%a, %b : tensor<4x64xf32>, tensor<64xf32>) outs(%e, %et : tensor<4x64xf32>, tensor<64x4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32, %p: f32):
    %s = arith.addf %x, %y : f32
    %t = math.tanh %s : f32
    %u = arith.mulf %t, %x : f32
    linalg.yield %u, %s : f32, f32
  } -> (tensor<4x64xf32>, tensor<64x4xf32>)
  return %r#0, %r#1 : tensor<4x64xf32>, tensor<64x4xf32>
}
"""


def test_generic_yielding_two_values(tmp_path):
    """The second result is an intermediate of the first, stored transposed."""
    (ew,) = analyses(tmp_path, mlir=TWO_RESULTS)
    op = ew.op
    assert isinstance(op, Elementwise), ew.problem
    assert op.expr == [("input", 0), ("input", 1), ("add", (0, 1)), ("tanh", (2,)),
                       ("mul", (3, 0))]
    (s_ref, s_node), = op.extra_outputs
    assert s_node == 2 and s_ref.shape == (4, 64) and s_ref.strides == (1, 4)
    a, b = random(4, 64), random(64)
    u, s = run_dispatch_outputs(ew, [a, b], fill=np.nan)
    np.testing.assert_allclose(stored(u, op.out, (4, 64)), np.tanh(a + b) * a, rtol=1e-6)
    np.testing.assert_allclose(stored(s, s_ref, (64, 4)), (a + b).T, rtol=1e-6)


SUM_AND_MAX = """
func.func @main(%a: tensor<8x32xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e38 : f32
  %e = tensor.empty() : tensor<8xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m0 = linalg.fill ins(%low : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                          affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]}
       ins(%a : tensor<8x32xf32>) outs(%s0, %m0 : tensor<8xf32>, tensor<8xf32>) {
  ^bb0(%x: f32, %s: f32, %m: f32):
    %t = arith.addf %x, %s : f32
    %u = arith.maximumf %x, %m : f32
    linalg.yield %t, %u : f32, f32
  } -> (tensor<8xf32>, tensor<8xf32>)
  return %r#0, %r#1 : tensor<8xf32>, tensor<8xf32>
}
"""


def test_several_results_with_reduction_loops_stay_on_host(tmp_path):
    (reduction,) = analyses(tmp_path, mlir=SUM_AND_MAX)
    assert reduction.op is None
    assert reduction.problem == ("linalg.generic with 2 results and reduction loops (the NPU "
                                 "op writes one; several only of an elementwise computation)")


LAYOUT = ("#hal.pipeline.layout<bindings = [#hal.pipeline.binding<storage_buffer, ReadOnly>, "
          "#hal.pipeline.binding<storage_buffer>, #hal.pipeline.binding<storage_buffer>]>")
TYPE = "!iree_tensor_ext.dispatch.tensor<{}:tensor<16x16xf32>>"
# A dispatch as IREE would hand it over (the stock compiler never forms these two): a
# copy, or a matmul, stored next to an elementwise value computed from it.
UNRELATED = f"""
hal.executable private @d {{
  hal.executable.variant public @v target(<"llvm-cpu", "embedded-elf-x86_64">) {{
    hal.executable.export public @d ordinal(0) layout({LAYOUT})
    builtin.module {{
      func.func @d() {{
        %c0 = arith.constant 0 : index
        %zero = arith.constant 0.0 : f32
        %in = hal.interface.binding.subspan layout({LAYOUT}) binding(0) offset(%c0) : {TYPE.format("readonly")}
        %o1 = hal.interface.binding.subspan layout({LAYOUT}) binding(1) offset(%c0) : {TYPE.format("writeonly")}
        %o2 = hal.interface.binding.subspan layout({LAYOUT}) binding(2) offset(%c0) : {TYPE.format("writeonly")}
        %x = iree_tensor_ext.dispatch.tensor.load %in, offsets = [0, 0], sizes = [16, 16], strides = [1, 1] : {TYPE.format("readonly")} -> tensor<16x16xf32>
        %e = tensor.empty() : tensor<16x16xf32>
        FIRST
        %second = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                                   iterator_types = ["parallel", "parallel"]}}
            ins(%first : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {{
        ^bb0(%v: f32, %o: f32):
          %t = math.tanh %v : f32
          linalg.yield %t : f32
        }} -> tensor<16x16xf32>
        iree_tensor_ext.dispatch.tensor.store %first, %o1, offsets = [0, 0], sizes = [16, 16], strides = [1, 1] : tensor<16x16xf32> -> {TYPE.format("writeonly")}
        iree_tensor_ext.dispatch.tensor.store %second, %o2, offsets = [0, 0], sizes = [16, 16], strides = [1, 1] : tensor<16x16xf32> -> {TYPE.format("writeonly")}
        return
      }}
    }}
  }}
}}
"""
COPY = """%first = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>,
                                                   affine_map<(i, j) -> (i, j)>],
                                  iterator_types = ["parallel", "parallel"]}
            ins(%x : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
        ^bb0(%v: f32, %o: f32):
          linalg.yield %v : f32
        } -> tensor<16x16xf32>"""
MATMUL = """%filled = linalg.fill ins(%zero : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
        %first = linalg.matmul ins(%x, %x : tensor<16x16xf32>, tensor<16x16xf32>)
                               outs(%filled : tensor<16x16xf32>) -> tensor<16x16xf32>"""


def test_a_copy_stored_beside_a_computed_value_stays_on_host():
    module, (executable,) = executables(UNRELATED.replace("FIRST", COPY))
    dispatch = analyse(executable)
    assert dispatch.op is None
    assert dispatch.problem == ("dispatch writes 2 results, not all computed by one "
                                "expression over an elementwise, contraction, convolution or "
                                "reduction op")


def test_a_matmul_and_its_epilogue_both_stored_are_one_op():
    """The raw sum (the epilogue's acc node) is an extra output of the Matmul whose
    `out` is tanh of it."""
    module, (executable,) = executables(UNRELATED.replace("FIRST", MATMUL))
    dispatch = analyse(executable)
    op = dispatch.op
    assert isinstance(op, Matmul), dispatch.problem
    assert op.epilogue == [("acc",), ("tanh", (0,))]
    assert [(ref.binding, node) for ref, node in op.extra_outputs] == [(1, 0)]
    assert op.out.binding == 2
    x = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32)
    raw, tanh = run_dispatch_outputs(dispatch, [x])
    expected = x.astype(np.float64) @ x
    np.testing.assert_allclose(raw.reshape(16, 16), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tanh.reshape(16, 16), np.tanh(expected), rtol=1e-5, atol=1e-6)
