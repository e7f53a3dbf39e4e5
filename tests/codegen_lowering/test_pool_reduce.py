"""Pool2D (max / avg with and without count_include_pad / sum) and Reduce (sum / max /
mean, row- and column-major inputs), on the native NPU core against numpy."""
import re

import numpy as np
import pytest

from compiler_target.codegen.ops import Pool2D, Reduce
from executable_format.machine import MachineConfig

from . import reference
from .helpers import MACHINE, Bindings, compile_and_run

NCHW, NHWC = (0, 1, 2, 3), (0, 2, 3, 1)


@pytest.mark.parametrize("seed", range(10))
def test_random_pool(seed):
    rng = np.random.default_rng(4000 + seed)
    kind = ("max", "avg", "avg", "sum")[seed % 4]
    kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
    stride = tuple(int(v) for v in rng.integers(1, 3, 2))
    dilation = (1, 1) if seed % 3 else (2, 1)
    pads = tuple(int(rng.integers(0, kernel[i % 2])) for i in range(4))
    include = bool(seed & 2) and kind == "avg"
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 20)), int(rng.integers(6, 30)),
             int(rng.integers(6, 30)))
    x = rng.standard_normal(shape).astype(np.float32)
    layout = (NCHW, NHWC)[seed % 2]
    b = Bindings()
    xr = b.add(x, layout)
    pooled = reference.pool2d(x, "avg" if kind == "sum" else kind, kernel, stride, dilation,
                              pads, include or kind == "sum")
    if kind == "sum":
        pooled = pooled * kernel[0] * kernel[1]
    expr = [("acc",), ("relu", (0,))] if seed % 2 else [("acc",)]
    out = b.output(pooled.shape, order=layout)
    op = Pool2D(xr, out, kind, kernel, stride, dilation, pads, include, epilogue=expr)
    machine = MachineConfig(sram_bytes=16 * 1024) if seed % 3 == 0 else MACHINE
    compiled, stats = compile_and_run(op, b, machine=machine)
    np.testing.assert_allclose(b.read(out), reference.expression(expr, [], pooled),
                               rtol=1e-5, atol=1e-5)
    assert compiled.estimated_cycles == stats.total_cycles


def test_pool_over_a_batch_of_contiguous_images_tiles_them_as_one():
    """openWakeWord's embedding CNN (exported from TF) max-pools 96 "images" of 10
    channels, 1x4 pixels each: with contiguous images, channel blocks span them, not 96
    tiles of one image each paying the DMA latency."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((96, 10, 1, 4)).astype(np.float32)
    b = Bindings()
    xr = b.add(x)
    out = b.output((96, 10, 1, 2))
    op = Pool2D(xr, out, "max", (1, 2), (1, 2), (1, 1), (0, 0, 0, 0), False,
                epilogue=[("acc",)])
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_array_equal(b.read(out), reference.pool2d(x, "max", (1, 2), (1, 2)))
    channel_block = int(re.match(r"tiles (\d+)x", compiled.detail).group(1))
    assert channel_block > 10, compiled.detail
    assert stats.total_cycles < 1000      # 96 or more tiles of 2 DMAs of 100 cycles each


@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("transposed", [False, True])
def test_reduce(kind, transposed, rng):
    outer, inner = 70, 300
    x = rng.standard_normal((outer, inner)).astype(np.float32)
    b = Bindings()
    xr = b.add(x, (1, 0) if transposed else None)
    out = b.output((outer,))
    op = Reduce(xr, out, kind)
    compiled, stats = compile_and_run(op, b)
    expected = {"sum": x.sum(1), "max": x.max(1), "min": x.min(1), "mean": x.mean(1)}[kind]
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("kind", ["mean", "max"])
def test_channels_last_global_pooling_reads_whole_runs(kind, rng):
    """Keras' GlobalAveragePooling as tf2onnx writes it (a mean over H and W of NHWC,
    LYT-Net's 240x320x32): loaded [i][o], a tile of a few channels over all of I read
    one run of 8 bytes per pixel (0.12 of the true roofline); all 32 channels over
    chunks of I read each chunk as one contiguous run."""
    channels, pixels = 32, 76800
    x = rng.standard_normal((channels, pixels)).astype(np.float32)
    b = Bindings()
    xr = b.add(x, (1, 0))
    out = b.output((channels,))
    compiled, stats = compile_and_run(Reduce(xr, out, kind), b)
    expected = {"mean": x.mean(1), "max": x.max(1)}[kind]
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-4, atol=1e-5)
    assert compiled.detail.startswith(f"tiles {channels}x"), compiled.detail
    assert compiled.estimated_cycles == stats.total_cycles
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.85


@pytest.mark.parametrize("kind", ["sum", "max", "min", "mean"])
def test_reduce_split_rows_combines_partials(kind, rng):
    x = rng.standard_normal((5, 3000)).astype(np.float32)
    b = Bindings()
    xr = b.add(x)
    bias = rng.standard_normal(5).astype(np.float32)
    br = b.add(bias)
    out = b.output((5,))
    op = Reduce(xr, out, kind, epilogue=[("acc",), ("input", 0), ("add", (0, 1))],
                epilogue_inputs=[br])
    compiled, stats = compile_and_run(op, b, machine=MachineConfig(sram_bytes=8 * 1024))
    assert "chunks" in compiled.detail
    expected = {"sum": x.sum(1), "max": x.max(1), "min": x.min(1), "mean": x.mean(1)}[kind] + bias
    np.testing.assert_allclose(b.read(out), expected, rtol=1e-4, atol=1e-4)
