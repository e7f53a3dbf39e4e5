"""tensor.pad inside a dispatch (the stock pipeline usually makes padding a separate copy
dispatch; hand-written executables check the in-dispatch form): zero pads of the spatial
dims become Conv2D pads, -inf pads become max Pool2D pads; anything else stays on host."""
import numpy as np

from compiler_target.codegen.analysis import analyse
from compiler_target.codegen.legalize import legalize
from compiler_target.codegen.ops import Conv2D, Pool2D

from .models import executables, random, run_dispatch

LAYOUT = ('#hal.pipeline.layout<bindings = [{}]>')
BINDING = '#hal.pipeline.binding<storage_buffer, {}>'


def executable(body: str, bindings: list[str]) -> str:
    """A module with one hal.executable whose dispatch function has `body`; `bindings`
    are the binding flags ("ReadOnly" or "None")."""
    layout = LAYOUT.format(", ".join(BINDING.format(flag) for flag in bindings))
    subspans = "\n".join(
        f"    %b{i} = hal.interface.binding.subspan layout({layout}) binding({i}) alignment(64) "
        f"offset(%c0) flags({flag}) : !iree_tensor_ext.dispatch.tensor<{{t{i}}}>"
        for i, flag in enumerate(bindings))
    return f"""
hal.executable private @ex {{
  hal.executable.variant public @v target(<"llvm-cpu", "embedded-elf-x86_64", {{}}>) {{
    hal.executable.export public @dispatch ordinal(0) layout({layout}) count(%d: !hal.device) -> (index, index, index) {{
      %c1 = arith.constant 1 : index
      hal.return %c1, %c1, %c1 : index, index, index
    }}
    builtin.module {{
      func.func @dispatch() {{
        %c0 = arith.constant 0 : index
{subspans}
{body}
        return
      }}
    }}
  }}
}}"""


CONV_BODY = """
    %zero = arith.constant 0.0 : f32
    %padv = arith.constant {pad_value} : f32
    %x = iree_tensor_ext.dispatch.tensor.load %b0, offsets = [0, 0, 0], sizes = [3, 10, 10], strides = [1, 1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<3x10x10xf32>> -> tensor<3x10x10xf32>
    %w = iree_tensor_ext.dispatch.tensor.load %b1, offsets = [0, 0, 0, 0], sizes = [8, 3, 3, 3], strides = [1, 1, 1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<8x3x3x3xf32>> -> tensor<8x3x3x3xf32>
    %p = tensor.pad %x low[{low}] high[{high}] {{
    ^bb0(%i: index, %j: index, %k: index):
      tensor.yield %padv : f32
    }} : tensor<3x10x10xf32> to tensor<{padded}xf32>
    %e = tensor.empty() : tensor<8x{out}xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x{out}xf32>) -> tensor<8x{out}xf32>
    %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d1 + d4, d2 + d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, d4, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}} ins(%p, %w : tensor<{padded}xf32>, tensor<8x3x3x3xf32>) outs(%f : tensor<8x{out}xf32>) {{
    ^bb0(%in: f32, %in_0: f32, %acc: f32):
      %m = arith.mulf %in, %in_0 : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }} -> tensor<8x{out}xf32>
    iree_tensor_ext.dispatch.tensor.store %r, %b2, offsets = [0, 0, 0], sizes = [8, {out_sizes}], strides = [1, 1, 1] : tensor<8x{out}xf32> -> !iree_tensor_ext.dispatch.tensor<writeonly:tensor<8x{out}xf32>>
"""


def padded_conv(low, high, pad_value="0.0"):
    padded = [3 + low[0] + high[0], 10 + low[1] + high[1], 10 + low[2] + high[2]]
    out = [padded[1] - 2, padded[2] - 2]
    body = CONV_BODY.format(pad_value=pad_value, low=", ".join(map(str, low)),
                            high=", ".join(map(str, high)), padded="x".join(map(str, padded)),
                            out="x".join(map(str, out)), out_sizes=", ".join(map(str, out)))
    text = executable(body, ["ReadOnly", "ReadOnly", "None"])
    text = text.replace("{t0}", "readonly:tensor<3x10x10xf32>").replace(
        "{t1}", "readonly:tensor<8x3x3x3xf32>").replace("{t2}", f"writeonly:tensor<8x{'x'.join(map(str, out))}xf32>")
    module, (op,) = executables(text)
    return analyse(op)


