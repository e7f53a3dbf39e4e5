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
"""
import numpy as np

from .errors import NotSupported
from .expressions import index_arithmetic
from .indexing import Generic, Operand
from .values import Scalar, View


def refine(generic: Generic, values: dict) -> Generic:
    """The generic over mixed-radix digits of its loops, its gathers as Operands."""
    if generic.reductions:
        raise NotSupported(f"{generic.name}: tensor.extract in a reduction body")
    if generic.extra_outputs:
        raise NotSupported(f"{generic.name}: tensor.extract in a body with several results")
    extracts = _extract_indices(generic, values)
    cuts = [set() for _ in generic.extents]
    for _, indices in extracts:
        for array in indices:
            for loop, loop_cuts in enumerate(_cuts(array, generic.extents, generic.name)):
                cuts[loop] |= loop_cuts
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
    for value, indices in extracts:
        source = values[value.owner.operands[0]]
        terms = [_affine_terms(array, digits, shape, generic.name) for array in indices]
        gathered[value] = Operand(source, terms)
    refined = [_refined(operand, digits) for operand in generic.inputs]
    output_loops = _output_loops(generic)
    output = Operand(generic.output.value, [({d: 1}, 0) for loop in output_loops
                                            for d, (l, _, _) in enumerate(digits) if l == loop])
    positions = {loop: _digit_positions(loop, digits, shape) for loop in range(len(generic.extents))}
    split = tuple(tuple(e for l, _, e in digits if l == loop) for loop in output_loops)
    return Generic(generic.op, generic.name, ["parallel"] * len(digits), refined, output, shape,
                   gathered=gathered, positions=positions, output_split=split)


def _extract_indices(generic: Generic, values: dict) -> list[tuple[object, list[np.ndarray]]]:
    """Each tensor.extract's result and its index at every loop position."""
    arrays: dict = {}

    def array_of(value):
        if value in arrays:
            return arrays[value]
        known = values.get(value)
        return np.array(known.value) if isinstance(known, Scalar) else None

    found = []
    for op in generic.body:
        if op.name == "tensor.extract":
            source = values.get(op.operands[0])
            indices = [array_of(index) for index in op.operands[1:]]
            if not isinstance(source, View) or any(index is None for index in indices):
                raise NotSupported(f"{generic.name}: tensor.extract in the body "
                                   "(gather: data-dependent indexing)")
            found.append((op.results[0], [np.broadcast_to(np.asarray(i, np.int64),
                                                          generic.extents) for i in indices]))
            continue
        positional = index_arithmetic(op, array_of, generic.position)
        if positional is not None:
            arrays[op.results[0]] = positional
    return found


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


def _affine_terms(array: np.ndarray, digits, shape, name: str) -> tuple[dict[int, int], int]:
    """The index as ({digit: coefficient}, constant) over the refined grid, verified."""
    grid = array.reshape(shape)
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


def _digit_positions(loop: int, digits, shape) -> np.ndarray:
    """The loop's index at every position of the refined grid."""
    total = np.zeros([1] * len(shape), np.int64)
    for d, (l, weight, extent) in enumerate(digits):
        if l == loop:
            total = total + weight * np.arange(extent).reshape(
                [-1 if i == d else 1 for i in range(len(shape))])
    return total


def _output_loops(generic: Generic) -> list[int]:
    loops = []
    for coefficients, constant in generic.output.terms:
        if len(coefficients) != 1 or list(coefficients.values()) != [1] or constant:
            raise NotSupported(f"{generic.name}: gather output indexed by an expression")
        loops.append(next(iter(coefficients)))
    if sorted(loops) != list(range(len(generic.extents))):
        raise NotSupported(f"{generic.name}: gather output does not index every loop once")
    return loops

