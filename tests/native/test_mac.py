"""matmul, conv2d and dwconv2d against numpy, every MAC dtype, transposes, groups, bias,
accumulate."""
import ml_dtypes
import numpy as np
import pytest

from executable_format import isa
from hal_driver.status import StatusError
from tests.native.programs import (SramImage, instr, program, random_values, run_on_sram,
                                   to_f32)

MAC_DTYPES = ["f32", "f16", "bf16", "i8", "u8"]
BYTE_INTS = ("i8", "u8")
F = isa.Flag


def _acc(dtype):
    return "i32" if dtype in BYTE_INTS else "f32"


def _assert_mac_result(out, ref, magnitude, dtype):
    if dtype in BYTE_INTS:
        np.testing.assert_array_equal(out, ref.astype(np.int64).astype(np.int32))
    else:
        assert np.all(np.abs(out - ref) <= 1e-5 * magnitude + 1e-6), np.abs(out - ref).max()


def _random_flags(rng):
    return [0, F.ACCUMULATE, F.BIAS][int(rng.integers(0, 3))]


@pytest.mark.parametrize("dtype", MAC_DTYPES)
def test_matmul(core, rng, dtype):
    acc = _acc(dtype)
    for trial in range(12):
        m, n, k = (int(v) for v in rng.integers(1, 70, size=3))
        ta, tb = bool(trial & 1), bool(trial & 2)
        flags = _random_flags(rng) | (F.TRANSPOSE_A if ta else 0) | (F.TRANSPOSE_B if tb else 0)
        lda = (m if ta else k) + int(rng.integers(0, 3))
        ldb = (k if tb else n) + int(rng.integers(0, 3))
        ldo = n + int(rng.integers(0, 3))
        a_store = random_values(rng, dtype, ((k, lda) if ta else (m, lda)))
        b_store = random_values(rng, dtype, ((n, ldb) if tb else (k, ldb)))
        out_store = random_values(rng, acc, (m, ldo))
        bias = random_values(rng, acc, n)
        image = SramImage()
        a_addr, b_addr = image.put(a_store), image.put(b_store)
        o_addr, bias_addr = image.put(out_store), image.put(bias)
        result = run_on_sram(core, image, instr(
            "matmul", dtype, flags, a=a_addr, b=b_addr, out=o_addr, m=m, n=n, k=k,
            lda=lda, ldb=ldb, ldo=ldo, bias=bias_addr if flags & F.BIAS else 0))
        A = to_f32(a_store, dtype).astype(np.float64)
        B = to_f32(b_store, dtype).astype(np.float64)
        A = A[:, :m].T if ta else A[:, :k]
        B = B[:, :k].T if tb else B[:, :n]
        ref = A @ B
        if flags & F.ACCUMULATE:
            ref = ref + out_store[:, :n]
        elif flags & F.BIAS:
            ref = ref + bias
        out = result.view(o_addr, acc, (m, ldo))
        _assert_mac_result(out[:, :n], ref, np.abs(A) @ np.abs(B) + 1, dtype)
        np.testing.assert_array_equal(out[:, n:], out_store[:, n:])
        assert result.stats.macs == m * n * k


