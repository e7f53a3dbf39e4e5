"""Dispatches with dynamic extents: compiled once into parametric npu-fb exports,
specialised by npu-sim for the extents of each call, checked against numpy; and the
errors when a call's extents cannot be served or no specialiser is installed."""
import io
import zipfile

import numpy as np
import pytest

from compiler_target import compile_str
from compiler_target.specialise import SpecialisationError, specialise_npu_fb
from executable_format.machine import DEFAULT_MACHINE
from executable_format.reader import read_executable
from hal_driver import runtime as rt
from hal_driver.device import executable_specialiser
from hal_driver.status import StatusError

MATMUL = """
func.func @main(%a: tensor<?x64xf32>, %b: tensor<64x32xf32>) -> tensor<?x32xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x64xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x64xf32>, tensor<64x32xf32>)
                     outs(%f : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %r : tensor<?x32xf32>
}
"""

# A 3x3 convolution with padding 1 over a dynamic height and width, then a mean over
# the image (whose element count IREE computes from the extents), in NCHW.
CONV_MEAN = """
func.func @main(%x: tensor<1x8x?x?xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x16xf32> {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %h = tensor.dim %x, %c2 : tensor<1x8x?x?xf32>
  %wd = tensor.dim %x, %c3 : tensor<1x8x?x?xf32>
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x?x?xf32> to tensor<1x8x?x?xf32>
  %e = tensor.empty(%h, %wd) : tensor<1x16x?x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x?x?xf32>) -> tensor<1x16x?x?xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%p, %w : tensor<1x8x?x?xf32>, tensor<16x8x3x3xf32>)
       outs(%f : tensor<1x16x?x?xf32>) -> tensor<1x16x?x?xf32>
  %se = tensor.empty() : tensor<1x16xf32>
  %sf = linalg.fill ins(%zero : f32) outs(%se : tensor<1x16xf32>) -> tensor<1x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(n, c, i, j) -> (n, c, i, j)>,
                                        affine_map<(n, c, i, j) -> (n, c)>],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
       ins(%y : tensor<1x16x?x?xf32>) outs(%sf : tensor<1x16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %acc, %in : f32
    linalg.yield %a : f32
  } -> tensor<1x16xf32>
  %hw = arith.muli %h, %wd : index
  %hwi = arith.index_cast %hw : index to i64
  %n = arith.sitofp %hwi : i64 to f32
  %me = tensor.empty() : tensor<1x16xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(n, c) -> (n, c)>, affine_map<(n, c) -> (n, c)>],
                       iterator_types = ["parallel", "parallel"]}
       ins(%s : tensor<1x16xf32>) outs(%me : tensor<1x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %d = arith.divf %in, %n : f32
    linalg.yield %d : f32
  } -> tensor<1x16xf32>
  return %m : tensor<1x16xf32>
}
"""


def conv_mean_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2:]
    y = np.zeros((16, h, wd))
    for i in range(3):
        for j in range(3):
            y += np.einsum("chw,fc->fhw", p[0, :, i:i + h, j:j + wd], w[:, :, i, j])
    return y.mean(axis=(1, 2))[None]


@pytest.fixture(scope="module")
def matmul_vmfb():
    return compile_str(MATMUL, target_backends=["npu"])


def test_one_build_serves_every_extent(matmul_vmfb):
    rng = np.random.default_rng(0)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    module = rt.load_vm_flatbuffer(matmul_vmfb, driver="npu-sim")
    try:
        for m in (1, 100, 257, 100):
            a = rng.standard_normal((m, 64)).astype(np.float32)
            got = np.asarray(module.main(a, b))
            stats = module.last_call_stats
            assert stats.npu_dispatches == stats.dispatches == 1
            assert stats.device.useful_macs == m * 64 * 32
            np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)
    finally:
        module.close()


def test_extents_that_feed_the_math_are_specialised():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    vmfb = compile_str(CONV_MEAN, target_backends=["npu"])
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        for h, wd in ((12, 20), (7, 33)):
            x = rng.standard_normal((1, 8, h, wd)).astype(np.float32)
            got = np.asarray(module.main(x, w))
            stats = module.last_call_stats
            assert stats.host_dispatches == 0
            np.testing.assert_allclose(got, conv_mean_reference(x, w), rtol=1e-4, atol=1e-5)
    finally:
        module.close()


