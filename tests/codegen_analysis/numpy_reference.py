"""A tiny numpy interpreter of NpuOps, exactly as compiler_target/codegen/ops.py defines
them: it proves what analysis described is what the model computes, independently of
lowering. Buffers are flat numpy arrays (one per binding, of the binding's element type);
the op reads its TensorRefs from them and writes its `out` view (and its extra outputs)
in place."""
import math

import numpy as np

from compiler_target.codegen.ops import (Conv2D, Elementwise, Matmul, NpuOp, Pool2D, Reduce,
                                         Rowwise, TensorRef)

NUMPY = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i32": np.int32}


def run(op: NpuOp, buffers: dict[int, np.ndarray]) -> None:
    if isinstance(op, (Elementwise, Rowwise)):
        values = evaluate(op.expr, None, [read(r, buffers) for r in op.inputs], op.out.shape)
    else:
        acc = {Conv2D: conv2d, Matmul: matmul, Pool2D: pool2d, Reduce: reduce}[type(op)](op, buffers)
        values = evaluate(op.epilogue, acc, [read(r, buffers) for r in op.epilogue_inputs],
                          op.out.shape)
    view(op.out, buffers)[...] = values[-1]
    for ref, node in getattr(op, "extra_outputs", []):
        view(ref, buffers)[...] = values[node]


def view(ref: TensorRef, buffers: dict[int, np.ndarray]) -> np.ndarray:
    flat = np.ascontiguousarray(ref.constant).reshape(-1) if ref.binding < 0 else buffers[ref.binding]
    assert ref.offset % flat.itemsize == 0
    base = flat[ref.offset // flat.itemsize:]
    extent = 1 + sum((n - 1) * s for n, s in zip(ref.shape, ref.strides))
    assert extent <= base.size, f"{ref.shape} {ref.strides} exceeds {base.size} elements"
    return np.lib.stride_tricks.as_strided(base, ref.shape, [s * flat.itemsize for s in ref.strides])


def read(ref: TensorRef, buffers) -> np.ndarray:
    return view(ref, buffers).astype(np.float64)


def evaluate(expr, acc, inputs, shape) -> list[np.ndarray]:
    """Every node's value, broadcast to `shape`."""
    values = []
    for node in expr:
        kind = node[0]
        if kind == "input":
            value = inputs[node[1]]
        elif kind == "acc":
            value = acc
        elif kind == "const":
            value = np.float64(node[1])
        elif kind == "reduce":       # Rowwise: along the rows (I, the last axis) of (B,) O, I
            value = {"sum": np.sum, "max": np.max}[node[2]](
                np.broadcast_to(values[node[1][0]], shape), axis=-1, keepdims=True)
        else:
            args = [values[a] for a in node[1]]
            value = OPS[kind](*args, *node[2:])
        values.append(value)
    return [np.broadcast_to(value, shape) for value in values]


OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": np.maximum, "min": np.minimum,
    "relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "neg": np.negative, "abs": np.abs, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "log": np.log, "log1p": np.log1p,
    "clamp": lambda x, lo, hi: np.clip(x, lo, hi),
    "leakyrelu": lambda x, alpha: np.where(x > 0, x, alpha * x),
    "scale": lambda x, mul, add: x * mul + add,
    "hswish": lambda x, mul, add: x * np.clip(x * mul + add, 0, 1),
    "fma": lambda a, b, c: a * b + c, "selgt": lambda a, b, c: np.where(a > b, a, c),
    "selge": lambda a, b, c: np.where(a >= b, a, c),
}


def _padded(x: np.ndarray, top: int, left: int, rows: int, cols: int, fill: float) -> np.ndarray:
    """x (N, C, H, W) placed at (top, left) in a (rows, cols) plane of `fill`."""
    n, c, h, w = x.shape
    out = np.full((n, c, max(rows, top + h), max(cols, left + w)), fill)
    out[:, :, top:top + h, left:left + w] = x
    return out


def _windows(x, op_out_hw, kernel, stride, dilation, pads, fill):
    """Yields (ky, kx, x[.., y*sh + ky*dh - pt, x*sw + kx*dw - pl]) with `fill` outside."""
    (ho, wo), (kh, kw), (sh, sw), (dh, dw) = op_out_hw, kernel, stride, dilation
    top, left = pads[0], pads[1]
    rows, cols = (ho - 1) * sh + (kh - 1) * dh + 1, (wo - 1) * sw + (kw - 1) * dw + 1
    xp = _padded(x, top, left, rows, cols, fill)
    for ky in range(kh):
        for kx in range(kw):
            yield ky, kx, xp[:, :, ky * dh:ky * dh + (ho - 1) * sh + 1:sh,
                             kx * dw:kx * dw + (wo - 1) * sw + 1:sw]


def conv2d(op: Conv2D, buffers) -> np.ndarray:
    x, w = read(op.input, buffers), read(op.weight, buffers)
    n, f, ho, wo = op.out.shape
    cg, fg = x.shape[1] // op.groups, f // op.groups
    acc = np.zeros((n, f, ho, wo))
    for ky, kx, window in _windows(x, (ho, wo), w.shape[2:], op.stride, op.dilation, op.pads, 0.0):
        for g in range(op.groups):
            acc[:, g * fg:(g + 1) * fg] += np.einsum(
                "nchw,fc->nfhw", window[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg, :, ky, kx])
    return acc


def matmul(op: Matmul, buffers) -> np.ndarray:
    """Each role's dims flattened: a (B, M, K) @ b (B, K, N), reshaped to out's dims."""
    nb, nm, nn, nk = op.dims
    a, b = read(op.a, buffers), read(op.b, buffers)
    size = lambda dims: int(np.prod(dims))  # noqa: E731
    batch, m, k, n = a.shape[:nb], a.shape[nb:nb + nm], a.shape[nb + nm:], b.shape[nb + nk:]
    product = np.matmul(a.reshape(size(batch), size(m), size(k)),
                        b.reshape(size(batch), size(k), size(n)))
    return product.reshape(op.out.shape)


def pool2d(op: Pool2D, buffers) -> np.ndarray:
    x = read(op.input, buffers)
    ho, wo = op.out.shape[2:]
    fill = -np.inf if op.kind == "max" else 0.0
    windows = [win for _, _, win in _windows(x, (ho, wo), op.kernel, op.stride, op.dilation,
                                             op.pads, fill)]
    if op.kind == "max":
        return np.max(windows, axis=0)
    total = np.sum(windows, axis=0)
    if op.kind == "sum":
        return total
    if op.count_include_pad:
        return total / (op.kernel[0] * op.kernel[1])
    inside = np.ones((1, 1) + x.shape[2:])
    counts = sum(win for _, _, win in _windows(inside, (ho, wo), op.kernel, op.stride,
                                               op.dilation, op.pads, 0.0))
    return total / counts


def reduce(op: Reduce, buffers) -> np.ndarray:
    x = read(op.input, buffers)
    return {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean}[op.kind](x, axis=1)
