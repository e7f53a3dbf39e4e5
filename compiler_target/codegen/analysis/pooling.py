"""Pooling: max, sum or average over windows of one or two spatial dims (a 1-D pool is
a 2-D one with H = 1). A window operand (`tensor.empty` of the kernel's shape) marks the
kernel loops; a spatial dim indexed by a kernel loop alone is a window whose output has
extent 1 (the pooled dim was squeezed away)."""
import math
from dataclasses import dataclass

from ..ops import Pool2D, TensorRef
from .errors import NotSupported
from .expressions import averaged
from .indexing import Generic, loop_of, strides_over_loops, view_ref
from .main_op import MainOp, label
from .values import Empty
from .windows import Window, unwindowed, window_source, window_text, windows


@dataclass
class PoolingMain(MainOp):
    input: TensorRef = None
    pool: str = "max"                       # max, sum; avg once build finds the division
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)

    kind = "pool2d"

    @property
    def summary(self) -> str:
        n, c, h, w = self.input.shape
        return (f"{label(self.name, f'{self.pool} pool2d')} N={n} C={c} H={h} W={w} "
                f"KH={self.kernel[0]} KW={self.kernel[1]}"
                f"{window_text(self.stride, self.dilation, self.pads)} {self.input.dtype}")

    def build(self, out, expr, inputs) -> Pool2D:
        self.pool, expr, inputs = averaged(self.pool, expr, inputs, math.prod(self.kernel), "avg")
        return Pool2D(self.input, out, self.pool, self.kernel, self.stride, self.dilation,
                      self.pads, count_include_pad=self.pool == "avg", epilogue=expr,
                      epilogue_inputs=inputs)


def recognise(generic: Generic, combine: str) -> PoolingMain:
    image = next(o for o in generic.inputs if not isinstance(o.value, Empty))
    window_shape = next(o for o in generic.inputs if isinstance(o.value, Empty))
    kernel_loops = window_shape.loops()
    found = windows(image, generic)
    windowed_dims = {w.dim for w in found}
    plain = []
    for dim, (coefficients, _) in enumerate(image.terms):
        if dim in windowed_dims:
            continue
        loop = loop_of(coefficients, generic.name)
        if loop in kernel_loops:
            found.append(Window(dim, None, 1, loop, 1))
        else:
            plain.append(loop)
    found.sort(key=lambda w: w.dim)
    windowed = {loop for w in found for loop in (w.output, w.kernel) if loop is not None}
    if len(found) not in (1, 2) or len(generic.inputs) != 2 or len(plain) > 2 or \
            any(generic.iterators[l] != "parallel" for l in plain) or \
            set(plain) | windowed != set(range(len(generic.extents))):
        raise NotSupported(f"{generic.name}: pooling with {len(found)} windowed dims "
                           "(the NPU pools over one or two)")
    batch, channel = [None] * (2 - len(plain)) + plain
    pad_value = -math.inf if combine == "max" else 0.0
    image_ref, pads = window_source(image, found, pad_value, generic.name)
    strides, offset = strides_over_loops(image_ref, unwindowed(image, found))
    spatial = [None] * (2 - len(found)) + found
    pads = [(0, 0)] * (2 - len(found)) + pads
    extent = lambda loop: 1 if loop is None else generic.extents[loop]  # noqa: E731
    n, c = extent(batch), extent(channel)
    (top, bottom), (left, right) = pads
    outputs = [None if w is None else w.output for w in spatial]
    return PoolingMain(
        generic.name, (n, c, extent(outputs[0]), extent(outputs[1])),
        {l: d for l, d in ((batch, (0, 1)), (channel, (1, 1)), (outputs[0], (2, 1)),
                           (outputs[1], (3, 1))) if l is not None},
        input=view_ref(image_ref, (n, c, *(1 if w is None else image_ref.shape[w.dim]
                                           for w in spatial)),
                       (strides.get(batch, 0), strides.get(channel, 0),
                        *(0 if w is None else image_ref.strides[w.dim] for w in spatial)),
                       offset),
        pool=combine,
        kernel=tuple(1 if w is None else generic.extents[w.kernel] for w in spatial),
        stride=tuple(1 if w is None else w.stride for w in spatial),
        dilation=tuple(1 if w is None else w.dilation for w in spatial),
        pads=(top, left, bottom, right))
