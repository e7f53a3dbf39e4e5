"""Conv2D: randomized shapes, strides, dilations, asymmetric pads, groups, layouts and
epilogues, compiled and run on the native NPU core against numpy."""
import re

import numpy as np
import pytest

from compiler_target.codegen import tile_conv, tile_conv_depthwise
from compiler_target.codegen.analysis.expressions import pruned, simplified
from compiler_target.codegen.backend import NotLowerable, compile_op
from compiler_target.codegen.ops import Conv2D, TensorRef
from compiler_target.codegen.tile import window_columns
from executable_format.machine import MachineConfig

from . import reference
from .helpers import MACHINE, Bindings, compile_and_run

NCHW, NHWC = (0, 1, 2, 3), (0, 2, 3, 1)
FCHW, HWCF = (0, 1, 2, 3), (2, 3, 1, 0)
SMALL_SRAM = MachineConfig(sram_bytes=48 * 1024)


def random_conv(rng):
    groups = int(rng.choice([1, 1, 2, 3]))
    cg, fg = int(rng.integers(1, 9)), int(rng.integers(1, 12))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    stride = tuple(int(v) for v in rng.integers(1, 3, 2))
    dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
    pads = tuple(int(v) for v in rng.integers(0, 3, 4))
    n = int(rng.integers(1, 3))
    h, w = int(rng.integers(kh * 2, 24)), int(rng.integers(kw * 2, 24))
    return dict(n=n, c=cg * groups, h=h, w=w, f=fg * groups, kh=kh, kw=kw, stride=stride,
                dilation=dilation, pads=pads, groups=groups)


EPILOGUES = {
    "none": ([("acc",)], []),
    "bias": ([("acc",), ("input", 0), ("add", (0, 1))], ["channel"]),
    "bias_relu": ([("acc",), ("input", 0), ("add", (0, 1)), ("relu", (2,))], ["channel"]),
    "residual_clamp": ([("acc",), ("input", 0), ("add", (0, 1)), ("input", 1),
                        ("add", (2, 3)), ("clamp", (4,), 0.0, 6.0)], ["channel", "full"]),
    "scale_abs": ([("acc",), ("const", 0.5), ("mul", (0, 1)), ("abs", (2,)),
                   ("input", 0), ("sub", (3, 4))], ["full"]),
    # conv bias, then BatchNormalization (x - mean) * s1 * s2 + shift, as ONNX imports it,
    # a constant step and a reversed subtraction, then relu
    "batchnorm_relu": ([("acc",), ("input", 0), ("add", (0, 1)), ("input", 1), ("sub", (2, 3)),
                        ("input", 2), ("mul", (4, 5)), ("input", 3), ("mul", (6, 7)),
                        ("input", 4), ("add", (8, 9)), ("const", 2.0), ("div", (10, 11)),
                        ("const", 0.25), ("sub", (13, 12)), ("relu", (14,))],
                       ["channel"] * 5),
}


