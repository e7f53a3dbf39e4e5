"""Contraction epilogues the NPU cannot compute, kept out of the contraction's dispatch: a
`util.optimization_barrier` where global optimization ends.

IREE's dispatch formation fuses a contraction with the elementwise ops after it, and
those with their elementwise producers. The NPU computes a contraction's epilogue over
the contraction's output tile, one value per accumulator, from inputs it reads as
strided views of memory. Two kinds of consumer made such a dispatch run on the host
with all its MACs:

- an op that reads the result broadcast along a new dim (additive attention's
  `tanh(x + unsqueeze(h @ W))`, over T positions per row of h @ W): the barrier goes on
  that broadcast read, so the broadcasting op is a dispatch of its own; the result makes
  one extra round trip through memory, M x N values against the consumer's M x T x N;
- an op that adds a gathered tensor (`tensor.extract` in a generic's body: a nearest
  Resize's upsampled feature map in a feature pyramid or U-Net skip connection, an
  attention bias looked up by ids) to a contraction's result that only elementwise ops
  read (which dispatch formation fuses): the barrier goes on the gathered operand, so the
  gather (with the elementwise ops fused with it: a quantized graph's quantize and
  dequantize of the upsampled map) is a dispatch of its own (a strided view on the NPU
  when its indices come from positions, the host when they depend on data) and the
  contraction reads its result as an ordinary epilogue input; the gathered tensor makes
  one round trip through memory.
  Where the result has other readers (another conv, a Resize), the adding op is an
  elementwise dispatch of its own, whose gather the NPU reads as a strided view:
  nothing to separate.

The same holds for a pooling window's input: the NPU pools a tensor it reads as a strided
view, and dispatch formation fuses the window with an elementwise producer (a QDQ
graph's dequantization before a MaxPool or AveragePool), which sent the pooling to the
host; the barrier goes on that operand, so the producer is a dispatch of its own and the
window reads its result (a round trip of the f32 map through memory).

A contraction is a named matmul, batch matmul or convolution, or a generic whose body
is a multiply-add of its two inputs (extensions allowed, and zero points subtracted: a
quantized conv with its zero points as scalar operands). Reductions are left alone: a
reduction read broadcast (softmax's max and sum) is one Rowwise dispatch on the NPU.
A value of dynamic shape is read through the barrier tied to its extents
(`flow.tensor.tie_shape`), which the flow phase resolves its dims from.
"""
from iree.compiler import ir

from compiler_target.program_functions import function_blocks

_QUANTIZE_OPS = ("iree_linalg_ext.quantize_affine", "iree_linalg_ext.dequantize_affine")
_POOL_BODY_OPS = {"arith.maximumf", "arith.maxnumf", "arith.addf", "linalg.yield"}
_BODY_OPS = {"arith.extf", "arith.extsi", "arith.extui", "arith.mulf", "arith.muli",
             "arith.addf", "arith.addi", "arith.subi", "linalg.yield"}


def separate_unfusable_epilogues(module) -> int:
    """Inserts the barriers in `module` (a module operation, in place); returns how many."""
    count = 0
    for block in function_blocks(module):
        epilogue_values, fused_values, gathered_values = set(), set(), set()
        for op in list(block.operations):
            op = op.operation
            if _is_pooling(op):
                count += sum(_barrier(op, index) for index, operand in enumerate(op.operands)
                             if _computed_elementwise(operand))
            elif _is_contraction(op):
                epilogue_values.add(op.results[0])
                if _read_elementwise(op.results[0]):
                    fused_values.add(op.results[0])
            elif _is_elementwise(op):
                count += _separate(op, epilogue_values, fused_values, gathered_values)
                if _gathers(op) or op.results[0] not in epilogue_values and \
                        any(operand in gathered_values for operand in op.operands):
                    gathered_values.update(op.results)      # fused with the gather
    return count


