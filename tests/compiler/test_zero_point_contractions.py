"""What compiler_target.zero_point_contractions rewrites and what it leaves: only a sum
whose every use truncates it to i32 (wrapping i32 arithmetic gives those bits exactly),
of operands that are an 8-bit value over the reduced dim plus terms that do not vary
along it. The rewritten programs' values are checked end to end in
tests/e2e/test_dynamic_quantization.py."""
import numpy as np
import pytest
from iree.compiler import ir

from compiler_target import compile_str
from compiler_target.stock_compiler import StockCompiler
from compiler_target.zero_point_contractions import rewrite_zero_point_contractions
from hal_driver import runtime as rt

SHIFTED = """
  %e{n} = tensor.empty() : tensor<{shape}xi32>
  %{n} = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> {zmap}>,
                                          affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}}
       ins(%{x}, %{z} : tensor<{shape}xi8>, {ztype}) outs(%e{n} : tensor<{shape}xi32>) {{
  ^bb0(%v: i8, %zp: i8, %o: i32):
    %ve = arith.{ext} %v : i8 to i32
    %ze = arith.{ext} %zp : i8 to i32
    %d = arith.subi %ve, %ze : i32
    linalg.yield %d : i32
  }} -> tensor<{shape}xi32>
"""

MATMUL = """
// x and its zero point are u8, w and its zero point i8
func.func @main(%x: tensor<{m}x{k}xi8>, %zx: tensor<i8>, %w: tensor<{k}x{n}xi8>, %zw: {zwtype}) -> {result} {{
{lhs}
{rhs}
  %c0 = arith.constant 0 : i64
  %acc0 = tensor.empty() : tensor<{m}x{n}xi64>
  %acc = linalg.fill ins(%c0 : i64) outs(%acc0 : tensor<{m}x{n}xi64>) -> tensor<{m}x{n}xi64>
  %s = linalg.matmul ins(%a, %b : tensor<{m}x{k}xi32>, tensor<{k}x{n}xi32>) outs(%acc : tensor<{m}x{n}xi64>) -> tensor<{m}x{n}xi64>
{use}
}}
"""

TRUNCATED = """
  %t0 = tensor.empty() : tensor<{m}x{n}xi32>
  %t = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
       ins(%s : tensor<{m}x{n}xi64>) outs(%t0 : tensor<{m}x{n}xi32>) {{
  ^bb0(%v: i64, %o: i32):
    %r = arith.trunci %v : i64 to i32
    linalg.yield %r : i32
  }} -> tensor<{m}x{n}xi32>
  return %t : tensor<{m}x{n}xi32>
"""


def _program(use=TRUNCATED, result="tensor<{m}x{n}xi32>", zw_map="()", zw_type="tensor<i8>",
             m=6, k=32, n=8):
    sizes = dict(m=m, k=k, n=n)
    lhs = SHIFTED.format(n="a", x="x", z="zx", ext="extui", shape=f"{m}x{k}", zmap="()", ztype="tensor<i8>")
    rhs = SHIFTED.format(n="b", x="w", z="zw", ext="extsi", shape=f"{k}x{n}", zmap=zw_map,
                         ztype=zw_type.format(**sizes))
    return MATMUL.format(lhs=lhs, rhs=rhs, use=use.format(**sizes), result=result.format(**sizes),
                         zwtype=zw_type.format(**sizes), **sizes)


def _rewritten(text: str) -> int:
    compiler = StockCompiler([])
    module = compiler.parse_text(text)
    with module.context, ir.Location.unknown():
        count = rewrite_zero_point_contractions(module)
    assert module.verify()
    return count


def test_a_truncated_sum_of_shifted_bytes_is_rewritten():
    assert _rewritten(_program()) == 1
    assert _rewritten(_program(zw_map="(j)", zw_type="tensor<{n}xi8>")) == 1   # per column


def test_a_sum_used_as_i64_is_left():
    """Without the truncation the i64 value matters: 32 x 255 x 128 fits in i32, but the
    rewrite does not depend on values."""
    assert _rewritten(_program(use="  return %s : tensor<{m}x{n}xi64>",
                               result="tensor<{m}x{n}xi64>")) == 0


def test_a_zero_point_that_varies_along_the_reduced_dim_is_left():
    """A per-row zero point of the weights (one per k) is not a term outside the sum."""
    assert _rewritten(_program(zw_map="(i)", zw_type="tensor<{k}xi8>")) == 0


def test_i32_operands_that_are_not_bytes_are_left():
    text = """
func.func @main(%a: tensor<6x32xi32>, %b: tensor<32x8xi32>) -> tensor<6x8xi32> {
  %c0 = arith.constant 0 : i64
  %acc0 = tensor.empty() : tensor<6x8xi64>
  %acc = linalg.fill ins(%c0 : i64) outs(%acc0 : tensor<6x8xi64>) -> tensor<6x8xi64>
  %s = linalg.matmul ins(%a, %b : tensor<6x32xi32>, tensor<32x8xi32>) outs(%acc : tensor<6x8xi64>) -> tensor<6x8xi64>
""" + TRUNCATED.format(m=6, n=8) + "}"
    assert _rewritten(text) == 0


@pytest.mark.parametrize("zw_map, zw_type", [("()", "tensor<i8>"), ("(j)", "tensor<{n}xi8>")],
                         ids=["per_tensor", "per_column"])
def test_the_rewritten_sum_wraps_as_the_truncated_one(tmp_path, zw_map, zw_type):
    """(0 - 255) x (-128 - 127) summed over 34,000 k: 2.2e9, past i32, so the truncated
    i64 sum wraps; the NPU's i32 terms wrap to the same bits."""
    m, k, n = 2, 34_000, 4
    x = np.zeros((m, k), np.int8)
    w = np.full((k, n), -128, np.int8)
    zx = np.array(255, np.uint8).view(np.int8)
    zw = np.full(() if zw_map == "()" else (n,), 127, np.int8)
    report = tmp_path / "report.txt"
    vmfb = compile_str(_program(zw_map=zw_map, zw_type=zw_type, m=m, k=k, n=n),
                       target_backends=["npu"], extra_args=[f"--iree-npu-dispatch-report={report}"])
    module = rt.load_vm_flatbuffer(vmfb, driver="npu-sim")
    try:
        result = np.asarray(module.main(x, zx, w, zw))
    finally:
        module.close()
    matmul = [line for line in report.read_text().splitlines() if "matmul" in line]
    assert matmul and all("-> npu" in line for line in matmul), report.read_text()
    exact = (x.view(np.uint8).astype(np.int64) - 255) @ (w.astype(np.int64) - zw.astype(np.int64))
    assert exact.max() > 2**31
    np.testing.assert_array_equal(result, exact.astype(np.int32))