def build_conv(rng, case, epilogue, layout, wlayout, constant_bias=False):
    b = Bindings()
    x = rng.standard_normal((case["n"], case["c"], case["h"], case["w"])).astype(np.float32)
    wt = rng.standard_normal((case["f"], case["c"] // case["groups"], case["kh"], case["kw"]))
    wt = wt.astype(np.float32)
    acc = reference.conv2d(x, wt, case["stride"], case["dilation"], case["pads"], case["groups"])
    xr = b.add(x, layout, offset_elems=int(rng.integers(0, 5)))
    wr = b.add(wt, wlayout)
    expr, kinds = EPILOGUES[epilogue] if isinstance(epilogue, str) else epilogue
    refs, values = [], []
    for kind in kinds:
        if kind == "channel":
            bias = rng.standard_normal((1, case["f"], 1, 1)).astype(np.float32)
            if constant_bias:
                refs.append(TensorRef("f32", acc.shape, (0, 1, 0, 0), constant=bias.reshape(-1)))
            else:
                refs.append(b.add_broadcast(bias, acc.shape))
            values.append(np.broadcast_to(bias, acc.shape))
        else:
            full = rng.standard_normal(acc.shape).astype(np.float32)
            refs.append(b.add(full, layout))
            values.append(full)
    out = b.output(acc.shape, order=layout)
    op = Conv2D(xr, wr, out, stride=case["stride"], dilation=case["dilation"],
                pads=case["pads"], groups=case["groups"], epilogue=expr, epilogue_inputs=refs)
    return op, b, reference.expression(expr, values, acc)


@pytest.mark.parametrize("seed", range(12))
def test_random_conv(seed, rng):
    rng = np.random.default_rng(1000 + seed)
    case = random_conv(rng)
    epilogue = list(EPILOGUES)[seed % len(EPILOGUES)]
    layout = (NCHW, NHWC)[seed % 2]
    wlayout = (FCHW, HWCF)[(seed // 2) % 2]
    machine = SMALL_SRAM if seed % 3 == 0 else MACHINE
    op, b, expected = build_conv(rng, case, epilogue, layout, wlayout, constant_bias=seed % 4 == 1)
    compiled, stats = compile_and_run(op, b, machine=machine)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_depthwise_conv_with_bias(rng):
    case = dict(n=1, c=16, h=20, w=18, f=16, kh=3, kw=3, stride=(2, 2), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=16)
    op, b, expected = build_conv(rng, case, "bias_relu", NHWC, FCHW)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("constant_bias", [False, True])
def test_batchnorm_folds_into_im2col_weights(rng, constant_bias, monkeypatch):
    """Few output channels, the im2col strategy alone (the direct conv2d with ramped rows
    is as fast on this one): the per-channel affine epilogue is folded into the weights
    and the bias column once per dispatch; only the relu is left per tile."""
    strategies = tile_conv.ConvTiler._strategies
    monkeypatch.setattr(tile_conv.ConvTiler, "_strategies", lambda self: [
        s for s in strategies(self) if isinstance(s, tile_conv.Im2colTiler)])
    case = dict(n=1, c=3, h=64, w=64, f=16, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=1)
    op, b, expected = build_conv(rng, case, "batchnorm_relu", NCHW, FCHW, constant_bias)
    compiled, stats = compile_and_run(op, b)
    assert "im2col" in compiled.detail
    assert "vsub" not in compiled.asm.split("vcopy")[-1]
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles
    # 27 useful products (C x KH x KW) on 32 reduction lanes; 0.69 of the true roofline
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.68


@pytest.mark.parametrize("c,f,groups,hw,machine", [(16, 32, 1, 32, MACHINE),
                                                     (32, 64, 1, 32, SMALL_SRAM),
                                                     (24, 48, 3, 32, MACHINE),
                                                     (128, 32, 1, 8, SMALL_SRAM)])
def test_batchnorm_folds_into_resident_direct_weights(rng, c, f, groups, hw, machine):
    """Many output channels (the direct conv2d): where each block of weights is loaded
    once, the per-channel affine epilogue is folded into it as it is loaded and the
    folded bias is the MAC's BIAS operand; only the relu is left per tile. Where weights
    stream (more than two input-channel chunks in a small SRAM), the chain stays in the
    epilogue; both match numpy."""
    case = dict(n=1, c=c, h=hw, w=hw, f=f, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=groups)
    op, b, expected = build_conv(rng, case, "batchnorm_relu", NCHW, FCHW)
    compiled, stats = compile_and_run(op, b, machine=machine)
    assert "im2col" not in compiled.detail
    chunks = re.search(r"(\d+) input-channel chunks", compiled.detail)
    tiles = compiled.asm.split("conv2d.f32", 1)[1]
    folded = chunks is None or int(chunks.group(1)) <= 2
    assert ("vsub" not in tiles) == folded, compiled.detail
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_input_channel_split_accumulates(rng):
    case = dict(n=1, c=96, h=12, w=12, f=40, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=1)
    op, b, expected = build_conv(rng, case, "bias", NCHW, FCHW)
    compiled, stats = compile_and_run(op, b, machine=SMALL_SRAM)
    assert "input-channel chunks" in compiled.detail
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("groups,cg,fg,layout", [(2, 96, 128, NCHW), (3, 72, 64, NHWC)])
def test_group_too_big_for_sram_is_tiled_within_the_group(rng, groups, cg, fg, layout):
    """AlexNet's conv 384 -> 384 in 2 groups: one group's 3x3 weights (1.3 MB) twice do
    not fit the 2 MB SRAM. Here, in 48 KB: tiles take part of one group's output
    channels and accumulate chunks of its input channels, as dense convolutions."""
    case = dict(n=1, c=groups * cg, h=10, w=9, f=groups * fg, kh=3, kw=3, stride=(1, 1),
                dilation=(1, 1), pads=(1, 1, 1, 1), groups=groups)
    op, b, expected = build_conv(rng, case, "bias_relu", layout, FCHW)
    compiled, stats = compile_and_run(op, b, machine=SMALL_SRAM)
    assert "input-channel chunks" in compiled.detail and "groups=1," in compiled.asm
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


def test_compute_bound_conv_reaches_roofline(rng):
    case = dict(n=1, c=64, h=56, w=56, f=64, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=1)
    op, b, expected = build_conv(rng, case, "bias_relu", NCHW, FCHW)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.85
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("c,f", [(64, 256), (256, 64)])
def test_pointwise_conv_reaches_roofline(rng, c, f):
    case = dict(n=1, c=c, h=56, w=56, f=f, kh=1, kw=1, stride=(1, 1), dilation=(1, 1),
                pads=(0, 0, 0, 0), groups=1)
    op, b, expected = build_conv(rng, case, "bias", NHWC, HWCF)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-3)
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.85


def test_too_big_for_sram_is_not_lowerable(rng):
    case = dict(n=1, c=1, h=64, w=64, f=1, kh=40, kw=40, stride=(1, 1), dilation=(1, 1),
                pads=(0, 0, 0, 0), groups=1)
    op, b, _ = build_conv(rng, case, "none", NCHW, FCHW)
    with pytest.raises(NotLowerable, match="does not fit SRAM"):
        compile_op(op, name="big", bindings=b.infos(), machine=MachineConfig(sram_bytes=8192))


@pytest.mark.parametrize("seed", range(6))
def test_depthwise_conv_on_mac_array(seed):
    rng = np.random.default_rng(5000 + seed)
    c = int(rng.integers(2, 40))
    case = dict(n=int(rng.integers(1, 3)), c=c, h=int(rng.integers(6, 30)),
                w=int(rng.integers(6, 30)), f=c, kh=int(rng.integers(1, 6)),
                kw=int(rng.integers(1, 4)),
                stride=tuple(int(v) for v in rng.integers(1, 3, 2)),
                dilation=tuple(int(v) for v in rng.integers(1, 3, 2)),
                pads=tuple(int(v) for v in rng.integers(0, 3, 4)), groups=c)
    epilogue = ("none", "bias", "bias_relu", "residual_clamp", "batchnorm_relu", "bias")[seed]
    machine = SMALL_SRAM if seed >= 4 else MACHINE
    op, b, expected = build_conv(rng, case, epilogue, (NCHW, NHWC)[seed % 2], FCHW,
                                 constant_bias=seed == 5)
    compiled, stats = compile_and_run(op, b, machine=machine)
    assert "dwconv2d" in compiled.detail
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("constant_bias,simplify", [(False, False), (True, False), (False, True)])
def test_batchnorm_folds_into_depthwise_weights(rng, constant_bias, simplify):
    """f32 depthwise: the per-channel affine epilogue is folded into the weights and the
    MAC's bias once per dispatch; only the relu is left per tile. Simplified, its
    constant steps are a scale node, folded the same way."""
    case = dict(n=1, c=48, h=20, w=30, f=48, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=48)
    expr, kinds = EPILOGUES["batchnorm_relu"]
    epilogue = (pruned(simplified(expr), [None] * len(kinds))[0], kinds) if simplify \
        else "batchnorm_relu"
    op, b, expected = build_conv(rng, case, epilogue, NCHW, FCHW, constant_bias)
    assert not simplify or ("scale", (10,), -0.5, 0.25) in op.epilogue
    compiled, stats = compile_and_run(op, b)
    per_tile = compiled.asm.split("dwconv2d.f32 flags=bias,", 1)[1]
    assert "vsub" not in per_tile and "vmul" not in per_tile and "vscale" not in per_tile
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles


# The depthwise layers of PP-OCRv4 rec and det (tests/real_models, dispatch names conv_<ho>
# x<wo>x<c>x<kh>x<kw>: the input comes padded) and a MobileNet one padded by the conv, +
# bias + relu, with the fraction of the true roofline each reaches with dwconv2d (0.704,
# 0.643, 0.869, 0.702, 0.890; on the vector engine the first four reached 0.060, 0.107,
# 0.219, 0.349). det's stride-2 layer reached 0.776 while its windows stopped a column
# short of the 82-wide rows, each row then beginning its own bursts (tile.window_columns).
REAL_DEPTHWISE = {
    "conv_12x80x240x5x5": (dict(c=240, h=16, w=84, kh=5, kw=5, stride=(1, 1)), 0.70),
    "conv_24x160x16x3x3": (dict(c=16, h=26, w=162, kh=3, kw=3, stride=(1, 1)), 0.64),
    "conv_12x160x64x3x3 stride 2x1": (dict(c=64, h=26, w=162, kh=3, kw=3, stride=(2, 1)), 0.86),
    "mobilenet 3x3 stride 2 pad 1": (dict(c=32, h=56, w=56, kh=3, kw=3, stride=(2, 2),
                                          pads=(1, 1, 1, 1)), 0.70),
    "conv_40x40x48x3x3 stride 2": (dict(c=48, h=82, w=82, kh=3, kw=3, stride=(2, 2)), 0.88),
}


def test_windows_reach_the_row_end_only_where_rows_merge():
    """PP-OCRv4 det's 3x3 stride-2 conv over 82 columns reads 81: its windows load all 82
    so that rows merge; openWakeWord's STFT (one row of 1,760 samples, 512-wide kernel,
    stride 160) reads 1,632 and has no rows to merge: 128 more columns would only be more
    bytes. A window over part of the row is what it reads."""
    assert window_columns(40, 40, 2, 3, 1, 0, 82, 82) == 82
    assert window_columns(8, 8, 160, 512, 1, 0, 1760, 1) == 1632
    assert window_columns(20, 40, 2, 3, 1, 0, 82, 82) == 41


@pytest.mark.parametrize("name", REAL_DEPTHWISE)
def test_real_model_depthwise_reaches_roofline(rng, name):
    shape, fraction = REAL_DEPTHWISE[name]
    case = dict(n=1, f=shape["c"], dilation=(1, 1), pads=(0, 0, 0, 0), groups=shape["c"])
    case.update(shape)
    op, b, expected = build_conv(rng, case, "bias_relu", NCHW, FCHW)
    compiled, stats = compile_and_run(op, b)
    assert "dwconv2d" in compiled.detail
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= fraction


# PP-OCRv4's depthwise epilogue as analysis finds it: conv bias, a constant scale and
# shift, x*relu6(x + 3)/6, then another constant scale and shift
PADDLE_HARDSWISH = [("acc",), ("input", 0), ("add", (0, 1)), ("const", 3.7258561), ("mul", (2, 3)),
                    ("const", -0.3639896), ("add", (4, 5)), ("const", 3.0), ("add", (6, 7)),
                    ("const", 6.0), ("clamp", (8,), 0.0, 6.0), ("mul", (6, 10)),
                    ("div", (11, 9)), ("const", 3.3484821), ("mul", (12, 13)),
                    ("const", -0.0717418), ("add", (14, 15))]


def vector_passes_per_tile(asm: str) -> float:
    """Vector instructions after the first dwconv2d (the per-dispatch fold of the affine
    chain comes before it) per dwconv2d."""
    lines = asm.split("dwconv2d.f32", 1)[1].splitlines()
    vector = [line for line in lines if line.lstrip().startswith("v")]
    return len(vector) / (1 + sum(line.lstrip().startswith("dwconv2d") for line in lines))


def test_depthwise_hardswish_epilogue_in_two_vector_passes():
    """Simplified, the epilogue is 2 vector passes per tile instead of 6 (vhswish and a
    scale; the first scale and shift fold into the weights either way), and the dispatch
    is faster."""
    case = dict(n=1, c=48, h=16, w=84, f=48, kh=5, kw=5, stride=(1, 1), dilation=(1, 1),
                pads=(0, 0, 0, 0), groups=48)
    simplified_expr = pruned(simplified(PADDLE_HARDSWISH), [None])[0]
    passes, cycles = [], []
    for expr in (PADDLE_HARDSWISH, simplified_expr):
        op, b, expected = build_conv(np.random.default_rng(7), case, (expr, ["channel"]),
                                     NCHW, FCHW)
        compiled, stats = compile_and_run(op, b)
        np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
        assert compiled.estimated_cycles == stats.total_cycles
        passes.append(vector_passes_per_tile(compiled.asm))
        cycles.append(stats.total_cycles)
    assert passes == [6, 2] and cycles[1] < cycles[0]


def test_depthwise_epilogue_overlaps_the_next_tiles_mac():
    """PP-OCRv4 det's first depthwise layer (16 channels, 160x160 out, hard-swish): MAC,
    vector, DMA-in and DMA-out are about equally busy. An accumulator tile is held from
    its dwconv2d through the epilogue to its store, so with two of them the MAC waited
    for the store two tiles back: 0.61 of the true roofline. Three keep every engine
    going: 0.81."""
    case = dict(n=1, c=16, h=162, w=162, f=16, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(0, 0, 0, 0), groups=16)
    expr = pruned(simplified(PADDLE_HARDSWISH), [None])[0]
    op, b, expected = build_conv(np.random.default_rng(3), case, (expr, ["channel"]), NCHW, FCHW)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert "dwconv2d" in compiled.detail and compiled.estimated_cycles == stats.total_cycles
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.8


@pytest.mark.parametrize("epilogue", ["bias_relu", "residual_clamp"])
def test_1d_conv_over_a_batch_of_columns_runs_as_one_image(rng, epilogue):
    """IREE presents a TF network's 3x1 convolution over NHWC (openWakeWord's embedding
    CNN) as a 1-D conv along W over a batch of 32 image columns whose stride is 1. As
    one image with W as its rows and the batch as its columns, each load is contiguous
    rows of 32 elements, not every 32nd element (a DMA burst each); the sums are the
    same, and so are the results, with per-channel and full-size epilogue inputs."""
    case = dict(n=32, c=24, h=1, w=74, f=24, kh=1, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(0, 1, 0, 1), groups=1)
    columns_innermost = (1, 2, 3, 0)         # memory order [c][h][w][n]
    op, b, expected = build_conv(rng, case, epilogue, columns_innermost, FCHW)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles
    assert "memref<1x24x74x32xf32" in compiled.ir_stages[0][1]
    assert stats.total_cycles < 1.3 * compiled.roofline.cycles(MACHINE)


def test_per_channel_epilogue_input_is_loaded_once(rng):
    """relu(acc) · s[channel]: s is not foldable into the weights (the relu comes first),
    so the epilogue reads it. It is loaded whole, one DMA for the dispatch, not one per
    tile."""
    case = dict(n=1, c=16, h=40, w=40, f=64, kh=3, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(1, 1, 1, 1), groups=1)
    epilogue = ([("acc",), ("relu", (0,)), ("input", 0), ("mul", (1, 2))], ["channel"])
    op, b, expected = build_conv(rng, case, epilogue, NCHW, FCHW)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    loads = [line for line in compiled.asm.splitlines() if "dma.load" in line]
    assert sum("binding=2," in line for line in loads) == 1
    assert sum("binding=0," in line for line in loads) > 4           # the input, per tile
    assert compiled.estimated_cycles == stats.total_cycles


@pytest.mark.parametrize("epilogue", ["bias_relu", "residual_clamp"])
def test_batch_of_one_row_images_runs_as_the_rows_of_one_image(rng, epilogue):
    """A 1x3 convolution over a batch of 34 one-row frames in NCHW (openWakeWord's
    embedding CNN after its first layers): each frame alone has 16 output pixels, half
    of the MAC columns; as the rows of one image (lower.batch_as_rows, N and H
    swapped in every view) a tile takes several frames. The same sums, the same
    results, with per-channel and per-frame epilogue inputs; fewer cycles."""
    case = dict(n=34, c=48, h=1, w=18, f=48, kh=1, kw=3, stride=(1, 1), dilation=(1, 1),
                pads=(0, 0, 0, 0), groups=1)
    op, b, expected = build_conv(rng, case, epilogue, NCHW, FCHW)
    compiled, stats = compile_and_run(op, b)
    np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
    assert compiled.estimated_cycles == stats.total_cycles
    rows = int(re.search(r"tiles \d+x(\d+)x16 \(out channels x rows x cols",
                         compiled.detail).group(1))
    assert rows > 1          # frames per tile
    assert compiled.roofline.fraction(MACHINE, stats.total_cycles) >= 0.8


@pytest.mark.parametrize("c, h, w, k", [(240, 16, 84, 5), (480, 10, 84, 5)])
def test_depthwise_last_tile_is_cut_to_drain_the_pipeline_early(c, h, w, k, monkeypatch):
    """The last tile's rows are cut into halving pieces where the scheduled program is
    shorter (PP-OCRv4 rec's 5x5 layers): its epilogue and store after the last
    dwconv2d are short. The same results in fewer cycles than with the last tile whole."""
    case = dict(n=1, c=c, h=h, w=w, f=c, kh=k, kw=k, stride=(1, 1), dilation=(1, 1),
                pads=(0, 0, 0, 0), groups=c)
    cycles = []
    for depths in (tile_conv_depthwise.RAMP_DEPTHS, range(1)):
        monkeypatch.setattr(tile_conv_depthwise, "RAMP_DEPTHS", depths)
        op, b, expected = build_conv(np.random.default_rng(4), case, "bias_relu", NCHW, FCHW)
        compiled, stats = compile_and_run(op, b)
        np.testing.assert_allclose(b.read(op.out), expected, rtol=1e-4, atol=1e-4)
        assert compiled.estimated_cycles == stats.total_cycles
        assert ("last rows in" in compiled.detail) == (len(depths) > 1), compiled.detail
        cycles.append(stats.total_cycles)
    assert cycles[0] < cycles[1]
