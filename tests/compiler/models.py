"""Small models for the compiler tests, generated at test time."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def single_conv(size: int = 500) -> onnx.ModelProto:
    """The seed model: Conv 1x3xSxS f32, weight 8x3x3x3, bias 8, pads 0, stride 1, opset 17."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "weight")
    bias = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "bias")
    conv = helper.make_node("Conv", ["input", "weight", "bias"], ["output"],
                            pads=[0, 0, 0, 0], strides=[1, 1])
    graph = helper.make_graph(
        [conv], "SingleConv",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, size - 2, size - 2])],
        [weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


# Three dispatches: matmul → matmul → column sum (the second reads the first's output).
CHAIN_MLIR = """
func.func @main(%a: tensor<64x32xf32>, %b: tensor<32x64xf32>) -> tensor<64xf32> {
  %cst = arith.constant 0.0 : f32
  %0 = tensor.empty() : tensor<64x64xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %2 = linalg.matmul ins(%a, %b : tensor<64x32xf32>, tensor<32x64xf32>) outs(%1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %3 = linalg.matmul ins(%2, %2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %4 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%3 : tensor<64x64xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %4 : tensor<64xf32>
}
"""

ADD_MLIR = """
func.func @add(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %0 = arith.addf %a, %b : tensor<16xf32>
  return %0 : tensor<16xf32>
}
"""
