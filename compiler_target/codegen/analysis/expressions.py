"""Elementwise expressions (ops.ExprNode lists): the arith/math ops of linalg bodies the
vector engine has instructions for, constants, values computed from loop positions, and
the rewrites that name activation patterns, fold scalar affine arithmetic into vscale
nodes and drop dead nodes."""
import math

import numpy as np
from iree.compiler import ir

from executable_format.isa import Flag

from ..ops import LEAVES, SCALARS, TensorRef, reachable
from .errors import NotSupported
from .indexing import row_major
from .values import Empty, Scalar, View

BINARY = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
          "arith.maximumf": "max", "arith.maxnumf": "max",
          "arith.minimumf": "min", "arith.minnumf": "min"}
UNARY = {"arith.negf": "neg", "math.absf": "abs", "math.tanh": "tanh", "math.exp": "exp",
         "math.sqrt": "sqrt", "math.rsqrt": "rsqrt", "math.floor": "floor", "math.ceil": "ceil",
         "math.round": "roundaway", "math.erf": "erf", "math.log": "log",
         "math.log1p": "log1p", "math.sin": "sin", "math.cos": "cos"}
# arith.cmpf's predicates (false, oeq, ogt, oge, olt, ole, one, ord, ueq, ugt, uge, ult,
# ule, une, uno, true) as the outcomes of comparing lhs with rhs that make each true:
# vcmp's flags.
_LT, _EQ, _GT, _UN = (int(f) for f in (Flag.CMP_LESS, Flag.CMP_EQUAL, Flag.CMP_GREATER,
                                       Flag.CMP_UNORDERED))
CMPF_OUTCOMES = (0, _EQ, _GT, _GT | _EQ, _LT, _LT | _EQ, _LT | _GT, _LT | _EQ | _GT,
                 _EQ | _UN, _GT | _UN, _GT | _EQ | _UN, _LT | _UN, _LT | _EQ | _UN,
                 _LT | _GT | _UN, _UN, _LT | _EQ | _GT | _UN)
# arith.cmpi's signed predicates (eq, ne, slt, sle, sgt, sge) as vcmp's outcomes; the
# unsigned ones (ult, ule, ugt, uge) are not taken.
CMPI_OUTCOMES = {0: _EQ, 1: _LT | _GT, 2: _LT, 3: _LT | _EQ, 4: _GT, 5: _GT | _EQ}
# Integer arithmetic on the vector engine's i32 values (i8/i16 values are held as i32;
# arithmetic narrower than 32 bits is taken only where it provably cannot wrap).
INT_BINARY = {"arith.addi": "iadd", "arith.subi": "isub", "arith.muli": "imul",
              "arith.maxsi": "imax", "arith.minsi": "imin"}
CONVERSIONS = {"arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci",
               "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui"}
F32_MAX = float(np.finfo(np.float32).max)

_same = lambda a: a  # noqa: E731
_to_float = lambda a: np.asarray(a, np.float32)  # noqa: E731
_to_int = lambda a: np.trunc(a).astype(np.int64)  # noqa: E731
_float = lambda f: lambda a, b: f(np.float32(a), np.float32(b))  # noqa: E731
# Arithmetic on values computed from loop positions (index computations, f32 as the
# body computes them), evaluated at every position.
INDEX_ARITHMETIC = {"arith.index_cast": _same, "arith.index_castui": _same, "arith.extsi": _same,
                    "arith.extui": _same,
                    "arith.trunci": _same, "arith.sitofp": _to_float, "arith.uitofp": _to_float,
                    "arith.fptosi": _to_int, "arith.fptoui": _to_int,
                    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
                    "arith.minsi": np.minimum, "arith.maxsi": np.maximum,
                    "arith.floordivsi": np.floor_divide,
                    "arith.divsi": lambda a, b: np.trunc(a / b).astype(np.int64),
                    "arith.remsi": np.fmod, "arith.divui": np.floor_divide, "arith.remui": np.mod,
                    "arith.addf": _float(np.add), "arith.subf": _float(np.subtract),
                    "arith.mulf": _float(np.multiply), "arith.divf": _float(np.divide),
                    "arith.maximumf": _float(np.maximum), "arith.minimumf": _float(np.minimum),
                    "math.floor": lambda a: np.floor(np.float32(a)),
                    "math.ceil": lambda a: np.ceil(np.float32(a)),
                    "arith.select": lambda c, a, b: np.where(c, a, b)}


