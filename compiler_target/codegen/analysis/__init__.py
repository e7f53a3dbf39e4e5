"""Analysis: what one dispatch computes, read from its linalg IR at the executable-sources
phase, described as an `NpuOp` (ops.py) or as the reason it cannot be.

    walk.py          the walk over the dispatch function; values, loads, stores, epilogues
    contraction.py   matmul-like ops (batch, M, N, K loop sets)
    convolution.py   1-D/2-D convolutions, grouped and depthwise
    pooling.py       max/sum/average pooling
    reduction.py     sum/max/mean reductions
    elementwise.py   elementwise expressions, copies and fills
    values.py, indexing.py, windows.py, expressions.py: what they share
"""
import math
import re
from dataclasses import dataclass

from iree.compiler import ir, passmanager

from ..ops import NpuOp
from .errors import NotSupported
from .walk import Binding, Subspan, Walk, block_ops, is_mac_generic

__all__ = ["Analysis", "Binding", "NotSupported", "Subspan", "analyse", "contraction_macs"]

GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops))"
PLUMBING_DIALECTS = ("arith", "hal", "iree_tensor_ext", "tensor", "func", "util")


@dataclass
class Analysis:
    name: str
    summary: str
    op: NpuOp | None                  # None: `problem` says why
    problem: str
    bindings: list[Binding]
    source_location: str
    macs: int = 0                     # multiply-accumulates of the dispatch's contractions
    constant_count: int = 0           # push constants of the export's layout


def analyse(executable_op) -> Analysis:
    """Describes the dispatch of a `hal.executable` (executable-sources phase)."""
    with executable_op.context:
        return _analyse(executable_op)


def _analyse(executable_op) -> Analysis:
    export, inner_module = _export_and_module(executable_op)
    name = ir.StringAttr(export.attributes["sym_name"]).value
    layout = str(export.attributes["layout"])
    bindings = _layout_bindings(layout)
    function = _only_function(inner_module)
    walk = Walk(bindings)
    macs, summary = 0, ""
    try:
        _check_static(function)
        generalized = inner_module.clone()
        passmanager.PassManager.parse(GENERALIZE).run(generalized.operation)
        macs = contraction_macs(_only_function(generalized))
        walk.run(_only_function(generalized), _op_names(function))
        (op, summary), problem = walk.finish(), ""
    except NotSupported as error:
        op, problem = None, str(error)
    summary = summary or walk.summary or _fallback_summary(function)
    location = walk.location or str(function.location)
    return Analysis(name, summary, op, problem, bindings, location, macs,
                    _constant_count(layout))


def contraction_macs(function) -> int:
    """Multiply-accumulates of the function's contractions and convolutions: the
    iteration space of every linalg.generic with a reduction loop whose body multiplies
    (the model's math, whether or not the NPU runs the dispatch)."""
    macs = 0
    for op in block_ops(function):
        if is_mac_generic(op):
            macs += math.prod(_loop_extents(op))
    return macs


def _loop_extents(op) -> list[int]:
    """Each loop's extent, from the operand dims it indexes directly."""
    maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
    extents = [1] * maps[0].n_dims
    for value, affine_map in zip(op.operands, maps):
        if isinstance(value.type, ir.ShapedType):
            for n, expr in zip(ir.ShapedType(value.type).shape, affine_map.results):
                if isinstance(expr, ir.AffineDimExpr):
                    extents[expr.position] = n
    return extents


def _export_and_module(executable_op):
    variant = executable_op.regions[0].blocks[0].operations[0]
    ops = list(variant.regions[0].blocks[0].operations)
    exports = [op for op in ops if op.operation.name == "hal.executable.export"]
    modules = [op for op in ops if op.operation.name == "builtin.module"]
    if len(exports) != 1 or len(modules) != 1:
        raise ValueError(f"executable has {len(exports)} exports and {len(modules)} modules; "
                         "expected one of each (--iree-hal-link-executables=false)")
    return exports[0].operation, modules[0].operation


def _only_function(module):
    functions = [op.operation for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func"]
    if len(functions) != 1:
        raise ValueError(f"dispatch module has {len(functions)} functions, expected 1")
    return functions[0]


def _op_names(function) -> list[str]:
    return [op.name for op in block_ops(function) if op.name != "arith.constant"]


def _layout_bindings(layout: str) -> list[Binding]:
    flags = re.findall(r"#hal\.pipeline\.binding<storage_buffer(?:, \"?([\w|]+)\"?)?>", layout)
    return [Binding(index, "ReadOnly" in flag.split("|")) for index, flag in enumerate(flags)]


def _constant_count(layout: str) -> int:
    match = re.search(r"constants = (\d+)", layout)
    return int(match.group(1)) if match else 0


def _check_static(function) -> None:
    for op in block_ops(function):
        for value in list(op.operands) + list(op.results):
            text = str(value.type)
            if "?" in text:
                raise NotSupported(f"dynamic shape ({text})")


def _fallback_summary(function) -> str:
    """The first compute op and its result type, for dispatches analysis could not describe."""
    for op in block_ops(function):
        if op.name.split(".")[0] not in PLUMBING_DIALECTS and op.name != "linalg.fill":
            shaped = [r.type for r in op.results if isinstance(r.type, ir.ShapedType)]
            return f"{op.name} {_type_text(shaped[0])}" if shaped else op.name
    return "dispatch without a compute op"


def _type_text(type_) -> str:
    shaped = ir.ShapedType(type_)
    dims = "x".join("?" if shaped.is_dynamic_dim(i) else str(n)
                    for i, n in enumerate(shaped.shape))
    return f"{dims} {shaped.element_type}"