def test_zero_pad_becomes_conv_pads():
    conv = padded_conv([0, 1, 2], [0, 0, 1])
    op = conv.op
    assert isinstance(op, Conv2D), conv.problem
    assert op.pads == (1, 2, 0, 1) and op.input.shape == (1, 3, 10, 10)
    assert "pads=1,2,0,1" in conv.summary
    x, w = random(3, 10, 10), random(8, 3, 3, 3)
    got = run_dispatch(conv, [x, w]).reshape(8, 9, 11)
    xp = np.pad(x, ((0, 0), (1, 0), (2, 1)))
    expected = sum(np.einsum("chw,fc->fhw", xp[:, ky:ky + 9, kx:kx + 11], w[:, :, ky, kx])
                   for ky in range(3) for kx in range(3))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_nonzero_pad_value_stays_on_host():
    conv = padded_conv([0, 1, 1], [0, 1, 1], pad_value="1.0")
    assert conv.op is None
    assert legalize(conv, None) == "not supported on npu: linalg.generic: padding with 1.0 (needs 0.0)"


POOL_BODY = """
    %ninf = arith.constant 0xFF800000 : f32
    %x = iree_tensor_ext.dispatch.tensor.load %b0, offsets = [0, 0, 0], sizes = [4, 9, 9], strides = [1, 1, 1] : !iree_tensor_ext.dispatch.tensor<readonly:tensor<4x9x9xf32>> -> tensor<4x9x9xf32>
    %p = tensor.pad %x low[{c}, 1, 1] high[0, 1, 1] {{
    ^bb0(%i: index, %j: index, %k: index):
      tensor.yield %ninf : f32
    }} : tensor<4x9x9xf32> to tensor<{padded}x11x11xf32>
    %e = tensor.empty() : tensor<4x5x5xf32>
    %win = tensor.empty() : tensor<3x3xf32>
    %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<4x5x5xf32>) -> tensor<4x5x5xf32>
    %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0 + {c}, d1 * 2 + d3, d2 * 2 + d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}} ins(%p, %win : tensor<{padded}x11x11xf32>, tensor<3x3xf32>) outs(%f : tensor<4x5x5xf32>) {{
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %m = arith.maximumf %out, %in : f32
      linalg.yield %m : f32
    }} -> tensor<4x5x5xf32>
    iree_tensor_ext.dispatch.tensor.store %r, %b1, offsets = [0, 0, 0], sizes = [4, 5, 5], strides = [1, 1, 1] : tensor<4x5x5xf32> -> !iree_tensor_ext.dispatch.tensor<writeonly:tensor<4x5x5xf32>>
"""


def padded_max_pool(channel_pad: int):
    body = POOL_BODY.format(c=channel_pad, padded=4 + channel_pad)
    text = executable(body, ["ReadOnly", "None"]).replace(
        "{t0}", "readonly:tensor<4x9x9xf32>").replace("{t1}", "writeonly:tensor<4x5x5xf32>")
    module, (op,) = executables(text)
    return analyse(op)


def test_channel_pad_stays_on_host():
    assert "padding of a non-spatial dim" in padded_max_pool(channel_pad=1).problem


def test_minus_infinity_pad_becomes_max_pool_pads():
    pool = padded_max_pool(channel_pad=0)
    assert isinstance(pool.op, Pool2D), pool.problem
    assert (pool.op.kind, pool.op.pads, pool.op.input.shape) == ("max", (1, 1, 1, 1), (1, 4, 9, 9))
    x = random(4, 9, 9)
    got = run_dispatch(pool, [x]).reshape(4, 5, 5)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    expected = np.max([xp[:, ky:ky + 9:2, kx:kx + 9:2] for ky in range(3) for kx in range(3)], axis=0)
    np.testing.assert_array_equal(got, expected)
