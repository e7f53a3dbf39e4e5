"""Integer contractions of zero-point-shifted 8-bit operands, rewritten at the end of the
`input` phase as a contraction of the 8-bit values plus the zero-point terms.

onnxruntime's dynamic quantization (`quantize_dynamic`: DynamicQuantizeLinear then
MatMulInteger) reaches IREE's input phase as a `linalg.matmul` or `batch_matmul` of i32
operands `ext(x) - ext(zx)` (x u8 or i8, zx its zero point) into i64 sums that the next op
truncates to i32. A u8 value minus a u8 zero point needs 9 bits, so the contraction the
code generator sees has i32 operands, and the NPU multiplies 8-bit ones: every such
matmul ran on the host. With each operand a data term that depends on the reduced dims
plus zero-point terms that do not,

    sum_r (a + za)(b + zb) = sum_r a b + zb sum_r a + za sum_r b + n za zb

(n the number of reduced points): one contraction of the 8-bit data (the NPU's), the sums
of each operand over the reduced dims (small reductions), and an elementwise combination
that IREE fuses into the contraction's dispatch as its epilogue. All terms are computed in
i32, which wraps: the result is the exact sum modulo 2^32, the same bits as the i64 sum
truncated to i32. So the rewrite applies only where every use of the sum is that
truncation (or the sum is i32 already), and needs no bound on the values.

Operands are traced through elementwise `linalg.generic`s whose maps are projected
permutations (the importer's extension, subtraction, broadcast and transpose ops); any
other producer ends the trace. A contraction that does not match is left unchanged.
"""
import math
from dataclasses import dataclass

from iree.compiler import ir

from compiler_target.program_functions import clone_before, function_blocks

_CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul", "linalg.generic")
_QUANTIZED_CONV = "linalg.conv_2d_nchw_fchw_q"
_QUANTIZED_CONV_3D = "linalg.conv_3d_ndhwc_dhwcf_q"
_EXTENSIONS = ("arith.extui", "arith.extsi")


@dataclass(frozen=True)
class Term:
    """sign * ext(value) at the indices `dims` (one contraction-space dim per value dim);
    `ext` is None for an i32 value."""
    sign: int
    value: ir.Value
    dims: tuple[int, ...]
    ext: str | None


@dataclass(frozen=True)
class Operand:
    """One side of the contraction: data (an 8-bit term over the reduced dims) plus
    zero-point terms (over the parallel dims only)."""
    data: Term
    zeros: tuple[Term, ...]


def rewrite_zero_point_contractions(module) -> int:
    """Rewrites every matching contraction in `module` (a module operation, in place);
    returns how many."""
    count = 0
    for block in function_blocks(module):
        for op in list(block.operations):
            name = op.operation.name
            if name in _CONTRACTIONS and _rewrite(op.operation, module.context) or \
                    name == _QUANTIZED_CONV and _rewrite_conv(op.operation, module.context) or \
                    name == _QUANTIZED_CONV_3D and _rewrite_conv_3d(op.operation,
                                                                    module.context):
                count += 1
    return count


def _rewrite(op, context) -> bool:
    shape = _contraction_shape(op)
    if shape is None:
        return False
    maps, reduced, extents = shape
    lhs = _operand(op.operands[0], maps[0], reduced)
    rhs = _operand(op.operands[1], maps[1], reduced)
    truncations = _truncations(op)
    if lhs is None or rhs is None or truncations is None:
        return False
    replacement = _replacement(op, context, lhs, rhs, maps, reduced, extents)
    for user in truncations:
        user.results[0].replace_all_uses_with(replacement)
        user.erase()
    if truncations == []:
        op.results[0].replace_all_uses_with(replacement)
    op.erase()
    return True


