"""A float per-channel step between two quantizations, as onnxruntime's `quantize_static`
leaves a QDQ MatMul followed by its bias Add (ppocrv4_rec's classifier), a conv
followed by a per-channel scale and shift (CSRNet's FiLM step) or a squeeze-excitation
block's channel weights times its dequantized input (PP-LCNet's): after the
requantization's table (or a byte input's), `x * g[c] + b[c]` and the next quantize ran
as a copy of the channel vector into the tile, a vfma (or vmul, vdiv, vround) and a
lookup, three or four vector passes per tile. The lookup's records now carry the
per-channel operands, copied per tile like a requantization's: one pass. Checked bit
for bit against stock IREE llvm-cpu."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests.e2e.onnx_on_npu import call_on_npu, onnx_file, quantized_static, stock_llvm_cpu


def bias_after_matmul(rng):
    shape = (1, 40, 120)
    inits = [numpy_helper.from_array(rng.normal(0, 0.2, (120, 1000)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.5, 1000).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    return shape, (1, 40, 1000), nodes, inits, "i8xi8xi32"


def scale_and_shift_after_conv(rng):
    shape = (1, 32, 24, 40)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (64, 32, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.uniform(0.5, 2, (1, 64, 1, 1)).astype(np.float32), "g"),
             numpy_helper.from_array(rng.normal(0, 0.5, (1, 64, 1, 1)).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Mul", ["c", "g"], ["s"]),
             helper.make_node("Add", ["s", "b"], ["y"])]
    return shape, (1, 64, 24, 40), nodes, inits, "i8xi8xi32"


def squeeze_excitation(rng):
    shape = (1, 48, 20, 30)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (48, 48, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.3, (48, 48, 1, 1)).astype(np.float32), "v")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Conv", ["p", "v"], ["q"]),
             helper.make_node("Sigmoid", ["q"], ["s"]),
             helper.make_node("Mul", ["c", "s"], ["y"])]
    # The product's dispatch: the conv's bytes and the channel weights, quantized.
    return shape, shape, nodes, inits, "elementwise_48x600_f32xf32xi8"


@pytest.mark.parametrize("graph", [bias_after_matmul, scale_and_shift_after_conv,
                                   squeeze_excitation],
                         ids=["matmul_bias", "conv_scale_shift", "squeeze_excitation"])
def test_a_per_channel_step_between_quantizations_is_part_of_a_lookup(tmp_path, graph):
    shape, out_shape, nodes, inits, dispatch = graph(np.random.default_rng(0))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    f32 = onnx_file(g, tmp_path / "f32.onnx")
    samples = np.random.default_rng(1).uniform(-1, 1, (4, *shape)).astype(np.float32)
    path = quantized_static(f32, tmp_path / "int8.onnx", [{"x": x} for x in samples])
    x = np.random.default_rng(2).uniform(-1, 1, shape).astype(np.float32)
    call = call_on_npu(path, "g", x, dump_asm=tmp_path / "asm")
    assert call.stats.host_dispatches == 0, call.report
    np.testing.assert_array_equal(call.output, np.asarray(stock_llvm_cpu(path)(x).to_host()))
    [program] = [p for p in (tmp_path / "asm").iterdir() if dispatch in p.name]
    # Over a tile's elements (more than a table's 256), the vector engine runs lookups
    # only: no conversion widens bytes to i32 (a lookup reads them as they are) or narrows
    # a result to bytes (the last lookup's table holds them).
    passes = {line.split()[0].split(".")[0] for line in program.read_text().splitlines()
              if line.lstrip().startswith("v") and elements(line) > 256}
    assert passes == {"vrequant"}, passes


def elements(instruction: str) -> int:
    fields = dict(f.split("=") for f in instruction.split("#")[0].replace(",", " ").split()
                  if "=" in f)
    return int(fields["n0"]) * int(fields["n1"]) * int(fields["n2"])