def constant(op):
    """The meaning of an arith.constant: a Scalar, or a View of an inlined tensor."""
    attribute = op.attributes["value"]
    if isinstance(attribute, (ir.FloatAttr, ir.IntegerAttr)):
        return Scalar(attribute.value)
    if isinstance(attribute, ir.BoolAttr):          # an i1 `true` or `false`
        return Scalar(int(attribute.value))
    if isinstance(attribute, (ir.DenseFPElementsAttr, ir.DenseIntElementsAttr)):
        shape = tuple(ir.ShapedType(attribute.type).shape)
        dtype = str(ir.ShapedType(attribute.type).element_type)
        if attribute.is_splat:
            splat = np.array([attribute.get_splat_value().value])
            return View(TensorRef(dtype, shape, (0,) * len(shape), -1, 0, splat))
        try:
            data = np.array(attribute).reshape(shape)
        except TypeError:
            raise NotSupported(f"inlined {dtype} constant cannot be read") from None
        return View(TensorRef(dtype, shape, row_major(shape), -1, 0, data))
    raise NotSupported(f"constant {str(attribute)[:60]} cannot be read")


def index_arithmetic(op, array_of, position) -> np.ndarray | None:
    """The op's value at every loop position, if it is arithmetic on loop indices
    (`position(loop)`) and constants; else None."""
    if op.name == "linalg.index":
        return position(ir.IntegerAttr(op.attributes["dim"]).value)
    if op.name == "arith.constant" and isinstance(op.attributes["value"], ir.IntegerAttr):
        return np.array(ir.IntegerAttr(op.attributes["value"]).value)
    if op.name == "arith.cmpf":
        args = [array_of(value) for value in op.operands]
        if any(arg is None for arg in args):
            return None
        return _compared(*(np.float32(arg) for arg in args),
                         CMPF_OUTCOMES[ir.IntegerAttr(op.attributes["predicate"]).value])
    if op.name in INDEX_ARITHMETIC:
        args = [array_of(value) for value in op.operands]
        if all(arg is not None for arg in args):
            if op.name in UNSIGNED_OPERANDS:
                args = [_as_unsigned(arg, _integer_bits(value.type))
                        for arg, value in zip(args, op.operands)]
            result = INDEX_ARITHMETIC[op.name](*args)
            bits = _integer_bits(op.results[0].type)
            return result if bits is None else _wrapped(result, bits)
    return None


def _compared(a: np.ndarray, b: np.ndarray, outcomes: int) -> np.ndarray:
    """Where comparing a with b gives one of the `outcomes` (vcmp's flags), as 0/1."""
    result = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b)), bool)
    for flag, outcome in ((_LT, a < b), (_EQ, a == b), (_GT, a > b),
                          (_UN, np.isnan(a) | np.isnan(b))):
        if outcomes & flag:
            result |= outcome
    return result.astype(np.int64)


# Ops that read their integer operands as unsigned.
UNSIGNED_OPERANDS = {"arith.uitofp", "arith.divui", "arith.remui", "arith.index_castui",
                     "arith.extui"}


def _integer_bits(type_) -> int | None:
    """The bit width of an integer or index type (index: 64), else None."""
    text = str(type_)
    if text == "index":
        return 64
    return int(text[1:]) if text[:1] == "i" and text[1:].isdigit() else None


def _wrapped(values, bits: int) -> np.ndarray:
    """Integers wrapped to `bits` bits, two's complement (MLIR's integer arithmetic)."""
    values = np.asarray(values, np.int64)
    if bits >= 64:
        return values
    half = 1 << (bits - 1)
    return (values + half) % (1 << bits) - half


def _as_unsigned(values, bits: int | None) -> np.ndarray:
    """Integers of `bits` bits read as unsigned (floats pass unchanged)."""
    values = np.asarray(values)
    if bits is None or bits >= 64 or values.dtype.kind == "f":
        return values
    return values.astype(np.int64) % (1 << bits)


def splat(value) -> Scalar | None:
    """The value of a scalar, or of a tensor constant with a single value."""
    if isinstance(value, Scalar):
        return value
    data = value.ref.constant if isinstance(value, View) else None
    if data is not None and data.size == 1:
        return Scalar(data.reshape(-1)[0].item())
    return None


