"""Reductions along the rows of an (O, I) space: the kept loops O and the reduced loops I
(each flattened into one dim), with elementwise work before a reduction (a reduction
body such as `x·x + out`), after it (an epilogue per row), and around it (the reduced
value read back along I by a consumer: x - mean(x), layer-norm and softmax rows).

The expression's ("reduce", (a,), kind) nodes are row values r[o] = sum/max over i of
node a; nodes after them read r broadcast along I. A dispatch that only reduces an
input (global average pooling, ReduceSum) becomes a `Reduce`; anything else a `Rowwise`.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from ..ops import Matmul, Reduce, Rowwise, TensorRef, row_varying, varies_along_rows
from .errors import NotSupported
from .expressions import LEAVES, averaged, pruned
from .indexing import Generic, flattened, single_loop, strides_over_loops, view_ref
from .main_op import MainOp, extents_text, label
from .values import View

COMBINE = {"arith.addf": "sum", "arith.maximumf": "max", "arith.maxnumf": "max",
           "arith.addi": "isum"}


@dataclass
class ReductionMain(MainOp):
    kept_rank: int = 0                # logical dims: the kept ones, then the reduced ones
    dtype: str = "f32"
    # Memory read by the reductions: each View's ref and the logical dim of each of its dims.
    sources: list[tuple[TensorRef, list[int]]] = field(default_factory=list)
    built: str = "sum reduction"      # what build made of it, for the summary

    kind = "reduce"

    @property
    def summary(self) -> str:
        rows, columns = (extents_text(self.shape[:self.kept_rank]),
                         extents_text(self.shape[self.kept_rank:]))
        if self.built.startswith("rowwise"):
            return f"{self.name} ({self.built}) {rows}x{columns} {self.dtype}"
        return f"{label(self.name, self.built)} {rows} over {columns} {self.dtype}"

    def logical_dims_of(self, ref: TensorRef) -> list[int] | None:
        """The logical dim of each dim of `ref` if a reduction read it (else None)."""
        for source, dims in self.sources:
            if ref.binding >= 0 and ref == source:
                return dims
        return None

    def build(self, out, expr, inputs, extra_outputs=()) -> Reduce | Rowwise:
        """`extra_outputs`: (tensor, node) of the results besides `out` (a layer norm's
        mean and variance from one sum): always the row-wise form, which stores any
        node."""
        reduces = [i for i, node in enumerate(expr) if node[0] == "reduce"]
        varies = varies_along_rows(expr, [row_varying(ref, self.kept_rank) for ref in inputs])
        plain = None
        if len(reduces) == 1 and expr[expr[reduces[0]][1][0]][0] == "input" and \
                not varies[-1] and not extra_outputs:
            plain = (reduces[0], expr[reduces[0]][1][0], expr[reduces[0]][2])
        minimum = _minimum_of_input(expr, reduces)
        if minimum is not None and not varies[-1] and not extra_outputs:
            plain = (*minimum, "min")
        if plain is not None and (plain[2] == "isum" or self._flattens_all(out, inputs)):
            return self._reduce(out, expr, inputs, *plain)
        if any(expr[i][2] == "isum" for i in reduces):
            raise NotSupported(f"{self.name}: an i32 sum within a row-wise expression")
        self.built = "rowwise " + " ".join(node[2] if node[0] == "reduce" else node[0]
                                           for node in expr if node[0] not in LEAVES)
        refs = [out] + list(inputs) + [ref for ref, _ in extra_outputs]
        row = row_groups(refs, self.kept_rank)
        split = next((k for k in range(max(self.kept_rank, 1)) if all(
            self._flattens(ref, k, row) for ref in refs)), None)
        if split is None:
            raise NotSupported(f"{self.name}: reduction operand dims cannot be flattened")
        return Rowwise(self._space(out, split, row),
                       [self._space(ref, split, row) for ref in inputs], expr,
                       [(self._space(ref, split, row), node) for ref, node in extra_outputs],
                       row_rank=len(row))

    def _flattens(self, ref: TensorRef, split: int, row) -> bool:
        try:
            self._space(ref, split, row)
        except NotSupported:
            return False
        return True

    def _flattens_all(self, out: TensorRef, inputs) -> bool:
        """Whether every view flattens into the (O, I) space a Reduce takes."""
        return all(self._flattens(ref, 0, [range(self.kept_rank, len(ref.shape))])
                   for ref in [out] + list(inputs))

    def _space(self, ref: TensorRef, split: int, row) -> TensorRef:
        """`ref` over the (O, I) space, O flattened and I in the `row` groups
        (row_groups); with `split` > 0, over the (B, O, I) space, B the kept dims before
        `split` (a softmax over a middle dim, YOLOv8's distribution focal loss: the kept
        dims around it do not flatten together)."""
        groups = ([range(split)] if split else []) + [range(split, self.kept_rank)] + list(row)
        sizes, strides = zip(*(flattened(ref, dims, self.name) for dims in groups))
        return view_ref(ref, sizes, strides)

    def _matrix(self, ref: TensorRef) -> TensorRef:
        """`ref` over the (O, I) space, each flattened."""
        return self._space(ref, 0, [range(self.kept_rank, len(ref.shape))])

    def _reduce(self, out, expr, inputs, at: int, source_node: int, kind: str) -> Reduce:
        """A plain reduction of one input (node `source_node`) with a per-row epilogue:
        the classic Reduce; node `at`, the reduced value, becomes the accumulator."""
        source = inputs[expr[source_node][1]]
        rewritten = [("acc",) if i == at else node for i, node in enumerate(expr)]
        epilogue, epilogue_inputs = pruned(rewritten, inputs)
        acc = epilogue.index(("acc",))
        order = [acc] + [i for i in range(len(epilogue)) if i != acc]
        epilogue = _reordered(epilogue, order)
        kind, epilogue, epilogue_inputs = averaged(
            kind, epilogue, epilogue_inputs, math.prod(self.shape[self.kept_rank:]), "mean")
        self.built = f"{kind} reduction"

        def vector(ref: TensorRef) -> TensorRef:
            size, stride = flattened(ref, range(self.kept_rank), self.name)
            return view_ref(ref, (size,), (stride,))

        if kind == "isum":
            return self._ones_matmul(source, out, epilogue, epilogue_inputs)
        return Reduce(self._matrix(source), vector(out), kind, epilogue,
                      [vector(ref) for ref in epilogue_inputs])

    def _ones_matmul(self, source: TensorRef, out: TensorRef, epilogue, epilogue_inputs):
        """An i32 sum of i8 values on the MAC array: out[b][n] = Σ_k 1 · source[b][n][k],
        a matmul of a row of ones (M = 1, K = the reduced dims) by the source seen as
        (batch, K, N), where N is the last kept dim and the batch the kept dims before it
        (kept dims that do not flatten into one stay apart this way)."""
        if source.dtype not in ("i8", "u8"):
            raise NotSupported(f"{self.name}: a sum of {source.dtype} values in i32 (the MAC "
                               "array sums i8 and u8)")
        rank = self.kept_rank
        self.built = "sum reduction (MAC array, by ones)"

        def batch_and_n(ref: TensorRef):
            return (flattened(ref, range(rank - 1), self.name),
                    flattened(ref, range(max(rank - 1, 0), rank), self.name))

        (batch, batch_stride), (n, n_stride) = batch_and_n(source)
        k, k_stride = flattened(source, range(rank, len(source.shape)), self.name)
        ones = TensorRef(source.dtype, (batch, 1, k), (0, 0, 1), -1, 0,
                         np.ones(k, np.uint8 if source.dtype == "u8" else np.int8))
        b = view_ref(source, (batch, k, n), (batch_stride, k_stride, n_stride))

        def kept(ref: TensorRef) -> TensorRef:
            (_, stride0), (_, stride1) = batch_and_n(ref)
            return view_ref(ref, (batch, 1, n), (stride0, 0, stride1))

        return Matmul(ones, b, kept(out), epilogue, [kept(ref) for ref in epilogue_inputs])


def row_groups(refs: list[TensorRef], kept_rank: int) -> list[list[int]]:
    """The reduced dims (those after the first `kept_rank`) of extent above 1, in runs of
    consecutive dims that every view flattens into one: a single run where the rows are
    contiguous in every view, one per dim where a view strides them apart (an output
    written into a padded buffer) or broadcasts some of them (a per-channel scale over
    (C, H, W) rows)."""
    shape = refs[0].shape
    groups: list[list[int]] = []
    for d in range(kept_rank, len(shape)):
        if shape[d] == 1:
            continue
        if groups and all(ref.strides[groups[-1][-1]] == ref.strides[d] * shape[d]
                          for ref in refs):
            groups[-1].append(d)
        else:
            groups.append([d])
    return groups or [list(range(kept_rank, len(shape)))]


def _reordered(expr, order: list[int]):
    """The nodes in a new order (operands renumbered); `order` keeps operands first."""
    position = {old: new for new, old in enumerate(order)}
    return [expr[i] if expr[i][0] in LEAVES else
            (expr[i][0], tuple(position[a] for a in expr[i][1])) + tuple(expr[i][2:])
            for i in order]


def _minimum_of_input(expr, reduces: list[int]) -> tuple[int, int] | None:
    """(the node of the minimum, the input node) where the expression's one reduction is
    a min of an input, which the walk writes -max(-x) (the vector unit reduces by sum
    and max; Reduce tiles a min itself); None otherwise."""
    if len(reduces) != 1 or expr[reduces[0]][2] != "max":
        return None
    negated = expr[reduces[0]][1][0]
    if expr[negated][0] != "neg" or expr[expr[negated][1][0]][0] != "input":
        return None
    users = [i for i, node in enumerate(expr) if node[0] not in LEAVES and reduces[0] in node[1]]
    if len(users) != 1 or expr[users[0]][0] != "neg":
        return None
    return users[0], expr[negated][1][0]


def recognise(generic: Generic) -> ReductionMain:
    kept = [single_loop(terms) for terms in generic.output.terms]
    if any(generic.iterators[l] != "parallel" for l in kept) or \
            len(kept) + len(generic.reductions) != len(generic.extents):
        raise NotSupported(f"{generic.name}: reduction loop structure not recognised")
    views = [operand for operand in generic.inputs if isinstance(operand.value, View)]
    strides = strides_over_loops(views[0].value.ref, views[0])[0] if views else {}
    reduced = sorted(generic.reductions, key=lambda l: -abs(strides.get(l, 0)))
    order = kept + reduced
    loop_to_logical = {l: (i, 1) for i, l in enumerate(order)}
    sources = []
    for operand in views:
        try:
            dims = [loop_to_logical[single_loop(terms)][0] for terms in operand.terms]
        except NotSupported:
            continue
        sources.append((operand.value.ref, dims))
    dtype = views[0].value.ref.dtype if views else "f32"
    return ReductionMain(generic.name, tuple(generic.extents[l] for l in order),
                         loop_to_logical, kept_rank=len(kept), dtype=dtype, sources=sources)


def after_elementwise(main: MainOp, generic: Generic, loop_to_logical) -> ReductionMain:
    """The rows of a reduction of values an elementwise computation made (a dequantized
    tensor's mean): its kept loops must index the first logical dims of the elementwise
    space, its reduced loops the others."""
    kept = {loop_to_logical[l] for l, kind in enumerate(generic.iterators) if kind == "parallel"}
    if kept != {(d, 1) for d in range(len(kept))} or \
            any(m != 1 for _, m in loop_to_logical.values()):
        raise NotSupported(f"{generic.name} reduces a computed value along dims other than "
                           "its last ones")
    return ReductionMain(main.name, main.shape, main.loop_to_logical, kept_rank=len(kept),
                         dtype=main.dtype)


def softmax(name: str, ref: TensorRef, dim: int) -> ReductionMain:
    """linalg.softmax of `ref` along `dim`: rows are the other dims."""
    order = [d for d in range(len(ref.shape)) if d != dim] + [dim]
    logical = {d: i for i, d in enumerate(order)}
    return ReductionMain(name, tuple(ref.shape[d] for d in order), {},
                         kept_rank=len(order) - 1, dtype=ref.dtype,
                         sources=[(ref, [logical[d] for d in range(len(ref.shape))])])

