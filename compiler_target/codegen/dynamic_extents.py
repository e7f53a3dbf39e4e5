"""Dispatches with dynamic extents: which push constants define them, and the dispatch
specialised for given values.

IREE passes a dispatch's dynamic tensor extents as push constants (an index is two i32
constants, low and high word, combined with extui/shli/ori), marks each extent with
`iree_tensor_ext.dispatch.workload.ordinal` and sizes the binding subspans with them.
The npu target compiles such a dispatch once into a parametric npu-fb export (the
dispatch's source and its extent constants); npu-sim specialises it for the values of
each call (`compiler_target.specialise`, docs/npu-ir-to-hal.md "Dynamic shapes").

Specialising substitutes constants for the extents, canonicalizes (which folds them
into the tensor types of loads, stores and linalg ops) and gives the binding subspans
their static types, so the dispatch reads exactly as a static one to the analysis.
"""
import math
import re

from iree.compiler import ir, passmanager

from ..program_functions import nested_ops
from .analysis.errors import NotSupported
from .analysis.indexing import ELEMENT_BYTES
from .analysis.walk import dispatch_tensor_type

# The refusal of extents that contradict the dispatch (its maps reach before its input).
INVALID_AT_EXTENTS = "the dispatch is invalid at these extents"
CANONICALIZE = ("builtin.module(hal.executable(hal.executable.variant("
                "builtin.module(func.func(canonicalize,cse)))))")
# A dispatch tensor type with its dynamic extents: `...tensor<?x64xf32>>{%c100}`.
_DYNAMIC_TENSOR = re.compile(r"(!iree_tensor_ext\.dispatch\.tensor<\w+:tensor<)([^>]*)>>\{([^}]*)\}")
_INDEX_CONSTANT = re.compile(r"%c(\d+)(?:_\d+)?")
# Ops with offset operands, and the operand segment that holds them.
_OFFSET_OPERANDS = {"hal.interface.binding.subspan": 0,
                    "iree_tensor_ext.dispatch.tensor.load": 2,
                    "iree_tensor_ext.dispatch.tensor.store": 3}
# Integer ops IREE combines and casts push constants with before using them. A high
# word (shifted left) counts as computation: it is specialised (to the 0 it
# always is for an offset), so the offset reads as its low word alone.
_PLUMBING = ("arith.extui", "arith.ori", "arith.index_cast", "arith.index_castui",
             "iree_tensor_ext.dispatch.workload.ordinal")


def extent_constants(executable_op) -> tuple[int, ...]:
    """The push constant ordinals the dispatch's computation depends on other than as
    offsets (binding views handle binding and slice offsets), ascending: its dynamic
    extents and what IREE computes from them (a mean's element count, Resize's scales),
    and the high words of 64-bit offsets. For a dispatch without dynamic extents, only
    those high words (IREE joins an offset's words when it cannot bound the offset below
    4 GiB, as in a network with a dynamic batch: the dispatch is specialised at run time
    for the high word, 0); its other push constants are offsets, or a loop position it
    computes an index from, which the code generator reads as push constants."""
    ordinals = {ir.IntegerAttr(op.attributes["ordinal"]).value
                for op in _function_ops(executable_op)
                if op.name == "hal.interface.constant.load" and _feeds_computation(op.results[0])}
    if not any(op.name == "hal.interface.binding.subspan" and len(_dynamic_dims(op))
               for op in _function_ops(executable_op)):
        high_words = high_word_constants(executable_op)
        return tuple(sorted(k for k in ordinals if k in high_words))
    return tuple(sorted(ordinals | crowded_offset_constants(executable_op)))


def crowded_offset_constants(executable_op) -> set[int]:
    """Push constant ordinals of the slice offsets of a dispatch tensor load or store
    whose byte offset has more dynamic terms than a binding view's two (its subspan's
    offset and a slice offset per dim): a tf2onnx SAME_UPPER convolution stores into
    its padded input at a top and left padding that depend on the input's size, in a
    transient buffer at a push constant offset. Specialised with the extents, the
    slice's position becomes static."""
    subspans = {op.results[0]: op for op in _function_ops(executable_op)
                if op.name == "hal.interface.binding.subspan"}
    ordinals = set()
    for op in _function_ops(executable_op):
        if op.name not in ("iree_tensor_ext.dispatch.tensor.load",
                           "iree_tensor_ext.dispatch.tensor.store"):
            continue
        subspan = subspans.get(op.operands[0 if op.name.endswith("load") else 1])
        slice_offsets = [op.operands[i] for i in _offset_operands(op)]
        dynamic_base = subspan is not None and any(
            subspan.operands[i].owner.name != "arith.constant" for i in _offset_operands(subspan))
        if len(slice_offsets) + dynamic_base > 2:
            ordinals |= _constants_reaching(slice_offsets)
    return ordinals


