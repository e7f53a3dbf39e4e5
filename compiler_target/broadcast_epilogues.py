"""Contraction results that a consumer broadcasts, kept out of the contraction's dispatch:
a `util.optimization_barrier` on the broadcast read, where global optimization ends.

IREE's dispatch formation fuses a contraction with the elementwise ops after it, and with
an op that reads the result broadcast along a new dim (additive attention's
`tanh(x + unsqueeze(h @ W))`, over T positions per row of h @ W). The NPU computes a
contraction's epilogue over the contraction's output tile, one value per accumulator,
so such a dispatch ran on the host with all its MACs. With the barrier, the contraction
(and its same-shape epilogue) is one dispatch and the broadcasting op another; the
result makes one extra round trip through memory, M x N values against the consumer's
M x T x N.

A contraction is a named matmul, batch matmul or convolution, or a generic whose body
is a multiply-add of its two inputs (extensions allowed). Reductions are left alone: a
reduction read broadcast (softmax's max and sum) is one Rowwise dispatch on the NPU.
Values of dynamic shape are left too.
"""
from iree.compiler import ir

from compiler_target.program_functions import function_blocks

_BODY_OPS = {"arith.extf", "arith.extsi", "arith.extui", "arith.mulf", "arith.muli",
             "arith.addf", "arith.addi", "linalg.yield"}


def separate_broadcast_epilogues(module) -> int:
    """Inserts the barriers in `module` (a module operation, in place); returns how many."""
    count = 0
    for block in function_blocks(module):
        epilogue_values = set()
        for op in list(block.operations):
            op = op.operation
            if _is_contraction(op):
                epilogue_values.add(op.results[0])
            elif _is_elementwise(op):
                count += _separate(op, epilogue_values)
    return count


def _separate(op, epilogue_values: set) -> int:
    """Barriers on the operands of elementwise `op` that are contraction epilogue values
    read broadcast; records `op`'s result as one when it reads them all without
    broadcasting."""
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    count, reads_epilogue = 0, False
    for index, (operand, affine_map) in enumerate(zip(op.operands, maps)):
        if operand not in epilogue_values:
            continue
        if len(affine_map.results) < affine_map.n_dims and _static(operand):
            with ir.InsertionPoint(op), op.location:
                barrier = ir.Operation.create("util.optimization_barrier",
                                              results=[operand.type], operands=[operand])
            op.operands[index] = barrier.results[0]
            count += 1
        else:
            reads_epilogue = True
    if reads_epilogue and len(op.results) == 1:
        epilogue_values.add(op.results[0])
    return count


def _static(value) -> bool:
    """A barrier on a tensor of dynamic shape leaves a `tensor.dim` of it that the flow
    phase cannot resolve: those stay as they were."""
    return ir.RankedTensorType(value.type).has_static_shape


def _is_contraction(op) -> bool:
    name = op.name
    if name in ("linalg.matmul", "linalg.batch_matmul") or name.startswith("linalg.conv_") or \
            name.startswith("linalg.depthwise_conv_"):
        return True
    if name != "linalg.generic" or len(op.results) != 1:
        return False
    iterators = [str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])]
    body = [inner.name for inner in op.regions[0].blocks[0].operations]
    return (any("reduction" in i for i in iterators) and set(body) <= _BODY_OPS
            and {"arith.mulf", "arith.muli"} & set(body) != set()
            and len(op.regions[0].blocks[0].arguments) == 3)


def _is_elementwise(op) -> bool:
    if op.name != "linalg.generic":
        return False
    iterators = [str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])]
    return all("parallel" in i for i in iterators)
