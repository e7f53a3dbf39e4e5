"""The benchmark suite: the ONNX samples and single-layer MLIR models of common CNN
shapes (3x3 and 1x1 convolutions, matmuls, a depthwise 3x3), each with fixed-seed
inputs. Layer weights are function arguments, so no large constants are embedded."""
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ("onnx_conv", "small_cnn", "depthwise_separable", "mlp", "host_fallback")
CONV_SHAPES = ((56, 64), (28, 128), (14, 256), (7, 512))   # (spatial size, channels)
MATMUL_SHAPES = ((512, 512, 512), (1024, 1024, 256))        # (M, N, K)
DEPTHWISE_SHAPE = (56, 128)
SEED = 20261122


@dataclass
class Model:
    name: str
    source: Path                  # .mlir or .onnx
    inputs: list[np.ndarray]
    kind: str                     # "sample" or "layer"


def _random(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def _tensor(shape: tuple) -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + "xf32>"


def conv_mlir(size: int, channels: int, kernel: int) -> tuple[str, list[tuple]]:
    """A stride-1 `kernel`x`kernel` conv, channels -> channels, size x size output."""
    x = (1, channels, size + kernel - 1, size + kernel - 1)
    w = (channels, channels, kernel, kernel)
    y = (1, channels, size, size)
    return f"""func.func @main(%x: {_tensor(x)}, %w: {_tensor(w)}) -> {_tensor(y)} {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : {_tensor(y)}
  %init = linalg.fill ins(%zero : f32) outs(%empty : {_tensor(y)}) -> {_tensor(y)}
  %y = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
      ins(%x, %w : {_tensor(x)}, {_tensor(w)}) outs(%init : {_tensor(y)}) -> {_tensor(y)}
  return %y : {_tensor(y)}
}}
""", [x, w]


def depthwise_mlir(size: int, channels: int) -> tuple[str, list[tuple]]:
    x = (1, channels, size + 2, size + 2)
    w = (channels, 3, 3)
    y = (1, channels, size, size)
    return f"""func.func @main(%x: {_tensor(x)}, %w: {_tensor(w)}) -> {_tensor(y)} {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : {_tensor(y)}
  %init = linalg.fill ins(%zero : f32) outs(%empty : {_tensor(y)}) -> {_tensor(y)}
  %y = linalg.depthwise_conv_2d_nchw_chw {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
      ins(%x, %w : {_tensor(x)}, {_tensor(w)}) outs(%init : {_tensor(y)}) -> {_tensor(y)}
  return %y : {_tensor(y)}
}}
""", [x, w]


def matmul_mlir(m: int, n: int, k: int) -> tuple[str, list[tuple]]:
    a, b, c = (m, k), (k, n), (m, n)
    return f"""func.func @main(%a: {_tensor(a)}, %b: {_tensor(b)}) -> {_tensor(c)} {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : {_tensor(c)}
  %init = linalg.fill ins(%zero : f32) outs(%empty : {_tensor(c)}) -> {_tensor(c)}
  %c = linalg.matmul ins(%a, %b : {_tensor(a)}, {_tensor(b)}) outs(%init : {_tensor(c)}) -> {_tensor(c)}
  return %c : {_tensor(c)}
}}
""", [a, b]


def add4_mlir() -> str:
    """The tiny model for per-call overhead: a 4-element add."""
    return """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.addf %a, %b : tensor<4xf32>
  return %c : tensor<4xf32>
}
"""


def layer_sources() -> dict[str, tuple[str, list[tuple]]]:
    layers = {}
    for size, channels in CONV_SHAPES:
        for kernel in (3, 1):
            layers[f"conv{kernel}x{kernel}_{size}x{size}x{channels}"] = conv_mlir(size, channels, kernel)
    for m, n, k in MATMUL_SHAPES:
        layers[f"matmul_{m}x{n}x{k}"] = matmul_mlir(m, n, k)
    size, channels = DEPTHWISE_SHAPE
    layers[f"depthwise3x3_{size}x{size}x{channels}"] = depthwise_mlir(size, channels)
    return layers


def suite(out_dir: Path) -> list[Model]:
    """Writes the layer MLIR files to `out_dir`; returns the samples then the layers."""
    out_dir.mkdir(parents=True, exist_ok=True)
    models = [_sample(name, out_dir / "samples" / name) for name in SAMPLES]
    rng = np.random.default_rng(SEED)
    for name, (text, shapes) in layer_sources().items():
        path = out_dir / f"{name}.mlir"
        path.write_text(text)
        models.append(Model(name, path, [_random(rng, shape) for shape in shapes], "layer"))
    return models


def tiny_model(out_dir: Path) -> Model:
    path = out_dir / "add4.mlir"
    path.write_text(add4_mlir())
    return Model("add4", path, [np.arange(4, dtype=np.float32), np.ones(4, np.float32)], "tiny")


def _sample(name: str, directory: Path) -> Model:
    """The sample made by its own script (fixed seed) into `directory`, once per bench
    run (each model's process reuses it): model and input."""
    if not (directory / "input_0.npy").exists():
        script = ROOT / "samples" / name / "make_model.py"
        subprocess.run([sys.executable, str(script), str(directory)], check=True)
    return Model(name, directory / f"{_onnx_stem(name)}.onnx",
                 [np.load(directory / "input_0.npy")], "sample")


def _onnx_stem(sample: str) -> str:
    return {"onnx_conv": "single_conv"}.get(sample, sample)
