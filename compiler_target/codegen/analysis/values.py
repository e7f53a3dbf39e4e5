"""What an SSA value of the dispatch function means to the analysis.

The walk gives every value it visits one of these meanings:
  View          memory: a binding region (or an inlined constant) with element strides
  Padded        a View inside `tensor.pad` (low/high per dim, pad value)
  Scalar        a scalar or splat value
  Empty         `tensor.empty` (contents undefined)
  PushConstant  a `hal.interface.constant.load` value (a binding offset, as IREE
                passes each call site's offsets of a deduplicated dispatch)
  Result        computed in the dispatch: an expression node, and for each tensor dim
                the logical dim of the NpuOp it indexes (and with which multiplier)
  Compare       an arith.cmpf inside a body, consumed by arith.select
  Deferred      a result of an elementwise generic that reads memory only and is
                independent of the main op (a dequantized residual before a convolution):
                walked where a generic reads it, in that generic's index space
"""
from dataclasses import dataclass

from ..ops import TensorRef


@dataclass
class View:
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
    greater: bool
    lhs: int
    rhs: int
    strict: bool = True       # > or <, not >= or <=
    ordered: bool = True      # ogt oge olt ole: false where an operand is NaN