def pruned(nodes: list, inputs: list[TensorRef]) -> tuple[list, list[TensorRef]]:
    """The nodes the last one depends on, renumbered, and the inputs they read."""
    expr, used, _ = pruned_to(nodes, inputs, [len(nodes) - 1])
    return expr, used


def pruned_to(nodes: list, inputs: list[TensorRef], roots: list[int]):
    """The nodes the `roots` depend on, renumbered, the inputs they read, and the roots'
    new indices."""
    order = sorted(reachable(nodes, roots))
    renumber = {old: new for new, old in enumerate(order)}
    used_inputs = sorted({nodes[i][1] for i in order if nodes[i][0] == "input"})
    input_index = {old: new for new, old in enumerate(used_inputs)}
    expr = []
    for i in order:
        node = nodes[i]
        if node[0] == "input":
            expr.append(("input", input_index[node[1]]))
        elif node[0] in ("acc",) + SCALARS:
            expr.append(node)
        else:
            expr.append((node[0], tuple(renumber[a] for a in node[1])) + tuple(node[2:]))
    return expr, [inputs[i] for i in used_inputs], [renumber[root] for root in roots]


def simplified(nodes: list, kept=()) -> list:
    """Names the activation patterns the vector unit has instructions for:
    max(x, 0) -> relu(x); min(max(x, lo), hi) and max(min(x, hi), lo) -> clamp(x, lo, hi);
    1 / (exp(-x) + 1) -> sigmoid(x); relu(x) + min(x, 0) * a -> leakyrelu(x, a);
    then folds chains of scalar affine steps into scale nodes (`_fold_affine_steps`,
    bit-exact) and the steps around a clamp and its product into them
    (`_fold_clamp_products`: hardswish as one hswish node, hard sigmoid). Where the
    expression rounds to integers, as a quantized graph does, or to f16 (`narrow`),
    whose results must be stock's bit for bit (an ulp before a rounding is a step
    after it), quantizers fold exactly instead
    (`_fold_quantizers`) and products feeding adds fuse as stock's LLVM contracts them
    (`_fuse_multiply_adds`), and a value quantized again with the scale it was just
    dequantized with is the value (`_fold_requantizations`). `kept`: the nodes besides the last
    one whose values are read (stored results). Nodes that become dead are left for
    `pruned`."""
    nodes = list(nodes)

    def const(i):
        return nodes[i][1] if nodes[i][0] == "const" else None

    def split(i, kind):
        """(x, c) if node i is kind(x, const c) in either order, else (None, None)."""
        if nodes[i][0] != kind:
            return None, None
        a, b = nodes[i][1]
        if const(b) is not None:
            return a, const(b)
        return (b, const(a)) if const(a) is not None else (None, None)

    def bounded(i, kind):
        """(x, bound) if node i bounds x below (kind max, or relu) or above (kind min)."""
        if kind == "max" and nodes[i][0] == "relu":
            return nodes[i][1][0], 0.0
        return split(i, kind)

    for i, node in enumerate(nodes):
        kind = node[0]
        for outer, inner in (("min", "max"), ("max", "min")):
            y, bound = split(i, outer)
            if y is not None:
                x, other = bounded(y, inner)
                if x is not None:
                    lo, hi = (other, bound) if outer == "min" else (bound, other)
                    nodes[i] = ("clamp", (x,), lo, hi)
        x, c = split(i, "max")
        if x is not None and c == 0.0:
            nodes[i] = ("relu", (x,))
        if kind == "div" and const(node[1][0]) == 1.0:
            e, one = split(node[1][1], "add")
            if one == 1.0 and nodes[e][0] == "exp" and nodes[nodes[e][1][0]][0] == "neg":
                nodes[i] = ("sigmoid", (nodes[nodes[e][1][0]][1][0],))
        if kind == "add":
            for r, m in (node[1], node[1][::-1]):
                low, alpha = split(m, "mul")
                if nodes[r][0] == "relu" and low is not None:
                    x, zero = split(low, "min")
                    if zero == 0.0 and x == nodes[r][1][0]:
                        nodes[i] = ("leakyrelu", (x,), alpha)
    _fold_affine_steps(nodes)
    # quantized, or f16 results of f32 steps: every rounding as stock's
    if any(node[0] in ("round", "narrow") for node in nodes):
        _fold_quantizers(nodes, {*kept, len(nodes) - 1})
        _fold_requantizations(nodes, {*kept, len(nodes) - 1})
        _fuse_multiply_adds(nodes, {*kept, len(nodes) - 1})
    else:
        _fold_clamp_products(nodes, {*kept, len(nodes) - 1})
    return nodes


