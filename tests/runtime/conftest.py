"""Models compiled with the stock iree-compile for llvm-cpu: one vmfb for the stock
runtime (local-task) and the same program retargeted to npu-sim by rewriting its
device query from `local*` to `npu*` (what the npu compiler target does)."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

BIN = pathlib.Path(sys.executable).parent
LLVM_CPU = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=generic"]

MODELS = {
    "elementwise": """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = arith.addf %a, %b : tensor<2x3xf32>
  %1 = arith.mulf %0, %a : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
func.func @two(%a: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
  %0 = arith.addi %a, %a : tensor<4xi32>
  return %0, %a : tensor<4xi32>, tensor<4xi32>
}
func.func @dynamic(%a: tensor<?xf32>) -> tensor<?xf32> {
  %0 = math.exp %a : tensor<?xf32>
  return %0 : tensor<?xf32>
}
func.func @scalar(%a: tensor<f32>, %k: i32, %x: f32) -> (tensor<f32>, i32, f32) {
  %0 = arith.addf %a, %a : tensor<f32>
  %1 = arith.addi %k, %k : i32
  %2 = arith.mulf %x, %x : f32
  return %0, %1, %2 : tensor<f32>, i32, f32
}
func.func @ints(%a: tensor<3xi8>, %b: tensor<2xi64>, %c: tensor<2xf16>) -> (tensor<3xi8>, tensor<2xi64>, tensor<2xf16>) {
  %0 = arith.addi %a, %a : tensor<3xi8>
  %1 = arith.addi %b, %b : tensor<2xi64>
  %2 = arith.addf %c, %c : tensor<2xf16>
  return %0, %1, %2 : tensor<3xi8>, tensor<2xi64>, tensor<2xf16>
}
""",
    "async": """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = arith.addf %a, %b : tensor<2x3xf32>
  %1 = arith.mulf %0, %a : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
""",
    "mlp": """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = arith.constant dense<"WEIGHTS"> : tensor<8x16xf32>
  %b = arith.constant dense<-0.5> : tensor<16xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>)
                      outs(%fill : tensor<4x16xf32>) -> tensor<4x16xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                          affine_map<(i, j) -> (j)>,
                                          affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%init : tensor<4x16xf32>) {
  ^bb0(%m: f32, %bias: f32, %o: f32):
    %s = arith.addf %m, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  return %out : tensor<4x16xf32>
}
""",
}
# A non-splat weight: stays a module constant (imported, or read through hal.file).
MODELS["mlp"] = MODELS["mlp"].replace(
    "WEIGHTS", "0x" + (np.arange(128, dtype=np.float32) / 64 - 1).tobytes().hex().upper())
# Two models of a pipeline (vm modules `det` and `rec`): det's output is rec's input.
MODELS["det"] = "module @det {\n" + MODELS["mlp"] + "}\n"
MODELS["rec"] = """
module @rec {
func.func @main(%f: tensor<4x16xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%f : tensor<4x16xf32>) outs(%fill : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %e = math.exp %x : f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %sum : tensor<4xf32>
}
}
"""
MODELS["bools"] = """
func.func @main(%a: tensor<4xi1>) -> (tensor<4xi32>, tensor<4xi1>) {
  %0 = arith.extui %a : tensor<4xi1> to tensor<4xi32>
  return %0, %a : tensor<4xi32>, tensor<4xi1>
}
"""
# Weights outside the module: parameters `model::weight` and `model::bias`.
MODELS["params"] = """
util.global private @w = #flow.parameter.named<"model"::"weight"> : tensor<4x8xf32>
util.global private @b = #flow.parameter.named<"model"::"bias"> : tensor<8xf32>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %w = util.global.load @w : tensor<4x8xf32>
  %b = util.global.load @b : tensor<8xf32>
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<2x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<2x8xf32>) -> tensor<2x8xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x8xf32>)
                      outs(%fill : tensor<2x8xf32>) -> tensor<2x8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                          affine_map<(i, j) -> (j)>,
                                          affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<2x8xf32>, tensor<8xf32>) outs(%init : tensor<2x8xf32>) {
  ^bb0(%m: f32, %bias: f32, %o: f32):
    %s = arith.addf %m, %bias : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  return %out : tensor<2x8xf32>
}
"""


def compile_pair(name: str, directory: pathlib.Path,
                 flags: tuple = ()) -> tuple[pathlib.Path, pathlib.Path]:
    """(stock local vmfb, npu-sim vmfb) of MODELS[name] compiled with extra `flags`:
    one compile to the VM dialect, then each vmfb from it (the npu-sim one after the
    device query rewrite)."""
    source = directory / f"{name}.mlir"
    source.write_text(MODELS[name])
    vm_ir = directory / f"{name}.vm.mlir"
    compiler = str(BIN / "iree-compile")
    subprocess.run([compiler, str(source), *LLVM_CPU, *flags, "--compile-to=vm", "-o",
                    str(vm_ir)], check=True)
    text = vm_ir.read_text()
    assert text.count('"local*"') == 1
    npu_ir = directory / f"{name}_npu.vm.mlir"
    npu_ir.write_text(text.replace('"local*"', '"npu*"'))
    outputs = []
    for ir, tag in ((vm_ir, "local"), (npu_ir, "npu")):
        outputs.append(directory / f"{name}_{tag}.vmfb")
        subprocess.run([compiler, "--compile-from=vm", str(ir), "-o", str(outputs[-1])],
                       check=True)
    return outputs[0], outputs[1]


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, tuple[pathlib.Path, pathlib.Path]]:
    directory = tmp_path_factory.mktemp("models")
    pairs = {name: compile_pair(name, directory) for name in MODELS if name != "async"}
    pairs["async"] = compile_pair("async", directory, ("--iree-execution-model=async-external",))
    return pairs


@pytest.fixture(scope="session")
def small_cnn(tmp_path_factory) -> pathlib.Path:
    """samples/small_cnn generated by its script (model, input_0.npy, expected_0.npy in the
    returned vmfb's directory), imported with iree-import-onnx, compiled for npu-sim."""
    directory = tmp_path_factory.mktemp("small_cnn")
    script = pathlib.Path(__file__).resolve().parents[2] / "samples/small_cnn/make_model.py"
    subprocess.run([sys.executable, str(script), str(directory)], check=True)
    onnx_file = directory / "small_cnn.onnx"
    subprocess.run([str(BIN / "iree-import-onnx"), str(onnx_file), "-o",
                    str(directory / "small_cnn.mlir")], check=True)
    MODELS["small_cnn"] = (directory / "small_cnn.mlir").read_text()
    return compile_pair("small_cnn", directory)[1]


@pytest.fixture(scope="session")
def parameter_archive(tmp_path_factory) -> pathlib.Path:
    """model.irpa for MODELS["params"], written by the stock runtime: `weight` as data,
    `bias` as a splat."""
    import iree.runtime
    path = tmp_path_factory.mktemp("parameters") / "model.irpa"
    weight = np.random.default_rng(7).standard_normal((4, 8), np.float32)
    iree.runtime.save_archive_file(
        {"weight": weight, "bias": iree.runtime.SplatValue(np.float32(-1.5), 8)}, path)
    return path