def _rewrite_conv(op, context) -> bool:
    """`conv_2d_nchw_fchw_q(x, w, zx, zw)` (i8 data, i32 zero points) as the i8 conv with
    its zero-point terms (_zero_point_terms), into the op's own init. Taken for
    ConvInteger's zero point known only at run time (dynamic quantization), and for
    QLinearConv's constant ones (IREE's global optimization leaves `ext(x) - zx` in the
    conv's body, which the NPU's 8-bit MAC cannot take: the conv ran on the host)."""
    x, w, zx, zw, init = op.operands
    if (_constant(zx), _constant(zw)) == (0, 0):
        return False
    x_type, w_type, out_type = (ir.RankedTensorType(v.type) for v in (x, w, init))
    if any(d < 0 for t in (x_type, w_type, out_type) for d in t.shape) or \
            str(x_type.element_type) != "i8" or str(w_type.element_type) != "i8":
        return False
    conv, attrs = "linalg.conv_2d_nchw_fchw", _conv_attributes(op)
    x_text, w_text, out_text = str(x_type), str(w_type), str(out_type)
    f = _Function()
    f.lines += [f"%conv = {conv} {attrs} ins({f.arg(x)}, {f.arg(w)} : "
                f"{x_text}, {w_text}) outs({f.arg(init)} : {out_text}) -> {out_text}"]
    _zero_point_terms(f, conv, attrs, f.arg(x), x_text, Term(1, w, (0, 1, 2, 3), "arith.extsi"),
                      list(w_type.shape), zx, zw, list(out_type.shape), "%result")
    replacement = f.clone_before(op, context, out_text)
    op.results[0].replace_all_uses_with(replacement)
    op.erase()
    return True


def _rewrite_conv_3d(op, context) -> bool:
    """`conv_3d_ndhwc_dhwcf_q(x, w, zx, zw)`, ONNX's ConvInteger or QLinearConv over
    (D, H, W) as the importer transposes it to channels-last, as _rewrite_conv writes the
    2-D one, in NCDHW: the i8 `conv_3d_ncdhw_fcdhw` (which depth_stacked_convs then makes
    a 2-D conv) with its zero-point terms, transposed back (IREE folds the transposes
    into the importer's). Taken whatever the zero points: the quantized 3-D conv ran on
    the host either way."""
    x, w, zx, zw, init = op.operands
    x_type, w_type, out_type = (ir.RankedTensorType(v.type) for v in (x, w, init))
    if any(d < 0 for t in (x_type, w_type, out_type) for d in t.shape) or \
            str(x_type.element_type) != "i8" or str(w_type.element_type) != "i8":
        return False
    n, d, h, wd, c = x_type.shape
    kd, kh, kw, _, o = w_type.shape
    _, od, oh, ow, _ = out_type.shape
    x_t, w_t = f"tensor<{n}x{c}x{d}x{h}x{wd}xi8>", f"tensor<{o}x{c}x{kd}x{kh}x{kw}xi8>"
    out_t = f"tensor<{n}x{o}x{od}x{oh}x{ow}xi32>"
    conv, attrs = "linalg.conv_3d_ncdhw_fcdhw", _conv_attributes(op)
    f = _Function()
    f.lines += [f"%x_empty = tensor.empty() : {x_t}",
                f"%x = linalg.transpose ins({f.arg(x)} : {x_type}) outs(%x_empty : {x_t}) "
                "permutation = [0, 4, 1, 2, 3]",
                f"%w_empty = tensor.empty() : {w_t}",
                f"%w = linalg.transpose ins({f.arg(w)} : {w_type}) outs(%w_empty : {w_t}) "
                "permutation = [4, 3, 0, 1, 2]",
                f"%init_empty = tensor.empty() : {out_t}",
                f"%init = linalg.transpose ins({f.arg(init)} : {out_type}) outs(%init_empty : "
                f"{out_t}) permutation = [0, 4, 1, 2, 3]",
                f"%conv = {conv} {attrs} ins(%x, %w : {x_t}, {w_t}) "
                f"outs(%init : {out_t}) -> {out_t}"]
    # the filter sums read w as it is: its dims (kd, kh, kw, c, o) as 1, 2, 3, 4, 0
    _zero_point_terms(f, conv, attrs, "%x", x_t, Term(1, w, (1, 2, 3, 4, 0), "arith.extsi"),
                      [o, c, kd, kh, kw], zx, zw, [n, o, od, oh, ow], "%combined")
    f.lines += [f"%result_empty = tensor.empty() : {out_type}",
                f"%result = linalg.transpose ins(%combined : {out_t}) outs(%result_empty : "
                f"{out_type}) permutation = [0, 2, 3, 4, 1]"]
    replacement = f.clone_before(op, context, str(out_type))
    op.results[0].replace_all_uses_with(replacement)
    op.erase()
    return True