def _affine(nodes: list, i: int):
    """(x, m, a) if node i is x·m + a for constants m and a: a scale, a neg, or an add, sub,
    mul or div of x and a const node (x / c as x·(1/c)); else None. No shift is -0.0,
    the zero that leaves every x as it is (x + -0.0 = x, also for x = -0.0)."""
    node = nodes[i]
    kind = node[0]
    if kind == "scale":
        return node[1][0], node[2], node[3]
    if kind == "neg":
        return node[1][0], -1.0, -0.0
    if kind not in ("add", "sub", "mul", "div"):
        return None
    lhs, rhs = node[1]
    lhs_const = nodes[lhs][1] if nodes[lhs][0] == "const" else None
    rhs_const = nodes[rhs][1] if nodes[rhs][0] == "const" else None
    if rhs_const is not None and lhs_const is None:
        c = rhs_const
        if kind == "div":
            return (lhs, 1.0 / c, -0.0) if c != 0 else None
        return {"add": (lhs, 1.0, c), "sub": (lhs, 1.0, -c), "mul": (lhs, c, -0.0)}[kind]
    if lhs_const is not None and rhs_const is None:
        c = lhs_const
        return {"add": (rhs, 1.0, c), "sub": (rhs, -1.0, c), "mul": (rhs, c, -0.0)}.get(kind)
    return None


def _power_of_two(m: float) -> bool:
    return m != 0 and math.isfinite(m) and abs(math.frexp(m)[0]) == 0.5


def _no_shift(a: float) -> bool:
    return a == 0 and math.copysign(1.0, a) < 0


def _scaling(m: float, a: float) -> bool:
    """x·m + a is x·2^k, exactly."""
    return _power_of_two(m) and _no_shift(a)


def _in_f32(*values: float) -> bool:
    return all(math.isfinite(v) and float(np.float32(v)) == v for v in values)


def _fold_affine_steps(nodes: list) -> None:
    """An affine step (`_affine`) on another becomes one ("scale", (x,), m, a) node where a
    vscale computes the same bits as the two instructions, whether the core rounds
    x·m + a once (fused multiply-add) or twice. So only steps of that kind are folded:
    x·m + a with m a power of two (x·m is exact) or without shift, and x / c only for c
    a power of two. The fold keeps that form and is exact when the inner step is an
    exact scaling (the outer step sees x·2^k exactly), or when the outer step is a
    scaling by 2^k, which commutes with rounding (by a negative one only if the inner
    step has no shift, else the exact zero x·m + a = +0 would change sign). Exact unless
    an intermediate value overflows or is subnormal in the dtype."""
    def step(i):
        found = _affine(nodes, i)
        if found is None or (nodes[i][0] == "div" and not _power_of_two(found[1])):
            return None
        return found

    for i in range(len(nodes)):
        outer = step(i)
        inner = step(outer[0]) if outer is not None else None
        if inner is None:
            continue
        (_, m2, a2), (x, m1, a1) = outer, inner
        if _scaling(m1, a1):
            folded = (m1 * m2, a2)
        elif _scaling(m2, a2) and (m2 > 0 or _no_shift(a1)):
            folded = (m1 * m2, -0.0 if _no_shift(a1) else a1 * m2)
        else:
            continue
        if _in_f32(*folded):
            nodes[i] = ("scale", (x,)) + folded


def _integral(*values: float) -> bool:
    return all(math.isfinite(v) and v == int(v) and abs(v) <= 2 ** 24 for v in values)


