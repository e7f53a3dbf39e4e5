"""Gathers whose indices are computed from loop positions only (`tensor.extract` of a
loaded tensor at indices the body computes from `linalg.index`, as IREE forms nearest
Resize/Upsample): once each loop is split into digits of a mixed radix, the indices
are affine in the digits, so the gather is a strided view of memory (stride 0 along the
digits it repeats) and the generic an ordinary elementwise one over the digits.

For nearest 2x upsampling of rows of 20, the column index floor((p mod 20) / 2) of the
flattened loop p (extent 400) is affine over the digits (20, 10, 2): coefficients
(0, 1, 0). Each index's digits are found by splitting a loop at the smallest period f
for which index(q·f + r) = index(q·f) + index(r) - index(0), recursively; the loop's
digits are the common refinement of every index's digits, and the fit is verified at
every position. Indices that depend on data, or that no mixed radix makes affine,
leave the dispatch on the host.

IREE often collapses a gather's loops into one and recovers each dim from the flattened
position by `remsi`/`divsi` with constants (p mod 384, (p div 384) mod 256, ...). Those
constants are the loop's first digits: the body is evaluated over them, each quotient or
remainder an open grid over its own digits, so a Resize over millions of positions costs
the size of its rows, not of its image.

An index may also move with one push constant p (a recurrent loop's step, which IREE
keeps on the host: row t, or 31 - t for the reverse direction of a bidirectional LSTM):
p may pass only through additions, subtractions and multiplications by values that do
not depend on it, so the index is index(p = 0) + k·p with one integer k; the gathered
tensor is then read through a binding view that starts k·stride bytes further per unit
of p, and the index is taken at p = 0.
"""
from dataclasses import dataclass, replace

import numpy as np
from iree.compiler import ir

from .errors import EMPTY, NotSupported
from .expressions import index_arithmetic
from .indexing import Generic, Operand
from .indexing import ELEMENT_BYTES
from .values import PushConstant, Scalar, View

# Ops that keep a digit of a loop's index a digit: casts, and rem/div by a constant.
SPAN_PRESERVING = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui")
SPAN_SPLITTING = {"arith.remsi": "rem", "arith.remui": "rem", "arith.divsi": "div",
                  "arith.divui": "div", "arith.floordivsi": "div"}
AFFINE_IN_PUSH_CONSTANT = ("arith.addi", "arith.subi", "arith.muli", "arith.index_cast",
                           "arith.index_castui")


