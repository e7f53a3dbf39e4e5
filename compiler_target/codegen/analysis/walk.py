"""The walk over one dispatch function: every SSA value gets a meaning (values.py), the
main structured op is recognised by its kind module, and the all-parallel generics
around it become its elementwise epilogue (or, without a main op, an elementwise op).

Named linalg ops are first generalized (on a clone), so every structured op is a
`linalg.generic` classified by its indexing maps, iterator types and body:
  reduction loops + body out+a*b   -> convolution (an input indexed by `s*oy + d*ky`) or
                                      contraction
  reduction loops + body out+x/max -> pooling (with a window operand) or reduction
  parallel loops only              -> copy/broadcast/transpose of a View (body yields an
                                      input) or an elementwise expression (one Result per
                                      yielded value: generics may have several results)
"""
import math
import re
from dataclasses import dataclass, field, replace

import numpy as np
from iree.compiler import ir

from ..ops import INT_NODES, LEAVES, Elementwise, NpuOp, TensorRef
from . import contraction, convolution, elementwise, gather, half_precision, pooling, reduction
from .errors import NotSupported
from .expressions import (BINARY, CMPF_OUTCOMES, CMPI_OUTCOMES, INT_BINARY, UNARY, constant,
                          index_arithmetic, pruned, pruned_to, reduction_kind, simplified,
                          splat, zero_extended)
from .indexing import (ELEMENT_BYTES, Generic, Operand, linear, logical_strides, row_major,
                       single_loop, strides_over_loops, view_ref)
from .main_op import MainOp
from .values import (Compare, Deferred, Empty, LowBit, Padded, PushConstant, Result, Scalar,
                     View)

NUMPY_FLOATS = {"f32": np.float32, "f16": np.float16}
IGNORED_OPS = {"func.return", "arith.constant"}
# Casts of a push constant that keep its value: index casts, and the zero extension of
# a dynamic dispatch's offset word (its high word is specialised to 0 and folded away).
PASS_THROUGH = {"arith.index_cast", "arith.index_castui", "arith.extui"}
MIN_COMBINE = ("arith.minimumf", "arith.minnumf")    # reduced as -max(-x)


@dataclass
class Subspan:
    """One `hal.interface.binding.subspan`: a tensor at a byte offset of a binding (plus
    a push constant's value when `offset_constant` >= 0)."""
    binding: int
    offset: int
    dtype: str
    shape: tuple[int, ...]
    offset_constant: int = -1

    @property
    def size_bytes(self) -> int:
        return math.prod(self.shape) * ELEMENT_BYTES[self.dtype]

    @property
    def end(self) -> int:
        return self.offset + self.size_bytes


@dataclass
class Binding:
    index: int
    read_only: bool
    subspans: list[Subspan] = field(default_factory=list)

    @property
    def size_bytes(self) -> int:
        """Bytes from the binding's start its statically placed subspans reach."""
        return max((s.end for s in self.subspans if s.offset_constant < 0), default=0)

    @property
    def role(self) -> str:
        return "input" if self.read_only else "output"


