"""The dispatch's main op: the structured op its epilogue follows, as each kind module
recognises it (contraction, convolution, pooling, reduction, elementwise)."""
from dataclasses import dataclass

from ..ops import NpuOp, TensorRef


@dataclass
class MainOp:
    name: str                                     # the linalg op's name before generalization
    shape: tuple[int, ...]                        # the NpuOp's logical output shape
    loop_to_logical: dict[int, tuple[int, int]]   # loop -> (logical dim, multiplier)
    # A contraction's sum in its f16 or bf16 operand type (a linalg.matmul with an f16
    # result), which the MAC array's NARROW_SUM follows; False: in f32 or i32.
    narrow_sum: bool = False

    kind = "op"

    @property
    def summary(self) -> str:
        """The dispatch report's description: op, shapes, dtype."""
        raise NotImplementedError

    def build(self, out: TensorRef, expr: list, inputs: list[TensorRef]) -> NpuOp:
        """The NpuOp writing `out` = epilogue `expr` of this op's result over `inputs`.
        The main ops that store several results (elementwise, contraction, convolution)
        take `extra_outputs` too: (tensor, node of `expr`) of each result besides `out`."""
        raise NotImplementedError


def label(name: str, kind: str) -> str:
    """`linalg.generic (kind)` for generics, the named op's name otherwise."""
    return f"{name} ({kind})" if name == "linalg.generic" else name


def extents_text(values) -> str:
    return "x".join(map(str, values)) or "1"