def refine(generic: Generic, values: dict) -> Generic:
    """The generic over mixed-radix digits of its loops, its gathers as Operands."""
    if generic.reductions:
        raise NotSupported(f"{generic.name}: tensor.extract in a reduction body")
    if generic.extra_outputs:
        raise NotSupported(f"{generic.name}: tensor.extract in a body with several results")
    if 0 in generic.extents:     # a dynamic dispatch at a probe where it has no work
        raise NotSupported(f"{EMPTY} loops {list(generic.extents)} of {generic.name}")
    spans, coarse = _delinearized(generic, values)
    coarse_shape = [extent for _, _, extent in coarse]
    extracts, push_constant_indices = _extract_indices(generic, values, spans, coarse)
    cuts = [set() for _ in generic.extents]
    for loop, weight, _ in coarse:
        cuts[loop].add(weight)
    for _, indices, _ in extracts:
        for array in indices:
            for d, digit_cuts in enumerate(_cuts(array, coarse_shape, generic.name)):
                loop, weight, _ = coarse[d]
                cuts[loop] |= {weight * cut for cut in digit_cuts}
    digits = []          # (loop, weight, extent), loops in order, each outermost digit first
    for loop, extent in enumerate(generic.extents):
        bounds = sorted(cuts[loop] | {1, extent})
        if any(outer % inner for inner, outer in zip(bounds, bounds[1:])):
            raise NotSupported(f"{generic.name}: gather indices split loop d{loop} at "
                               f"incompatible periods {bounds[1:-1]}")
        digits += [(loop, inner, outer // inner) for inner, outer in
                   reversed(list(zip(bounds, bounds[1:])))]
    shape = [extent for _, _, extent in digits]
    gathered = {}
    for value, indices, moving in extracts:
        source = values[value.owner.operands[0]]
        if moving is not None:
            source = _moving_view(source, moving, generic.name)
        terms = [_affine_terms(array.reshape(shape), generic.name) for array in indices]
        gathered[value] = Operand(source, terms)
    refined = [_refined(operand, digits) for operand in generic.inputs]
    output_loops = _output_loops(generic)
    output = Operand(generic.output.value, [({d: 1}, 0) for loop in output_loops
                                            for d, (l, _, _) in enumerate(digits) if l == loop])
    positions = {loop: _digit_positions(digits, loop) for loop in range(len(generic.extents))}
    split = tuple(tuple(e for l, _, e in digits if l == loop) for loop in output_loops)
    return Generic(generic.op, generic.name, ["parallel"] * len(digits), refined, output, shape,
                   gathered=gathered, positions=positions, output_split=split,
                   push_constant_indices=push_constant_indices)


@dataclass(frozen=True)
class Moving:
    """Index dim `dim` of a gather grows by `step` per unit of push constant `ordinal`."""
    ordinal: int
    dim: int
    step: int


def _extract_indices(generic: Generic, values: dict, spans: dict, coarse: list):
    """Each tensor.extract's (result, index at every position of the coarse digits with
    any push constant at 0, how the index moves with a push constant: a Moving or None),
    and the body values computed from a push constant."""
    shape = [extent for _, _, extent in coarse]
    # body value -> its value at every position, for p = 0, 1; one world when the body
    # reads no push constant (a Resize's indices over millions of positions)
    reads_push_constant = any(isinstance(values.get(operand), PushConstant)
                              for op in generic.body for operand in op.operands)
    worlds = ({}, {}) if reads_push_constant else ({},) * 2
    moving_with: dict = {}       # body value -> the push constant it depends on

    def array_of(world: int, value):
        if value in worlds[world]:
            return worlds[world][value]
        if value in spans:       # evaluated where read: the loop index itself spans all
            worlds[world][value] = _digit_positions(coarse, *spans[value])
            return worlds[world][value]
        known = values.get(value)
        if isinstance(known, PushConstant):
            return np.array(world)
        return np.array(known.value) if isinstance(known, Scalar) else None

    def push_constant_of(value):
        known = values.get(value)
        return known.ordinal if isinstance(known, PushConstant) else moving_with.get(value)

    found = []
    for op in generic.body:
        ordinals = {o for o in map(push_constant_of, op.operands) if o is not None}
        if op.name == "tensor.extract":
            at = [[array_of(world, index) for index in op.operands[1:]] for world in (0, 1)]
            found.append(_extract(generic.name, op, values.get(op.operands[0]), at, ordinals,
                                  shape))
            continue
        if op.results and op.results[0] in spans:
            continue
        if ordinals:
            _check_affine_in_push_constant(op, ordinals, push_constant_of, generic.name)
            moving_with[op.results[0]] = next(iter(ordinals))
        for world in (0, 1) if reads_push_constant else (0,):
            positional = index_arithmetic(op, lambda v: array_of(world, v),
                                          lambda loop: _digit_positions(coarse, loop))
            if positional is not None:
                worlds[world][op.results[0]] = positional
    return found, frozenset(moving_with)


def _check_affine_in_push_constant(op, ordinals: set, push_constant_of, name: str) -> None:
    dependent = [v for v in op.operands if push_constant_of(v) is not None]
    if len(ordinals) > 1 or op.name not in AFFINE_IN_PUSH_CONSTANT or (
            op.name == "arith.muli" and len(dependent) > 1):
        raise NotSupported(f"{name}: gather index computed from push constants by "
                           f"{op.name} (only sums and constant multiples of one are views)")


def _extract(name: str, op, source, at: list[list], ordinals: set, extents):
    """(result, index at p = 0, Moving or None) of one tensor.extract whose indices are
    `at[w]` with the push constant at w = 0 and 1."""
    if not isinstance(source, View) or any(i is None for i in at[0] + at[1]):
        raise NotSupported(f"{name}: tensor.extract in the body "
                           "(gather: data-dependent indexing)")
    base = [np.broadcast_to(np.asarray(i, np.int64), extents) for i in at[0]]
    steps = [np.broadcast_to(np.asarray(i1, np.int64) - np.asarray(i0, np.int64), extents)
             for i0, i1 in zip(at[0], at[1])]
    moving = [(dim, step) for dim, step in enumerate(steps) if step.any()]
    if not moving:
        return op.results[0], base, None
    if len(moving) > 1 or len(ordinals) != 1 or len(np.unique(moving[0][1])) != 1:
        raise NotSupported(f"{name}: gather index moves with a push constant in several "
                           "dims or by a position-dependent step")
    dim, step = moving[0]
    return op.results[0], base, Moving(next(iter(ordinals)), dim, int(step.flat[0]))


def _moving_view(source: View, moving: Moving, name: str) -> View:
    """The gathered tensor seen through a view that moves with the push constant."""
    ref = source.ref
    if ref.binding < 0 or ref.offset_constant >= 0:
        raise NotSupported(f"{name}: gather index moves with a push constant in an inlined "
                           "constant or a tensor already at a push-constant offset")
    scale = moving.step * ref.strides[moving.dim] * ELEMENT_BYTES[ref.dtype]
    return View(replace(ref, offset_constant=moving.ordinal, offset_scale=scale))


def _cuts(array: np.ndarray, extents: list[int], name: str) -> list[set[int]]:
    """Per loop, the digit boundaries (sizes of the inner digits) that make `array`
    affine, once it is checked to be a sum of one function per loop."""
    origin = array[(0,) * len(extents)]
    per_loop = [array[tuple(slice(None) if d == loop else 0 for d in range(len(extents)))] - origin
                for loop in range(len(extents))]
    total = origin + sum(np.reshape(f, [-1 if d == loop else 1 for d in range(len(extents))])
                         for loop, f in enumerate(per_loop))
    if not np.array_equal(np.broadcast_to(total, array.shape), array):
        raise NotSupported(f"{name}: gather indices mix loops non-additively")
    cuts = []
    for f in per_loop:
        inner, loop_cuts = 1, set()
        for extent, _ in reversed(_merged(_digits(f, name))):
            inner *= extent
            loop_cuts.add(inner)
        cuts.append(loop_cuts - {len(f)})
    return cuts


def _digits(f: np.ndarray, name: str) -> list[tuple[int, int]]:
    """(extent, coefficient) digits, outermost first, over which the 1-D function f
    (f[0] = 0) is affine: split at the smallest period f separates into outer and inner
    parts, recursively."""
    n = len(f)
    if n == 1 or np.array_equal(f, f[1] * np.arange(n)):
        return [(n, int(f[1]) if n > 1 else 0)]
    for period in (p for p in range(2, n) if n % p == 0):
        blocks = f.reshape(n // period, period)
        if np.array_equal(blocks, blocks[:, :1] + blocks[:1, :]):
            return _digits(blocks[:, 0], name) + _digits(blocks[0], name)
    raise NotSupported(f"{name}: gather index is not affine over any mixed radix of its loop")


def _merged(digits: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Adjacent digits joined where the function continues affinely across them (an
    outer digit's coefficient is the inner one's times its extent)."""
    merged = []
    for extent, coefficient in digits:
        if merged and merged[-1][1] == coefficient * extent:
            merged[-1] = (merged[-1][0] * extent, coefficient)
        else:
            merged.append((extent, coefficient))
    return merged


def _affine_terms(grid: np.ndarray, name: str) -> tuple[dict[int, int], int]:
    """The index as ({digit: coefficient}, constant) over the refined grid, verified."""
    shape = grid.shape
    constant = int(grid[(0,) * len(shape)])
    coefficients = {}
    for d in range(len(shape)):
        if shape[d] > 1:
            step = int(grid[tuple(1 if i == d else 0 for i in range(len(shape)))]) - constant
            if step:
                coefficients[d] = step
    fitted = constant + sum(c * np.arange(shape[d]).reshape(
        [-1 if i == d else 1 for i in range(len(shape))]) for d, c in coefficients.items())
    if not np.array_equal(np.broadcast_to(fitted, grid.shape), grid):
        raise NotSupported(f"{name}: gather index is not affine over the loops' digits")
    return coefficients, constant


def _refined(operand: Operand, digits) -> Operand:
    """An operand's terms over the digits (a loop is Σ weight · digit)."""
    terms = []
    for coefficients, constant in operand.terms:
        terms.append(({d: c * weight for loop, c in coefficients.items()
                       for d, (l, weight, _) in enumerate(digits) if l == loop}, constant))
    return Operand(operand.value, terms)


def _digit_positions(digits, loop: int, low: int = 1, high: int | None = None) -> np.ndarray:
    """(index of `loop` mod high) div low at every position of the grid of `digits`, an
    open grid over the digits between low and high (the whole index by default)."""
    total = np.zeros([1] * len(digits), np.int64)
    for d, (l, weight, extent) in enumerate(digits):
        if l == loop and low <= weight and (high is None or weight < high):
            total = total + weight // low * np.arange(extent).reshape(
                [-1 if i == d else 1 for i in range(len(digits))])
    return total


def _delinearized(generic: Generic, values: dict):
    """The body values that are digits of one loop's index, as (loop, low, high): the
    index mod high, div low; and the coarse digits (loop, weight, extent) those bounds
    split the loops into (one digit per loop where they do not nest)."""
    spans = {}
    for op in generic.body:
        if op.name == "linalg.index":
            loop = ir.IntegerAttr(op.attributes["dim"]).value
            spans[op.results[0]] = (loop, 1, generic.extents[loop])
        elif op.name in SPAN_PRESERVING and op.operands[0] in spans:
            spans[op.results[0]] = spans[op.operands[0]]
        elif op.name in SPAN_SPLITTING and op.operands[0] in spans:
            span = _split_span(spans[op.operands[0]], SPAN_SPLITTING[op.name],
                               _integer_constant(op.operands[1], values))
            if span is not None:
                spans[op.results[0]] = span
    coarse = []
    for loop, extent in enumerate(generic.extents):
        bounds = sorted({1, extent} | {b for l, low, high in spans.values() if l == loop
                                       for b in (low, high)})
        if any(outer % inner for inner, outer in zip(bounds, bounds[1:])):
            spans = {value: span for value, span in spans.items() if span[0] != loop}
            bounds = [1, extent]
        coarse += [(loop, inner, outer // inner) for inner, outer in
                   reversed(list(zip(bounds, bounds[1:])))]
    return spans, coarse


def _split_span(span: tuple, kind: str, divisor: int | None) -> tuple | None:
    """The span of `span` rem or div a positive constant, if it is again one."""
    loop, low, high = span
    if not divisor or divisor < 0:
        return None
    if kind == "div":
        return (loop, low * divisor, high) if high % (low * divisor) == 0 else None
    if low * divisor >= high:               # a remainder by more than the span holds
        return span
    return (loop, low, low * divisor) if high % (low * divisor) == 0 else None


def _integer_constant(value, values: dict) -> int | None:
    known = values.get(value)
    if isinstance(known, Scalar):
        return known.value if isinstance(known.value, int) else None
    owner = getattr(value, "owner", None)
    if getattr(owner, "name", None) == "arith.constant" and isinstance(
            owner.attributes["value"], ir.IntegerAttr):
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None


def _output_loops(generic: Generic) -> list[int]:
    loops = []
    for coefficients, constant in generic.output.terms:
        if len(coefficients) != 1 or list(coefficients.values()) != [1] or constant:
            raise NotSupported(f"{generic.name}: gather output indexed by an expression")
        loops.append(next(iter(coefficients)))
    if sorted(loops) != list(range(len(generic.extents))):
        raise NotSupported(f"{generic.name}: gather output does not index every loop once")
    return loops