def _fold_quantizers(nodes: list, kept: set[int]) -> None:
    """A quantizer clamp(round(y) + zp, lo, hi) (integral zp, lo, hi) is one vround of y
    with the bounds lo - zp, hi - zp, plus zp (none if zp = 0); a dequantizer of its
    value, itof(ftoi(q) - zp'), is that rounded value plus zp - zp'. Exact: the values
    are integers, below 2^24 in magnitude or saturated alike. A QDQ pair of IREE's
    (div, round, add, clamp, ftoi, isub, itof, mul) becomes div, round, mul."""
    for c in range(len(nodes)):
        if nodes[c][0] != "clamp" or not _integral(*nodes[c][2:]):
            continue
        users = _live_users(nodes, kept)
        lo, hi = nodes[c][2:]
        a = nodes[c][1][0]
        step = _affine(nodes, a)
        if nodes[a][0] == "round":
            r, zp = a, 0.0
        elif step is not None and step[1] == 1.0 and _integral(step[2]) and \
                nodes[step[0]][0] == "round" and len(users[a]) == 1 and a not in kept:
            r, zp = step[0], step[2] + 0.0
        else:
            continue
        if len(users[r]) != 1 or r in kept or nodes[r][2:] != (-math.inf, math.inf):
            continue
        y = nodes[r][1][0]
        if zp == 0:
            nodes[c] = ("round", (y,), lo, hi)
            r = c
        else:
            nodes[r] = ("round", (y,), lo - zp, hi - zp)
            nodes[c] = ("scale", (r,), 1.0, zp)
        _fold_dequantizers(nodes, kept, c, r, zp, (lo, hi))


REQUANTIZED_BOUND = 2.0 ** 20     # |x| up to this: x·s / s rounded twice is x ± 2^-3


def _fold_requantizations(nodes: list, kept: set[int]) -> None:
    """round(x·s / s, lo', hi') of a rounded x = round(y, lo, hi) within [lo', hi'] is x:
    a value quantized again with the scale it was just dequantized with (a graph's
    QDQ pair repeated, as at PP-OCR's output). Exact: x is an integer of at most 2^20 in
    magnitude and s a normal float, so x·s / s, two roundings of relative error 2^-24
    each, is within 2^-3 of x and rounds back to it, and the clamp holds. The users of
    the outer round read x instead."""
    def const(i):
        return nodes[i][1] if nodes[i][0] == "const" else None

    for i, node in enumerate(nodes):
        if node[0] != "round" or i in kept or nodes[node[1][0]][0] != "div":
            continue
        product, divisor = nodes[node[1][0]][1]
        if nodes[product][0] != "mul" or const(divisor) is None:
            continue
        x, factor = nodes[product][1]
        if const(factor) is None:
            x, factor = factor, x
        s = const(divisor)
        if const(factor) != s or not 2.0 ** -100 <= abs(s) <= 2.0 ** 100 or \
                nodes[x][0] != "round":
            continue
        (lo, hi), (outer_lo, outer_hi) = nodes[x][2:], node[2:]
        if not (outer_lo <= lo and hi <= outer_hi and
                max(abs(lo), abs(hi)) <= REQUANTIZED_BOUND):
            continue
        _read_instead(nodes, [u for u, user in enumerate(nodes)
                              if user[0] not in LEAVES and i in user[1]], i, x)


def _read_instead(nodes: list, users, old: int, new: int) -> None:
    """The `users` nodes read node `new` where they read node `old`."""
    for user in users:
        kind, args, *params = nodes[user]
        nodes[user] = (kind, tuple(new if arg == old else arg for arg in args), *params)


def _fits_conversion(node, bounds) -> bool:
    """Whether integral values within `bounds` pass a float-to-integer node unchanged."""
    kind, _, bits = node
    lo, hi = (0, 2 ** bits - 1) if kind == "ftou" else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
    return lo <= bounds[0] <= bounds[1] <= hi


def _fold_dequantizers(nodes: list, kept: set[int], q: int, r: int, zp: float, bounds) -> None:
    """Every itof(ftoi(q) ∓ k) of the quantized value q = r + zp (integral, within
    `bounds`) as r + zp ∓ k in f32 (users redirected to r where that is r itself)."""
    users = _live_users(nodes, kept)
    for f in users[q]:
        if nodes[f][0] not in ("ftoi", "ftou") or not _fits_conversion(nodes[f], bounds):
            continue
        for d in users[f]:
            if nodes[d][0] not in ("iadd", "isub"):
                continue
            lhs, rhs = nodes[d][1]
            if lhs != f or nodes[rhs][0] != "iconst" or not _integral(nodes[rhs][1]):
                continue
            shift = zp + (nodes[rhs][1] if nodes[d][0] == "iadd" else -nodes[rhs][1])
            for t in users[d]:
                if nodes[t][0] != "itof":
                    continue
                if shift == 0 and t not in kept:
                    _read_instead(nodes, _live_users(nodes, kept)[t], t, r)
                else:
                    nodes[t] = ("scale", (r,), 1.0, shift + 0.0 if shift else -0.0)


