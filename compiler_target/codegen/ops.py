"""The dispatch operations the NPU can run, as analysis hands them to lowering.

Analysis (analyse + legalize, from the dispatch's linalg IR) produces one `NpuOp` per
NPU-capable dispatch; lowering (lower, tile, schedule, emit) turns it into an npu-fb
program. Everything here is plain Python: no MLIR objects cross this boundary.

Tensors are described by where their elements live: a HAL binding (or an inlined
constant), a byte offset, and an element stride per logical dimension. Layout
differences (NCHW vs NHWC, FCHW vs HWCF, transposed matmul operands, broadcasts with
stride 0) are therefore only different strides; lowering turns them into DMA boxes.
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TensorRef:
    dtype: str                       # "f32", "f16", "bf16", "i8", "u8", "i32"
    shape: tuple[int, ...]           # logical dims, in the order the op documents
    strides: tuple[int, ...]         # element stride of each logical dim (0 = broadcast)
    binding: int = -1                # HAL binding ordinal, or -1 for `constant`
    offset: int = 0                  # byte offset within the binding (its static part)
    constant: np.ndarray | None = field(default=None, compare=False)  # inlined data (dense, C order of `shape`)
    offset_constant: int = -1        # push constant whose value x offset_scale is added
    offset_scale: int = 1            # to `offset` (bytes), or -1
    step_constant: int = 0           # a second push constant (a slice position inside a
    step_scale: int = 0              # window that offset_constant places) x step_scale;
                                     # step_scale 0: none (npu-fb's BindingView)
    # With `constant` (offset is then 0), `strides` index the constant's flat C-order data
    # like a binding's elements: element i is constant.ravel()[Σ i_d·strides_d], so an
    # inlined bias can be broadcast with stride 0 without being expanded.


# Elementwise expressions: a list of nodes in SSA order; the last node is the result.
#   ("input", k)              the k-th entry of `inputs`, read at the current output index
#   ("acc",)                  the main op's accumulator (conv/matmul/pool results)
#   ("const", value)          a scalar
#   (op, (a, b))              binary: add sub mul div max min   (a, b: node indices)
#   ("fma", (a, b, c))        a·b + c rounded once (an add of a product, contracted as
#                             LLVM does stock's fmul + fadd)
#   ("selgt", (a, b, c))      a > b ? a : c, and selge a >= b ? a : c (a NaN compare is
#                             false): softplus's threshold, PReLU
#   ("cmp", (a, b), outcomes) 1 where a compares with b as `outcomes` (vcmp's flags:
#                             less, equal, greater, unordered) say, else 0 (arith.cmpf);
#                             "icmp" the same of i32 values, an i32 0 or 1 (arith.cmpi)
#   ("select", (c, a, b))     c != 0 ? a : b, c a 0/1 condition (arith.select)
#   (op, (a,), params...)     unary: relu, sigmoid, tanh, exp, sqrt, rsqrt (1/sqrt), erf, log,
#                             log1p (ln(1 + a)), sin, cos, neg, abs, floor, ceil, roundaway
#                             (math.round: ties away from zero), clamp(lo, hi),
#                             leakyrelu(alpha), scale(mul, add),
#                             hswish(mul, add): a·clamp(a·mul + add, 0, 1)
#   ("narrow", (a,))          a rounded to the nearest f16 (an f16 result of a mixed-precision
#                             body computed in f32: analysis/half_precision.py)
#   ("reduce", (a,), kind)    Rowwise only: the row's sum or max of node a
#   ("lookup", (a,), j)       code generation's: table j of the plan's lookups (lookup.py)
#                             read at a's value, one vrequant; "ilookup" an i32 table
# Integer nodes (quantized graphs) compute on i32 values; i8 and u8 inputs are read as i32
# (an i8 tensor the IR zero-extends, arith.extui/uitofp, is a u8 input):
#   ("iconst", value)         an i32 scalar
#   ("pconst", k)             the dispatch's i32 push constant k (a scalar IREE passes per
#                             call, such as a quantized input's sum)
#   (iop, (a, b))             iadd isub imul imax imin: i32 arithmetic, wrapping; iand:
#                             bitwise and (an i1 truncation's low bit)
#   ("ifma", (a, b, c))       a·b + c in i32, wrapping (code generation's, not the IR's)
#   ("itof", (a,))            i32 -> f32, rounded to nearest even (arith.sitofp)
#   ("ftoi", (a,), bits)      f32 -> i32 toward zero, saturating (arith.fptosi to `bits`
#                             bits; the value is in that range or the IR's is poison)
#   ("ftou", (a,), bits)      the same for arith.fptoui: a value in [0, 2^bits)
#   ("round", (a,), lo, hi)   f32 rounded half to even (math.roundeven), clamped to
#                             [lo, hi] (-inf, inf unless a quantizer's clamp folded in)
# A node's dtype follows from its kind: integer nodes, iconst, and inputs or an
# accumulator of an integer dtype are i32; every other node is of the float dtype.
ExprNode = tuple
LEAVES = ("input", "acc", "const", "iconst", "pconst")
INT_NODES = frozenset({"iadd", "isub", "imul", "imax", "imin", "iand", "ifma", "ftoi", "ftou",
                       "icmp", "ilookup", "iconst", "pconst"})
SCALARS = ("const", "iconst", "pconst")    # leaves held in a one-element SRAM cell


def reachable(expr, roots=None) -> set[int]:
    """Indices of the nodes the final node (or the `roots`) depends on (itself included)."""
    seen, stack = set(), [len(expr) - 1] if roots is None else list(roots)
    while stack:
        index = stack.pop()
        if index in seen:
            continue
        seen.add(index)
        if expr[index][0] not in LEAVES:
            stack.extend(expr[index][1])
    return seen


def live_nodes(expr, last: int | None = None) -> list:
    """The nodes `last` (default: the final node) depends on, renumbered, `last` the final
    one; input indices unchanged."""
    order = sorted(reachable(expr, None if last is None else [last]))
    renumber = {old: new for new, old in enumerate(order)}
    return [expr[i] if expr[i][0] in LEAVES else
            (expr[i][0], tuple(renumber[a] for a in expr[i][1])) + tuple(expr[i][2:])
            for i in order]


@dataclass
class Elementwise:
    """out[i] = expr(inputs[i]) over a dense iteration space of `out.shape` (rank <= 4).
    Inputs are indexed in that space (broadcast dims have stride 0).
    `extra_outputs` are the further results of a multi-result computation (an LSTM
    cell's new c and h): (tensor indexed like `out`, node of `expr` it stores), e.g.
    (c, 20) stores node 20 while `out` stores the last node. The expression is computed
    once for all of them."""
    out: TensorRef
    inputs: list[TensorRef]
    expr: list[ExprNode]
    extra_outputs: list[tuple[TensorRef, int]] = field(default_factory=list)


@dataclass
class Conv2D:
    """out[n][f][y][x] = epilogue(Σ in[n][g·C/G + c][y·sh + ky·dh - pt][x·sw + kx·dw - pl]
    · w[f][c][ky][kx]) with zero padding outside the input.
    in: (N, C, H, W); w: (F, C/groups, KH, KW); out: (N, F, Ho, Wo) — logical orders,
    whatever the memory layout (strides)."""
    input: TensorRef
    weight: TensorRef
    out: TensorRef
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)     # top, left, bottom, right
    groups: int = 1
    epilogue: list[ExprNode] = field(default_factory=lambda: [("acc",)])
    epilogue_inputs: list[TensorRef] = field(default_factory=list)  # indexed like out (N, F, Ho, Wo)
    narrow_sum: bool = False    # the IR sums in the f16/bf16 operand dtype, not in f32
    extra_outputs: list[tuple[TensorRef, int]] = field(default_factory=list)  # as Elementwise's


@dataclass
class Matmul:
    """out[b][m][n] = epilogue(Σ_k a[b][m][k] · b[b][k][n]), where each of b, m, n, k is
    a multi-index over `dims` = (batch, M, N, K) logical dims (outermost first; one each
    for a plain batched matmul): a: (*B, *M, *K); b: (*B, *K, *N); out: (*B, *M, *N).
    A 1x1 convolution in NCHW has M = (rows, cols). Transposed operands are just other
    strides."""
    a: TensorRef
    b: TensorRef
    out: TensorRef
    epilogue: list[ExprNode] = field(default_factory=lambda: [("acc",)])
    epilogue_inputs: list[TensorRef] = field(default_factory=list)  # indexed like out
    dims: tuple[int, int, int, int] = (1, 1, 1, 1)
    narrow_sum: bool = False    # the IR sums in the f16/bf16 operand dtype, not in f32
    extra_outputs: list[tuple[TensorRef, int]] = field(default_factory=list)  # as Elementwise's


@dataclass
class Pool2D:
    """Max, average or sum pooling. input: (N, C, H, W); out: (N, C, Ho, Wo).
    out[n][c][y][x] = epilogue(reduce over ky, kx of in[n][c][y·sh + ky·dh - pt][x·sw + kx·dw - pl]),
    positions outside the input skipped (max, sum) or, for avg, counted in the divisor
    only if count_include_pad (the divisor is KH·KW when there are no pads)."""
    input: TensorRef
    out: TensorRef
    kind: str                          # "max", "avg" or "sum" (window sum, no division)
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)     # top, left, bottom, right
    count_include_pad: bool = False
    epilogue: list[ExprNode] = field(default_factory=lambda: [("acc",)])
    epilogue_inputs: list[TensorRef] = field(default_factory=list)


@dataclass
class Reduce:
    """out[o] = reduce_i input[o][i]. input: (O, I) (strided views of e.g. N·C × H·W);
    out: (O,). kind: "sum", "max", "min", "mean" (global average pooling = mean)."""
    input: TensorRef
    out: TensorRef
    kind: str
    epilogue: list[ExprNode] = field(default_factory=lambda: [("acc",)])
    epilogue_inputs: list[TensorRef] = field(default_factory=list)


@dataclass
class Rowwise:
    """An expression over an (O, I) space (rows of I elements) whose ("reduce", (a,),
    kind) nodes, kind "sum" or "max", are row values r[o] = combine over i of node a[o][i],
    read broadcast along I by the nodes after them (softmax, layer-norm rows, x - mean).
    inputs and out are (O, I) views, or (B, O, I) views when the kept dims do not
    flatten into one (B batches of rows); stride 0 along I means one value per row (an
    input broadcast along I, or an out holding one result per row). Where the reduced
    dims do not flatten into one in every view (a layer norm over (C, H, W) written into
    the next convolution's padded input), I is the last `row_rank` dims: a row is a box
    of them, dense in SRAM."""
    out: TensorRef
    inputs: list[TensorRef]
    expr: list[ExprNode]
    extra_outputs: list[tuple[TensorRef, int]] = field(default_factory=list)  # as Elementwise's
    row_rank: int = 1


def varies_along_rows(expr: list[ExprNode], input_varies: list[bool]) -> list[bool]:
    """Per node of a Rowwise expression: whether its value varies along I (within a row),
    given whether each input does (`row_varying`)."""
    varies: list[bool] = []
    for node in expr:
        kind = node[0]
        if kind == "input":
            varies.append(input_varies[node[1]])
        elif kind in SCALARS + ("acc", "reduce"):
            varies.append(False)
        else:
            varies.append(any(varies[a] for a in node[1]))
    return varies


def row_varying(ref: TensorRef, kept_rank: int = 1) -> bool:
    """Whether `ref` (its first `kept_rank` dims the rows) varies within a row."""
    return any(stride != 0 and size > 1
               for size, stride in zip(ref.shape[kept_rank:], ref.strides[kept_rank:]))


NpuOp = Elementwise | Conv2D | Matmul | Pool2D | Reduce | Rowwise