def _conv_attributes(op) -> str:
    return f"{{dilations = {op.attributes['dilations']}, strides = {op.attributes['strides']}}}"


def _zero_point_terms(f, conv: str, attrs: str, x: str, x_text: str, filters: Term,
                      filter_shape: list[int], zx, zw, out_shape: list[int], name: str) -> None:
    """Adds to `f` the channels-first convolution `%conv` (of the i8 data x, filters of
    `filter_shape` (F, C, kernel...), into an (N, F, spatial...) result of `out_shape`)
    minus zx times each filter's sum (of `filters`, a term over dims whose 0 is the
    filter's), minus zw times each window's sum (`conv` with a filter of ones; left out
    when zw is the constant 0, as onnxruntime's symmetric int8 weights have it), plus n
    zx zw, as `name`."""
    o, c, *kernel = filter_shape
    n, _, *spatial = out_shape
    rank = len(out_shape)
    out_text = _tensor_text(out_shape, "i32")
    f.lines += ["%scalar = tensor.empty() : tensor<i32>",     # filled: a splat, not a dispatch
                f"%zx = linalg.fill ins({f.arg(zx)} : i32) outs(%scalar : tensor<i32>) -> tensor<i32>",
                f"%zw = linalg.fill ins({f.arg(zw)} : i32) outs(%scalar : tensor<i32>) -> tensor<i32>"]
    f.generic("%filter_sums", [filters], (0,), tuple(range(1, rank)), _SUM, f"tensor<{o}xi32>")
    inputs = [("%conv", tuple(range(rank)), None, out_text),
              ("%filter_sums", (1,), None, f"tensor<{o}xi32>"),
              ("%zx", (), None, "tensor<i32>"), ("%zw", (), None, "tensor<i32>")]
    products = [(-1, 1, 2), (c * math.prod(kernel), 2, 3)]
    if _constant(zw) != 0:
        sums_type = _tensor_text([n, 1, *spatial], "i32")
        ones_type = _tensor_text([1, c, *kernel], "i8")
        flat_type = _tensor_text([n, *spatial], "i32")
        sums_init = f.zeros("%window_sums", sums_type)
        groups = ", ".join(["[0, 1]"] + [f"[{i}]" for i in range(2, rank)])
        f.lines += [f"%ones = arith.constant dense<1> : {ones_type}",
                    f"%window_sums = {conv} {attrs} ins({x}, %ones : {x_text}, {ones_type}) "
                    f"outs({sums_init} : {sums_type}) -> {sums_type}",
                    f"%window_sums_flat = tensor.collapse_shape %window_sums [{groups}] : "
                    f"{sums_type} into {flat_type}"]
        inputs.append(("%window_sums_flat", (0, *range(2, rank)), None, flat_type))
        products.append((-1, 3, len(inputs) - 1))
    f.lines += _combination(inputs, products, tuple(range(rank)), out_text, "", name)


