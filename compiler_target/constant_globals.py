"""Small integer globals that IREE's const-eval computed, read as constants where global
optimization ends.

IREE evaluates a graph's constant subgraphs at compile time and keeps each result in an
immutable `util.global` with that value, read back by `util.global.load`. A shape
computed from constants stays such a load: tf2onnx writes a Keras Dense layer on a 4-D
tensor (Tensordot) as Shape, Cast, Gather, ReduceProd and Concat into a Reshape's target,
so the Reshape's result stays dynamic (`tensor<?x?xf32>`) and its MatMul gets extents
the host program reads from a device buffer at run time. The npu target cannot evaluate
those when it plans the dispatch, so the MatMul ran on the host (LYT-Net: 17 host
dispatches, 8 M MACs). Loads of such globals (non-negative integers, at most
MAX_ELEMENTS of them: shapes and extents, never weights) become `arith.constant`s; the
stock passes after global optimization then fold the Reshape to a static one and its
MatMul is an ordinary static dispatch. A negative value is an ONNX Reshape's -1 that the
importer passes on to tensor.reshape unresolved; folded, it made the stream passes
compute negative resource sizes, so such globals stay loads, as for stock. Where the
stock passes fail after this rewrite all the same, the driver compiles the module again
without it (compiler_target/pipeline.py, `_run_to_split_phase`).
"""
import math

from iree.compiler import ir

from compiler_target.program_functions import (function_blocks, immutable_global_values,
                                                loaded_global, nested_ops)

MAX_ELEMENTS = 16


def inline_constant_globals(module) -> int:
    """Replaces each load of a small integer constant global in `module` (in place) by an
    arith.constant of its value; returns how many."""
    values = {name: value for name, value in immutable_global_values(module).items()
              if _small_integer(value)}
    count = 0
    for block in function_blocks(module):
        for op in [op for top in block.operations
                   for op in (top.operation, *nested_ops(top.operation))]:
            value = values.get(loaded_global(op)) if op.name == "util.global.load" else None
            if value is not None and value.type == op.results[0].type:
                _replace_by_constant(op, value)
                count += 1
    return count


def _small_integer(value: ir.Attribute) -> bool:
    """A non-negative integer, or at most MAX_ELEMENTS of them."""
    if isinstance(value, ir.IntegerAttr):
        return value.value >= 0
    if isinstance(value, ir.DenseIntElementsAttr):
        shaped = ir.ShapedType(value.type)
        return shaped.has_static_shape and math.prod(shaped.shape) <= MAX_ELEMENTS and \
            all(v >= 0 for v in value)
    return False


def _replace_by_constant(op, value: ir.Attribute) -> None:
    with ir.InsertionPoint(op), op.location:
        constant = ir.Operation.create("arith.constant", results=[op.results[0].type],
                                       attributes={"value": value})
    op.results[0].replace_all_uses_with(constant.results[0])
    op.erase()
