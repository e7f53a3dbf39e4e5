"""Windowed operands of convolutions and pooling: an input dim indexed by
`stride·o + dilation·k` (output position o, kernel position k), and the zero (or -inf)
padding around the window's source from a `tensor.pad` in the dispatch."""
from dataclasses import dataclass

from ..ops import TensorRef
from .errors import NotSupported
from .indexing import Generic, Operand
from .values import Padded, View


@dataclass(frozen=True)
class Window:
    dim: int            # the windowed operand's tensor dim
    output: int | None  # output-position loop (None: the output dim has extent 1)
    stride: int
    kernel: int         # kernel-position loop
    dilation: int


def windows(image: Operand, generic: Generic) -> list[Window]:
    """The windowed dims of `image`, in its dim order."""
    found = []
    for dim, (coefficients, _) in enumerate(image.terms):
        if len(coefficients) < 2:
            continue
        if len(coefficients) != 2:
            raise NotSupported(f"{generic.name}: windowed index over {len(coefficients)} loops")
        (a, ca), (b, cb) = sorted(coefficients.items(), key=lambda kv: generic.iterators[kv[0]])
        if generic.iterators[a] != "parallel" or generic.iterators[b] != "reduction":
            raise NotSupported(f"{generic.name}: windowed index is not output + kernel position")
        if ca <= 0 or cb <= 0:
            raise NotSupported(f"{generic.name}: window with stride {ca} and dilation {cb}")
        found.append(Window(dim, a, ca, b, cb))
    return found


def unwindowed(image: Operand, found: list[Window]) -> Operand:
    """The operand without its windowed dims (their strides are taken per dim)."""
    windowed = {w.dim for w in found}
    return Operand(image.value, [({} if t in windowed else c, k)
                                 for t, (c, k) in enumerate(image.terms)])


def window_source(image: Operand, found: list[Window], pad_value: float,
                  name: str) -> tuple[TensorRef, list[tuple[int, int]]]:
    """The windowed operand's memory and the (low, high) padding of each window."""
    value = image.value
    if isinstance(value, View):
        return value.ref, [(0, 0)] * len(found)
    if not isinstance(value, Padded):
        raise NotSupported(f"{name} reads a computed or undefined tensor")
    dims = {w.dim for w in found}
    if any((value.low[t] or value.high[t]) for t in range(len(value.low)) if t not in dims):
        raise NotSupported(f"{name}: padding of a non-spatial dim")
    if value.value != pad_value:
        raise NotSupported(f"{name}: padding with {value.value} (needs {pad_value})")
    return value.ref, [(value.low[w.dim], value.high[w.dim]) for w in found]


def window_text(stride, dilation, pads, groups: int = 1) -> str:
    text = ""
    for key, (a, b) in (("stride", stride), ("dilation", dilation)):
        if key == "stride" or (a, b) != (1, 1):
            text += f" {key}={a}" if a == b else f" {key}={a}x{b}"
    if any(pads):
        text += " pads=" + ",".join(map(str, pads))
    if groups > 1:
        text += f" groups={groups}"
    return text
