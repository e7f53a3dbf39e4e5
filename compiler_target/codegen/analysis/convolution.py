"""Convolutions: out[n][f][y][x] (+)= Σ in[n][g·C/G + c][s·y + d·ky][s·x + d·kx] ·
w[f][c][ky][kx], 1-D or 2-D (a 1-D convolution is a 2-D one with H = 1), grouped and
depthwise, in any layout.

The loops' roles come from MLIR's own partition (`linalg.infer_convolution_dimensions`:
batch, output_channel, input_channel and depth = the group loop); loops it does not
list get theirs from which operands index them. The windowed dims (an input dim indexed
by `stride·o + dilation·k`) give the output-image and kernel loops.
"""
from dataclasses import dataclass

from iree.compiler._mlir_libs import _mlirDialectsLinalg as mlir_linalg

from ..ops import Conv2D, TensorRef
from .errors import NotSupported
from .indexing import Generic, Operand, logical_strides, plain_view, strides_over_loops, view_ref
from .main_op import MainOp, label
from .windows import Window, unwindowed, window_source, window_text, windows

# (operands indexing the loop, iterator type) -> role, for loops MLIR leaves out
ROLE_BY_USE = {("I", "O", "parallel"): "n", ("I", "W", "O", "parallel"): "g",
               ("W", "O", "parallel"): "f", ("I", "W", "reduction"): "c"}
MLIR_ROLES = {"batch": "n", "depth": "g", "output_channel": "f", "input_channel": "c"}


@dataclass
class ConvolutionMain(MainOp):
    input: TensorRef = None
    weight: TensorRef = None
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    groups: int = 1

    kind = "conv2d"

    @property
    def summary(self) -> str:
        n, channels, h, w = self.input.shape
        f, _, kh, kw = self.weight.shape
        layout = "NHWC" if self.input.strides[1] < self.input.strides[3] else "NCHW"
        kind = "depthwise conv2d" if self.groups > 1 and self.groups == channels else "conv2d"
        return (f"{label(self.name, f'{kind} {layout}')} N={n} C={channels} H={h} W={w} F={f} "
                f"KH={kh} KW={kw}{window_text(self.stride, self.dilation, self.pads, self.groups)}"
                f" {self.input.dtype}")

    def build(self, out, expr, inputs, extra_outputs=()) -> Conv2D:
        return Conv2D(self.input, self.weight, out, self.stride, self.dilation, self.pads,
                      self.groups, expr, inputs, narrow_sum=self.narrow_sum,
                      extra_outputs=list(extra_outputs))


def recognise(generic: Generic, infer_roles: bool = True) -> ConvolutionMain:
    """`infer_roles`: take the loops' roles from MLIR's convolution inference first (not
    for a generic whose operands the walk rewrote, which MLIR does not see)."""
    image, weight = sorted(generic.inputs, key=lambda o: -max(len(c) for c, _ in o.terms))
    if any(len(c) > 1 for c, _ in weight.terms):
        raise NotSupported(f"{generic.name}: both operands have windowed indexing")
    found = windows(image, generic)
    if len(found) not in (1, 2):
        raise NotSupported(f"{generic.name}: convolution with {len(found)} windowed dims "
                           "(the NPU runs 1-D and 2-D convolutions)")
    role, channel_loops = _roles(generic, image, weight, found, infer_roles)
    size = {r: generic.extents[l] if l is not None else 1 for r, l in role.items()}
    image_ref, pads = window_source(image, found, 0.0, generic.name)
    weight_ref = plain_view(weight, generic.name)
    i_strides, i_offset = strides_over_loops(image_ref, unwindowed(image, found))
    w_strides, w_offset = strides_over_loops(weight_ref, weight)
    role["c"], size["c"] = _input_channels(channel_loops, generic, i_strides, w_strides)
    groups, channels = size["g"], size["g"] * size["c"]

    def grouped(strides, inner):
        """Stride of the channel dim indexed by g * size[inner] + inner."""
        loops = {l: (0, m) for l, m in ((role["g"], size[inner]), (role[inner], 1))
                 if l is not None}
        return logical_strides({l: strides.get(l, 0) for l in loops}, loops, generic.extents, 1)[0]

    # A 1-D convolution is a 2-D one over a unit height.
    spatial = [None] * (2 - len(found)) + found
    pads = [(0, 0)] * (2 - len(found)) + pads

    def window_field(window: Window | None, key: str, default: int = 1) -> int:
        return default if window is None else getattr(window, key)

    def extent(window: Window | None, key: str) -> int:
        return 1 if window is None else generic.extents[getattr(window, key)]

    (top, bottom), (left, right) = pads
    return ConvolutionMain(
        generic.name,
        (size["n"], groups * size["f"], extent(spatial[0], "output"), extent(spatial[1], "output")),
        {l: d for l, d in ((role["n"], (0, 1)), (role["g"], (1, size["f"])), (role["f"], (1, 1)),
                           (window_field(spatial[0], "output", None), (2, 1)),
                           (spatial[1].output, (3, 1))) if l is not None},
        input=view_ref(image_ref,
                       (size["n"], channels, *(_image_extent(image_ref, w) for w in spatial)),
                       (i_strides.get(role["n"], 0), grouped(i_strides, "c"),
                        *(0 if w is None else image_ref.strides[w.dim] for w in spatial)),
                       i_offset),
        weight=view_ref(weight_ref,
                        (groups * size["f"], size["c"], extent(spatial[0], "kernel"),
                         extent(spatial[1], "kernel")),
                        (grouped(w_strides, "f"), w_strides.get(role["c"], 0),
                         *(0 if w is None else w_strides.get(w.kernel, 0) for w in spatial)),
                        w_offset),
        stride=tuple(window_field(w, "stride") for w in spatial),
        dilation=tuple(window_field(w, "dilation") for w in spatial),
        pads=(top, left, bottom, right), groups=groups)