def _separate(op, epilogue_values: set, fused_values: set, gathered_values: set) -> int:
    """Barriers on the operands of elementwise `op` that are contraction epilogue values
    read broadcast, and, when it reads a `fused_values` one (a contraction's result, or
    an epilogue of it, that only elementwise ops read), on its gathered operands.
    Records `op`'s result as an epilogue value when it reads one without broadcasting,
    and as a fused one when it is."""
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    count, reads_epilogue, fused = 0, False, False
    for index, (operand, affine_map) in enumerate(zip(op.operands, maps)):
        if operand not in epilogue_values:
            continue
        if len(affine_map.results) < affine_map.n_dims:
            count += _barrier(op, index)
        else:
            reads_epilogue = True
            fused = fused or operand in fused_values
    if not reads_epilogue:
        return count
    for index, operand in enumerate(op.operands):
        if fused and operand in gathered_values:
            count += _barrier(op, index)
    if len(op.results) == 1:
        epilogue_values.add(op.results[0])
        if fused and _read_elementwise(op.results[0]):
            fused_values.add(op.results[0])
    return count


def _read_elementwise(value) -> bool:
    """Whether every op that reads `value` is elementwise (`_is_elementwise`) and reads
    it as an operand (dispatch formation then fuses them with its producer); a read
    inside a body (a gather's tensor.extract), by a contraction or by a function's
    return is not."""
    return all(_is_elementwise(use.owner) for use in value.uses)


def _barrier(op, index: int) -> int:
    """Reads operand `index` of `op` through a util.optimization_barrier; returns 1. A
    tensor of dynamic shape is read through a `flow.tensor.tie_shape` of the barrier's
    result to the operand's extents (`tensor.dim` before the barrier), which the flow
    phase resolves its dims from (a barrier alone hides them)."""
    operand = op.operands[index]
    with ir.InsertionPoint(op), op.location:
        barrier = ir.Operation.create("util.optimization_barrier",
                                      results=[operand.type], operands=[operand])
        result = barrier.results[0]
        shape = ir.RankedTensorType(operand.type).shape
        dims = [_dim(operand, d) for d, n in enumerate(shape) if n < 0]
        if dims:
            result = ir.Operation.create("flow.tensor.tie_shape", results=[operand.type],
                                         operands=[result, *dims]).results[0]
    op.operands[index] = result
    return 1


def _dim(value, d: int):
    """`tensor.dim` of `value` along `d`, inserted at the current insertion point."""
    index = ir.IndexType.get()
    position = ir.Operation.create("arith.constant", results=[index],
                                   attributes={"value": ir.IntegerAttr.get(index, d)})
    return ir.Operation.create("tensor.dim", results=[index],
                               operands=[value, position.results[0]]).results[0]


def _is_contraction(op) -> bool:
    name = op.name
    if name in ("linalg.matmul", "linalg.batch_matmul") or name.startswith("linalg.conv_") or \
            name.startswith("linalg.depthwise_conv_"):
        return True
    if name != "linalg.generic" or len(op.results) != 1:
        return False
    body = [inner.name for inner in op.regions[0].blocks[0].operations]
    return (any("reduction" in i for i in _iterators(op)) and set(body) <= _BODY_OPS
            and {"arith.mulf", "arith.muli"} & set(body) != set()
            and len(op.regions[0].blocks[0].arguments) >= 3)


def _is_pooling(op) -> bool:
    """A window reduction without products: a linalg.generic with reduction loops, an
    input indexed by a sum of loops and a body of maximums and sums (or a named pooling
    op)."""
    if op.name.startswith("linalg.pooling_"):
        return True
    if op.name != "linalg.generic" or len(op.results) != 1:
        return False
    body = {inner.name for inner in op.regions[0].blocks[0].operations}
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    windowed = any("+" in str(result) for m in maps for result in m.results)
    return any("reduction" in i for i in _iterators(op)) and windowed and \
        body <= _POOL_BODY_OPS


def _computed_elementwise(value) -> bool:
    """Whether `value` is the result of an elementwise op (`_is_elementwise`)."""
    owner = value.owner
    return isinstance(owner, (ir.Operation, ir.OpView)) and _is_elementwise(owner.operation)


def _is_elementwise(op) -> bool:
    """An all-parallel linalg.generic, or a quantize or dequantize (IREE's form of a QDQ
    pair's ops until dispatch formation)."""
    if op.name in _QUANTIZE_OPS:
        return True
    if op.name != "linalg.generic":
        return False
    return all("parallel" in i for i in _iterators(op))


def _iterators(op) -> list[str]:
    return [str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])]


def _gathers(op) -> bool:
    """Whether the generic's body reads a tensor at computed indices (tensor.extract)."""
    return op.name == "linalg.generic" and any(
        inner.name == "tensor.extract" for inner in op.regions[0].blocks[0].operations)