def _fuse_multiply_adds(nodes: list, kept: set[int]) -> None:
    """x·y + z as one ("fma", (x, y, z)) node, rounded once, as LLVM contracts IREE's
    fmul and fadd (IREE marks them contractable) on an FMA machine: the add's first
    operand if it is a product nothing else reads, else its second."""
    users = _live_users(nodes, kept)
    for i, node in enumerate(nodes):
        if node[0] != "add":
            continue
        for product, addend in (node[1], node[1][::-1]):
            if nodes[product][0] == "mul" and users[product] == [i] and product not in kept \
                    and product != addend:
                nodes[i] = ("fma", nodes[product][1] + (addend,))
                break


def _live_users(nodes: list, roots: set[int]) -> dict[int, list[int]]:
    """The users of every node among the nodes the `roots` depend on."""
    users = {i: [] for i in range(len(nodes))}
    seen, stack = set(), list(roots)
    while stack:
        i = stack.pop()
        if i not in seen and nodes[i][0] not in LEAVES:
            seen.add(i)
            for arg in set(nodes[i][1]):
                users[arg].append(i)
                stack.append(arg)
    return users


def _fold_clamp_products(nodes: list, kept: set[int]) -> None:
    """z·(clamp(y·a + b, lo, hi)·p + q)·s + t, each factor and term from a chain of
    scalar affine steps (`_affine`, any number of them), is z·clamp(y·a' + b', lo', hi')
    + t: the steps after the clamp and after the product move into the clamp's input and
    bounds. That is a scale, a clamp, a mul, and a scale if t != 0 (without the product:
    a scale and a clamp); where z is y and the clamp [0, hi], a hard swish,
    hi·y·clamp(y·a'/hi + b'/hi, 0, 1) + t: an hswish node (vhswish), and a scale if hi != 1
    or t != 0. Hardswish as ONNX imports it, x·(relu6(x + 3)/6) (4 nodes -> 1), or as
    PaddlePaddle's x·relu6(x + 3)/6 with a scale and shift after it (6 nodes -> 2);
    hard-sigmoid gates (4 -> 3). Rewritten where it saves nodes. The
    rounding changes by an ulp or so (x/6 becomes x·(1/6), one vscale rounds x·a + b
    once or twice)."""
    for c in range(len(nodes)):
        if nodes[c][0] != "clamp":
            continue
        users = _live_users(nodes, kept)

        def single_user(i):
            return users[i][0] if len(users[i]) == 1 and i not in kept else None

        def steps_after(i) -> list[int]:
            """The affine steps applied to node i, each the single user of the one before."""
            chain = []
            while (user := single_user(i)) is not None and \
                    _affine(nodes, user) is not None and _affine(nodes, user)[0] == i:
                chain.append(user)
                i = user
            return chain

        def composed(chain: list[int]) -> tuple[float, float]:
            m, a = 1.0, -0.0
            for i in chain:
                _, step_m, step_a = _affine(nodes, i)
                m, a = m * step_m, a * step_m + step_a
            return m, a

        before, y = [], nodes[c][1][0]
        while _affine(nodes, y) is not None and single_user(y) is not None:
            before.insert(0, y)
            y = _affine(nodes, y)[0]
        after = steps_after(c)
        end = after[-1] if after else c
        product = single_user(end)
        if product is not None and (nodes[product][0] != "mul" or
                                    nodes[product][1].count(end) != 1):
            product = None
        then = steps_after(product) if product is not None else []
        (a, b), (p, q), (s, t) = composed(before), composed(after), composed(then)
        p, q = p * s, q * s
        lo, hi = sorted((nodes[c][2] * p + q + 0.0, nodes[c][3] * p + q + 0.0))
        new = [("scale", (y,), a * p, b * p + q), ("clamp", (None,), lo, hi)]
        if product is not None and lo == 0 and hi > 0 and y in nodes[product][1]:
            # y·clamp(y·a + b, 0, hi) = hi·y·clamp((y·a + b) / hi, 0, 1): a hard swish
            new = [("hswish", (y,), a * p / hi, (b * p + q) / hi)]
            if hi != 1 or t != 0:
                new.append(("scale", (None,), hi, t))
        elif product is not None:
            new.append(("mul", tuple(None if arg == end else arg for arg in nodes[product][1])))
            if t != 0:
                new.append(("scale", (None,), 1.0, t))
        positions = before + [c] + after + ([product] if product is not None else []) + then
        if len(new) >= len(positions) or p == 0 or \
                not all(math.isfinite(v) and abs(v) <= F32_MAX for v in (a * p, b * p + q, t)):
            continue
        slots = positions[-len(new):]   # after y and z; the last keeps its value
        for k, (slot, node) in enumerate(zip(slots, new)):
            args = tuple(slots[k - 1] if arg is None else arg for arg in node[1])
            nodes[slot] = (node[0], args) + node[2:]


