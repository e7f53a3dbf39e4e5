"""Input dims that an ONNX op's static weights fix, made static in the imported
torch-dialect module (before the `input` phase).

An exporter may declare every dim of a graph input symbolic (RetinaFace: `[batch_size,
channel, height, width]`). Its first Conv then reads the channel extent as a push
constant, and the probe inputs (every dynamic input dim at 64, 1024, ...: see
docs/npu-ir-to-hal.md, "Dynamic shapes") contradict the conv's 3-channel weights at
every probe: the dispatch stayed on the host. The op is defined only where that dim is
what its weights say, so its operand is cast (`torch.tensor_static_info_cast`) to that
static dim, for this op alone:

    Conv           input dim 1 = weight dim 1 x group
    ConvTranspose  input dim 1 = weight dim 0

A dim the weights leave unknown, or that is known already, stays. A MatMul or Gemm
whose reduced dim is symbolic needs none of this: its lowering reads that dim from
the weights.
"""
from iree.compiler import ir

from compiler_target.torch_operators import integer_attribute, onnx_operators, vtensor_shape


def rewrite_weight_fixed_dims(module) -> int:
    """Casts each such operand of `module`'s ops (in place); returns how many."""
    count = 0
    for name, fixed_dim in _FIXED_DIMS.items():
        for op, _ in onnx_operators(module, name):
            found = fixed_dim(op)
            if found is not None and _cast_operand(op, *found):
                count += 1
    return count


def _conv(op):
    weight, _ = vtensor_shape(op.operands[1])
    if len(weight) < 3 or weight[1] == "?":
        return None
    return 1, int(weight[1]) * integer_attribute(op, "group", 1)


def _conv_transpose(op):
    weight, _ = vtensor_shape(op.operands[1])
    return (1, int(weight[0])) if len(weight) >= 3 and weight[0] != "?" else None


_FIXED_DIMS = {"onnx.Conv": _conv, "onnx.ConvTranspose": _conv_transpose}


def _cast_operand(op, dim: int, size: int) -> bool:
    """Makes dim `dim` of the op's operand 0 `size` through a static info cast; False
    when that dim is not unknown."""
    value = op.operands[0]
    dims, element = vtensor_shape(value)
    if not 0 <= dim < len(dims) or dims[dim] != "?":
        return False
    dims[dim] = str(size)
    with ir.InsertionPoint(op), op.location:
        cast = ir.Operation.create(
            "torch.tensor_static_info_cast", operands=[value],
            results=[ir.Type.parse(f"!torch.vtensor<[{','.join(dims)}],{element}>")])
    op.operands[0] = cast.results[0]
    return True