def _dynamic_dims(subspan) -> list:
    segments = ir.DenseI32ArrayAttr(subspan.attributes["operandSegmentSizes"])
    return list(subspan.operands)[segments[0]:]


def _offset_operands(op) -> range:
    """Operand positions of `op` that are offsets: a subspan's byte offset, a dispatch
    tensor load's or store's slice offsets."""
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    first = _OFFSET_OPERANDS[op.name]
    start = sum(segments[:first])
    return range(start, start + segments[first])


def size_constants(executable_op) -> set[int]:
    """Push constant ordinals the binding subspans' dynamic extents are computed from."""
    return _constants_reaching([dim for op in _function_ops(executable_op)
                                if op.name == "hal.interface.binding.subspan"
                                for dim in _dynamic_dims(op)])


def _constants_reaching(values) -> set[int]:
    """Push constant ordinals `values` are computed from."""
    ordinals, pending, seen = set(), list(values), set()
    while pending:
        value = pending.pop()
        if isinstance(value, ir.BlockArgument) or value.owner in seen:
            continue
        owner = value.owner
        seen.add(owner)
        if owner.name == "hal.interface.constant.load":
            ordinals.add(ir.IntegerAttr(owner.attributes["ordinal"]).value)
        pending.extend(owner.operands)
    return ordinals


def high_word_constants(executable_op) -> set[int]:
    """Push constant ordinals that are the high word of a 64-bit value (zero extended,
    then shifted left by 32)."""
    ordinals = set()
    for op in _function_ops(executable_op):
        if op.name == "hal.interface.constant.load":
            uses = [use.owner for use in op.results[0].uses]
            if uses and all(u.name == "arith.extui" and all(
                    v.owner.name == "arith.shli" for v in u.results[0].uses) for u in uses):
                ordinals.add(ir.IntegerAttr(op.attributes["ordinal"]).value)
    return ordinals


def _feeds_computation(value) -> bool:
    """Whether `value` reaches anything but binding subspan offsets and dispatch tensor
    slice offsets, through the integer plumbing that combines and casts push constants."""
    pending, seen = [value], set()
    while pending:
        for use in pending.pop().uses:
            owner = use.owner
            if owner.name in _OFFSET_OPERANDS:
                if use.operand_number not in _offset_operands(owner):
                    return True
            elif owner.name == "util.assume.int":
                pending.append(owner.results[use.operand_number])
            elif owner.name in _PLUMBING:
                if owner not in seen:
                    seen.add(owner)
                    pending.extend(owner.results)
            else:
                return True
    return False


def specialised(source: str, context, constants: dict[int, int]):
    """A module holding the `hal.executable` of `source` with the push constants
    `constants` ({ordinal: u32 value as pushed}) substituted and folded. Raises
    NotSupported when an extent stays dynamic or the values contradict the dispatch.
    The executable is `executable_of(module)`, valid while the module lives."""
    module = ir.Module.parse(source, context)
    with context, ir.Location.unknown():
        for op in list(_function_ops(executable_of(module))):
            if op.name == "hal.interface.constant.load":
                ordinal = ir.IntegerAttr(op.attributes["ordinal"]).value
                if ordinal in constants:
                    _replace_with_constant(op, _signed_i32(constants[ordinal]))
        try:
            passmanager.PassManager.parse(CANONICALIZE).run(module.operation)
            text = _DYNAMIC_TENSOR.sub(_static_tensor_type, str(module))
            module = ir.Module.parse(text, context)
            if _static_through_casts(executable_of(module)):
                passmanager.PassManager.parse(CANONICALIZE).run(module.operation)
            return module
        except ir.MLIRError as error:      # e.g. extents a linalg op's maps contradict
            raise NotSupported(f"{INVALID_AT_EXTENTS}: {_first_diagnostic(error)}") from None


def executable_of(module):
    return module.body.operations[0].operation


