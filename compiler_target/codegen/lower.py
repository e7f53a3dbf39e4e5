"""Stage 1, lower: an NpuOp becomes one NPU IR op on DRAM tensors.

Each TensorRef becomes a DRAM `Buffer` (binding, byte offset, element strides); inlined
constants are placed in the executable's constant pool (binding isa.CONST_POOL), and a
tensor whose offset is a push constant (times a scale) lies in a view of its binding
(an npu-fb binding view, one per (binding, push constant, scale), numbered after the
export's `binding_count` bindings). The
result keeps the NpuOp for the tiling stage and prints as
`"npu.conv2d"(%input, %weight, %epilogue.0, %out) {stride = ..., epilogue = [...]}`.
"""
from dataclasses import dataclass, field, replace

import numpy as np

from executable_format.isa import CONST_POOL

from .npu_ir import Buffer, dispatch_text, dtype_bytes, op_line
from .ops import (SCALARS, Conv2D, Elementwise, Matmul, NpuOp, Pool2D, Reduce, Rowwise,
                  TensorRef)

CONSTANT_ALIGN = 64
NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i32": np.int32,
                "u8": np.uint8}


class NotLowerable(Exception):
    """The op cannot run on the NPU; str(exc) is the reason."""


@dataclass
class ConstantPool:
    data: bytearray = field(default_factory=bytearray)

    def add(self, payload: bytes) -> int:
        self.data.extend(b"\0" * (-len(self.data) % CONSTANT_ALIGN))
        offset = len(self.data)
        self.data.extend(payload)
        return offset

    def intern(self, payload: bytes) -> int:
        """The offset of `payload`, added unless an aligned copy is already in the pool
        (a tiler that plans its candidates adds the same data each time)."""
        start = self.data.find(payload)
        while start >= 0 and start % CONSTANT_ALIGN:
            start = self.data.find(payload, start + 1)
        return start if start >= 0 else self.add(payload)


@dataclass
class Views:
    """The binding views lowering gives the tensors at push-constant offsets: one per
    (binding, push constant, scale, step constant, step), program binding
    binding_count + k, based at the lowest byte its tensors reach (so that a window moving
    back as the constant grows, or a tensor read backwards, starts at or after the
    binding's start)."""
    binding_count: int
    keys: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)

    @staticmethod
    def of(refs: list[TensorRef], binding_count: int) -> "Views":
        views = Views(binding_count)
        for ref in refs:
            if ref.binding >= 0 and ref.offset_constant >= 0:
                key = _view_key(ref)
                if key in views.keys:
                    k = views.keys.index(key)
                    views.bases[k] = min(views.bases[k], _lowest_byte(ref))
                else:
                    views.keys.append(key)
                    views.bases.append(_lowest_byte(ref))
        return views

    def place(self, ref: TensorRef) -> tuple[int, int]:
        """(program binding, byte offset in it) of a tensor."""
        if ref.offset_constant < 0:
            return ref.binding, ref.offset
        k = self.keys.index(_view_key(ref))
        return self.binding_count + k, ref.offset - self.bases[k]


def _lowest_byte(ref: TensorRef) -> int:
    """The lowest byte offset an element of the tensor has (negative strides reach below
    its offset, the element at index 0)."""
    return ref.offset + dtype_bytes(ref.dtype) * sum(
        (n - 1) * stride for n, stride in zip(ref.shape, ref.strides) if stride < 0)


def _view_key(ref: TensorRef) -> tuple[int, int, int, int, int]:
    return ref.binding, ref.offset_constant, ref.offset_scale, ref.step_constant, ref.step_scale


@dataclass
class Lowered:
    """An NpuOp with its tensors as named DRAM buffers."""
    kind: str                          # conv2d, matmul, elementwise, pool2d, reduce
    op: NpuOp
    tensors: dict[str, Buffer]         # role -> DRAM buffer; epilogue inputs "epilogue.k",
                                       # the op's extra outputs "out.k"
    attrs: dict
    constants: ConstantPool
    views: Views

    @property
    def extra_outputs(self) -> list[tuple[Buffer, int]]:
        return extra_outputs(self.op, self.tensors)


