"""Runs stock llvm-cpu executables through HostLibrary and compares with numpy."""
import numpy as np
import pytest

from hal_driver.device.host_library import HostLibrary

from .buffers import aligned_bytes, binding_for
from .iree_tools import SYSTEM_ELF_FLAGS, SYSTEM_ELF_IREE_LLD_FLAGS, compile_mlir

ADD_EXP = """
func.func @add_exp(%a: tensor<1000xf32>, %b: tensor<1000xf32>) -> tensor<1000xf32> {
  %0 = arith.addf %a, %b : tensor<1000xf32>
  %1 = math.exp %0 : tensor<1000xf32>
  return %1 : tensor<1000xf32>
}
"""

MATMUL = """
func.func @matmul(%a: tensor<64x96xf32>, %b: tensor<96x48xf32>) -> tensor<64x48xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %r = linalg.matmul ins(%a, %b : tensor<64x96xf32>, tensor<96x48xf32>)
                     outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  return %r : tensor<64x48xf32>
}
"""

CONV = """
func.func @conv(%x: tensor<1x16x16x8xf32>, %w: tensor<3x3x8x16xf32>) -> tensor<1x14x14x16xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x16xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x14x14x16xf32>) -> tensor<1x14x14x16xf32>
  %r = linalg.conv_2d_nhwc_hwcf
         {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x16x16x8xf32>, tensor<3x3x8x16xf32>)
         outs(%f : tensor<1x14x14x16xf32>) -> tensor<1x14x14x16xf32>
  return %r : tensor<1x14x14x16xf32>
}
"""

# Two functions whose dispatches are linked into one library with two exports.
# (Results of one function share one allocation, and kernels address their part at
# an offset baked into the code; separate functions keep every binding at offset 0.)
MATMUL_AND_SUB = """
func.func @mm(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m = linalg.matmul ins(%a, %b : tensor<32x32xf32>, tensor<32x32xf32>)
                     outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  return %m : tensor<32x32xf32>
}
func.func @sub(%c: tensor<100xf32>, %d: tensor<100xf32>) -> tensor<100xf32> {
  %s = arith.subf %c, %d : tensor<100xf32>
  return %s : tensor<100xf32>
}
"""

# Dynamic shapes: the dims reach the kernel as push constants.
DYNAMIC_MUL = """
func.func @dyn(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %0 = arith.mulf %a, %b : tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""

RNG = np.random.default_rng(0)


def rand(*shape) -> np.ndarray:
    return RNG.standard_normal(shape, dtype=np.float32)


def run(executable, dispatch, inputs, result_shape):
    """Runs `dispatch` with bindings (inputs..., result) sized as the program sizes
    them (kernels do not bounds-check)."""
    result = aligned_bytes(int(np.prod(result_shape)) * 4)
    bindings = [binding_for(x) for x in inputs] + [result]
    assert [len(b) for b in bindings] == dispatch.binding_lengths
    ordinal = executable.lookup(dispatch.export_name)
    executable.dispatch(ordinal, dispatch.workgroup_count, dispatch.constants, bindings)
    return result.view(np.float32).reshape(result_shape)


def run_single_dispatch(compiled, inputs, result_shape):
    [dispatch] = compiled.dispatches
    with HostLibrary(*compiled.only_executable()) as executable:
        return run(executable, dispatch, inputs, result_shape)


@pytest.mark.parametrize("flags,format", [
    ([], "embedded-elf-x86_64"),
    (SYSTEM_ELF_FLAGS, "system-elf-x86_64"),
    (SYSTEM_ELF_IREE_LLD_FLAGS, "system-elf-x86_64"),
], ids=["embedded", "system-ld", "system-iree-lld"])
def test_elementwise_add_exp(tmp_path, flags, format):
    compiled = compile_mlir(ADD_EXP, tmp_path, flags)
    assert compiled.only_executable()[0] == format
    a, b = rand(1000), rand(1000)
    result = run_single_dispatch(compiled, [a, b], (1000,))
    np.testing.assert_allclose(result, np.exp(a + b), rtol=1e-5)


def test_matmul(tmp_path):
    compiled = compile_mlir(MATMUL, tmp_path)
    a, b = rand(64, 96), rand(96, 48)
    result = run_single_dispatch(compiled, [a, b], (64, 48))
    np.testing.assert_allclose(result, a @ b, rtol=1e-4, atol=1e-4)


def conv_nhwc_hwcf(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    kh, kw = w.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float32)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cf->nhwf", x[:, i:i + oh, j:j + ow, :], w[i, j])
    return out


def test_conv(tmp_path):
    compiled = compile_mlir(CONV, tmp_path)
    x, w = rand(1, 16, 16, 8), rand(3, 3, 8, 16)
    result = run_single_dispatch(compiled, [x, w], (1, 14, 14, 16))
    np.testing.assert_allclose(result, conv_nhwc_hwcf(x, w), rtol=1e-4, atol=1e-4)


def test_linked_library_exports_are_looked_up_by_name(tmp_path):
    compiled = compile_mlir(MATMUL_AND_SUB, tmp_path)
    matmul, sub = compiled.dispatches
    a, b, c, d = rand(32, 32), rand(32, 32), rand(100), rand(100)
    with HostLibrary(*compiled.only_executable()) as executable:
        assert sorted(executable.export_names) == sorted(
            [matmul.export_name, sub.export_name])
        for dispatch in (matmul, sub):
            info = executable.export_info(executable.lookup(dispatch.export_name))
            assert info.name == dispatch.export_name
            assert (info.binding_count, info.constant_count) == (3, 0)
        np.testing.assert_allclose(run(executable, matmul, [a, b], (32, 32)), a @ b,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(run(executable, sub, [c, d], (100,)), c - d)


def test_dynamic_shape_push_constants(tmp_path):
    compiled = compile_mlir(DYNAMIC_MUL, tmp_path)
    assert compiled.dispatches == []  # grid and constants depend on runtime dims
    format, data = compiled.only_executable()
    n = 10000
    a, b = rand(n), rand(n)
    result = aligned_bytes(n * 4)
    with HostLibrary(format, data) as executable:
        [name] = executable.export_names
        info = executable.export_info(executable.lookup(name))
        assert (info.binding_count, info.constant_count) == (3, 4)
        # What the host program computes: each dim as (low, high) 32-bit halves,
        # input 1's dim first, and ceil(n / 4096) workgroups along x.
        constants = [n, 0, n, 0]
        workgroup_count = (-(-n // 4096), 1, 1)
        executable.dispatch(0, workgroup_count, constants,
                            [binding_for(a), binding_for(b), result])
    np.testing.assert_allclose(result.view(np.float32), a * b, rtol=1e-6)