class Walk:
    def __init__(self, bindings: list[Binding]):
        self.bindings = bindings
        self.values: dict = {}
        self.nodes: list = []
        self.inputs: list[TensorRef] = []
        self.main: MainOp | None = None
        self.stores: list[tuple[object, TensorRef]] = []
        self.location = ""
        self.deferred: set = set()          # generic ops walked where they are read
        self.rounds_half = False            # f16 results rounded (half_precision.py)

    @property
    def summary(self) -> str:
        return self.main.summary if self.main is not None else ""

    def run(self, function, original_names: list[str]) -> None:
        """Visits the generalized function's ops; `original_names` are the names of the
        non-constant ops before generalization (which may merge and hoist constants)."""
        ops = [op.operation for op in function.regions[0].blocks[0].operations]
        if len([op for op in ops if op.name != "arith.constant"]) != len(original_names):
            raise NotSupported("generalization changed the op count")
        names = iter(original_names)
        self.deferred = _prologue(ops)
        self.rounds_half = half_precision.rounds_half(function)
        for op in ops:
            self.visit(op, op.name if op.name == "arith.constant" else next(names))

    def visit(self, op, name: str) -> None:
        kind = op.name
        if kind == "arith.constant":
            self.values[op.results[0]] = constant(op)
        elif kind == "hal.interface.constant.load":
            self.values[op.results[0]] = PushConstant(ir.IntegerAttr(op.attributes["ordinal"]).value)
        elif kind in PASS_THROUGH and isinstance(self.values.get(op.operands[0]), PushConstant):
            self.values[op.results[0]] = self.values[op.operands[0]]
        elif kind == "iree_tensor_ext.dispatch.workload.ordinal":
            self.values[op.results[0]] = self.values.get(op.operands[0])
        elif kind == "util.assume.int":
            for operand, result in zip(op.operands, op.results):
                self.values[result] = self.values.get(operand)
        elif kind == "hal.interface.binding.subspan":
            self.values[op.results[0]] = self.subspan(op)
        elif kind == "iree_tensor_ext.dispatch.tensor.load":
            ref = self.slice_ref(op, op.operands[0], op.results[0].type)
            self.values[op.results[0]] = View(ref)
        elif kind == "iree_tensor_ext.dispatch.tensor.store":
            self.stores.append((self.values[op.operands[0]],
                                self.slice_ref(op, op.operands[1], op.operands[0].type)))
        elif kind == "tensor.empty":
            self.values[op.results[0]] = Empty()
        elif kind == "tensor.pad":
            self.values[op.results[0]] = self.pad(op)
        elif kind == "arith.trunci" and isinstance(self.values.get(op.operands[0]), PushConstant):
            self.values[op.results[0]] = PushConstant(self.values[op.operands[0]].ordinal,
                                                      _int_bits(op.results[0].type))
        elif kind == "arith.trunci":
            self.values[op.results[0]] = self.low_bit(op, name)
        elif kind == "tensor.extract_slice" and (part := self.constant_slice(op)) is not None:
            self.values[op.results[0]] = part
        elif kind == "tensor.extract" and (element := self.extracted_element(op)) is not None:
            self.values[op.results[0]] = element
        elif kind == "linalg.generic" and op in self.deferred:
            self.defer(self.describe(op, name))
        elif kind == "linalg.generic":
            for result, value in zip(op.results, self.generic(op, name)):
                self.values[result] = value
        elif kind == "linalg.softmax":
            self.values[op.results[0]] = self.softmax(op)
        elif kind not in IGNORED_OPS:
            raise NotSupported(f"op {name} has no NPU equivalent")

    # -- memory

    def subspan(self, op) -> Subspan:
        if len(op.operands) != 1:
            raise NotSupported("binding subspan with dynamic dims")
        tensor = dispatch_tensor_type(op.results[0].type)
        if str(tensor.element_type) not in ELEMENT_BYTES:
            raise NotSupported(f"element type {tensor.element_type} has no NPU equivalent")
        offset = self.values.get(op.operands[0])
        if isinstance(offset, PushConstant):
            static, offset_constant = 0, offset.ordinal
        elif isinstance(offset, Scalar):
            static, offset_constant = int(offset.value), -1
        else:
            raise NotSupported("binding offset is neither a constant nor a push constant")
        subspan = Subspan(ir.IntegerAttr(op.attributes["binding"]).value, static,
                          str(tensor.element_type), tuple(tensor.shape), offset_constant)
        self.bindings[subspan.binding].subspans.append(subspan)
        return subspan

    def constant_slice(self, op) -> View | None:
        """A static tensor.extract_slice of an inlined constant (a bias the dispatch
        trims to its channels) as a constant of its own; None for any other slice."""
        source = self.values.get(op.operands[0])
        if len(op.operands) != 1 or not isinstance(source, View) or \
                source.ref.constant is None:
            return None
        offsets, sizes, steps = (list(ir.DenseI64ArrayAttr(op.attributes[key]))
                                 for key in ("static_offsets", "static_sizes", "static_strides"))
        ref = source.ref
        flat = sum(np.reshape((offset + step * np.arange(size)) * stride,
                              [-1 if d == i else 1 for d in range(len(sizes))])
                   for i, (offset, size, step, stride)
                   in enumerate(zip(offsets, sizes, steps, ref.strides)))
        shape = tuple(ir.ShapedType(op.results[0].type).shape)
        kept_dims(sizes, shape)      # NotSupported unless only unit dims are dropped
        data = ref.constant.ravel()[flat].reshape(shape)
        return View(TensorRef(ref.dtype, shape, row_major(shape), -1, 0, data))

    def slice_ref(self, op, source, value_type) -> TensorRef:
        """The TensorRef of a load's result (or a store's value) in its binding. A slice
        offset that is a push constant (a loop position, e.g. an LSTM's time step) makes
        the tensor's offset that constant times the dim's byte stride; in a binding placed
        at a push constant offset (a dispatch shared by the layers of a stacked GRU, each
        reading its own sequence) the position is the view's second term, as is a second
        slice offset in a binding at a static offset (a tf2onnx SAME_UPPER padding's top
        and left, which depend on the input's size)."""
        subspan = self.values[source]
        offsets, sizes, steps = (list(ir.DenseI64ArrayAttr(op.attributes[key]))
                                 for key in ("static_offsets", "static_sizes", "static_strides"))
        dynamic = list(op.operands[2 if op.name.endswith("store") else 1:])
        positions = [i for i, o in enumerate(offsets) if o == ir.ShapedType.get_dynamic_stride_or_offset()]
        full = row_major(subspan.shape)
        elem = ELEMENT_BYTES[subspan.dtype]
        terms = [(subspan.offset_constant, 1)] if subspan.offset_constant >= 0 else []
        if len(dynamic) != len(positions) or len(terms) + len(positions) > 2:
            raise NotSupported("dispatch tensor slice with dynamic sizes or strides, or "
                               "dynamic offsets past a view's two push constants")
        for position, value in zip(positions, dynamic):
            index = self.values.get(value)
            if not isinstance(index, PushConstant):
                raise NotSupported("dispatch tensor slice offset that is not a push constant")
            terms.append((index.ordinal, full[position] * elem))
            offsets[position] = 0
        offset_constant, offset_scale = terms[0] if terms else (-1, 1)
        step_constant, step_scale = terms[1] if len(terms) > 1 else (0, 0)
        kept = kept_dims(sizes, ir.ShapedType(value_type).shape)
        element = sum(o * s for o, s in zip(offsets, full))
        return TensorRef(subspan.dtype, tuple(sizes[i] for i in kept),
                         tuple(full[i] * steps[i] for i in kept), subspan.binding,
                         subspan.offset + element * elem, offset_constant=offset_constant,
                         offset_scale=offset_scale, step_constant=step_constant,
                         step_scale=step_scale)

    def pad(self, op) -> Padded:
        source = self.values[op.operands[0]]
        if not isinstance(source, View) or len(op.operands) != 1:
            raise NotSupported("tensor.pad of a computed value or with dynamic pads")
        low, high = (tuple(ir.DenseI64ArrayAttr(op.attributes[key]))
                     for key in ("static_low", "static_high"))
        yielded = op.regions[0].blocks[0].operations[0].operation
        value = self.values.get(yielded.operands[0]) if yielded.name == "tensor.yield" else None
        if not isinstance(value, Scalar):
            raise NotSupported("tensor.pad with a non-constant pad value")
        return Padded(source.ref, low, high, float(value.value))

    def extracted_element(self, op) -> Operand | None:
        """One element of a loaded tensor at constant indices (a dynamic quantizer's
        scale), read in a body as an operand that does not move with the loops."""
        source = self.values.get(op.operands[0])
        indices = [self.values.get(v) for v in list(op.operands)[1:]]
        if not isinstance(source, View) or not all(isinstance(i, Scalar) for i in indices):
            return None
        return Operand(source, [({}, int(i.value)) for i in indices])

    def low_bit(self, op, name: str) -> LowBit:
        """A tensor's truncation to i1 (IREE keeps a bool tensor as i8 bytes and
        truncates where it is read)."""
        source = self.values.get(op.operands[0])
        if not isinstance(source, View) or \
                _int_bits(ir.ShapedType(op.results[0].type).element_type) != 1:
            raise NotSupported(f"op {name}: arith.trunci of a computed tensor or to more "
                               "than one bit")
        return LowBit(source.ref)

    # -- structured ops

    def generic(self, op, name: str) -> list:
        """The meaning of each of the generic's results."""
        generic = self.describe(op, name)
        if any(o.name == "tensor.extract" for o in generic.body):
            generic = gather.refine(generic, self.values)
        if generic.reductions:
            return self.main_op(generic)
        return self.parallel(generic)

    def describe(self, op, name: str) -> Generic:
        maps = [ir.AffineMapAttr(m).value for m in op.attributes["indexing_maps"]]
        iterators = [str(t).split("<")[1].rstrip(">") for t in op.attributes["iterator_types"]]
        results = len(op.results)
        if results > 1 and "reduction" in iterators:
            raise NotSupported(f"{name} with {results} results and reduction loops (the NPU "
                               "op writes one; several only of an elementwise computation)")
        operands = [Operand(self.values[v], [linear(e) for e in m.results])
                    for v, m in zip(op.operands, maps)]
        extents: list[int | None] = [None] * len(iterators)
        for value, operand in zip(op.operands, operands):
            if not isinstance(value.type, ir.ShapedType):
                continue
            for n, (coefficients, constant_) in zip(ir.ShapedType(value.type).shape, operand.terms):
                if len(coefficients) == 1 and list(coefficients.values()) == [1] and not constant_:
                    extents[next(iter(coefficients))] = n
        if None in extents:
            raise NotSupported(f"{name}: a loop's extent is not given by an operand dim")
        inputs = len(operands) - results
        return Generic(op, name, iterators, operands[:inputs], operands[inputs], extents,
                       extra_outputs=operands[inputs + 1:])

    def parallel(self, generic: Generic) -> list:
        copied = yielded_argument(generic)
        if copied is not None:
            source = (generic.inputs + [generic.output])[copied]
            if isinstance(source.value, View):
                return [self.view_through(generic, source)]
            if isinstance(source.value, Scalar) and not source.terms:
                return [source.value]
        if self.main is None:
            self.start(elementwise.recognise(generic), generic.op)
            loop_to_logical = self.main.loop_to_logical
        elif not isinstance(self.main, reduction.ReductionMain) and not any(
                isinstance(o.value, (Result, Deferred)) for o in generic.inputs):
            return self.defer(generic)      # independent of the main op: walked when read
        else:
            loop_to_logical = self.loops_to_logical(generic)
        return self.expression(generic, loop_to_logical)

    def defer(self, generic: Generic) -> list[Deferred]:
        walked: list = []
        values = [Deferred(generic, index, walked) for index in range(len(generic.outputs))]
        for result, value in zip(generic.op.results, values):
            self.values[result] = value
        return values

    def walk_deferred(self, value: Deferred, operand: Operand, loop_to_logical) -> Result:
        """The deferred generic walked in the index space of the generic reading its
        result through `operand` (whose loops index the op's dims as `loop_to_logical`
        says): each of its loops indexes the dim the reader's loop at the same result
        dim does."""
        generic = value.generic
        if not value.walked:
            mapping = {}
            for own, read in zip(generic.outputs[value.index].terms, operand.terms):
                mapping[single_loop(own)] = loop_to_logical[single_loop(read)]
            if len(mapping) != len(generic.extents):
                raise NotSupported(f"{generic.name}: its result is read broadcast")
            value.walked.extend(self.expression(generic, mapping))
            for result, walked in zip(generic.op.results, value.walked):
                self.values[result] = walked
        return value.walked[value.index]

    def view_through(self, generic: Generic, source: Operand) -> View:
        """A copy, broadcast or transpose of memory is a strided view of it."""
        loop_strides, offset = strides_over_loops(source.value.ref, source)
        loops = [single_loop(terms) for terms in generic.output.terms]
        shape = [generic.extents[loop] for loop in loops]
        return View(view_ref(source.value.ref, shape, [loop_strides.get(l, 0) for l in loops],
                             offset))

    def start(self, main: MainOp, op) -> None:
        self.main = main
        self.location = str(op.location)

    # -- expressions

    def expression(self, generic: Generic, loop_to_logical) -> list[Result]:
        """Appends the body of an all-parallel generic to the expression; its loops index
        the op's logical dims as `loop_to_logical` says. One Result per yielded value."""
        operands = generic.inputs + generic.outputs
        block = generic.op.regions[0].blocks[0]
        nodes: dict = {}      # body value -> expression node (or Compare)
        arrays: dict = {}     # body value -> its value at every loop position (index arithmetic)

        def node_of(value) -> int:
            if isinstance(nodes.get(value), Compare):    # read other than by a select
                compare = nodes[value]
                nodes[value] = self.add(("cmp", (compare.lhs, compare.rhs), compare.outcomes))
            if value in nodes:
                return nodes[value]
            if value in arrays:
                nodes[value] = self.positional_input(arrays[value], value.type, generic,
                                                     loop_to_logical)
            elif value in generic.gathered:
                nodes[value] = self.operand_node(generic.gathered[value], generic,
                                                 loop_to_logical)
            elif isinstance(value, ir.BlockArgument) and value.owner == block:
                nodes[value] = self.operand_node(operands[value.arg_number], generic,
                                                 loop_to_logical)
            elif value in self.values and isinstance(self.values[value], Scalar):
                nodes[value] = self.add(("const", float(self.values[value].value)))
            elif isinstance(self.values.get(value), PushConstant):
                nodes[value] = self.push_constant_node(self.values[value])
            elif isinstance(self.values.get(value), Operand):
                nodes[value] = self.operand_node(self.values[value], generic, loop_to_logical)
            else:
                raise NotSupported(f"{generic.name}: unsupported value in body")
            return nodes[value]

        def array_of(value):
            if value in arrays:
                return arrays[value]
            known = self.values.get(value)
            return np.array(known.value) if isinstance(known, Scalar) else None

        accumulator = block.arguments[len(generic.inputs)]
        for op in generic.body:
            if op.name == "linalg.yield":
                return [Result(node_of(value), [loop_to_logical[single_loop(terms)]
                                                for terms in output.terms], generic.output_split)
                        for value, output in zip(op.operands, generic.outputs)]
            if generic.reductions and accumulator in list(op.operands):
                nodes[op.results[0]] = self.row_reduction(generic, op, accumulator, node_of,
                                                          loop_to_logical)
                continue
            positional = index_arithmetic(op, array_of, generic.position)
            if positional is not None:
                arrays[op.results[0]] = positional
            elif op.name != "tensor.extract" and \
                    op.results[0] not in generic.push_constant_indices:
                nodes[op.results[0]] = self.body_op(op, node_of, nodes, generic.name)
        raise NotSupported(f"{generic.name}: body without yield")

    def row_reduction(self, generic: Generic, op, accumulator, node_of, loop_to_logical) -> int:
        """The reduction body's combine (`out + x`, `max(out, x)`, `min(out, x)` or an
        i32 sum) as a reduce node of x over the rows, combined with the output's initial
        value. The vector unit reduces by sum and max: a min is -max(-x)."""
        kind = reduction.COMBINE.get(op.name) or ("min" if op.name in MIN_COMBINE else None)
        others = [v for v in op.operands if v != accumulator]
        uses = sum(accumulator == v for o in generic.body for v in o.operands)
        if kind is None or len(others) != 1 or uses != 1:
            raise NotSupported(f"{generic.name}: reduction body combines with {op.name}")
        if kind == "min":
            negated = self.add(("neg", (node_of(others[0]),)))
            reduced = self.add(("neg", (self.add(("reduce", (negated,), "max")),)))
        else:
            reduced = self.add(("reduce", (node_of(others[0]),), kind))
        combine = {"max": "max", "min": "min", "sum": "add", "isum": "iadd"}[kind]
        return self.with_initial(generic, reduced, combine, loop_to_logical)

    def positional_input(self, array: np.ndarray, type_, generic: Generic,
                         loop_to_logical) -> int:
        """Values computed from loop positions only (e.g. the divisor of an average pool
        that excludes padding) become an inlined constant input."""
        dtype = str(type_)
        if dtype not in NUMPY_FLOATS:
            raise NotSupported(f"{generic.name}: position-dependent {dtype} values")
        rank = len(generic.extents)
        data = np.ascontiguousarray(np.broadcast_to(array, np.broadcast_shapes(
            array.shape, (1,) * rank)), NUMPY_FLOATS[dtype])
        data_strides = row_major(data.shape)
        loop_strides = {loop: data_strides[loop] for loop in range(rank) if data.shape[loop] > 1}
        shape = self.main.shape
        strides = logical_strides(loop_strides, loop_to_logical, generic.extents, len(shape))
        self.inputs.append(TensorRef(dtype, shape, strides, -1, 0, data))
        return self.add(("input", len(self.inputs) - 1))

    def body_op(self, op, node_of, nodes, name: str):
        """The expression node of one body op; in a mixed-precision body its f16 result
        rounded to f16 (half_precision.py)."""
        node = self.body_value(op, node_of, nodes, name)
        if self.rounds_half and isinstance(node, int) and str(op.results[0].type) == "f16":
            return self.narrowed(node)
        return node

    def narrowed(self, node: int) -> int:
        """The node's value rounded to f16, unless it always holds an f16 value."""
        if half_precision.is_half_value(self.nodes, [ref.dtype for ref in self.inputs], node):
            return node
        return self.add(("narrow", (node,)))

    def body_value(self, op, node_of, nodes, name: str):
        kind = op.name
        if kind == "arith.constant":
            if _int_bits(op.results[0].type) is not None:
                return self.add(("iconst", int(constant(op).value)))
            return self.add(("const", float(constant(op).value)))
        if kind in BOOLEAN and _int_bits(op.results[0].type) == 1:
            return self.boolean(op, node_of, name)
        if kind in INT_BINARY or kind in INT_CONVERSIONS:
            return self.integer_op(op, node_of, name)
        if kind == "arith.cmpi":
            return self.integer_compare(op, node_of, name)
        if kind == "math.roundeven":
            return self.add(("round", (node_of(op.operands[0]),), -math.inf, math.inf))
        if kind in BINARY:
            return self.add((BINARY[kind], (node_of(op.operands[0]), node_of(op.operands[1]))))
        if kind in UNARY:
            return self.add((UNARY[kind], (node_of(op.operands[0]),)))
        if kind == "arith.cmpf":
            predicate = ir.IntegerAttr(op.attributes["predicate"]).value
            return Compare(node_of(op.operands[0]), node_of(op.operands[1]),
                           CMPF_OUTCOMES[predicate])
        if kind == "arith.select":
            condition = nodes.get(op.operands[0])
            if not isinstance(condition, Compare):
                condition = node_of(op.operands[0])
            return self.select(condition, node_of(op.operands[1]), node_of(op.operands[2]),
                               name)
        if kind in ("math.fpowi", "math.powf"):
            return self.power(node_of(op.operands[0]), self.values.get(op.operands[1]), name)
        if half_precision.converts_half(op):
            return node_of(op.operands[0])      # in f32: the value (body_op rounds a truncf)
        raise NotSupported(f"{name}: {kind} in an elementwise body has no NPU equivalent")

    def push_constant_node(self, constant: PushConstant) -> int:
        """A push constant read in a body (a quantized input's zero point the host read
        back): the i32 word, or its low bits zero-extended (signed_node sign-extends)."""
        node = self.add(("pconst", constant.ordinal))
        if constant.bits < 32:
            node = self.add(("iand", (node, self.add(("iconst", (1 << constant.bits) - 1)))))
        return node

    def signed_conversion(self, value: int, bits: int) -> int:
        """arith.fptosi of float node `value` to `bits` bits. Beyond the signed range MLIR
        calls the result poison; stock IREE's CPU code truncates to i32 and keeps the low
        bits, which is what ONNX's Cast to uint8 of 128..255 (an image or a mask as
        bytes), imported as fptosi to i8, relies on: unless the operand is known to lie
        in the signed range (a quantizer's clamp) or in [0, 2^bits) (unsigned_conversion),
        the i32 value's low bits, read as signed."""
        lo, hi = self.float_range(value)
        half = 1 << (bits - 1)
        if bits == 32 or -half <= lo and hi < half or 0 <= lo and hi < (1 << bits):
            return self.add(("ftoi", (value,), bits))
        whole = self.add(("ftoi", (value,), 32))
        mask = self.add(("iconst", (1 << bits) - 1))
        return self.sign_extended(self.add(("iand", (whole, mask))), bits)

    def sign_extended(self, low: int, bits: int) -> int:
        """The `bits`-bit two's complement value whose bits node `low` holds (0 <= low <
        2^bits): low - 2 x its sign bit."""
        sign = self.add(("iand", (low, self.add(("iconst", 1 << (bits - 1))))))
        return self.add(("isub", (low, self.add(("imul", (sign, self.add(("iconst", 2))))))))

    def integer_compare(self, op, node_of, name: str) -> int:
        """arith.cmpi of integers of up to 32 bits, signed (or eq, ne): an ("icmp", (a, b),
        outcomes) node, vcmp in i32, whose 0 or 1 a select or an uitofp reads (a one-hot
        of integer ids)."""
        predicate = ir.IntegerAttr(op.attributes["predicate"]).value
        bits = _int_bits(op.operands[0].type)
        if predicate not in CMPI_OUTCOMES or bits is None or bits > 32:
            raise NotSupported(f"{name}: arith.cmpi (predicate {predicate}) of "
                               f"{op.operands[0].type}: vcmp compares signed i32")
        lhs, rhs = (self.signed_node(value, node_of, name) for value in op.operands)
        return self.add(("icmp", (lhs, rhs), CMPI_OUTCOMES[predicate]))

    def integer_op(self, op, node_of, name: str) -> int:
        """Integer arithmetic and conversions of a quantized body on i32 values. An op on
        narrower integers is taken where its operands' ranges show it cannot wrap (i8
        and i16 values are held as i32, so extsi is the value itself); an op on i64
        where its result's range fits i32 (the ONNX importer's QLinearAdd, QLinearMul
        and QLinearSigmoid subtract their zero points in i64), so i32 computes it
        exactly."""
        kind = op.name
        bits = _int_bits(op.results[0].type)
        if kind == "arith.sitofp" and self.is_i64_input(node_of(op.operands[0])):
            if str(op.results[0].type) != "f32":
                raise NotSupported(f"{name}: arith.sitofp of i64 to {op.results[0].type}")
            return node_of(op.operands[0])      # loaded as f32 (vcvt from i64)
        if kind == "arith.sitofp":
            return self.add(("itof", (self.signed_node(op.operands[0], node_of, name),)))
        if kind == "arith.uitofp" and _int_bits(op.operands[0].type) == 1 and \
                not self.is_integer(node_of(op.operands[0])):
            return node_of(op.operands[0])      # a compare's 0 or 1, already a float
        if kind == "arith.uitofp":
            return self.add(("itof", (self.unsigned_node(op.operands[0], node_of, name),)))
        if kind in ("arith.fptosi", "arith.fptoui"):
            if bits is None or bits > 32 or kind == "arith.fptoui" and bits == 32:
                raise NotSupported(f"{name}: {kind} to {op.results[0].type}")
            if kind == "arith.fptosi":
                return self.signed_conversion(node_of(op.operands[0]), bits)
            return self.add(("ftou", (node_of(op.operands[0]),), bits))
        wide = bits == 64 and kind in WIDE_EXACT
        if bits is None or bits > 32 and not wide:
            raise NotSupported(f"{name}: {kind} on {op.results[0].type}")
        if kind == "arith.trunci" and bits == 1:    # the low bit
            return self.add(("iand", (self.signed_node(op.operands[0], node_of, name),
                                      self.add(("iconst", 1)))))
        if kind == "arith.trunci":
            raise NotSupported(f"{name}: arith.trunci to i{bits}")
        if kind == "arith.extsi":
            return self.signed_node(op.operands[0], node_of, name)
        if kind == "arith.extui":
            return self.unsigned_node(op.operands[0], node_of, name)
        if kind in ("arith.addi", "arith.subi") and bits < 32:
            # the low bits do not depend on reading a byte signed or unsigned; the range
            # check below keeps the results that fit the signed type
            args = tuple(self.add(("iconst", int(self.values[v].value)))
                         if isinstance(self.values.get(v), Scalar) else node_of(v)
                         for v in op.operands)
        else:
            args = tuple(self.signed_node(v, node_of, name) for v in op.operands)
        node = self.add((INT_BINARY[kind], args))
        bounds = self.int_range(node) if bits != 32 else None
        if bounds is not None and not _fits(bounds, min(bits, 32)):
            raise NotSupported(f"{name}: {kind} on i{bits} may wrap in i"
                               f"{min(bits, 32)} (range {bounds})")
        return node

    def is_unsigned_byte(self, node: int) -> bool:
        kind, *rest = self.nodes[node]
        if kind not in INT_NODES and not (kind == "input" and
                                          self.inputs[rest[0]].dtype in INT_RANGES):
            return False
        lo, hi = self.int_range(node)
        return kind == "ftou" and rest[1] == 8 or 0 <= lo and 127 < hi <= 255

    def unsigned_node(self, value, node_of, name: str) -> int:
        """The node of an integer value read as unsigned (arith.extui, arith.uitofp):
        an i8 input becomes a u8 input; a value already known to be non-negative and
        below 2^bits is itself."""
        bits = _int_bits(value.type)
        known = self.values.get(value)
        if isinstance(known, Scalar):
            return self.add(("iconst", int(known.value) % (1 << bits)))
        node = node_of(value)
        kind, *rest = self.nodes[node]
        if kind == "input" and self.inputs[rest[0]].dtype == "i8" and bits == 8:
            if any(node in n[1] for n in self.nodes if n[0] not in LEAVES):
                raise NotSupported(f"{name}: an i8 tensor read both signed and unsigned")
            self.inputs[rest[0]] = replace(self.inputs[rest[0]], dtype="u8")
            return node
        lo, hi = self.int_range(node)
        if not 0 <= lo <= hi < (1 << bits):
            raise NotSupported(f"{name}: {value.type} read as unsigned, range {lo}..{hi}")
        return node

    def signed_node(self, value, node_of, name: str) -> int:
        """The node of an integer value (MLIR's types say it is one) read as signed; a
        scalar constant becomes an iconst. A u8 input (read unsigned elsewhere) or an
        unsigned byte beyond i8's range cannot be read as signed."""
        known = self.values.get(value)
        if isinstance(known, Scalar):
            return self.add(("iconst", int(known.value)))
        node = node_of(value)
        if isinstance(known, PushConstant) and known.bits < 32:   # push_constant_node's
            return self.sign_extended(node, known.bits)               # low bits
        kind, *rest = self.nodes[node]
        if self.is_i64_input(node):
            raise NotSupported(f"{name}: an i64 input other than converted to f32")
        if kind == "ftoi" and self.unsigned_conversion(node) is not None:
            raise NotSupported(f"{name}: an fptosi beyond the signed range read as signed")
        if _int_bits(value.type) == 8 and (
                kind == "input" and self.inputs[rest[0]].dtype == "u8" or
                kind == "ftou" and rest[1] == 8):
            raise NotSupported(f"{name}: an i8 value read both signed and unsigned")
        return node

    def is_i64_input(self, node: int) -> bool:
        """Whether `node` reads an i64 input, which loads as f32 (epilogue.load_dtype)."""
        kind, *rest = self.nodes[node]
        return kind == "input" and self.inputs[rest[0]].dtype == "i64"

    def int_range(self, node: int) -> tuple[int, int]:
        """Bounds of an integer node's value (i32's for values nothing bounds)."""
        kind, *rest = self.nodes[node]
        if kind == "iconst":
            return rest[0], rest[0]
        if kind == "input":
            return INT_RANGES.get(self.inputs[rest[0]].dtype, INT_RANGES["i32"])
        if kind == "ftoi":
            return self.unsigned_conversion(node) or INT_RANGES.get(f"i{rest[1]}", INT_RANGES["i32"])
        if kind == "ftou":
            return 0, (1 << rest[1]) - 1
        if kind == "icmp":
            return 0, 1
        if kind == "iand":        # and with a non-negative value: at most that value
            highs = [hi for lo, hi in map(self.int_range, rest[0]) if lo >= 0]
            return (0, min(highs)) if highs else INT_RANGES["i32"]
        if kind in ("iadd", "isub", "imul", "imax", "imin"):
            (a_lo, a_hi), (b_lo, b_hi) = (self.int_range(a) for a in rest[0])
            if kind == "iadd":
                return a_lo + b_lo, a_hi + b_hi
            if kind == "isub":
                return a_lo - b_hi, a_hi - b_lo
            if kind == "imul":
                products = [a * b for a in (a_lo, a_hi) for b in (b_lo, b_hi)]
                return min(products), max(products)
            pick = max if kind == "imax" else min
            return pick(a_lo, b_lo), pick(a_hi, b_hi)
        return INT_RANGES["i32"]

    def unsigned_conversion(self, node: int) -> tuple[int, int] | None:
        """The bounds of an `fptosi` to 8 or 16 bits whose operand lies in [0, 2^bits) but
        beyond the signed range: the ONNX importer converts DynamicQuantizeLinear's u8
        zero point, clamped to [0, 255], with fptosi to i8. MLIR calls the result poison;
        stock IREE keeps the low bits, the unsigned value's. None for any other node."""
        _, (operand,), bits = self.nodes[node]
        lo, hi = self.float_range(operand)
        if bits < 32 and 0 <= lo and (1 << (bits - 1)) <= hi < (1 << bits):
            return math.floor(lo), math.floor(hi)
        return None

    def float_range(self, node: int) -> tuple[float, float]:
        """Bounds of a float node's value from its constants, clamps and roundings
        (unbounded for any other node)."""
        kind, *rest = self.nodes[node]
        if kind == "const":
            return rest[0], rest[0]
        if kind in ("max", "min"):
            (a_lo, a_hi), (b_lo, b_hi) = (self.float_range(a) for a in rest[0])
            pick = max if kind == "max" else min
            return pick(a_lo, b_lo), pick(a_hi, b_hi)
        if kind in ("round", "clamp"):
            lo, hi = self.float_range(rest[0][0])
            bounds = (max(lo, rest[1]), min(hi, rest[2]))
            return tuple(map(round, bounds)) if kind == "round" and all(
                map(math.isfinite, bounds)) else bounds
        if kind == "relu":
            lo, hi = self.float_range(rest[0][0])
            return max(lo, 0.0), max(hi, 0.0)
        return -math.inf, math.inf

    def power(self, base: int, exponent, name: str) -> int:
        """x ** n for a constant n: products for small integers, sqrt/rsqrt for ±0.5."""
        n = float(exponent.value) if isinstance(exponent, Scalar) else None
        if n == 0.5:
            return self.add(("sqrt", (base,)))
        if n == -0.5:
            return self.add(("rsqrt", (base,)))
        if n is None:
            raise NotSupported(f"{name}: power with an exponent read from a tensor (not a "
                               "constant of the dispatch) has no NPU equivalent")
        if 4 * n != int(4 * n) or not 0.25 <= abs(n) <= 4:
            raise NotSupported(f"{name}: power with exponent {n} has no NPU equivalent")
        quarters = int(4 * abs(n))
        root = self.add(("sqrt", (base,))) if quarters % 4 else base
        fourth_root = self.add(("sqrt", (root,))) if quarters % 2 else root
        factors = [base] * (quarters // 4) + [root] * (quarters % 4 // 2) + \
            [fourth_root] * (quarters % 2)
        result = factors[0]
        for factor in factors[1:]:
            result = self.add(("mul", (result, factor)))
        if n < 0:
            result = self.add(("div", (self.add(("const", 1.0)), result)))
        return result

    def select(self, condition, if_true: int, if_false: int, name: str) -> int:
        """arith.select: by an order compare of the selected values a max or min, or a
        selgt/selge node (`ordered_select`); else a ("select", (c, a, b)) node, c != 0 ?
        a : b (vselect), on a condition held as 0 or 1: a ("cmp", (x, y), outcomes)
        node (vcmp) or an integer 0/1 (an i1 truncation's low bit) converted to float."""
        if if_true == if_false:
            return if_true
        if isinstance(condition, Compare):
            if condition.order is not None:
                picked = self.ordered_select(condition, if_true, if_false)
                if picked is not None:
                    return picked
            condition = self.add(("cmp", (condition.lhs, condition.rhs), condition.outcomes))
        if self.is_integer(if_true) or self.is_integer(if_false):
            raise NotSupported(f"{name}: arith.select of integer values")
        if self.is_integer(condition):
            condition = self.add(("itof", (condition,)))
        return self.add(("select", (condition, if_true, if_false)))

    def ordered_select(self, condition: Compare, if_true: int, if_false: int) -> int | None:
        """select(a > b, a, b) = max(a, b); the other orders are max or min likewise.
        With an ordered compare, a select that picks a compared value when it is the
        larger is a ("selgt"/"selge", (a, b, c)) node, a > b ? a : c or a >= b ? a : c
        (vselgt): softplus's threshold, x > 20 ? x : ..., and PReLU's
        x < 0 ? x·slope : x, which is x >= 0 ? x : x·slope. (NaN order ignored, as for
        max and min.) None for another select."""
        greater = condition.order == "greater"
        if {condition.lhs, condition.rhs} == {if_true, if_false}:
            picks_larger = greater == (if_true == condition.lhs)
            return self.add(("max" if picks_larger else "min", (if_true, if_false)))
        larger, smaller = (condition.lhs, condition.rhs) if greater else \
            (condition.rhs, condition.lhs)
        if condition.ordered and if_true == larger:
            return self.add(("selgt" if condition.strict else "selge",
                             (larger, smaller, if_false)))
        if condition.ordered and if_false == smaller:   # not (larger > smaller)
            return self.add(("selge" if condition.strict else "selgt",
                             (smaller, larger, if_true)))
        return None

    def is_integer(self, node: int) -> bool:
        """Whether the node computes in i32 (ops.py): an integer node or input."""
        kind, *rest = self.nodes[node]
        return kind in INT_NODES or kind == "input" and self.inputs[rest[0]].dtype in INT_RANGES

    def boolean(self, op, node_of, name: str) -> int:
        """arith.andi, ori, xori of i1 values held as 0 or 1 (compares, in float): their
        product, maximum, and whether they differ (vcmp's one)."""
        a, b = (node_of(v) for v in op.operands)
        a, b = (self.add(("itof", (n,))) if self.is_integer(n) else n for n in (a, b))
        if op.name == "arith.andi":
            return self.add(("mul", (a, b)))
        if op.name == "arith.ori":
            return self.add(("max", (a, b)))
        return self.add(("cmp", (a, b), CMPF_OUTCOMES[6]))    # one: a != b

    def operand_node(self, operand: Operand, generic: Generic, loop_to_logical) -> int:
        value = operand.value
        if isinstance(value, Deferred):
            value = self.walk_deferred(value, operand, loop_to_logical)
        if isinstance(value, Result):
            if value.split is not None:
                raise NotSupported(f"{generic.name} reads a gathered value")
            for (coefficients, _), dim in zip(operand.terms, value.dims):
                if loop_to_logical[single_loop((coefficients, 0))] != dim:
                    raise NotSupported(f"{generic.name} reads the computed value in two "
                                       "different index orders")
            return value.node
        if isinstance(value, PushConstant) and not operand.terms:
            return self.add(("pconst", value.ordinal))
        if splat(value) is not None:
            if isinstance(value, View) and value.ref.dtype in INT_RANGES:
                return self.add(("iconst", int(splat(value).value)))
            return self.add(("const", float(splat(value).value)))
        if isinstance(value, View | LowBit):
            node = self.add(("input", self.add_input(value.ref, operand, generic.extents,
                                                     loop_to_logical)))
            return node if isinstance(value, View) else \
                self.add(("iand", (node, self.add(("iconst", 1)))))
        raise NotSupported(f"{generic.name} reads an undefined or padded tensor")

    def add_input(self, ref: TensorRef, operand: Operand, extents, loop_to_logical) -> int:
        loop_strides, offset = strides_over_loops(ref, operand)
        shape = self.main.shape
        strides = logical_strides(loop_strides, loop_to_logical, extents, len(shape))
        self.inputs.append(view_ref(ref, shape, strides, offset))
        return len(self.inputs) - 1

    def loops_to_logical(self, generic: Generic) -> dict[int, tuple[int, int]]:
        """Which logical dim of the op each loop of a generic consuming its result indexes."""
        mapping = {}
        for operand in generic.inputs + generic.outputs:
            if isinstance(operand.value, Result):
                for terms, dim in zip(operand.terms, operand.value.dims):
                    mapping[single_loop(terms)] = dim
            elif isinstance(operand.value, View) and isinstance(self.main, reduction.ReductionMain):
                dims = self.main.logical_dims_of(operand.value.ref)
                for terms, dim in zip(operand.terms, dims or []):
                    mapping[single_loop(terms)] = (dim, 1)
        if not mapping and isinstance(self.main, reduction.ReductionMain) and \
                self.main.kept_rank == 0 and list(generic.extents) == list(self.main.shape):
            # After a reduction to one value (a global mean or deviation), a computation
            # over values of the reduced tensor's shape: its loops are the reduced dims.
            mapping = {loop: (loop, 1) for loop in range(len(generic.extents))}
        if not mapping:
            raise NotSupported(f"{generic.name} is a second computation independent of "
                               f"the {self.main.kind}")
        if len(mapping) != len(generic.extents):
            raise NotSupported(f"{generic.name} broadcasts the computed value")
        return mapping

    def add(self, node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    # -- main ops (with reduction loops)

    def main_op(self, generic: Generic) -> list[Result]:
        kind = reduction_kind(generic)
        if kind == "rows":
            return self.reduction(generic)
        if self.main is not None:
            raise NotSupported(f"{generic.name} after a {self.main.kind} in the same dispatch")
        for operand in generic.inputs:
            if isinstance(operand.value, (Result, Deferred)):
                raise NotSupported(f"{generic.name} consumes a value computed in the dispatch")
        if kind in ("mac", "window isum"):
            generic = with_unsigned_bytes(generic)
        if kind == "window isum":
            self.start(convolution.recognise(with_ones_filter(generic), infer_roles=False),
                       generic.op)
        elif kind == "mac":
            windowed = any(len(c) > 1 for operand in generic.inputs for c, _ in operand.terms)
            self.start((convolution if windowed else contraction).recognise(generic), generic.op)
            self.main.narrow_sum = str(_result_element_type(generic)) in ("f16", "bf16")
        else:
            self.start(pooling.recognise(generic, kind), generic.op)
        loop_to_logical = self.main.loop_to_logical
        combine = "max" if kind == "max" else "add"
        if kind == "window isum" or _int_bits(_result_element_type(generic)) is not None:
            combine = "i" + combine
        acc = self.with_initial(generic, self.add(("acc",)), combine, loop_to_logical)
        return [Result(acc, [loop_to_logical[single_loop(t)] for t in generic.output.terms])]

    def reduction(self, generic: Generic) -> list[Result]:
        """A sum/max reduction over rows: the first one sets the (O, I) space, later ones
        (softmax, layer norm) reduce values over the same rows."""
        if self.main is None:
            self.start(reduction.recognise(generic), generic.op)
            loop_to_logical = self.main.loop_to_logical
        elif isinstance(self.main, (reduction.ReductionMain, elementwise.ElementwiseMain)):
            loop_to_logical = self.loops_to_logical(generic)
            if isinstance(self.main, elementwise.ElementwiseMain):
                self.main = reduction.after_elementwise(self.main, generic, loop_to_logical)
            rank = self.main.kept_rank
            if any((loop_to_logical[l][0] >= rank) != (kind == "reduction")
                   for l, kind in enumerate(generic.iterators)):
                raise NotSupported(f"{generic.name} reduces other dims than the "
                                   f"{self.main.kind} before it")
        else:
            raise NotSupported(f"{generic.name} after a {self.main.kind} in the same dispatch")
        return self.expression(generic, loop_to_logical)

    def softmax(self, op) -> Result:
        """linalg.softmax: exp(x - max) / sum(exp(x - max)) along its dimension, of a
        tensor or of the value an elementwise computation made (a dequantized one)."""
        source = self.values[op.operands[0]]
        dim = ir.IntegerAttr(op.attributes["dimension"]).value
        if isinstance(source, Result) and isinstance(self.main, elementwise.ElementwiseMain):
            x, dims = self.computed_rows(source, dim)
        elif self.main is not None or not isinstance(source, View):
            raise NotSupported("linalg.softmax of a value computed in the dispatch")
        else:
            x, dims = self.softmax_rows(op, source, dim)
        shifted = self.add(("sub", (x, self.add(("reduce", (x,), "max")))))
        exponentials = self.add(("exp", (shifted,)))
        total = self.add(("reduce", (exponentials,), "sum"))
        return Result(self.add(("div", (exponentials, total))), [(d, 1) for d in dims])

    def softmax_rows(self, op, source: View, dim: int) -> tuple[int, list[int]]:
        """A softmax of a tensor: its rows (every dim but `dim`) and its input node."""
        self.start(reduction.softmax("linalg.softmax", source.ref, dim), op)
        (ref, dims), = self.main.sources
        strides = [0] * len(ref.shape)
        for stride, logical in zip(ref.strides, dims):
            strides[logical] = stride
        self.inputs.append(view_ref(ref, self.main.shape, strides))
        return self.add(("input", len(self.inputs) - 1)), dims

    def computed_rows(self, source: Result, dim: int) -> tuple[int, list[int]]:
        """A softmax of an elementwise result along its last logical dim: the
        elementwise space becomes the rows of a reduction."""
        dims = [d for d, _ in source.dims]
        if source.split is not None or any(m != 1 for _, m in source.dims) or \
                dims != list(range(len(self.main.shape))) or dim != len(dims) - 1:
            raise NotSupported("linalg.softmax of a computed value along another dim than "
                               "its last")
        main = self.main
        self.main = reduction.ReductionMain(main.name, main.shape, main.loop_to_logical,
                                            kept_rank=len(dims) - 1, dtype=main.dtype)
        return source.node, dims

    def with_initial(self, generic: Generic, acc: int, combine: str, loop_to_logical) -> int:
        """The accumulated node combined with the output's initial value."""
        init = splat(generic.output.value) or generic.output.value
        identity = {"max": -math.inf, "min": math.inf, "imax": -2 ** 31}.get(combine, 0.0)
        if isinstance(init, Scalar) and float(init.value) != identity:
            leaf = ("iconst", int(init.value)) if combine.startswith("i") else \
                ("const", float(init.value))
            return self.add((combine, (acc, self.add(leaf))))
        if isinstance(init, View):
            init_node = self.add(("input", self.add_input(init.ref, generic.output,
                                                          generic.extents, loop_to_logical)))
            return self.add((combine, (acc, init_node)))
        if not isinstance(init, Scalar):
            raise NotSupported(f"{generic.name} accumulates into an undefined or computed tensor")
        return acc

    # -- the result

    def finish(self) -> tuple[NpuOp, str]:
        """The dispatch's NpuOp and its summary."""
        if not self.stores:
            raise NotSupported("dispatch writes no results")
        if len(self.stores) > 1:
            return self.several_results()
        value, target = self.stores[0]
        if isinstance(value, View) and self.main is None:
            return (Elementwise(target, [value.ref], [("input", 0)]),
                    f"copy {'x'.join(map(str, value.ref.shape))} {value.ref.dtype}")
        if isinstance(value, Scalar) and self.main is None:
            return (Elementwise(target, [], [("const", float(value.value))]),
                    f"fill {'x'.join(map(str, target.shape))} {target.dtype}")
        if isinstance(value, Deferred):
            raise NotSupported(f"{value.generic.name}'s result is stored without the "
                               f"{self.main.kind} reading it")
        if not isinstance(value, Result) or self.main is None:
            raise NotSupported("the stored value is not computed by the dispatch")
        expr, inputs = pruned(simplified(self.nodes[:value.node + 1]), self.inputs)
        op = self.main.build(self.output_ref(value, target), expr, inputs)
        return op, self.main.summary

    def several_results(self) -> tuple[NpuOp, str]:
        """Stores of several values of one expression, over an elementwise, contraction,
        convolution or reduction main op (an LSTM cell's c and h; a matmul's
        BatchNormalization output and the HardSwish factor of it; a layer norm's mean and
        variance from its sums): one op computing it once, whose `out` is the
        last-computed stored value and whose extra outputs are the others, in store
        order."""
        if not isinstance(self.main, SEVERAL_RESULTS) or \
                not all(isinstance(value, Result) for value, _ in self.stores):
            raise NotSupported(f"dispatch writes {len(self.stores)} results, not all computed "
                               "by one expression over an elementwise, contraction, "
                               "convolution or reduction op")
        last = max(self.stores, key=lambda store: store[0].node)
        stores = [store for store in self.stores if store is not last] + [last]
        roots = [value.node for value, _ in stores]
        expr, inputs, nodes = pruned_to(simplified(self.nodes[:last[0].node + 1], roots),
                                        self.inputs, roots)
        refs = [self.output_ref(value, target) for value, target in stores]
        op = self.main.build(refs[-1], expr, inputs, list(zip(refs[:-1], nodes[:-1])))
        return op, self.main.summary

    def output_ref(self, value: Result, target: TensorRef) -> TensorRef:
        """The stored tensor `target` over the op's logical dims. An i8 tensor that
        receives unsigned bytes (arith.fptoui, or a value the analysis bounds to
        [0, 255] beyond i8's range) is stored as u8: saturated to [0, 255]."""
        if value.split is not None:
            target = split_dims(target, value.split)
        if target.dtype == "i8" and self.is_unsigned_byte(value.node):
            target = replace(target, dtype="u8")
        shape = self.main.shape
        return view_ref(target, shape, logical_strides(
            {t: s for t, s in enumerate(target.strides)},
            {t: dim for t, dim in enumerate(value.dims)}, list(target.shape), len(shape)))


# ---- helpers --------------------------------------------------------------------------

# The main ops whose NpuOp stores several results (extra_outputs).
SEVERAL_RESULTS = (elementwise.ElementwiseMain, contraction.ContractionMain,
                   convolution.ConvolutionMain, reduction.ReductionMain)


def _prologue(ops) -> set:
    """The elementwise generics before a contraction, convolution or reduction that
    only ops after it read (a quantized residual's dequantization for a contraction's
    epilogue; the dequantized values a global normalization divides by the reduced
    deviation): walked where they are read, in the main op's index space, rather than
    as the dispatch's main op. Any other generic before the main op that computes a
    value makes the walk's main op elementwise, as before."""
    mains = [i for i, op in enumerate(ops) if is_mac_generic(op) or _reduces(op)]
    if not mains:
        return set()
    first = mains[0]
    position = {op: i for i, op in enumerate(ops)}
    deferred: set[int] = set()
    for i in range(first - 1, -1, -1):
        op = ops[i]
        if op.name != "linalg.generic" or _reduces(op) or \
                any(o.name == "tensor.extract" for o in block_ops(op)):
            continue
        users = [position.get(use.owner) for result in op.results for use in result.uses]
        if users and all(u is not None and (u > first or u in deferred) for u in users):
            deferred.add(i)
    return {ops[i] for i in deferred}


def _reduces(op) -> bool:
    """A linalg.generic with a reduction loop."""
    return op.name == "linalg.generic" and "reduction" in str(op.attributes["iterator_types"])


def is_mac_generic(op) -> bool:
    """A linalg.generic with a reduction loop whose body multiplies: a contraction or a
    convolution."""
    return _reduces(op) and any(o.name in ("arith.mulf", "arith.muli") for o in block_ops(op))


def block_ops(op) -> list:
    """The operations of the op's first block (a function's body, a generic's)."""
    return [o.operation for o in op.regions[0].blocks[0].operations]


# i64 ops taken where their values fit i32 (integer_op).
WIDE_EXACT = ("arith.extsi", "arith.extui", "arith.addi", "arith.subi", "arith.muli",
              "arith.maxsi", "arith.minsi")
INT_CONVERSIONS = {"arith.extsi", "arith.sitofp", "arith.fptosi",
                   "arith.extui", "arith.uitofp", "arith.fptoui", "arith.trunci"}
BOOLEAN = ("arith.andi", "arith.ori", "arith.xori")
INT_RANGES = {"i8": (-2 ** 7, 2 ** 7 - 1), "u8": (0, 2 ** 8 - 1), "i16": (-2 ** 15, 2 ** 15 - 1),
              "i32": (-2 ** 31, 2 ** 31 - 1)}


def _result_element_type(generic: Generic):
    """The element type of the generic's (first) result: a contraction's accumulator."""
    return ir.ShapedType(generic.op.results[0].type).element_type


def _int_bits(type_) -> int | None:
    match = re.fullmatch(r"i(\d+)", str(type_))
    return int(match.group(1)) if match else None


def _fits(bounds: tuple[int, int], bits: int) -> bool:
    lo, hi = INT_RANGES.get(f"i{bits}", (0, -1))
    return lo <= bounds[0] and bounds[1] <= hi


def dispatch_tensor_type(type_) -> ir.ShapedType:
    text = str(type_)
    match = re.fullmatch(r"!iree_tensor_ext\.dispatch\.tensor<\w+:(.*)>", text)
    if not match:
        raise NotSupported(f"binding of type {text}")
    return ir.ShapedType(ir.Type.parse(match.group(1)))


def kept_dims(sizes: list[int], shape) -> list[int]:
    """Which dims of a (possibly rank-reducing) slice the value keeps."""
    kept, j = [], 0
    for i, n in enumerate(sizes):
        if j < len(shape) and shape[j] == n and len(sizes) - i >= len(shape) - j:
            kept.append(i)
            j += 1
        elif n != 1:
            raise NotSupported(f"slice sizes {sizes} do not match the value shape {list(shape)}")
    return kept


def with_ones_filter(generic: Generic) -> Generic:
    """A window sum (out[y][x] = Σ_c,ky,kx in[c][s·y + ky][s·x + kx] over channels, or
    out[g][y][x] = Σ_ky,kx in[g][s·y + ky][s·x + kx] per channel) as the convolution
    with a filter of ones it is: the window operand (a tensor.empty of the kernel's
    shape) becomes an i8 constant of ones indexed by the channel loops too (the image's
    plain loops: reductions are input channels, loops the output keeps are groups, so a
    per-channel sum is a depthwise convolution)."""
    image = next(o for o in generic.inputs if not isinstance(o.value, Empty))
    window = next(o for o in generic.inputs if isinstance(o.value, Empty))
    windowed = window.loops() | {loop for c, _ in image.terms if len(c) > 1 for loop in c}
    plain = sorted(image.loops() - windowed)
    groups = [loop for loop in plain if loop in generic.output.loops()][-1:]
    channels = [loop for loop in plain if loop in generic.reductions]
    terms = [({loop: 1}, 0) for loop in groups + channels] + window.terms
    shape = tuple(generic.extents[single_loop(t)] for t in terms)
    dtype = image.value.ref.dtype
    ones = TensorRef(dtype, shape, (0,) * len(shape), -1, 0,
                     np.ones(1, np.uint8 if dtype == "u8" else np.int8))
    filter_ = Operand(View(ones), terms)
    return replace(generic, inputs=[filter_ if o is window else o for o in generic.inputs])


def with_unsigned_bytes(generic: Generic) -> Generic:
    """The integer contraction or sum with the i8 tensor operands its body zero-extends
    read as u8 (the MAC array multiplies i8 and u8 operands)."""
    args = generic.op.regions[0].blocks[0].arguments
    unsigned = zero_extended(generic.body, list(args)[:len(generic.inputs)])

    def as_u8(operand: Operand) -> Operand:
        value = operand.value
        if isinstance(value, (View, Padded)) and value.ref.dtype == "i8":
            return replace(operand, value=replace(value, ref=replace(value.ref, dtype="u8")))
        return operand
    return replace(generic, inputs=[as_u8(o) if i in unsigned else o
                                    for i, o in enumerate(generic.inputs)])


def split_dims(ref: TensorRef, split) -> TensorRef:
    """`ref` with each dim split into the given extents (outermost first)."""
    shape, strides = [], []
    for extents, stride in zip(split, ref.strides):
        for i, extent in enumerate(extents):
            shape.append(extent)
            strides.append(stride * math.prod(extents[i + 1:]))
    return view_ref(ref, shape, strides)


def yielded_argument(generic: Generic) -> int | None:
    """The block argument a one-result body yields unchanged (a copy), or extended from
    f16 to f32 (every f16 value is an f32 one: a view of the f16 tensor, which its
    readers load as f32), if it does."""
    body = generic.body
    if len(body) == 2 and body[0].name == "arith.extf" and \
            half_precision.converts_half(body[0]) and \
            list(body[1].operands) == [body[0].results[0]]:
        source = body[0].operands[0]
        return source.arg_number if isinstance(source, ir.BlockArgument) else None
    if len(body) == 1 and len(body[0].operands) == 1 and \
            isinstance(body[0].operands[0], ir.BlockArgument):
        return body[0].operands[0].arg_number
    return None