def extra_outputs(op: NpuOp, tensors: dict[str, Buffer]) -> list[tuple[Buffer, int]]:
    """(DRAM buffer of `tensors`, node of the op's expression it stores) of each result
    besides `out`, which stores the last node."""
    return [(tensors[f"out.{k}"], node)
            for k, (_, node) in enumerate(getattr(op, "extra_outputs", []), 1)]


def _constant_buffer(role: str, ref: TensorRef, pool: ConstantPool) -> Buffer:
    """An inlined constant in the constant pool; its strides index the flat data."""
    if ref.dtype not in NUMPY_DTYPES:
        raise NotLowerable(f"inlined {ref.dtype} constants are not supported")
    data = np.ascontiguousarray(ref.constant, dtype=NUMPY_DTYPES[ref.dtype]).reshape(-1)
    offset = pool.add(data.tobytes())
    return Buffer(role, ref.dtype, tuple(ref.shape), "dram", binding=CONST_POOL,
                  offset=offset, strides=tuple(ref.strides))


def dram_buffer(role: str, ref: TensorRef, pool: ConstantPool, views: Views) -> Buffer:
    if ref.binding < 0:
        return _constant_buffer(role, ref, pool)
    binding, offset = views.place(ref)
    if offset % dtype_bytes(ref.dtype):
        raise NotLowerable(f"{role} offset {offset} is not aligned to {ref.dtype}")
    return Buffer(role, ref.dtype, tuple(ref.shape), "dram", binding=binding,
                  offset=offset, strides=tuple(ref.strides))


def expr_text(expr) -> list[str]:
    """The expression nodes as `%k = op(%a, %b) params` strings."""
    lines = []
    for index, node in enumerate(expr):
        kind = node[0]
        if kind == "input":
            body = f"input({node[1]})"
        elif kind == "acc":
            body = "acc"
        elif kind in SCALARS:
            body = f"{kind}({node[1]})"
        else:
            args = ", ".join(f"%{a}" for a in node[1])
            params = "".join(f", {p}" for p in node[2:])
            body = f"{kind}({args}{params})"
        lines.append(f"%{index} = {body}")
    return lines


def _roles(op: NpuOp) -> tuple[str, list[tuple[str, TensorRef]], dict]:
    if isinstance(op, Conv2D):
        return "conv2d", [("input", op.input), ("weight", op.weight), ("out", op.out)], {
            "stride": list(op.stride), "dilation": list(op.dilation), "pads": list(op.pads),
            "groups": op.groups, "epilogue": expr_text(op.epilogue)}
    if isinstance(op, Matmul):
        return "matmul", [("a", op.a), ("b", op.b), ("out", op.out)], {
            "epilogue": expr_text(op.epilogue)}
    if isinstance(op, Pool2D):
        return "pool2d", [("input", op.input), ("out", op.out)], {
            "kind": op.kind, "kernel": list(op.kernel), "stride": list(op.stride),
            "dilation": list(op.dilation), "pads": list(op.pads),
            "count_include_pad": op.count_include_pad, "epilogue": expr_text(op.epilogue)}
    if isinstance(op, Reduce):
        return "reduce", [("input", op.input), ("out", op.out)], {
            "kind": op.kind, "epilogue": expr_text(op.epilogue)}
    if isinstance(op, Rowwise):
        return "rowwise", [(f"in.{k}", ref) for k, ref in enumerate(op.inputs)] + \
            [("out", op.out)], {"expr": expr_text(op.expr)}
    if isinstance(op, Elementwise):
        return "elementwise", [(f"in.{k}", ref) for k, ref in enumerate(op.inputs)] + \
            [("out", op.out)], {"expr": expr_text(op.expr)}
    raise NotLowerable(f"unknown NPU op {type(op).__name__}")


def _with_extra_outputs(op: NpuOp, roles: list, attrs: dict, expr) -> None:
    """Adds the op's extra outputs (out.1, out.2, ...) after `out`, and which node of
    `expr` each output stores to `attrs`."""
    extra = getattr(op, "extra_outputs", [])
    if not extra:
        return
    roles += [(f"out.{k}", ref) for k, (ref, _) in enumerate(extra, 1)]
    attrs["outputs"] = [f"out = %{len(expr) - 1}"] + [f"out.{k} = %{node}" for k, (_, node)
                                                       in enumerate(extra, 1)]


