"""i8 sums in i32, as IREE computes a quantized op's zero-point corrections, on the MAC
array (a matmul by a row of ones): over rows, and over a middle dim whose kept dims do
not flatten into one (attention heads: 8x40 over 15); checked against numpy."""
import numpy as np
import pytest

from compiler_target import compile_str
from hal_driver import runtime as rt

SUM = """
func.func @main(%x: tensor<{shape}xi8>) -> tensor<{out}xi32> {{
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<{out}xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%e : tensor<{out}xi32>) -> tensor<{out}xi32>
  %r = linalg.generic {{indexing_maps = [affine_map<({loops}) -> ({loops})>,
                                        affine_map<({loops}) -> ({kept})>],
                       iterator_types = [{iterators}]}}
       ins(%x : tensor<{shape}xi8>) outs(%z : tensor<{out}xi32>) {{
  ^bb0(%a: i8, %acc: i32):
    %w = arith.extsi %a : i8 to i32
    %s = arith.addi %acc, %w : i32
    linalg.yield %s : i32
  }} -> tensor<{out}xi32>
  return %r : tensor<{out}xi32>
}}
"""


@pytest.mark.parametrize("shape, reduced", [((2304, 8), 1), ((8, 15, 40), 1)])
def test_i8_sums_run_on_the_mac_array(shape, reduced):
    loops = [f"d{i}" for i in range(len(shape))]
    kept = [loop for i, loop in enumerate(loops) if i != reduced]
    out = [n for i, n in enumerate(shape) if i != reduced]
    text = SUM.format(shape="x".join(map(str, shape)), out="x".join(map(str, out)),
                      loops=", ".join(loops), kept=", ".join(kept),
                      iterators=", ".join('"reduction"' if i == reduced else '"parallel"'
                                          for i in range(len(shape))))
    x = np.random.default_rng(3).integers(-128, 128, shape, dtype=np.int8)
    module = rt.load_vm_flatbuffer(compile_str(text, target_backends=["npu"]), driver="npu-sim")
    try:
        got = np.asarray(module.main(x))
        stats = module.last_call_stats
    finally:
        module.close()
    assert stats.npu_dispatches == stats.dispatches == 1
    np.testing.assert_array_equal(got, x.astype(np.int32).sum(axis=reduced))
