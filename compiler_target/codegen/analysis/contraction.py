"""Contractions: out[b][m][n] (+)= Σ_k a[b][m][k] · b[b][k][n], where each of the batch,
M, N and K roles is a set of loops (a 1x1 convolution in NCHW has M = rows x cols).

The loops' roles come from MLIR's own partition (`linalg.infer_contraction_dimensions`);
loops it does not list (it considers only plain loop results, so a strided index such
as `2*d1` of a strided 1x1 convolution is left out) get theirs by the same rule: which
operands index the loop, and whether it is a reduction. Within a role the loops are
ordered outermost first by the output's (or, for K, the first operand's) strides.
"""
from dataclasses import dataclass

from iree.compiler._mlir_libs import _mlirDialectsLinalg as mlir_linalg

from ..ops import Matmul, TensorRef
from .errors import NotSupported
from .indexing import Generic, Operand, plain_view, strides_over_loops, view_ref
from .main_op import MainOp, extents_text, label

ROLES = ("batch", "m", "n", "k")
# (operands indexing the loop, iterator type) -> role
ROLE_BY_USE = {("A", "B", "O", "parallel"): "batch", ("A", "O", "parallel"): "m",
               ("B", "O", "parallel"): "n", ("A", "B", "reduction"): "k"}


@dataclass
class ContractionMain(MainOp):
    a: TensorRef = None
    b: TensorRef = None
    dims: tuple[int, int, int, int] = (1, 1, 1, 1)     # logical dims per role
    extents: dict = None                                # role -> loop extents, outer first

    kind = "matmul"

    transposed: str = ""                               # " a^T", " b^T": column-major operands

    @property
    def summary(self) -> str:
        e = self.extents
        batch = f"B={extents_text(e['batch'])} " if e["batch"] else ""
        return (f"{label(self.name, 'matmul')} {batch}M={extents_text(e['m'])} "
                f"N={extents_text(e['n'])} K={extents_text(e['k'])}{self.transposed} "
                f"{self.a.dtype}")

    def build(self, out, expr, inputs, extra_outputs=()) -> Matmul:
        return Matmul(self.a, self.b, out, expr, inputs, dims=self.dims,
                      narrow_sum=self.narrow_sum, extra_outputs=list(extra_outputs))


def recognise(generic: Generic) -> ContractionMain:
    a, b = generic.inputs
    roles = _roles(generic, a, b)
    a_ref, b_ref = plain_view(a, generic.name), plain_view(b, generic.name)
    a_strides, a_offset = strides_over_loops(a_ref, a)
    b_strides, b_offset = strides_over_loops(b_ref, b)
    out_strides = _output_strides(generic)
    order = {role: sorted(loops, key=lambda l: (-abs((a_strides if role == "k" else out_strides)
                                                     .get(l, 0)), l))
             for role, loops in roles.items()}
    # Every role has at least one logical dim (a unit dim when the role has no loop).
    padded = {role: loops or [None] for role, loops in order.items()}
    extent = lambda loop: 1 if loop is None else generic.extents[loop]  # noqa: E731
    along = lambda strides, loop: 0 if loop is None else strides.get(loop, 0)  # noqa: E731

    def ref_of(source, strides, offset, role_names):
        loops = [loop for role in role_names for loop in padded[role]]
        return view_ref(source, [extent(l) for l in loops], [along(strides, l) for l in loops],
                        offset)

    def column_major(strides, rows, cols) -> bool:
        """Whether the innermost `rows` loop is the contiguous one (and `cols` not)."""
        row, col = padded[rows][-1], padded[cols][-1]
        return min(extent(row), extent(col)) > 1 and along(strides, row) == 1 != \
            along(strides, col)

    transposed = "".join(f" {x}^T" for x, strides, rows, cols in (
        ("a", a_strides, "m", "k"), ("b", b_strides, "k", "n")) if column_major(strides, rows, cols))
    out_loops = padded["batch"] + padded["m"] + padded["n"]
    return ContractionMain(
        generic.name, tuple(extent(l) for l in out_loops),
        {l: (i, 1) for i, l in enumerate(out_loops) if l is not None},
        a=ref_of(a_ref, a_strides, a_offset, ("batch", "m", "k")),
        b=ref_of(b_ref, b_strides, b_offset, ("batch", "k", "n")),
        dims=tuple(len(padded[role]) for role in ROLES),
        extents={role: [generic.extents[l] for l in loops] for role, loops in order.items()},
        transposed=transposed)


def _roles(generic: Generic, a: Operand, b: Operand) -> dict[str, list[int]]:
    inferred = mlir_linalg.infer_contraction_dimensions(generic.op)
    roles = {role: list(getattr(inferred, role)) if inferred else [] for role in ROLES}
    assigned = {loop for loops in roles.values() for loop in loops}
    for loop, iterator in enumerate(generic.iterators):
        if loop in assigned:
            continue
        use = tuple(name for name, operand in (("A", a), ("B", b), ("O", generic.output))
                    if loop in operand.loops()) + (iterator,)
        role = ROLE_BY_USE.get(use)
        if role is None:
            raise NotSupported(f"{generic.name}: loop d{loop} ({' '.join(use)}) fits no "
                               "contraction role")
        roles[role].append(loop)
    return roles


def _output_strides(generic: Generic) -> dict[int, int]:
    """The output's row-major strides along the loops indexing it (its memory layout is
    only known at the store, so the order of the output's own dims stands in for it)."""
    strides, step = {}, 1
    for coefficients, _ in reversed(generic.output.terms):
        for loop in coefficients:
            strides[loop] = step
        step *= max(1, max((generic.extents[l] for l in coefficients), default=1))
    return strides
