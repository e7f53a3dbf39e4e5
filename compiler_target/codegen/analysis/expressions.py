"""Elementwise expressions (ops.ExprNode lists): the arith/math ops of linalg bodies the
vector engine has instructions for, constants, values computed from loop positions, and
the rewrites that name activation patterns and drop dead nodes."""
import numpy as np
from iree.compiler import ir

from ..ops import TensorRef
from .errors import NotSupported
from .indexing import row_major
from .values import Empty, Scalar, View

BINARY = {"arith.addf": "add", "arith.subf": "sub", "arith.mulf": "mul", "arith.divf": "div",
          "arith.maximumf": "max", "arith.maxnumf": "max",
          "arith.minimumf": "min", "arith.minnumf": "min"}
UNARY = {"arith.negf": "neg", "math.absf": "abs", "math.tanh": "tanh", "math.exp": "exp",
         "math.sqrt": "sqrt", "math.rsqrt": "rsqrt"}
# arith.cmpf predicates: the comparison is `lhs > rhs` or `lhs < rhs` (NaN order ignored).
CMPF_GREATER = {2, 3, 9, 10}   # ogt oge ugt uge
CMPF_LESS = {4, 5, 11, 12}     # olt ole ult ule
CONVERSIONS = {"arith.extf", "arith.truncf", "arith.extsi", "arith.extui", "arith.trunci",
               "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui"}
LEAVES = ("input", "acc", "const")

_same = lambda a: a  # noqa: E731
_to_float = lambda a: np.asarray(a, np.float32)  # noqa: E731
_to_int = lambda a: np.trunc(a).astype(np.int64)  # noqa: E731
_float = lambda f: lambda a, b: f(np.float32(a), np.float32(b))  # noqa: E731
# Arithmetic on values computed from loop positions (index computations, f32 as the
# body computes them), evaluated at every position.
INDEX_ARITHMETIC = {"arith.index_cast": _same, "arith.index_castui": _same, "arith.extsi": _same,
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
                    "math.floor": lambda a: np.floor(np.float32(a))}


def constant(op):
    """The meaning of an arith.constant: a Scalar, or a View of an inlined tensor."""
    attribute = op.attributes["value"]
    if isinstance(attribute, (ir.FloatAttr, ir.IntegerAttr)):
        return Scalar(attribute.value)
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
    if op.name in INDEX_ARITHMETIC:
        args = [array_of(value) for value in op.operands]
        if all(arg is not None for arg in args):
            return INDEX_ARITHMETIC[op.name](*args)
    return None


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
    keep, stack = set(), list(roots)
    while stack:
        index = stack.pop()
        if index not in keep:
            keep.add(index)
            if nodes[index][0] not in LEAVES:
                stack.extend(nodes[index][1])
    order = sorted(keep)
    renumber = {old: new for new, old in enumerate(order)}
    used_inputs = sorted({nodes[i][1] for i in order if nodes[i][0] == "input"})
    input_index = {old: new for new, old in enumerate(used_inputs)}
    expr = []
    for i in order:
        node = nodes[i]
        if node[0] == "input":
            expr.append(("input", input_index[node[1]]))
        elif node[0] in ("acc", "const"):
            expr.append(node)
        else:
            expr.append((node[0], tuple(renumber[a] for a in node[1])) + tuple(node[2:]))
    return expr, [inputs[i] for i in used_inputs], [renumber[root] for root in roots]


def simplified(nodes: list) -> list:
    """Names the activation patterns the vector unit has instructions for:
    max(x, 0) -> relu(x); min(max(x, lo), hi) and max(min(x, hi), lo) -> clamp(x, lo, hi);
    1 / (exp(-x) + 1) -> sigmoid(x); relu(x) + min(x, 0) * a -> leakyrelu(x, a).
    Nodes that become dead are left for `pruned`."""
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
    return nodes


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
    operand, a tensor.empty of the kernel's shape), or "rows": any other reduction,
    whose body the walk translates as an expression reduced along the rows."""
    body = generic.body
    names = [op.name for op in body]
    *args, out = generic.op.regions[0].blocks[0].arguments
    data = [arg for arg, operand in zip(args, generic.inputs)
            if not isinstance(operand.value, Empty)]
    yielded = body[-1].operands[0]
    conversions = sorted({name for name in names if name in CONVERSIONS})
    if conversions and {"arith.mulf", "arith.muli"} & set(names):
        raise NotSupported(f"{generic.name}: mixed-precision body ({', '.join(conversions)}); "
                           "an NPU op has one element type")
    if names == ["arith.mulf", "arith.addf", "linalg.yield"] and len(data) == 2 and \
            combines(body[0], *data) and combines(body[1], out, body[0].results[0]) and \
            yielded == body[1].results[0]:
        return "mac"
    kind = {"arith.addf": "sum", "arith.maximumf": "max", "arith.maxnumf": "max"}.get(names[0])
    windowed = len(data) < len(generic.inputs)
    if windowed and len(names) == 2 and kind and len(data) == 1 and \
            combines(body[0], out, data[0]) and yielded == body[0].results[0]:
        return kind
    if windowed:
        raise NotSupported(f"{generic.name}: pooling body ({', '.join(names[:-1])}) "
                           "is not a sum or max of its input")
    return "rows"


def combines(op, *values) -> bool:
    """Whether the op's operands are exactly `values`, in any order."""
    operands = list(op.operands)
    return len(operands) == len(values) and all(
        sum(o == v for o in operands) == sum(w == v for w in values) for v in values)