def binding_reach(executable_op) -> dict[int, int]:
    """Binding ordinal -> bytes its subspans reach (static offset + tensor bytes; a push
    constant offset counts as 0), for a dispatch whose extents are fixed."""
    reach: dict[int, int] = {}
    for op in _function_ops(executable_op):
        if op.name == "hal.interface.binding.subspan":
            tensor = dispatch_tensor_type(op.results[0].type)
            offsets = [op.operands[i].owner for i in _offset_operands(op)]
            start = (ir.IntegerAttr(offsets[0].attributes["value"]).value
                     if offsets and offsets[0].name == "arith.constant" else 0)
            size = math.prod(tensor.shape) * ELEMENT_BYTES.get(str(tensor.element_type), 8)
            binding = ir.IntegerAttr(op.attributes["binding"]).value
            reach[binding] = max(reach.get(binding, 0), start + size)
    return reach


def _first_diagnostic(error) -> str:
    diagnostics = getattr(error, "error_diagnostics", None)
    return diagnostics[0].message if diagnostics else str(error).splitlines()[0]


def _static_through_casts(executable_op) -> bool:
    """Canonicalization leaves a `tensor.cast` of a now static tensor back to its dynamic
    type where an elementwise `arith` op on whole tensors reads it (IREE truncates a bool
    mask's i8 bytes to i1 that way, before the generic that reads it): the op reads the
    static tensor instead and its result takes the static shape, and so on down such
    ops. Returns whether any op changed."""
    changed = False
    for op in list(_function_ops(executable_op)):
        if op.name != "tensor.cast" or not _static(op.operands[0].type):
            continue
        for use in list(op.results[0].uses):
            user = use.owner
            if user.name.startswith("arith.") and len(user.results) == 1 and \
                    isinstance(user.results[0].type, ir.RankedTensorType):
                user.operands[use.operand_number] = op.operands[0]
                changed |= _take_operand_shapes(user)
    return changed


def _take_operand_shapes(op) -> bool:
    """An elementwise tensor op whose operands are all static takes their shape (and its
    own element type) for its result, and passes it on to its elementwise users."""
    shapes = {tuple(ir.RankedTensorType(v.type).shape) for v in op.operands
              if isinstance(v.type, ir.RankedTensorType)}
    result = op.results[0]
    if len(shapes) != 1 or not all(_static(v.type) for v in op.operands
                                   if isinstance(v.type, ir.RankedTensorType)) or \
            _static(result.type):
        return False
    element = ir.RankedTensorType(result.type).element_type
    result.set_type(ir.RankedTensorType.get(list(shapes.pop()), element))
    for use in list(result.uses):
        if use.owner.name.startswith("arith.") and len(use.owner.results) == 1:
            _take_operand_shapes(use.owner)
    return True


def _static(type_) -> bool:
    return isinstance(type_, ir.RankedTensorType) and ir.RankedTensorType(type_).has_static_shape


def _function_ops(executable_op):
    variant = executable_op.regions[0].blocks[0].operations[0]
    for op in variant.regions[0].blocks[0].operations:
        if op.operation.name == "builtin.module":
            for function in op.regions[0].blocks[0].operations:
                yield from nested_ops(function.operation)


def _replace_with_constant(op, value: int) -> None:
    result = op.results[0]
    with ir.InsertionPoint(op):
        constant = ir.Operation.create(
            "arith.constant", results=[result.type],
            attributes={"value": ir.IntegerAttr.get(result.type, value)})
    result.replace_all_uses_with(constant.results[0])
    op.erase()


def _signed_i32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _static_tensor_type(match) -> str:
    """`tensor<?x64xf32>>{%c100}` -> `tensor<100x64xf32>>`: the subspan's extents are
    index constants after canonicalization."""
    head, shape, dims = match.groups()
    values = []
    for dim in dims.split(","):
        constant = _INDEX_CONSTANT.fullmatch(dim.strip())
        if constant is None:
            raise NotSupported(f"extent {dim.strip()} is not a constant after specialisation")
        values.append(constant.group(1))
    parts = shape.split("x")
    if parts.count("?") != len(values):
        raise NotSupported(f"tensor<{shape}> has {parts.count('?')} dynamic extents and "
                           f"{len(values)} values")
    values.reverse()
    return head + "x".join(values.pop() if part == "?" else part for part in parts) + ">>"
