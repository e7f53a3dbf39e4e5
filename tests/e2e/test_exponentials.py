"""The NPU's exponential unit against stock IREE llvm-cpu on the same MLIR, bit for bit:
npu-sim's vexp and vsigmoid compute exp with the range reduction, polynomial and fused
multiply-adds of IREE's CPU code generator. A quantized network rounds its activations
to integers after each layer, so one ulp of an exp (a SiLU) can move a value to the
next integer; the int8 networks match stock exactly because of this.

On a CPU without FMA, stock llvm-cpu does not contract sigmoid's final multiply and
add into one rounding, so there it differs from npu-sim by at most one ulp."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler_target import compile_file
from hal_driver import runtime as rt
from tests.real_models.quantized import import_mlir

SHAPE = (32, 512)


def _has_fma() -> bool:
    with open("/proc/cpuinfo") as cpuinfo:
        return " fma " in cpuinfo.read()


def _model(tmp_path, nodes):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
                     .SerializeToString())
    return path


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.max(np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32))))


@pytest.mark.parametrize("nodes", [
    [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
    [helper.make_node("Exp", ["x"], ["y"])],
], ids=["silu", "exp"])
def test_exponentials_have_stock_bits(tmp_path, nodes):
    import iree.runtime
    x = np.random.default_rng(7).uniform(-30, 30, SHAPE).astype(np.float32)
    x.ravel()[:6] = [0.0, -0.0, 88.7, -80.0, 100.0, -100.0]   # (-87.9: a subnormal
    # sigmoid, which stock's code flushes to zero and the vector engine does not)
    mlir = import_mlir(_model(tmp_path, nodes), tmp_path)
    npu = rt.load_vm_flatbuffer(compile_file(str(mlir), target_backends=["npu"]),
                                driver="npu-sim")
    try:
        got = np.asarray(npu.g(x))
        assert npu.last_call_stats.npu_dispatches == npu.last_call_stats.dispatches
    finally:
        npu.close()
    cpu = iree.runtime.load_vm_flatbuffer(
        compile_file(str(mlir), target_backends=["llvm-cpu"],
                     extra_args=["--iree-llvmcpu-target-cpu=host"]), driver="local-task")
    expected = cpu.g(x).to_host()
    assert _ulps(got, expected) <= (0 if _has_fma() else 1)
