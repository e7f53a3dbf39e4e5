"""Reductions: out[o] = sum / max / mean over i of input[o][i], the kept loops O and the
reduced loops I each flattened into one dim (global average pooling is a mean)."""
import math
from dataclasses import dataclass

from ..ops import Reduce, TensorRef
from .errors import NotSupported
from .expressions import averaged
from .indexing import Generic, flattened, plain_view, single_loop, strides_over_loops, view_ref
from .main_op import MainOp, extents_text, label


@dataclass
class ReductionMain(MainOp):
    input: TensorRef = None           # (kept dims..., reduced dims...)
    reduce: str = "sum"               # sum, max; mean once build finds the division
    kept_rank: int = 0

    kind = "reduce"

    @property
    def summary(self) -> str:
        shape = self.input.shape
        return (f"{label(self.name, f'{self.reduce} reduction')} "
                f"{extents_text(shape[:self.kept_rank])} over "
                f"{extents_text(shape[self.kept_rank:])} {self.input.dtype}")

    def build(self, out, expr, inputs) -> Reduce:
        source, rank = self.input, self.kept_rank
        self.reduce, expr, inputs = averaged(self.reduce, expr, inputs,
                                             math.prod(source.shape[rank:]), "mean")
        (rows, row_stride), (columns, column_stride) = (
            flattened(source, dims, self.name)
            for dims in (range(rank), range(rank, len(source.shape))))
        matrix = view_ref(source, (rows, columns), (row_stride, column_stride))

        def vector(ref: TensorRef) -> TensorRef:
            size, stride = flattened(ref, range(rank), self.name)
            return view_ref(ref, (size,), (stride,))

        return Reduce(matrix, vector(out), self.reduce, expr, [vector(ref) for ref in inputs])


def recognise(generic: Generic, combine: str) -> ReductionMain:
    if len(generic.inputs) != 1:
        raise NotSupported(f"{generic.name}: reduction of {len(generic.inputs)} operands")
    source = generic.inputs[0]
    ref = plain_view(source, generic.name)
    kept = [single_loop(terms) for terms in generic.output.terms]
    if any(generic.iterators[l] != "parallel" for l in kept) or \
            len(kept) + len(generic.reductions) != len(generic.extents):
        raise NotSupported(f"{generic.name}: reduction loop structure not recognised")
    strides, offset = strides_over_loops(ref, source)
    reduced = sorted(generic.reductions, key=lambda l: -strides.get(l, 0))
    return ReductionMain(
        generic.name, tuple(generic.extents[l] for l in kept),
        {l: (i, 1) for i, l in enumerate(kept)},
        input=view_ref(ref, [generic.extents[l] for l in kept + reduced],
                       [strides.get(l, 0) for l in kept + reduced], offset),
        reduce=combine, kept_rank=len(kept))