def averaged(kind: str, expr: list, inputs: list, count: int, average: str):
    """A sum whose only use is a division by the count it summed is an average.
    Returns (kind, expr, inputs) with kind "max", "sum" or `average`."""
    if kind != "sum":
        return kind, expr, inputs
    users = [i for i, node in enumerate(expr) if node[0] not in LEAVES and 0 in node[1]]
    if expr[0] == ("acc",) and len(users) == 1 and expr[users[0]][0] == "div":
        dividend, divisor = expr[users[0]][1]
        if dividend == 0 and expr[divisor] == ("const", float(count)):
            rewritten = [("acc",) if i == users[0] else node for i, node in enumerate(expr)]
            return (average,) + pruned(rewritten, inputs)
    return kind, expr, inputs


def reduction_kind(generic) -> str:
    """"mac" (out + a*b), a pooling "sum" or "max" (out + x or max(out, x) with a window
    operand, a tensor.empty of the kernel's shape), a "window isum" (an i8 window's sum
    in i32, over channels too), or "rows": any other reduction, and a float out + a*b
    of dot products (dot_products), whose body the walk translates as an expression
    reduced along the rows."""
    body = generic.body
    names = [op.name for op in body]
    *args, out = generic.op.regions[0].blocks[0].arguments
    data = [arg for arg, operand in zip(args, generic.inputs)
            if not isinstance(operand.value, Empty)]
    yielded = body[-1].operands[0]
    if integer_mac(body, data, out) or widening_float_mac(body, data, out) or \
            half_weight_mac(body, data, out):
        return "mac"
    if len(data) < len(generic.inputs) and integer_sum(body, data, out):
        return "window isum"
    conversions = sorted({name for name in names if name in CONVERSIONS})
    if conversions and len(data) == 2 and _multiplies_data(body, data):
        raise NotSupported(f"{generic.name}: mixed-precision body ({', '.join(conversions)}); "
                           "an NPU op has one element type")
    if names == ["arith.mulf", "arith.addf", "linalg.yield"] and len(data) == 2 and \
            combines(body[0], *data) and combines(body[1], out, body[0].results[0]) and \
            yielded == body[1].results[0]:
        return "rows" if dot_products(generic) else "mac"
    kind = {"arith.addf": "sum", "arith.maximumf": "max", "arith.maxnumf": "max",
            "arith.maxsi": "max"}.get(names[0])
    windowed = len(data) < len(generic.inputs)
    if windowed and len(names) == 2 and kind and len(data) == 1 and \
            combines(body[0], out, data[0]) and yielded == body[0].results[0]:
        return kind
    if windowed:
        raise NotSupported(f"{generic.name}: pooling body ({', '.join(names[:-1])}) "
                           "is not a sum or max of its input")
    return "rows"


EXTENSIONS = ("arith.extsi", "arith.extui")


def zero_extended(body, args) -> set[int]:
    """Positions in `args` (the body's block arguments) of the byte operands the body
    zero-extends (arith.extui: uint8 quantized data; arith.extsi is int8)."""
    return {i for op in body if op.name == "arith.extui"
            for i, arg in enumerate(args) if op.operands[0] == arg}


def integer_mac(body, data, out) -> bool:
    """Whether the body is out + ext(a)·ext(b) in i32 of two byte operands, each sign-
    or zero-extended (i8 or u8; u8 activations with i8 weights is onnxruntime's default
    quantization): an integer contraction, as IREE fuses a quantized conv or matmul."""
    names = [op.name for op in body]
    if len(names) != 5 or names[0] not in EXTENSIONS or names[1] not in EXTENSIONS or \
            names[2:] != ["arith.muli", "arith.addi", "linalg.yield"] \
            or len(data) != 2 or any(str(arg.type) != "i8" for arg in data) or \
            str(out.type) != "i32":
        return False
    return _extended_mac(body, data, out)


