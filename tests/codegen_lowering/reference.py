"""numpy references for the NPU ops (float64 accumulation)."""
import math

import numpy as np


def conv2d(x, w, stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0), groups=1):
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (h + pt + pb - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    wo = (wd + pl + pr - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, f, ho, wo))
    fg = f // groups
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            patch = xp[:, :, y0:y0 + (ho - 1) * stride[0] + 1:stride[0],
                       x0:x0 + (wo - 1) * stride[1] + 1:stride[1]]
            for g in range(groups):
                out[:, g * fg:(g + 1) * fg] += np.einsum(
                    "nchw,fc->nfhw", patch[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg, :, ky, kx])
    return out


def pool2d(x, kind, kernel, stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0),
           count_include_pad=False):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    valid = np.pad(np.ones((h, w)), ((pt, pb), (pl, pr)))
    kh, kw = kernel
    ho = (h + pt + pb - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    wo = (w + pl + pr - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    taps, counts = [], np.zeros((ho, wo))
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dilation[0], kx * dilation[1]
            sl = (slice(y0, y0 + (ho - 1) * stride[0] + 1, stride[0]),
                  slice(x0, x0 + (wo - 1) * stride[1] + 1, stride[1]))
            taps.append(xp[:, :, sl[0], sl[1]])
            counts += valid[sl]
    taps = np.stack(taps)
    if kind == "max":
        return taps.max(axis=0)
    divisor = kh * kw if count_include_pad else counts
    return taps.sum(axis=0) / divisor


UNARY = {
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "erf": np.vectorize(math.erf, otypes=[np.float64]), "log": np.log, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos,
    "neg": np.negative, "abs": np.abs,
    "clamp": lambda x, lo, hi: np.clip(x, lo, hi),
    "leakyrelu": lambda x, alpha: np.where(x < 0, alpha * x, x),
    "scale": lambda x, mul, add: x * mul + add,
    "hswish": lambda x, mul, add: x * np.clip(x * mul + add, 0, 1),
}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum}


def expression(expr, inputs, acc=None):
    values = []
    for node in expr:
        kind = node[0]
        if kind == "input":
            values.append(inputs[node[1]].astype(np.float64))
        elif kind == "acc":
            values.append(acc)
        elif kind == "const":
            values.append(np.float64(node[1]))
        elif kind == "reduce":          # Rowwise: along the rows (I, the last axis) of (B,) O, I
            values.append({"sum": np.sum, "max": np.max}[node[2]](
                values[node[1][0]], axis=-1, keepdims=True))
        elif kind in BINARY:
            values.append(BINARY[kind](values[node[1][0]], values[node[1][1]]))
        elif kind == "fma":
            a, b, c = (values[i] for i in node[1])
            values.append(a * b + c)
        elif kind in ("selgt", "selge"):
            a, b, c = (values[i] for i in node[1])
            values.append(np.where(a > b if kind == "selgt" else a >= b, a, c))
        else:
            values.append(UNARY[kind](values[node[1][0]], *node[2:]))
    return values[-1]
