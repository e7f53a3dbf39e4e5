"""What stays on the host and why, legalization limits, and plan_dispatch's plumbing
(analysis -> legalize -> compile_op) with a stand-in backend and with the real one."""
import numpy as np
import pytest
from iree.compiler import ir
from onnx import TensorProto, helper

from compiler_target import codegen
from compiler_target.codegen import backend, plan_dispatch
from compiler_target.codegen.analysis import Analysis
from compiler_target.codegen.legalize import legalize
from compiler_target.codegen.ops import Conv2D, Elementwise, TensorRef
from compiler_target.executable_sources import symbol_name
from compiler_target.probe_constants import PROBE_EXTENTS, probe_constants
from executable_format.cost import Roofline
from executable_format.machine import DEFAULT_MACHINE

from tests.e2e.test_dynamic_shapes import MATMUL

from .models import CONTEXT, analyses, executable_sources, executables, onnx_model

N = helper.make_node


def test_gather_stays_on_host(tmp_path):
    model = onnx_model([N("Gather", ["x", "i"], ["y"], axis=0)], {"x": (10, 16)},
                       {"i": np.array([1, 3, 5], np.int64)})
    (gather,) = analyses(tmp_path, model)
    assert gather.op is None
    assert "tensor.extract in the body (gather: data-dependent indexing)" in gather.problem