def widening_float_mac(body, data, out) -> bool:
    """Whether the body is out + extf(a)·extf(b) in f32 of two f16 or two bf16 operands:
    the MAC array's own f16/bf16 contraction, which accumulates in f32."""
    names = [op.name for op in body]
    if names != ["arith.extf", "arith.extf", "arith.mulf", "arith.addf", "linalg.yield"] or \
            len(data) != 2 or str(out.type) != "f32" or \
            {str(arg.type) for arg in data} not in ({"f16"}, {"bf16"}):
        return False
    return _extended_mac(body, data, out)


def half_weight_mac(body, data, out) -> bool:
    """Whether the body is out + a·extf(b) in f32 of an f32 and an f16 operand: fp16-stored
    weights computed in f32, which the MAC array takes as an f32 contraction whose B (or
    weights) is f16 (flag HALF_B; f16 to f32 is exact)."""
    names = [op.name for op in body]
    if names != ["arith.extf", "arith.mulf", "arith.addf", "linalg.yield"] or \
            len(data) != 2 or str(out.type) != "f32" or \
            sorted(str(arg.type) for arg in data) != ["f16", "f32"]:
        return False
    ext, mul, add, yielded = body
    half, full = data if str(data[0].type) == "f16" else data[::-1]
    return combines(ext, half) and combines(mul, full, ext.results[0]) and \
        combines(add, out, mul.results[0]) and yielded.operands[0] == add.results[0]


def _extended_mac(body, data, out) -> bool:
    """Whether a five-op body (ext, ext, mul, add, yield) is out + ext(a)·ext(b) of its
    two data arguments, in either order."""
    ext_a, ext_b, mul, add, yielded = body
    extends_both = combines(ext_a, data[0]) and combines(ext_b, data[1]) or \
        combines(ext_a, data[1]) and combines(ext_b, data[0])
    return extends_both and combines(mul, ext_a.results[0], ext_b.results[0]) and \
        combines(add, out, mul.results[0]) and yielded.operands[0] == add.results[0]


def integer_sum(body, data, out) -> bool:
    """Whether the body is out + ext(x) in i32 of one byte operand, sign- or
    zero-extended (the sums of a quantized input IREE computes for a zero-point
    correction)."""
    names = [op.name for op in body]
    if len(names) != 3 or names[0] not in EXTENSIONS or \
            names[1:] != ["arith.addi", "linalg.yield"] or len(data) != 1 or \
            str(data[0].type) != "i8" or str(out.type) != "i32":
        return False
    ext, add, yielded = body
    return combines(ext, data[0]) and combines(add, out, ext.results[0]) and \
        yielded.operands[0] == add.results[0]


def dot_products(generic) -> bool:
    """Whether each output element is a dot product of its own: every parallel loop
    indexes both operands (no M or N loops), so the MAC array would reuse neither
    (PP-LCNet's HardSwish before its global average pool, sum over pixels of x * f(x),
    a batch of 512 dot products of 49). The vector engine multiplies and sums the
    rows instead."""
    parallel = {l for l, kind in enumerate(generic.iterators) if kind == "parallel"}
    return all(parallel <= operand.loops() for operand in generic.inputs)


def _multiplies_data(body, data) -> bool:
    """Whether a product in the body has factors computed from two different data
    operands (a contraction), rather than a data value times constants (a dequantized
    value, summed)."""
    sources = {arg: {k} for k, arg in enumerate(data)}
    for op in body:
        found = set().union(*(sources.get(v, set()) for v in op.operands))
        for result in op.results:
            sources[result] = found
        if op.name in ("arith.mulf", "arith.muli") and len(op.operands) == 2:
            a, b = (sources.get(v, set()) for v in op.operands)
            if a and b and a | b != a & b:
                return True
    return False


def combines(op, *values) -> bool:
    """Whether the op's operands are exactly `values`, in any order."""
    operands = list(op.operands)
    return len(operands) == len(values) and all(
        sum(o == v for o in operands) == sum(w == v for w in values) for v in values)