def _tensor_text(shape: list[int], element: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{element}>"


def _constant(value) -> int | None:
    """The value of an integer arith.constant; None for any other value."""
    op = _defining(value)
    if op is None or op.name != "arith.constant" or not isinstance(op.attributes["value"], ir.IntegerAttr):
        return None
    return op.attributes["value"].value


def _contraction_shape(op):
    """(the maps of lhs, rhs and result as dim tuples, the reduced dims, each dim's
    extent, -1 for a dynamic one) of a two-input integer contraction `out + ext(a) *
    ext(b)` into a zero fill with projected-permutation maps, its reduced dims static;
    None otherwise."""
    if len(op.operands) != 3 or len(op.results) != 1 or "indexing_maps" not in op.attributes:
        return None
    maps = [_dims(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if any(m is None for m in maps) or not _is_integer_multiply_add(op):
        return None
    if not _is_zero_fill(op.operands[2]):
        return None
    rank = ir.AffineMapAttr(ir.ArrayAttr(op.attributes["indexing_maps"])[0]).value.n_dims
    reduced = tuple(d for d in range(rank) if d not in maps[2])
    extents = {}
    for operand, dims in zip(op.operands, maps):
        shape = ir.RankedTensorType(operand.type).shape
        extents.update(zip(dims, shape))
    if not reduced or len(extents) != rank or any(extents[d] < 0 for d in reduced):
        return None
    return maps, reduced, extents


def _dims(affine_map) -> tuple[int, ...] | None:
    """A projected permutation's result dims; None for any other map."""
    dims = []
    for expr in affine_map.results:
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        dims.append(expr.position)
    return tuple(dims) if len(set(dims)) == len(dims) else None


def _is_integer_multiply_add(op) -> bool:
    """The body is yield(out + ext(a) * ext(b)) of i32 a and b (ext: extsi, value-preserving)."""
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    if (len(args) != 3 or any(str(a.type) != "i32" for a in args[:2])
            or str(args[2].type) not in ("i32", "i64")):
        return False
    add = _defining(list(block.operations)[-1].operands[0])
    if add is None or add.name != "arith.addi" or args[2] not in list(add.operands):
        return False
    multiply = _defining(add.operands[1] if add.operands[0] == args[2] else add.operands[0])
    if multiply is None or multiply.name != "arith.muli":
        return False
    factors = [_through_extsi(v) for v in multiply.operands]
    return factors in ([args[0], args[1]], [args[1], args[0]])


def _through_extsi(value):
    op = _defining(value)
    return op.operands[0] if op is not None and op.name == "arith.extsi" else value


def _defining(value):
    """The operation that defines `value`; None for a block argument."""
    return value.owner.operation if isinstance(value, ir.OpResult) else None


def _is_zero_fill(value) -> bool:
    fill = _defining(value)
    if fill is None or fill.name != "linalg.fill":
        return False
    return _constant(fill.operands[0]) == 0


def _truncations(op) -> list | None:
    """The users of an i64 sum, each an elementwise trunci to i32 of the whole sum; [] for
    an i32 sum; None when some use needs the i64 value."""
    if str(ir.RankedTensorType(op.results[0].type).element_type) == "i32":
        return []
    users = [use.owner for use in op.results[0].uses]
    for user in users:
        if user.name != "linalg.generic" or len(user.operands) != 2 or len(user.results) != 1:
            return None
        maps = [_dims(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(user.attributes["indexing_maps"])]
        rank = len(ir.RankedTensorType(op.results[0].type).shape)
        if maps != [tuple(range(rank))] * 2:
            return None
        body = list(user.regions[0].blocks[0].operations)
        if (len(body) != 2 or body[0].name != "arith.trunci" or str(body[0].results[0].type) != "i32"
                or body[0].operands[0] != user.regions[0].blocks[0].arguments[0]
                or body[1].operands[0] != body[0].results[0]):
            return None
    return users or None


def _operand(value, dims, reduced) -> Operand | None:
    """The operand as one 8-bit data term over the reduced dims plus zero-point terms."""
    terms = _terms(value, dims)
    if terms is None:
        return None
    data = [t for t in terms if set(t.dims) & set(reduced)]
    if len(data) != 1 or data[0].ext is None or data[0].sign != 1:
        return None
    return Operand(data[0], tuple(t for t in terms if t is not data[0]))


def _terms(value, dims) -> list[Term] | None:
    """`value` (i32, indexed by `dims`) as a sum of signed terms."""
    producer = _defining(value)
    if producer is None or producer.name != "linalg.generic" or not _is_elementwise(producer):
        return [Term(1, value, dims, None)]
    block = producer.regions[0].blocks[0]
    maps = [_dims(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(producer.attributes["indexing_maps"])]
    inputs = {arg: (operand, tuple(dims[d] for d in m))
              for arg, operand, m in zip(block.arguments, producer.operands, maps)}
    return _expression(list(block.operations)[-1].operands[0], inputs)


def _is_elementwise(op) -> bool:
    """One result, all dims parallel, projected-permutation maps, identity output map."""
    if len(op.results) != 1:
        return False
    maps = [_dims(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    rank = len(ir.RankedTensorType(op.results[0].type).shape)
    iterators = [str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])]
    return (all(m is not None for m in maps) and maps[-1] == tuple(range(rank))
            and all("parallel" in i for i in iterators))


def _expression(value, inputs) -> list[Term] | None:
    if value in inputs:
        operand, dims = inputs[value]
        if str(ir.RankedTensorType(operand.type).element_type) != "i32":
            return None
        return _terms(operand, dims)
    op = _defining(value)
    if op is None:
        return None
    if op.name in _EXTENSIONS and op.operands[0] in inputs:
        operand, dims = inputs[op.operands[0]]
        if str(op.operands[0].type) != "i8" or str(op.results[0].type) != "i32":
            return None
        return [Term(1, operand, dims, op.name)]
    if op.name in ("arith.addi", "arith.subi"):
        lhs, rhs = (_expression(v, inputs) for v in op.operands)
        if lhs is None or rhs is None:
            return None
        sign = -1 if op.name == "arith.subi" else 1
        return lhs + [Term(sign * t.sign, t.value, t.dims, t.ext) for t in rhs]
    return None


def _replacement(op, context, lhs: Operand, rhs: Operand, maps, reduced, extents) -> ir.Value:
    """Builds the i32 sum before `op` (from MLIR text, cloned in) and returns it."""
    out_dims = maps[2]
    f = _Function()
    for value, dims in zip(op.operands, maps):
        for position, d in enumerate(dims):
            f.dim_sources.setdefault(d, (value, position))
    result_type = _tensor_type([extents[d] for d in out_dims], "i32")
    f.generic("%product", [lhs.data, rhs.data], out_dims, reduced,
              "%m = arith.muli %e0, %e1 : i32\n%s = arith.addi %out, %m : i32", result_type)
    inputs = [("%product", out_dims, None, result_type)]   # the combination's inputs
    products = []                         # (scale, input, input): summed onto the product
    count = 1
    for d in reduced:
        count *= extents[d]

    def add_input(name, dims, ext, type_text) -> int:
        if (name, dims, ext, type_text) not in inputs:
            inputs.append((name, dims, ext, type_text))
        return inputs.index((name, dims, ext, type_text))

    def add_term(term: Term) -> int:
        return add_input(f.arg(term.value), term.dims, term.ext, str(term.value.type))

    for data, zeros in ((lhs.data, rhs.zeros), (rhs.data, lhs.zeros)):
        if not zeros:
            continue
        name = f"%sum{len(inputs)}"
        kept = tuple(d for d in data.dims if d not in reduced)
        sum_type = _tensor_type([extents[d] for d in kept], "i32")
        f.generic(name, [data], kept, reduced, _SUM, sum_type)
        total = add_input(name, kept, None, sum_type)
        for zero in zeros:
            products.append((zero.sign, total, add_term(zero)))
    for a in lhs.zeros:
        for b in rhs.zeros:
            products.append((a.sign * b.sign * count, add_term(a), add_term(b)))
    f.lines += _combination(inputs, products, out_dims, result_type, f.sizes(out_dims))
    return f.clone_before(op, context, result_type)


_SUM = "%s = arith.addi %out, %e0 : i32"     # a generic's body that sums its one term


class _Function:
    """The MLIR text of the function whose body the rewrite clones before the op it
    replaces: its arguments (%a0, %a1...) are the program values it reads."""

    def __init__(self):
        self.values = []
        self.lines = ["%zero = arith.constant 0 : i32"]
        self.dim_sources = {}     # dynamic dim -> (a value it indexes, at which position)
        self.dims_read = []

    def arg(self, value) -> str:
        if value not in self.values:
            self.values.append(value)
        return f"%a{self.values.index(value)}"

    def sizes(self, dims) -> str:
        """The SSA names of the dynamic extents among `dims` (their `tensor.dim` read from
        a value each indexes), for a tensor.empty's operands."""
        names = []
        for d in dims:
            value, position = self.dim_sources.get(d, (None, None))
            if value is None or ir.RankedTensorType(value.type).shape[position] >= 0:
                continue        # static
            if d not in self.dims_read:
                self.dims_read.append(d)
                self.lines[:0] = [f"%c{d}_position = arith.constant {position} : index",
                                  f"%dim{d} = tensor.dim {self.arg(value)}, %c{d}_position : "
                                  f"{value.type}"]
            names.append(f"%dim{d}")
        return ", ".join(names)

    def zeros(self, name: str, type_text: str, dims=()) -> str:
        """Adds a zero-filled tensor (`name`_init) over `dims` and returns its name."""
        self.lines += [f"{name}_empty = tensor.empty({self.sizes(dims)}) : {type_text}",
                       f"{name}_init = linalg.fill ins(%zero : i32) outs({name}_empty : "
                       f"{type_text}) -> {type_text}"]
        return f"{name}_init"

    def generic(self, name: str, terms: list[Term], out_dims, reduced, body: str,
                type_text: str) -> None:
        """Adds a generic over `out_dims` + `reduced` into zeros whose body (`body`, result
        %s) reads ext(term) of each term as %e0, %e1... and the accumulator as %out."""
        init = self.zeros(name, type_text, out_dims)
        space = list(out_dims) + list(reduced)
        position = {d: i for i, d in enumerate(space)}
        ins, types, maps, exts, block_args = [], [], [], [], []
        for i, term in enumerate(terms):
            ins.append(self.arg(term.value))
            types.append(str(term.value.type))
            maps.append(_map(len(space), [position[d] for d in term.dims]))
            block_args.append(f"%in{i}: i8")
            exts.append(f"%e{i} = {term.ext} %in{i} : i8 to i32")
        maps.append(_map(len(space), [position[d] for d in out_dims]))
        self.lines += [f"{name} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                       f"iterator_types = [{_iterators(d in out_dims for d in space)}]}} "
                       f"ins({', '.join(ins)} : {', '.join(types)}) outs({init} : {type_text}) {{",
                       f"^bb0({', '.join(block_args)}, %out: i32):", *exts, body,
                       "linalg.yield %s : i32", f"}} -> {type_text}"]

    def clone_before(self, op, context, result_type: str) -> ir.Value:
        """Clones the function's body (its %result returned) before `op`, its arguments
        bound to the values they stand for; returns the clone of %result."""
        arguments = ", ".join(f"%a{i}: {v.type}" for i, v in enumerate(self.values))
        text = (f"func.func @f({arguments}) -> {result_type} {{\n" + "\n".join(self.lines)
                + f"\nreturn %result : {result_type}\n}}")
        return clone_before(op, ir.Module.parse(text, context), self.values)


def _combination(inputs, products, out_dims, result_type, sizes: str,
                 name: str = "%result") -> list[str]:
    """`name` = input 0 plus each scale * input i * input j, over the output's dims
    (`sizes`: its dynamic extents' names)."""
    position = {d: i for i, d in enumerate(out_dims)}
    rank = len(out_dims)
    maps = [_map(rank, [position[d] for d in dims]) for _, dims, _, _ in inputs]
    block_args, body, names = [], [], []
    for i, (_, _, ext, type_text) in enumerate(inputs):
        element = "i8" if ext else "i32"
        block_args.append(f"%in{i}: {element}")
        if ext:
            body.append(f"%v{i} = {ext} %in{i} : i8 to i32")
        names.append(f"%v{i}" if ext else f"%in{i}")
    total = names[0]
    for k, (scale, i, j) in enumerate(products):
        body.append(f"%p{k} = arith.muli {names[i]}, {names[j]} : i32")
        term = f"%p{k}"
        if abs(scale) != 1:
            body += [f"%k{k} = arith.constant {abs(scale)} : i32",
                     f"%q{k} = arith.muli %p{k}, %k{k} : i32"]
            term = f"%q{k}"
        body.append(f"%t{k} = {'arith.addi' if scale > 0 else 'arith.subi'} {total}, {term} : i32")
        total = f"%t{k}"
    maps.append(_map(rank, range(rank)))
    return [f"%out_empty = tensor.empty({sizes}) : {result_type}",
            f"{name} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
            f"iterator_types = [{_iterators([True] * rank)}]}} "
            f"ins({', '.join(n for n, _, _, _ in inputs)} : {', '.join(t for _, _, _, t in inputs)}) "
            f"outs(%out_empty : {result_type}) {{",
            f"^bb0({', '.join(block_args)}, %out: i32):", *body,
            f"linalg.yield {total} : i32", f"}} -> {result_type}"]


def _iterators(parallel) -> str:
    return ", ".join('"parallel"' if p else '"reduction"' for p in parallel)


def _map(rank: int, dims) -> str:
    space = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({space}) -> ({', '.join(f'd{d}' for d in dims)})>"


def _tensor_type(shape, element: str) -> str:
    return f"tensor<{''.join(f'{e if e >= 0 else chr(63)}x' for e in shape)}{element}>"