# openWakeWord's melspectrogram front end: a 512-tap, stride-160 Conv1d over a dynamic
# number of samples, invalid at the first probe extent (64 samples: -2 frames).
LONG_WINDOW = """
func.func @main(%x: tensor<1x1x?xf32>, %w: tensor<8x1x512xf32>) -> tensor<1x8x?xf32> {
  %c2 = arith.constant 2 : index
  %c160 = arith.constant 160 : index
  %c512 = arith.constant 512 : index
  %n = tensor.dim %x, %c2 : tensor<1x1x?xf32>
  %s = arith.subi %n, %c512 : index
  %q = arith.divui %s, %c160 : index
  %c1 = arith.constant 1 : index
  %frames = arith.addi %q, %c1 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%frames) : tensor<1x8x?xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x?xf32>) -> tensor<1x8x?xf32>
  %y = linalg.conv_1d_ncw_fcw {dilations = dense<1> : tensor<1xi64>, strides = dense<160> : tensor<1xi64>}
       ins(%x, %w : tensor<1x1x?xf32>, tensor<8x1x512xf32>)
       outs(%f : tensor<1x8x?xf32>) -> tensor<1x8x?xf32>
  return %y : tensor<1x8x?xf32>
}
"""


def test_a_dispatch_invalid_at_the_first_probe_is_planned_at_a_longer_one():
    """The compiler plans a dynamic dispatch at probe extents (every dynamic input
    extent 64); where that gives a window longer than its input, the next longer probe:
    the 512-tap conv runs on the NPU at every length, instead of on the host."""
    rng = np.random.default_rng(2)
    w = (0.05 * rng.standard_normal((8, 1, 512))).astype(np.float32)
    vmfb = compile_str(LONG_WINDOW, target_backends=["npu"])
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        for samples in (1760, 4000):
            x = rng.standard_normal((1, 1, samples)).astype(np.float32)
            got = np.asarray(module.main(x, w))
            assert module.last_call_stats.host_dispatches == 0
            frames = (samples - 512) // 160 + 1
            windows = np.stack([x[0, 0, 160 * t:160 * t + 512] for t in range(frames)])
            np.testing.assert_allclose(got[0], w[:, 0] @ windows.T, rtol=1e-4, atol=1e-5)
    finally:
        module.close()


def parametric_export(vmfb: bytes):
    """The npu-fb export of the module's single dispatch."""
    with zipfile.ZipFile(io.BytesIO(vmfb)) as archive:
        [member] = [n for n in archive.namelist() if n.endswith("_npu_fb.fb")]
        return read_executable(archive.read(member)).exports[0]


def test_the_specialiser_refuses_extents_it_cannot_serve(matmul_vmfb):
    export = parametric_export(matmul_vmfb)
    assert export.parametric.dim_constants == (0, 1)      # the row count, low and high word
    lengths = [5 * 64 * 4, 64 * 32 * 4, 5 * 32 * 4]
    static = read_executable(specialise_npu_fb(export.parametric.source, {0: 5, 1: 0},
                                               DEFAULT_MACHINE, lengths))
    assert static.exports[0].roofline.useful_macs == 5 * 64 * 32
    # 2^32 + 5 rows overrun the bound ranges: refused before any code is generated
    with pytest.raises(SpecialisationError, match="binding 0 needs 1099511629056 bytes at "
                                                  "these extents but is bound to 1280"):
        specialise_npu_fb(export.parametric.source, {0: 5, 1: 1}, DEFAULT_MACHINE, lengths)


def test_a_refused_specialisation_fails_the_dispatch(matmul_vmfb, monkeypatch):
    def refuse(source, constants, machine, binding_lengths):
        raise SpecialisationError("not supported on npu: tile does not fit SRAM")

    monkeypatch.setattr(executable_specialiser, "specialiser", lambda: refuse)
    module = rt.load_vm_flatbuffer(matmul_vmfb, driver="npu-sim")
    try:
        with pytest.raises(StatusError, match=r"UNIMPLEMENTED; .*npu-fb export '\S+' at "
                                               r"extents pc0=3, pc1=0: not supported on npu: "
                                               r"tile does not fit SRAM"):
            module.main(np.zeros((3, 64), np.float32), np.zeros((64, 32), np.float32))
    finally:
        module.close()


def test_without_a_specialiser_a_parametric_export_is_refused(matmul_vmfb, monkeypatch):
    monkeypatch.setattr(executable_specialiser, "specialiser", lambda: None)
    module = rt.load_vm_flatbuffer(matmul_vmfb, driver="npu-sim")
    try:
        with pytest.raises(StatusError, match="FAILED_PRECONDITION.*parametric.*no specialiser"):
            module.main(np.zeros((3, 64), np.float32), np.zeros((64, 32), np.float32))
    finally:
        module.close()
