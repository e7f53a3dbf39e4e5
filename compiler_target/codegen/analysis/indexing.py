"""Indexing: affine maps as linear forms over loops, and element strides of operands
along loops and along an op's logical dims.

Everything the NPU runs is linear: an operand's element address along each loop is the
sum over its tensor dims of (dim stride x affine coefficient), so layouts (NCHW/NHWC,
transposes, broadcasts) become strides of the op's logical dims.
"""
from dataclasses import dataclass, field, replace

import numpy as np
from iree.compiler import ir

from ..ops import TensorRef
from .errors import NotSupported
from .values import View

ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2,
                 "i8": 1, "i1": 1, "u8": 1}

Term = tuple[dict[int, int], int]     # {loop: coefficient}, constant


def linear(expr) -> Term:
    """An affine expression as ({loop: coefficient}, constant)."""
    if isinstance(expr, ir.AffineDimExpr):
        return {expr.position: 1}, 0
    if isinstance(expr, ir.AffineConstantExpr):
        return {}, expr.value
    if isinstance(expr, ir.AffineAddExpr):
        (lc, lk), (rc, rk) = linear(expr.lhs), linear(expr.rhs)
        return {d: lc.get(d, 0) + rc.get(d, 0) for d in lc.keys() | rc.keys()}, lk + rk
    if isinstance(expr, ir.AffineMulExpr):
        (lc, lk), (rc, rk) = linear(expr.lhs), linear(expr.rhs)
        if lc and rc:
            raise NotSupported(f"non-linear indexing {expr}")
        coefficients, scale, constant = (lc, rk, lk) if lc else (rc, lk, rk)
        return {d: c * scale for d, c in coefficients.items()}, constant * scale
    raise NotSupported(f"indexing expression {expr} is not linear")


@dataclass
class Operand:
    """A structured op's operand: its value's meaning and the linear form of each of its
    tensor dims."""
    value: object                                   # values.View | Padded | Scalar | ...
    terms: list[Term]

    def loops(self) -> set[int]:
        return {d for coefficients, _ in self.terms for d, c in coefficients.items() if c}


@dataclass
class Generic:
    """A linalg.generic (named ops are generalized first): loops, operands, body."""
    op: object
    name: str                                        # before generalization
    iterators: list[str]
    inputs: list[Operand]
    output: Operand
    extents: list[int]
    # A generic refined over mixed-radix digits of its loops (gather.py): the values of
    # its tensor.extract ops as Operands, the body values that only compute their
    # indices from a push constant, each original loop's index at every position, and
    # the digit extents each output tensor dim is split into.
    gathered: dict = field(default_factory=dict)
    push_constant_indices: frozenset = frozenset()
    positions: dict[int, np.ndarray] = field(default_factory=dict)
    output_split: tuple[tuple[int, ...], ...] | None = None
    # The outputs after the first of an all-parallel generic with several results.
    extra_outputs: list[Operand] = field(default_factory=list)

    @property
    def outputs(self) -> list[Operand]:
        return [self.output] + self.extra_outputs

    def position(self, loop: int) -> np.ndarray:
        """linalg.index `loop` at every position of the iteration space."""
        if loop in self.positions:
            return self.positions[loop]
        shape = [1] * len(self.extents)
        shape[loop] = self.extents[loop]
        return np.arange(self.extents[loop]).reshape(shape)

    @property
    def reductions(self) -> list[int]:
        return [d for d, kind in enumerate(self.iterators) if kind == "reduction"]

    @property
    def body(self) -> list:
        return [op.operation for op in self.op.regions[0].blocks[0].operations]


def strides_over_loops(ref: TensorRef, operand: Operand) -> tuple[dict[int, int], int]:
    """Element stride of the operand along each loop, and its extra byte offset."""
    strides: dict[int, int] = {}
    offset = 0
    for stride, (coefficients, constant) in zip(ref.strides, operand.terms):
        for loop, c in coefficients.items():
            strides[loop] = strides.get(loop, 0) + stride * c
        offset += stride * constant
    return strides, offset * ELEMENT_BYTES[ref.dtype]


def logical_strides(loop_strides: dict[int, int], loop_to_logical: dict[int, tuple[int, int]],
                    extents: list[int], rank: int) -> tuple[int, ...]:
    """Strides over the op's logical dims, given strides over loops that index them
    (logical index = sum of multiplier x loop index)."""
    strides: list[int | None] = [None] * rank
    for loop, (dim, multiplier) in sorted(loop_to_logical.items(), key=lambda kv: kv[1][1]):
        if extents[loop] == 1:
            continue
        stride = loop_strides.get(loop, 0)
        if strides[dim] is None and stride % multiplier == 0:
            strides[dim] = stride // multiplier
        if strides[dim] is None or strides[dim] * multiplier != stride:
            raise NotSupported("an operand's layout does not match the op's logical dims")
    for loop, stride in loop_strides.items():
        if stride and loop not in loop_to_logical and extents[loop] > 1:
            raise NotSupported(f"an operand varies along loop d{loop}, which the op does not index")
    return tuple(s or 0 for s in strides)


def row_major(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def view_ref(ref: TensorRef, shape, strides, extra_offset=0) -> TensorRef:
    """`ref` seen with another shape and strides, `extra_offset` bytes further on
    (constants are re-based so that their offset stays 0)."""
    offset = ref.offset + extra_offset
    if ref.constant is None:
        return replace(ref, shape=tuple(shape), strides=tuple(strides), offset=offset)
    data = ref.constant.reshape(-1)[offset // ELEMENT_BYTES[ref.dtype]:]
    return TensorRef(ref.dtype, tuple(shape), tuple(strides), -1, 0, data)


def single_loop(term: Term) -> int:
    """The loop a dim of an output or a computed value is indexed by."""
    coefficients, constant = term
    if len(coefficients) != 1 or list(coefficients.values()) != [1] or constant:
        raise NotSupported("an output or computed value is indexed by an expression, not a loop")
    return next(iter(coefficients))


def loop_of(coefficients: dict[int, int], name: str) -> int:
    """The loop an input dim is indexed by (a constant offset is allowed)."""
    if len(coefficients) != 1 or list(coefficients.values()) != [1]:
        raise NotSupported(f"{name}: an input dim is indexed by {coefficients}, not by one loop")
    return next(iter(coefficients))


def plain_view(operand: Operand, name: str) -> TensorRef:
    if not isinstance(operand.value, View):
        raise NotSupported(f"{name} reads a computed, padded or undefined tensor")
    return operand.value.ref


def flattened(ref: TensorRef, dims, name: str) -> tuple[int, int]:
    """(size, stride) of the given consecutive dims of `ref` seen as one dim."""
    size, stride = 1, 0
    for d in reversed(list(dims)):
        if ref.shape[d] == 1:
            continue
        if size > 1 and ref.strides[d] != stride * size:
            raise NotSupported(f"{name}: reduction operand dims cannot be flattened")
        if size == 1:
            stride = ref.strides[d]
        size *= ref.shape[d]
    return size, stride
