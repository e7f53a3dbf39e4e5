"""The true roofline of an NPU op (executable_format.cost.Roofline): its useful MACs
(the op's math, without the padding or recomputation a program may add) and its
compulsory DRAM traffic (each element of each input and output tensor once: a
broadcast dim counts once, and tensors that are the same memory count once)."""
import math

from executable_format.cost import Roofline

from .lower import Lowered
from .npu_ir import Buffer, dtype_bytes
from .ops import Conv2D, Matmul


def useful_macs(lowered: Lowered) -> int:
    op = lowered.op
    if isinstance(op, Conv2D):
        _, channels, _, _ = op.input.shape
        _, _, kh, kw = op.weight.shape
        return math.prod(op.out.shape) * (channels // op.groups) * kh * kw
    if isinstance(op, Matmul):
        batch, m, _, _ = op.dims
        return math.prod(op.out.shape) * math.prod(op.a.shape[batch + m:])
    return 0


def _distinct(buffer: Buffer) -> tuple:
    """The memory a DRAM buffer covers, as a key: equal keys are the same bytes."""
    dims = tuple((n, s) for n, s in zip(buffer.shape, buffer.strides) if s != 0 and n != 1)
    return buffer.binding, buffer.offset, buffer.dtype, dims


def _bytes(buffers) -> int:
    distinct = {_distinct(b): b for b in buffers}
    return sum(math.prod(n for n, _ in dims) * dtype_bytes(dtype)
               for _, _, dtype, dims in distinct)


def roofline(lowered: Lowered) -> Roofline:
    outputs = [b for role, b in lowered.tensors.items() if role.startswith("out")]
    inputs = [b for role, b in lowered.tensors.items() if not role.startswith("out")]
    mac_dtype = lowered.op.input.dtype if isinstance(lowered.op, Conv2D) else \
        lowered.op.a.dtype if isinstance(lowered.op, Matmul) else "f32"
    return Roofline(useful_macs(lowered), mac_dtype, _bytes(inputs), _bytes(outputs))
