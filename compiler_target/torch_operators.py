"""The imported ONNX graph as the torch dialect holds it: `torch.operator "onnx.<Op>"`
ops and their `!torch.vtensor` types, for the rewrites of the imported module
(instance_norms.py, weight_fixed_dims.py). The module is what iree-import-onnx writes,
or what compiling an `.onnx` imports in process (onnx_import.py)."""
import re

from iree.compiler import ir

from compiler_target.program_functions import function_blocks, nested_ops

_VTENSOR = re.compile(r"!torch\.vtensor<\[([^\]]*)\],(\w+)>")


def onnx_operators(module, name: str):
    """(op, opset of its function) for each `torch.operator` named `name` (such as
    "onnx.Conv") in `module`'s functions, each block's ops listed before the first is
    yielded (a caller may replace them)."""
    for block in function_blocks(module):
        opset = _opset(block.owner)
        for op in [o for inner in block.operations
                   for o in [inner.operation, *nested_ops(inner.operation)]]:
            if op.name == "torch.operator" and _name(op) == name:
                yield op, opset


def vtensor_shape(value) -> tuple[list[str], str]:
    """(dims as text, '?' for unknown; element type) of a `!torch.vtensor` value; ([], "")
    for another type."""
    match = _VTENSOR.fullmatch(str(value.type))
    if match is None:
        return [], ""
    dims = match.group(1).split(",") if match.group(1) else []
    return dims, match.group(2)


def integer_attribute(op, name: str, default: int) -> int:
    """The op's `torch.onnx.<name>` integer attribute, or `default`."""
    key = f"torch.onnx.{name}"
    return ir.IntegerAttr(op.attributes[key]).value if key in op.attributes else default


def _name(op) -> str:
    return ir.StringAttr(op.attributes["name"]).value if "name" in op.attributes else ""


def _opset(function) -> int:
    attributes = function.attributes
    key = "torch.onnx_meta.opset_version"
    return ir.IntegerAttr(attributes[key]).value if key in attributes else 1