def test_64_bit_integer_arithmetic_stays_on_host(tmp_path):
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [4, 16]) for n in "xz"]
    graph = helper.make_graph([N("Add", ["x", "z"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [4, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (add,) = analyses(tmp_path, model)
    assert add.problem == "linalg.generic: an i64 input other than converted to f32"


DYNAMIC = """
func.func @main(%a: tensor<?x16xf32>, %b: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%n) : tensor<?x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%a, %b : tensor<?x16xf32>, tensor<?x16xf32>) outs(%e : tensor<?x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<?x16xf32>
  return %r : tensor<?x16xf32>
}
"""


def test_dynamic_shape_stays_on_host(tmp_path):
    (add,) = analyses(tmp_path, mlir=DYNAMIC)
    assert add.op is None and add.problem.startswith("dynamic shape (")
    assert legalize(add, DEFAULT_MACHINE).startswith("not supported on npu: dynamic shape")


def ref(shape, dtype="f32", binding=0):
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    return TensorRef(dtype, tuple(shape), strides, binding)


def synthetic(op) -> Analysis:
    return Analysis("d", "synthetic", op, "", [], "")


@pytest.mark.parametrize("op, reason", [
    (Elementwise(ref((4, 4), "i64", 1), [ref((4, 4), "i64")], [("input", 0)]),
     "unsupported element type i64 (out)"),
    (Elementwise(ref((4, 4), "bf16", 1), [ref((4, 4))], [("input", 0)]),
     "mixed element types bf16/f32"),
    (Elementwise(ref((4, 4), "f16", 1), [ref((4, 4), "i8")], [("input", 0)]),
     "mixed element types f16/i8"),
    (Elementwise(ref((4, 4), "f32", 1), [ref((4, 4))], [("input", 0), ("neg", (0,))],
                 [(ref((4, 4), "i64", 2), 0)]), "unsupported element type i64 (out.1)"),
    (Conv2D(ref((1, 6, 8, 8)), ref((4, 2, 3, 3), binding=1), ref((1, 4, 6, 6), binding=2),
            groups=4), "groups=4 with C=6 F=4"),
])
def test_legalize_limits(op, reason):
    assert legalize(synthetic(op), DEFAULT_MACHINE) == f"not supported on npu: {reason}"


def conv_executable(tmp_path):
    model = onnx_model([N("Conv", ["x", "w"], ["y"])], {"x": (1, 3, 10, 10)},
                       {"w": np.linspace(-1, 1, 8 * 3 * 3 * 3, dtype=np.float32).reshape(8, 3, 3, 3)})
    return executables(executable_sources(tmp_path, model))


class FakeCompiled:
    npu_fb, asm, ir_stages, estimated_cycles, detail = b"NPU", "asm", [("lowered", "x")], 77, "tiles"
    roofline = Roofline(useful_macs=0, mac_dtype="f32", read_bytes=640, write_bytes=64)
    engine_busy_cycles = {"dma_in": 20, "dma_out": 11, "mac": 40, "vector": 9}


def test_plan_dispatch_plumbing(tmp_path, monkeypatch):
    calls = []

    def fake_compile_op(op, *, name, bindings, machine, source_location, constant_count,
                        tiling):
        assert tiling is None
        calls.append((op, name, bindings, machine, source_location))
        return FakeCompiled()

    monkeypatch.setattr(backend, "compile_op", fake_compile_op)
    module, (executable,) = conv_executable(tmp_path)
    plan = plan_dispatch(3, executable, DEFAULT_MACHINE)
    (op, name, bindings, machine, location), = calls
    assert isinstance(op, Conv2D) and name == plan.name and machine is DEFAULT_MACHINE
    assert [(b.read_only, b.size_bytes) for b in bindings] == [(True, 1200), (True, 864),
                                                              (False, 2048)]
    assert (plan.index, plan.target, plan.reason, plan.npu_fb, plan.estimated_cycles) == \
        (3, "npu", "", b"NPU", 77)
    assert (plan.roofline_cycles, plan.mac_dtype) == (10, "f32")     # 640 bytes at 64/cycle
    assert plan.engine_busy_cycles == FakeCompiled.engine_busy_cycles
    assert plan.report_line().endswith("stride=1 f32 -> npu (tiles)")
    assert plan.task == {
        "bindings": [
            {"binding": 0, "role": "input", "size_bytes": 1200,
             "tensors": [{"offset": 0, "shape": [3, 10, 10], "dtype": "f32"}]},
            {"binding": 1, "role": "input", "size_bytes": 864,
             "tensors": [{"offset": 0, "shape": [8, 3, 3, 3], "dtype": "f32"}]},
            {"binding": 2, "role": "output", "size_bytes": 2048,
             "tensors": [{"offset": 0, "shape": [8, 8, 8], "dtype": "f32"}]}],
        "inputs": [0, 1], "outputs": [2]}
    assert location


def test_plan_dispatch_not_lowerable(tmp_path, monkeypatch):
    def refuse(op, **kwargs):
        raise backend.NotLowerable("does not fit SRAM even tiled")

    monkeypatch.setattr(backend, "compile_op", refuse)
    module, (executable,) = conv_executable(tmp_path)
    plan = plan_dispatch(0, executable, DEFAULT_MACHINE)
    assert (plan.target, plan.reason) == ("host", "not lowerable on npu: does not fit SRAM even tiled")


def test_plan_dispatch_with_the_real_backend(tmp_path):
    module, (executable,) = conv_executable(tmp_path)
    plan = codegen.plan_dispatch(0, executable, DEFAULT_MACHINE)
    assert plan.target == "npu", plan.reason
    assert plan.npu_fb and plan.estimated_cycles > 0


MODULO = """
func.func @main(%a: tensor<64x32x{t}>) -> tensor<64x32x{t}> {{
  %b = arith.constant dense<[[1.0, 2.0]]> : tensor<1x2x{t}>
  %c = tensor.empty() : tensor<64x32x{t}>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (0, j mod 2)>,
                                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}}
       ins(%a, %b : tensor<64x32x{t}>, tensor<1x2x{t}>) outs(%c : tensor<64x32x{t}>) {{
  ^bb0(%x: {t}, %y: {t}, %o: {t}):
    %s = arith.addf %x, %y : {t}
    linalg.yield %s : {t}
  }} -> tensor<64x32x{t}>
  return %r : tensor<64x32x{t}>
}}
"""


@pytest.mark.parametrize("dtype, problem", [
    ("f32", "indexing expression d1 mod 2 is not linear"),
    ("bf16", "inlined bf16 constant cannot be read"),
])
def test_unreadable_indexing_or_constant_stays_on_host(tmp_path, dtype, problem):
    (dispatch,) = analyses(tmp_path, mlir=MODULO.format(t=dtype))
    assert dispatch.problem == problem


def test_a_dynamic_dispatch_is_lowered_with_the_others(tmp_path):
    """Deferred, a dispatch with dynamic extents leaves its lowering at the probe pending
    like a static one (complete_plans runs them together, on several processes: a
    dynamic T5 encoder's 51 int8 matmuls were lowered one after another), then becomes
    the parametric plan."""
    module, (executable,) = executables(executable_sources(tmp_path, mlir=MATMUL))
    probes = {extent: probe_constants(module.operation, extent)[symbol_name(executable)]
              for extent in PROBE_EXTENTS}
    with CONTEXT, ir.Location.unknown():
        plan = codegen.plan_dispatch(0, executable, DEFAULT_MACHINE, probes, deferred=True)
    assert plan.pending is not None and plan.target == "host" and not plan.reason
    codegen.complete_plans([plan], jobs=1)
    assert plan.target == "npu", plan.reason
    assert plan.detail.startswith("dynamic extents, specialised at dispatch time")
    assert plan.macs == 0 and plan.npu_fb
