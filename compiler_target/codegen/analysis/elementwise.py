"""Elementwise dispatches: out[i] = expression(inputs[i]) over the loops of the first
all-parallel generic that is not a plain copy (the expression then grows through the
generics that consume its result). Several stored results of the expression (a generic
with several results, as an LSTM cell's c and h) are one op with extra outputs."""
from dataclasses import dataclass

from iree.compiler import ir

from ..ops import Elementwise
from .expressions import LEAVES
from .indexing import Generic
from .main_op import MainOp, extents_text


@dataclass
class ElementwiseMain(MainOp):
    dtype: str = "f32"
    ops: str = ""                     # the expression's op names, once built
    results: int = 1                  # the tensors it writes, once built

    kind = "elementwise"

    @property
    def summary(self) -> str:
        kind = " ".join(["elementwise"] + ([self.ops] if self.ops else []))
        if self.results > 1:
            kind += f", {self.results} results"
        return f"{self.name} ({kind}) {extents_text(self.shape)} {self.dtype}"

    def build(self, out, expr, inputs, extra_outputs=()) -> Elementwise:
        """`extra_outputs`: (tensor, node) of the results besides `out` (the last node)."""
        self.ops = " ".join(node[0] for node in expr if node[0] not in LEAVES)
        self.results = 1 + len(extra_outputs)
        return Elementwise(out, inputs, expr, list(extra_outputs))


def recognise(generic: Generic) -> ElementwiseMain:
    dtype = str(ir.ShapedType(generic.op.results[0].type).element_type)
    return ElementwiseMain(generic.name, tuple(generic.extents),
                           {loop: (loop, 1) for loop in range(len(generic.extents))},
                           dtype=dtype)
