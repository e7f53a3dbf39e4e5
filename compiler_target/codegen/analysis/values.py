"""What an SSA value of the dispatch function means to the analysis.

The walk gives every value it visits one of these meanings:
  View          memory: a binding region (or an inlined constant) with element strides
  LowBit        a View of integers truncated to i1: each element's low bit
  Padded        a View inside `tensor.pad` (low/high per dim, pad value)
  Scalar        a scalar or splat value
  Empty         `tensor.empty` (contents undefined)
  PushConstant  a `hal.interface.constant.load` value (a binding offset, as IREE
                passes each call site's offsets of a deduplicated dispatch)
  Result        computed in the dispatch: an expression node, and for each tensor dim
                the logical dim of the NpuOp it indexes (and with which multiplier)
  Compare       an arith.cmpf inside a body: consumed by arith.select (a max, min or
                selgt), else a cmp node
  Deferred      a result of an elementwise generic that reads memory only and is
                independent of the main op (a dequantized residual before a convolution):
                walked where a generic reads it, in that generic's index space
"""
from dataclasses import dataclass

from executable_format.isa import Flag

from ..ops import TensorRef


@dataclass
class View:
    ref: TensorRef


@dataclass
class LowBit:
    """A View of integers truncated to i1 (`arith.trunci` of a loaded tensor): read as
    each element's low bit."""
    ref: TensorRef


@dataclass
class Padded:
    ref: TensorRef
    low: tuple[int, ...]
    high: tuple[int, ...]
    value: float


@dataclass
class Scalar:
    value: float | int


@dataclass
class Empty:
    pass


@dataclass
class PushConstant:
    ordinal: int
    bits: int = 32        # < 32: the value's low `bits` (an arith.trunci of the constant)


@dataclass
class Result:
    node: int
    dims: list[tuple[int, int]]       # per tensor dim: (logical dim, multiplier)
    # Set when the value's dims are digits of its tensor's dims (a gather, gather.py):
    # the digit extents each tensor dim is split into.
    split: tuple[tuple[int, ...], ...] | None = None


@dataclass
class Deferred:
    generic: object                   # indexing.Generic
    index: int                        # which of its results
    walked: list                      # its Results once walked (one list per generic)


@dataclass
class Compare:
    """`lhs` compared with `rhs` (expression nodes): true for the `outcomes`, vcmp's
    flags (less, equal, greater, unordered) of the arith.cmpf predicate."""
    lhs: int
    rhs: int
    outcomes: int

    @property
    def order(self) -> str | None:
        """"greater" for lhs > rhs or >= (NaN order aside), "less" for < or <=, None
        for the others (==, !=, ordered, ...)."""
        ordering = self.outcomes & (Flag.CMP_LESS | Flag.CMP_GREATER)
        return {Flag.CMP_GREATER: "greater", Flag.CMP_LESS: "less"}.get(ordering)

    @property
    def strict(self) -> bool:
        """> or <, not >= or <=."""
        return not self.outcomes & Flag.CMP_EQUAL

    @property
    def ordered(self) -> bool:
        """False where an operand is NaN (ogt, oge, olt, ole)."""
        return not self.outcomes & Flag.CMP_UNORDERED