def conv_reference(x, w, groups, stride, dilation, ho, wo):
    """out[f][y][x] = sum in[g*cg + ci][y*sh + ky*dh][x*sw + kx*dw] * w[f][ci][ky][kx]."""
    c = x.shape[0]
    f, cg, kh, kw = w.shape
    fg = f // groups
    (sh, sw), (dh, dw) = stride, dilation
    out = np.zeros((f, ho, wo))
    for g in range(groups):
        xg = x[g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                tap = xg[:, ky * dh:ky * dh + (ho - 1) * sh + 1:sh,
                         kx * dw:kx * dw + (wo - 1) * sw + 1:sw]
                out[g * fg:(g + 1) * fg] += np.einsum("fc,chw->fhw", w[g * fg:(g + 1) * fg, :, ky, kx], tap)
    assert c == cg * groups
    return out


def _conv_case(rng, depthwise):
    groups = int(rng.integers(1, 4))
    cg = 1 if depthwise else int(rng.integers(1, 6))
    fg = 1 if depthwise else int(rng.integers(1, 6))
    kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
    sh, sw = (int(v) for v in rng.integers(1, 3, size=2))
    dh, dw = (int(v) for v in rng.integers(1, 3, size=2))
    ho, wo = (int(v) for v in rng.integers(1, 12, size=2))
    hi = (ho - 1) * sh + (kh - 1) * dh + 1 + int(rng.integers(0, 2))
    wi = (wo - 1) * sw + (kw - 1) * dw + 1 + int(rng.integers(0, 2))
    return groups, cg * groups, fg * groups, (kh, kw), (sh, sw), (dh, dw), hi, wi, ho, wo


@pytest.mark.parametrize("dtype", MAC_DTYPES)
@pytest.mark.parametrize("depthwise", [False, True])
def test_conv2d(core, rng, dtype, depthwise):
    acc = _acc(dtype)
    for _ in range(10):
        groups, c, f, (kh, kw), stride, dilation, hi, wi, ho, wo = _conv_case(rng, depthwise)
        flags = _random_flags(rng)
        x = random_values(rng, dtype, (c, hi, wi))
        w = random_values(rng, dtype, (f, c // groups, kh, kw))
        out_init = random_values(rng, acc, (f, ho, wo))
        bias = random_values(rng, acc, f)
        image = SramImage()
        x_addr, w_addr, o_addr, b_addr = (image.put(v) for v in (x, w, out_init, bias))
        result = run_on_sram(core, image, instr(
            "conv2d", dtype, flags, **{"in": x_addr}, w=w_addr, out=o_addr, c=c, hi=hi,
            wi=wi, f=f, ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=stride, dh_dw=dilation,
            groups=groups, bias=b_addr if flags & F.BIAS else 0))
        X = to_f32(x, dtype).astype(np.float64)
        W = to_f32(w, dtype).astype(np.float64)
        ref = conv_reference(X, W, groups, stride, dilation, ho, wo)
        if flags & F.ACCUMULATE:
            ref = ref + out_init
        elif flags & F.BIAS:
            ref = ref + bias[:, None, None]
        magnitude = conv_reference(np.abs(X), np.abs(W), groups, stride, dilation, ho, wo) + 1
        _assert_mac_result(result.view(o_addr, acc, (f, ho, wo)), ref, magnitude, dtype)
        assert result.stats.macs == ho * wo * f * (c // groups) * kh * kw


def test_conv2d_large_tile_spans_chunks(core, rng):
    """More output columns than one im2col chunk, wide rows and a K over a GEMM block."""
    c, f, hi, wi, ho, wo = 40, 33, 20, 300, 18, 298
    x = rng.standard_normal((c, hi, wi)).astype(np.float32)
    w = rng.standard_normal((f, c, 3, 3)).astype(np.float32)
    image = SramImage()
    x_addr, w_addr, o_addr = image.put(x), image.put(w), image.reserve(f * ho * wo * 4)
    result = run_on_sram(core, image, instr(
        "conv2d", **{"in": x_addr}, w=w_addr, out=o_addr, c=c, hi=hi, wi=wi, f=f, ho=ho,
        wo=wo, kh_kw=(3, 3), sh_sw=(1, 1), dh_dw=(1, 1), groups=1))
    ref = conv_reference(x.astype(np.float64), w.astype(np.float64), 1, (1, 1), (1, 1), ho, wo)
    np.testing.assert_allclose(result.view(o_addr, "f32", (f, ho, wo)), ref, rtol=1e-4,
                               atol=1e-3)


@pytest.mark.parametrize("dtype", MAC_DTYPES)
def test_dwconv2d(core, rng, dtype):
    """Against numpy (stride, dilation, padded tiles, bias, accumulate) and bit for bit the
    conv2d with f = groups = c on the same operands."""
    acc = _acc(dtype)
    for trial in range(12):
        c = int(rng.integers(1, 20))
        kh, kw = (int(v) for v in rng.integers(1, 6, size=2))
        stride = tuple(int(v) for v in rng.integers(1, 3, size=2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, size=2))
        ho, wo = (int(v) for v in rng.integers(1, 70 if trial % 3 == 0 else 12, size=2))
        hi = (ho - 1) * stride[0] + (kh - 1) * dilation[0] + 1 + int(rng.integers(0, 2))
        wi = (wo - 1) * stride[1] + (kw - 1) * dilation[1] + 1 + int(rng.integers(0, 2))
        flags = _random_flags(rng)
        x = random_values(rng, dtype, (c, hi, wi))
        w = random_values(rng, dtype, (c, kh, kw))
        out_init = random_values(rng, acc, (c, ho, wo))
        bias = random_values(rng, acc, c)
        image = SramImage()
        x_addr, w_addr, o_addr, o2_addr, b_addr = (image.put(v) for v in (x, w, out_init,
                                                                           out_init, bias))
        window = dict(hi=hi, wi=wi, ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=stride, dh_dw=dilation,
                      bias=b_addr if flags & F.BIAS else 0)
        result = run_on_sram(core, image, instr(
            "dwconv2d", dtype, flags, **{"in": x_addr}, w=w_addr, out=o_addr, c=c, **window),
            instr("conv2d", dtype, flags, **{"in": x_addr}, w=w_addr, out=o2_addr, c=c, f=c,
                  groups=c, **window))
        X = to_f32(x, dtype).astype(np.float64)
        W = to_f32(w, dtype).astype(np.float64)[:, None]
        ref = conv_reference(X, W, c, stride, dilation, ho, wo)
        if flags & F.ACCUMULATE:
            ref = ref + out_init
        elif flags & F.BIAS:
            ref = ref + bias[:, None, None]
        magnitude = conv_reference(np.abs(X), np.abs(W), c, stride, dilation, ho, wo) + 1
        out = result.view(o_addr, acc, (c, ho, wo))
        _assert_mac_result(out, ref, magnitude, dtype)
        np.testing.assert_array_equal(out.view(np.uint32),
                                      result.view(o2_addr, acc, (c, ho, wo)).view(np.uint32))
        assert result.stats.macs == 2 * c * ho * wo * kh * kw


def _sequential_fma(acc, a_cols, b_rows):
    """acc[i][j] += a[i][kk] * b[kk][j] for kk in order, each step rounded once to f32 (a
    fused multiply-add). Exact in f64 for the operands of the tests below: A holds small
    integers, so every product and every running sum fits f64 before its f32 rounding."""
    acc = acc.astype(np.float32)
    for a_col, b_row in zip(a_cols, b_rows):
        product = np.outer(a_col.astype(np.float64), b_row.astype(np.float64))
        acc = (acc.astype(np.float64) + product).astype(np.float32)
    return acc


def _k_order_operands(rng, *a_shape_b_shape):
    a_shape, b_shape = a_shape_b_shape
    a = rng.integers(0, 4, size=a_shape).astype(np.float32)
    b = rng.uniform(0.25, 1.0, size=b_shape).astype(np.float32)
    return a, b


def test_f32_matmul_sums_in_k_order(core, rng):
    """Every output adds its products in k order with one rounding each (the sum a
    sequential f32 loop computes, stock IREE's on llvm-cpu): 13 rows (tiles of 6, 6 and 1),
    37 columns (an edge tile), k = 300 (two k blocks), accumulating onto C."""
    m, n, k = 13, 37, 300
    a, b = _k_order_operands(rng, (m, k), (k, n))
    c = rng.uniform(0.0, 1.0, size=(m, n)).astype(np.float32)
    image = SramImage()
    a_addr, b_addr, o_addr = image.put(a), image.put(b), image.put(c)
    result = run_on_sram(core, image, instr(
        "matmul", "f32", F.ACCUMULATE, a=a_addr, b=b_addr, out=o_addr, m=m, n=n, k=k,
        lda=k, ldb=n, ldo=n))
    expected = _sequential_fma(c, a.T, b)
    np.testing.assert_array_equal(result.view(o_addr, "f32", (m, n)), expected)


@pytest.mark.parametrize("n, k, ldb, lda, flags", [
    (37, 300, 300, 1, F.ACCUMULATE),       # 4 groups of 8 outputs and 5 more
    (64, 512, 512, 1, 0),                  # an LSTM step's shape (two column units)
    (8, 5, 7, 3, F.BIAS | F.TRANSPOSE_A),  # padded rows of B, a strided A
    (3, 1, 1, 1, F.TRANSPOSE_A),           # only the one-output chains, k = 1
    (11, 4200, 4203, 1, F.ACCUMULATE),     # k long enough to poll the deadline
])
def test_f32_matvec_with_transposed_b_sums_in_k_order(core, rng, n, k, ldb, lda, flags):
    """m = 1 with a transposed f32 B (an LSTM step) has a kernel of its own, reading B's
    rows in place: each output adds its products in k order with one rounding each, the
    bits of the GEMM kernel on the same product with B stored in rows of n (not
    transposed), and (on a build with FMA, as the tests above) of the sequential
    reference. Its vector part takes groups of 16 and 4 outputs and blocks of 4 of k; the
    cases leave outputs and k over."""
    a, bt = _k_order_operands(rng, (k, lda), (n, ldb))      # A's row is a[:, 0]
    c = rng.uniform(0.0, 1.0, size=(1, n)).astype(np.float32)
    bias = rng.uniform(0.0, 1.0, size=n).astype(np.float32)
    a_row = a[:, 0] if flags & F.TRANSPOSE_A else a.reshape(-1)[:k]
    outputs = []
    for transposed in (True, False):
        image = SramImage()
        a_addr = image.put(a if flags & F.TRANSPOSE_A else a.reshape(-1)[:k])
        o_addr, bias_addr = image.put(c), image.put(bias)
        b_addr = image.put(bt if transposed else np.ascontiguousarray(bt[:, :k].T))
        result = run_on_sram(core, image, instr(
            "matmul", "f32", flags | (F.TRANSPOSE_B if transposed else 0), a=a_addr, b=b_addr,
            out=o_addr, m=1, n=n, k=k, lda=lda if flags & F.TRANSPOSE_A else k,
            ldb=ldb if transposed else n, ldo=n, bias=bias_addr if flags & F.BIAS else 0))
        outputs.append(result.view(o_addr, "f32", (1, n)).copy())
    start = c if flags & F.ACCUMULATE else bias[None] if flags & F.BIAS else np.zeros((1, n))
    expected = _sequential_fma(start, a_row[:, None], bt[:, :k].T)
    np.testing.assert_array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))
    np.testing.assert_array_equal(outputs[0].view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("m, n, k, ldb", [(7, 37, 45, 45), (13, 8, 16, 19), (2, 3, 5, 5),
                                          (6, 130, 35, 36)])
def test_f32_matmul_transposed_b_is_packed_exactly(core, rng, m, n, k, ldb):
    """A transposed f32 B (m > 1) is packed into rows by 4x4 register transposes with
    element-wise edges: the product has the bits of the same matmul with B stored in
    rows, for shapes with k and n over a multiple of 4 and k over the 16-row blocks."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, ldb)).astype(np.float32)
    outputs = []
    for transposed in (True, False):
        image = SramImage()
        a_addr, o_addr = image.put(a), image.put(np.zeros((m, n), np.float32))
        b_addr = image.put(bt if transposed else np.ascontiguousarray(bt[:, :k].T))
        result = run_on_sram(core, image, instr(
            "matmul", "f32", F.TRANSPOSE_B if transposed else 0, a=a_addr, b=b_addr,
            out=o_addr, m=m, n=n, k=k, lda=k, ldb=ldb if transposed else n, ldo=n))
        outputs.append(result.view(o_addr, "f32", (m, n)).copy())
    np.testing.assert_array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))
    assert np.allclose(outputs[0], a.astype(np.float64) @ bt[:, :k].T, rtol=1e-4, atol=1e-4)


def test_f32_conv2d_sums_in_channel_then_tap_order(core, rng):
    """conv2d's reduction order is (input channel, ky, kx), each product rounded into the
    sum once, as the matmul's k order."""
    c, f, kh, kw, ho, wo = 40, 7, 3, 3, 5, 6
    w, x = _k_order_operands(rng, (f, c, kh, kw), (c, ho + kh - 1, wo + kw - 1))
    image = SramImage()
    x_addr, w_addr = image.put(x), image.put(w)
    o_addr = image.put(np.zeros((f, ho, wo), np.float32))
    result = run_on_sram(core, image, instr(
        "conv2d", "f32", 0, **{"in": x_addr}, w=w_addr, out=o_addr, c=c, hi=ho + kh - 1,
        wi=wo + kw - 1, f=f, ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=(1, 1), dh_dw=(1, 1),
        groups=1))
    taps = [(ci, ky, kx) for ci in range(c) for ky in range(kh) for kx in range(kw)]
    a_cols = [w[:, ci, ky, kx] for ci, ky, kx in taps]
    b_rows = [x[ci, ky:ky + ho, kx:kx + wo].reshape(-1) for ci, ky, kx in taps]
    expected = _sequential_fma(np.zeros((f, ho * wo)), a_cols, b_rows)
    np.testing.assert_array_equal(result.view(o_addr, "f32", (f, ho, wo)).reshape(f, -1), expected)


@pytest.mark.parametrize("opcode, stride", [("dwconv2d", 1), ("dwconv2d", 2), ("conv2d", 1)])
def test_f32_depthwise_sums_in_tap_order(core, rng, opcode, stride):
    """One channel per group (dwconv2d, or conv2d with groups = c = f) computes each
    tap's products into whole output rows: each output still adds them in (ky, kx)
    order onto its bias, one rounding each, as the im2col GEMM does."""
    c, kh, kw, ho, wo = 5, 3, 5, 4, 33
    hi, wi = (ho - 1) * stride + kh, (wo - 1) * stride + kw
    w, x = _k_order_operands(rng, (c, 1, kh, kw), (c, hi, wi))
    bias = rng.uniform(0.0, 1.0, size=c).astype(np.float32)
    image = SramImage()
    x_addr, w_addr, b_addr = image.put(x), image.put(w), image.put(bias)
    o_addr = image.put(np.zeros((c, ho, wo), np.float32))
    fields = dict(w=w_addr, out=o_addr, c=c, hi=hi, wi=wi, ho=ho, wo=wo, kh_kw=(kh, kw),
                  sh_sw=(stride, stride), dh_dw=(1, 1), bias=b_addr)
    if opcode == "conv2d":
        fields.update(f=c, groups=c)
    result = run_on_sram(core, image, instr(opcode, "f32", F.BIAS, **{"in": x_addr}, **fields))
    expected = np.empty((c, ho * wo), np.float32)
    for ch in range(c):
        taps = [(ky, kx) for ky in range(kh) for kx in range(kw)]
        a_cols = [w[ch:ch + 1, 0, ky, kx] for ky, kx in taps]
        b_rows = [x[ch, ky:ky + (ho - 1) * stride + 1:stride,
                    kx:kx + (wo - 1) * stride + 1:stride].reshape(-1) for ky, kx in taps]
        expected[ch] = _sequential_fma(np.full((1, ho * wo), bias[ch]), a_cols, b_rows)[0]
    np.testing.assert_array_equal(result.view(o_addr, "f32", (c, ho, wo)).reshape(c, -1),
                                  expected)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_narrow_sum_rounds_every_product_and_sum(core, rng, dtype):
    """NARROW_SUM: the sum is held in the operand dtype, as IR that multiplies and adds
    in f16 or bf16 (linalg.matmul with an f16 result) says: each product and each running
    sum rounded to it (ml_dtypes' arithmetic), in k order; the output keeps the
    accumulator's f32 storage. Values cover f16's subnormals and overflow to infinity."""
    element = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    m, n, k = 9, 21, 70
    scale = np.array([[1000.0], [1e-6]] + [[s] for s in rng.choice([1e-2, 1.0, 300.0], m - 2)])
    a = (rng.standard_normal((m, k)) * scale).astype(element)
    b = rng.standard_normal((k, n)).astype(element)
    a[0], b[:, 0] = 1000.0, 1.0        # row 0, column 0 sums to 70 000: f16's infinity
    c = (rng.standard_normal((m, n)) * scale).astype(element).astype(np.float32)
    image = SramImage()
    a_addr = image.put(_stored(a, dtype))
    b_addr = image.put(_stored(b, dtype))
    o_addr = image.put(c)
    result = run_on_sram(core, image, instr(
        "matmul", dtype, F.ACCUMULATE | F.NARROW_SUM, a=a_addr, b=b_addr, out=o_addr,
        m=m, n=n, k=k, lda=k, ldb=n, ldo=n))
    expected = c.astype(element)
    with np.errstate(over="ignore"):
        for kk in range(k):
            expected = expected + np.outer(a[:, kk], b[kk]).astype(element)
    out = result.view(o_addr, "f32", (m, n))
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    if dtype == "f16":
        assert np.isinf(out[0, 0]) and (np.abs(out[1]) < 2.0 ** -14).all()


def _stored(values, dtype):
    """ml_dtypes values as the SRAM image stores `dtype` (bf16 as its uint16 bits)."""
    return values.view(np.uint16) if dtype == "bf16" else values


def test_narrow_sum_conv2d_is_the_matmul_order(core, rng):
    """conv2d with NARROW_SUM sums in (channel, ky, kx) order with f16 rounding."""
    c, f, kh, kw, ho, wo = 6, 5, 3, 3, 4, 7
    x = rng.standard_normal((c, ho + kh - 1, wo + kw - 1)).astype(np.float16)
    w = rng.standard_normal((f, c, kh, kw)).astype(np.float16)
    image = SramImage()
    x_addr, w_addr = image.put(x), image.put(w)
    o_addr = image.put(np.zeros((f, ho, wo), np.float32))
    result = run_on_sram(core, image, instr(
        "conv2d", "f16", F.NARROW_SUM, **{"in": x_addr}, w=w_addr, out=o_addr, c=c,
        hi=ho + kh - 1, wi=wo + kw - 1, f=f, ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=(1, 1),
        dh_dw=(1, 1), groups=1))
    expected = np.zeros((f, ho * wo), np.float16)
    for ci in range(c):
        for ky in range(kh):
            for kx in range(kw):
                tap = x[ci, ky:ky + ho, kx:kx + wo].reshape(-1)
                expected = expected + np.outer(w[:, ci, ky, kx], tap)
    np.testing.assert_array_equal(result.view(o_addr, "f32", (f, ho, wo)).reshape(f, -1),
                                  expected.astype(np.float32))


@pytest.mark.parametrize("m, n, k, flags", [(13, 37, 300, 0), (1, 64, 512, F.TRANSPOSE_B),
                                            (7, 37, 45, F.TRANSPOSE_B | F.BIAS)])
def test_half_b_matmul_is_the_f32_matmul_of_the_widened_weights(core, rng, m, n, k, flags):
    """HALF_B (npu-fb 2.10): an f32 matmul whose B is stored as f16 (fp16-stored
    weights that IREE widens with arith.extf in the body) has the bits of the same f32
    matmul with B widened first, f16 to f32 being exact."""
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if flags & F.TRANSPOSE_B else (k, n)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float32)
    outputs = []
    for half in (True, False):
        image = SramImage()
        a_addr, bias_addr = image.put(a), image.put(bias)
        b_addr = image.put(b if half else b.astype(np.float32))
        o_addr = image.put(np.zeros((m, n), np.float32))
        result = run_on_sram(core, image, instr(
            "matmul", "f32", flags | (F.HALF_B if half else 0), a=a_addr, b=b_addr,
            out=o_addr, m=m, n=n, k=k, lda=k, ldb=k if flags & F.TRANSPOSE_B else n, ldo=n,
            bias=bias_addr if flags & F.BIAS else 0))
        outputs.append(result.view(o_addr, "f32", (m, n)).copy())
    np.testing.assert_array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))
    wide = b.astype(np.float64).T if flags & F.TRANSPOSE_B else b.astype(np.float64)
    assert np.allclose(outputs[0], a.astype(np.float64) @ wide +
                       (bias if flags & F.BIAS else 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opcode, groups", [("conv2d", 1), ("conv2d", 4), ("dwconv2d", 8)])
def test_half_b_conv_is_the_f32_conv_of_the_widened_weights(core, rng, opcode, groups):
    c, f, kh, kw, ho, wo = 8, 8, 3, 3, 5, 37
    per_group = 1 if opcode == "dwconv2d" else c // groups
    w = rng.standard_normal((f, per_group, kh, kw)).astype(np.float16)
    x = rng.standard_normal((c, ho + kh - 1, wo + kw - 1)).astype(np.float32)
    fields = dict(c=c, hi=ho + kh - 1, wi=wo + kw - 1, ho=ho, wo=wo, kh_kw=(kh, kw),
                  sh_sw=(1, 1), dh_dw=(1, 1))
    if opcode == "conv2d":
        fields.update(f=f, groups=groups)
    outputs = []
    for half in (True, False):
        image = SramImage()
        x_addr, w_addr = image.put(x), image.put(w if half else w.astype(np.float32))
        o_addr = image.put(np.zeros((f, ho, wo), np.float32))
        result = run_on_sram(core, image, instr(
            opcode, "f32", F.HALF_B if half else 0, **{"in": x_addr}, w=w_addr, out=o_addr,
            **fields))
        outputs.append(result.view(o_addr, "f32", (f, ho, wo)).copy())
    np.testing.assert_array_equal(outputs[0].view(np.uint32), outputs[1].view(np.uint32))


def test_half_b_needs_an_f32_instruction(core):
    with pytest.raises(StatusError, match="flag HALF_B needs an f32 instruction"):
        core.execute(program(instr("matmul", "i8", F.HALF_B, a=0, b=64, out=128, m=1, n=1,
                                   k=1, lda=1, ldb=1, ldo=1)),
                     [np.zeros(64, np.uint8)])