def _image_extent(ref: TensorRef, window: Window | None) -> int:
    return 1 if window is None else ref.shape[window.dim]


def _input_channels(loops: list[int], generic: Generic, i_strides: dict[int, int],
                    w_strides: dict[int, int]) -> tuple[int | None, int]:
    """(the loop that stands for the input-channel loops, their joint extent). Several
    loops act as one where image and weight both hold them contiguously in the same
    order: IREE drops an output dim of 1, so a kernel as tall as its input (a 2-D conv
    over a signal's channels) leaves the kernel's rows as a second reduction over image
    and weight. The innermost loop stands for all; its strides step through them."""
    loops = [l for l in loops if generic.extents[l] != 1] or loops[:1]
    if len(loops) <= 1:
        return (loops[0], generic.extents[loops[0]]) if loops else (None, 1)
    order = sorted(loops, key=lambda l: i_strides.get(l, 0))
    for inner, outer in zip(order, order[1:]):
        for strides in (i_strides, w_strides):
            if strides.get(outer, 0) != strides.get(inner, 0) * generic.extents[inner]:
                raise NotSupported(f"{generic.name}: several loops act as c, not contiguous "
                                   "in both operands")
    extent = 1
    for loop in loops:
        extent *= generic.extents[loop]
    return order[0], extent


def _roles(generic: Generic, image: Operand, weight: Operand, found: list[Window],
           infer: bool = True) -> tuple[dict[str, int | None], list[int]]:
    """The loop of each of the roles n, g, f (None when the op has no such loop), and
    the input-channel loops (_input_channels makes them one)."""
    windowed = {loop for w in found for loop in (w.output, w.kernel)}
    loops: dict[str, list[int]] = {role: [] for role in ROLE_BY_USE.values()}
    inferred = mlir_linalg.infer_convolution_dimensions(generic.op) if infer else None
    if inferred is not None:
        for mlir_role, role in MLIR_ROLES.items():
            loops[role] = [l for l in getattr(inferred, mlir_role) if l not in windowed]
    assigned = windowed | {l for ls in loops.values() for l in ls}
    for loop, iterator in enumerate(generic.iterators):
        if loop in assigned:
            continue
        use = tuple(name for name, operand in (("I", image), ("W", weight), ("O", generic.output))
                    if loop in operand.loops()) + (iterator,)
        role = ROLE_BY_USE.get(use)
        if role is None:
            raise NotSupported(f"{generic.name}: loop d{loop} ({' '.join(use)}) fits no "
                               "convolution role")
        loops[role].append(loop)
    for role, found_loops in loops.items():
        if len(found_loops) > 1 and role != "c":
            raise NotSupported(f"{generic.name}: several loops act as {role}")
    return ({role: found_loops[0] if found_loops else None for role, found_loops in loops.items()
             if role != "c"}, loops["c"])