def lower(op: NpuOp, binding_count: int = 0) -> Lowered:
    """`binding_count`: the export's bindings (views are numbered after them)."""
    if isinstance(op, Conv2D):
        op = batch_as_rows(batch_as_columns(op))
    kind, roles, attrs = _roles(op)
    _with_extra_outputs(op, roles, attrs, getattr(op, "epilogue", getattr(op, "expr", [])))
    extra = getattr(op, "epilogue_inputs", [])
    first_out = next(i for i, (role, _) in enumerate(roles) if role == "out")
    roles = roles[:first_out] + [(f"epilogue.{k}", ref) for k, ref in enumerate(extra)] + \
        roles[first_out:]
    pool, views = ConstantPool(), Views.of([ref for _, ref in roles], binding_count)
    tensors = {role: dram_buffer(role, ref, pool, views) for role, ref in roles}
    return Lowered(kind, op, tensors, attrs, pool, views)


def batch_as_columns(op: Conv2D) -> Conv2D:
    """A 1-D convolution along W (H, KH and its pads 1, 1 and 0) over a batch whose
    images are closer together in memory than their columns, as a 2-D one of a single
    image: W becomes the rows, the batch the columns (kernel width 1). IREE presents a
    TF-exported network's 3x1 convolution over NHWC this way, the image columns as the
    batch with stride 1; tiled per image, each load took every 32nd element, a DMA burst
    each. The sums are the same."""
    n, _, h, _ = op.input.shape
    if n == 1 or h != 1 or op.weight.shape[2] != 1 or op.pads[0] or op.pads[2] or \
            abs(op.input.strides[0]) >= abs(op.input.strides[3]):
        return op
    images = (2, 1, 3, 0)       # (N, C|F, 1, W) -> (1, C|F, W, N)
    return replace(
        op, input=_permuted(op.input, images), weight=_permuted(op.weight, (0, 1, 3, 2)),
        out=_permuted(op.out, images), stride=(op.stride[1], 1), dilation=(op.dilation[1], 1),
        pads=(op.pads[1], 0, op.pads[3], 0),
        epilogue_inputs=[_permuted(ref, images) for ref in op.epilogue_inputs],
        extra_outputs=[(_permuted(ref, images), node) for ref, node in op.extra_outputs])


def batch_as_rows(op: Conv2D) -> Conv2D:
    """A batch of one-row images convolved by one-row kernels (stride 1, no row padded:
    a 1-D convolution over frames, each frame an image, as openWakeWord's embedding
    CNN's) whose images are farther apart than their columns, as a single image whose
    rows are the batch, so that a MAC instruction takes the pixels of several frames,
    not of one: N and H swapped in every tensor but the weights. The sums are the
    same."""
    n, _, h, _ = op.input.shape
    if n == 1 or h != 1 or op.out.shape[2] != 1 or op.weight.shape[2] != 1 or \
            op.stride[0] != 1 or op.pads[0] or op.pads[2]:
        return op
    rows = (2, 1, 0, 3)         # (N, C|F, 1, W) -> (1, C|F, N, W)
    return replace(
        op, input=_permuted(op.input, rows), out=_permuted(op.out, rows),
        epilogue_inputs=[_permuted(ref, rows) for ref in op.epilogue_inputs],
        extra_outputs=[(_permuted(ref, rows), node) for ref, node in op.extra_outputs])


def _permuted(ref: TensorRef, order: tuple[int, ...]) -> TensorRef:
    return replace(ref, shape=tuple(ref.shape[d] for d in order),
                   strides=tuple(ref.strides[d] for d in order))


def lowered_text(lowered: Lowered, name: str) -> str:
    tensors = list(lowered.tensors.values())
    line = op_line(lowered.kind, tensors, lowered.attrs)
    return dispatch_text(name, tensors, [line], {"stage": "lower"})
