"""ONNX InstanceNormalization over dims of unknown size, rewritten in the imported
torch-dialect module (before the `input` phase) into the ONNX spec's moments.

iree-base-compiler 3.13.0 lowers `onnx.InstanceNormalization` whose normalized dims
(those after N and C) are dynamic without dividing the variance's sum by their count:
over a 20x24 image of unknown size the outputs were off by up to 6.5 against
onnxruntime, over one dynamic dim NaN, for llvm-cpu and npu alike. Each such op becomes
`onnx.*` ops the importer's lowering computes right, the same function:

    mean = ReduceMean(x), d = x - mean, var = ReduceMean(d * d)
    y = d / Sqrt(var + epsilon) * Reshape(scale, [-1, 1, ...]) + Reshape(bias, ...)

ReduceMean over the dims after N and C, kept (its axes an operand from opset 18, an
attribute before). The module is what iree-import-onnx writes, or what compiling an
`.onnx` imports in process (onnx_import.py), so both ways of bringing a network in are
covered. An op whose dims are all known stays.
"""
from iree.compiler import ir

from compiler_target.torch_operators import onnx_operators, vtensor_shape


def rewrite_dynamic_instance_norms(module) -> int:
    """Rewrites each dynamic `onnx.InstanceNormalization` of `module` (in place);
    returns how many."""
    count = 0
    for op, opset in onnx_operators(module, "onnx.InstanceNormalization"):
        if _dynamic(op):
            _rewrite(op, opset)
            count += 1
    return count


def _dynamic(op) -> bool:
    dims, _ = vtensor_shape(op.operands[0])
    return len(dims) > 2 and "?" in dims[2:]


def _rewrite(op, opset: int) -> None:
    x, scale, bias = op.operands
    dims, element = vtensor_shape(x)
    rank = len(dims)
    full = op.results[0].type
    moments = ir.Type.parse(f"!torch.vtensor<[{','.join(dims[:2] + ['1'] * (rank - 2))}],"
                            f"{element}>")
    epsilon = ir.FloatAttr(op.attributes["torch.onnx.epsilon"]).value \
        if "torch.onnx.epsilon" in op.attributes else 1e-5
    si64 = ir.IntegerType.get_signed(64)
    axes = list(range(2, rank))
    with ir.InsertionPoint(op), op.location:
        def onnx(name, operands, result, **attributes):
            attrs = {"name": ir.StringAttr.get(f"onnx.{name}")}
            attrs.update({f"torch.onnx.{k}": v for k, v in attributes.items()})
            return ir.Operation.create("torch.operator", results=[result], operands=operands,
                                       attributes=attrs).results[0]

        def constant(text: str, result: str):
            return onnx("Constant", [], ir.Type.parse(result), value=ir.Attribute.parse(text))

        def mean(value):
            if opset >= 18:
                axes_value = constant(f"dense<{axes}> : tensor<{len(axes)}xsi64>",
                                      f"!torch.vtensor<[{len(axes)}],si64>")
                return onnx("ReduceMean", [value, axes_value], moments,
                            keepdims=ir.IntegerAttr.get(si64, 1))
            return onnx("ReduceMean", [value], moments, keepdims=ir.IntegerAttr.get(si64, 1),
                        axes=ir.ArrayAttr.get([ir.IntegerAttr.get(si64, a) for a in axes]))

        def per_channel(value):
            shape = constant(f"dense<{[-1] + [1] * (rank - 2)}> : tensor<{rank - 1}xsi64>",
                             f"!torch.vtensor<[{rank - 1}],si64>")
            channels = vtensor_shape(value)[0][:1] or ["?"]
            result = ir.Type.parse(f"!torch.vtensor<[{','.join(channels + ['1'] * (rank - 2))}],"
                                   f"{element}>")
            return onnx("Reshape", [value, shape], result)

        centered = onnx("Sub", [x, mean(x)], full)
        variance = mean(onnx("Mul", [centered, centered], full))
        scalar = ir.Type.parse(element)
        eps = onnx("Constant", [], ir.Type.parse(f"!torch.vtensor<[],{element}>"),
                   value=ir.DenseElementsAttr.get_splat(ir.RankedTensorType.get([], scalar),
                                                        ir.FloatAttr.get(scalar, epsilon)))
        deviation = onnx("Sqrt", [onnx("Add", [variance, eps], moments)], moments)
        normalized = onnx("Div", [centered, deviation], full)
        result = onnx("Add", [onnx("Mul", [normalized, per_channel(scale)], full),
                              per_channel(bias)], full)
    op.results[0].replace_all_uses_with(result)
    op.erase()
