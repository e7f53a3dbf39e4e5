"""Vector unit against numpy: elementwise ops with broadcasting strides, unary ops,
vsqrt/vrsqrt bit for bit, vcvt (incl. i8 requantization and exhaustive f16), vpool,
vreduce."""
import math
from fractions import Fraction

import numpy as np
import pytest

from executable_format import isa
from tests.native.programs import NP_DTYPES, SramImage, bf16_round, from_f32, instr, \
    program, random_values, run_on_sram, to_f32

FLOATS = ["f32", "f16", "bf16"]
F = isa.Flag


def _layout(rng, counts, broadcast: bool):
    """Strides of a dense layout of `counts` in a random order; with `broadcast`, some
    dimensions get stride 0. Returns (strides, length)."""
    strides = [0, 0, 0]
    step = 1
    for d in rng.permutation(3)[::-1]:
        if broadcast and rng.random() < 0.3:
            continue
        strides[d] = int(step)
        step *= counts[d]
    return strides, 1 + sum((n - 1) * s for n, s in zip(counts, strides))


def _gather(flat, counts, strides):
    idx = sum(np.arange(n).reshape([-1 if d == i else 1 for d in range(3)]) * s
              for i, (n, s) in enumerate(zip(counts, strides)))
    return flat[idx]


def _round(values_f32, dtype):
    """What the NPU stores for f32 results in `dtype`, read back as f32."""
    return to_f32(from_f32(values_f32, dtype), dtype)


BINARY = {"vadd": np.add, "vsub": np.subtract, "vmul": np.multiply, "vmax": np.maximum,
          "vmin": np.minimum, "vdiv": np.divide}


def _int_div(l, r):
    q = np.abs(l.astype(np.int64)) // np.maximum(np.abs(r.astype(np.int64)), 1)
    return np.where(r == 0, 0, np.sign(l) * np.sign(r) * q).astype(np.int32)


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + ["i32"])
def test_binary(core, rng, op, dtype):
    for _ in range(4):
        counts = [int(v) for v in rng.integers(1, 9, size=3)]
        dst_s, dst_len = _layout(rng, counts, False)
        lhs_s, lhs_len = _layout(rng, counts, True)
        rhs_s, rhs_len = _layout(rng, counts, True)
        lhs = random_values(rng, dtype, lhs_len)
        rhs = random_values(rng, dtype, rhs_len)
        if dtype == "i32" and op == "vdiv":
            rhs[::3] = 0
        image = SramImage()
        d_addr, l_addr, r_addr = image.reserve(dst_len * 4), image.put(lhs), image.put(rhs)
        fields = dict(dst=d_addr, lhs=l_addr, rhs=r_addr, n0=counts[0], n1=counts[1],
                      n2=counts[2])
        for name, strides in (("dst", dst_s), ("lhs", lhs_s), ("rhs", rhs_s)):
            fields.update({f"{name}_s{i}": strides[i] for i in range(3)})
        result = run_on_sram(core, image, instr(op, dtype, **fields))
        out = _gather(result.view(d_addr, dtype, dst_len), counts, dst_s)
        L, R = _gather(lhs, counts, lhs_s), _gather(rhs, counts, rhs_s)
        if dtype == "i32":
            expected = _int_div(L, R) if op == "vdiv" else BINARY[op](L, R).astype(np.int32)
            np.testing.assert_array_equal(out, expected)
        else:
            expected = _round(BINARY[op](to_f32(L, dtype), to_f32(R, dtype)), dtype)
            np.testing.assert_array_equal(to_f32(out, dtype), expected)


def _sigmoid(x):
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)


UNARY = {
    "vcopy": (lambda x, p0, p1: x, False),
    "vrelu": (lambda x, p0, p1: np.maximum(x, np.float32(0)), False),
    "vclamp": (lambda x, p0, p1: np.minimum(np.maximum(x, p0), p1), False),
    "vleakyrelu": (lambda x, p0, p1: np.where(x < 0, p0 * x, x), False),
    "vscale": (lambda x, p0, p1: x * p0 + p1, True),
    "vsigmoid": (lambda x, p0, p1: _sigmoid(x), True),
    "vtanh": (lambda x, p0, p1: np.tanh(x.astype(np.float64)).astype(np.float32), True),
    "vexp": (lambda x, p0, p1: np.exp(x.astype(np.float64)).astype(np.float32), True),
    "vsqrt": (lambda x, p0, p1: np.sqrt(x), False),
    "vrsqrt": (lambda x, p0, p1: np.float32(1) / np.sqrt(x), False),
    "vhswish": (lambda x, p0, p1: x * np.clip(x * p0 + p1, 0, 1), True),
    "verf": (lambda x, p0, p1: np.vectorize(math.erf)(x.astype(np.float64)).astype(np.float32),
             True),
    "vlog": (lambda x, p0, p1: np.log(x.astype(np.float64)).astype(np.float32), True),
    "vlog1p": (lambda x, p0, p1: np.log1p(x.astype(np.float64)).astype(np.float32), True),
    "vsin": (lambda x, p0, p1: np.sin(x.astype(np.float64)).astype(np.float32), True),
    "vcos": (lambda x, p0, p1: np.cos(x.astype(np.float64)).astype(np.float32), True),
}
PARAMS = {"vclamp": (-0.5, 0.75), "vleakyrelu": (0.125, 0.0), "vscale": (1.5, -0.25),
          "vhswish": (1 / 6, 0.5)}
NONNEGATIVE = {"vsqrt", "vrsqrt", "vlog", "vlog1p"}   # inputs |x|: sqrt, log of x < 0 are NaN


@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary(core, rng, op, dtype):
    fn, approximate = UNARY[op]
    p0, p1 = PARAMS.get(op, (0.0, 0.0))
    for _ in range(4):
        counts = [int(v) for v in rng.integers(1, 9, size=3)]
        dst_s, dst_len = _layout(rng, counts, False)
        src_s, src_len = _layout(rng, counts, False)
        src = random_values(rng, dtype, src_len)
        if op in NONNEGATIVE:
            src = from_f32(np.abs(to_f32(src, dtype)), dtype)
        image = SramImage()
        d_addr, s_addr = image.reserve(dst_len * 4), image.put(src)
        fields = dict(dst=d_addr, src=s_addr, n0=counts[0], n1=counts[1], n2=counts[2])
        fields.update({f"dst_s{i}": dst_s[i] for i in range(3)})
        fields.update({f"src_s{i}": src_s[i] for i in range(3)})
        if op in PARAMS:
            fields["p0"] = p0
            if op != "vleakyrelu":
                fields["p1"] = p1
        result = run_on_sram(core, image, instr(op, dtype, **fields))
        out = to_f32(_gather(result.view(d_addr, dtype, dst_len), counts, dst_s), dtype)
        x = to_f32(_gather(src, counts, src_s), dtype)
        expected = _round(fn(x, np.float32(p0), np.float32(p1)), dtype)
        if approximate:
            tol = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}[dtype]
            np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(out, expected)


def _fma_f32(a, b, c) -> np.float32:
    """a * b + c of f32 values rounded once to f32: the exact value from fractions,
    rounded to f64 to odd (no double rounding), then to f32."""
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    d = float(exact)
    if Fraction(d) != exact and int(np.float64(d).view(np.uint64)) % 2 == 0:
        d = float(np.nextafter(d, np.inf if exact > Fraction(d) else -np.inf))
    return np.float32(d)


def _exp_unit(x):
    """The exponential unit step by step (MLIR's polynomial, native/npu_vector.c
    exp_parts) for f32 x: (e^r, 2^n); NaN for NaN."""
    f = np.float32
    bits = lambda u: np.uint32(u).view(np.float32)
    if np.isnan(x):
        return x, f(1)
    c = min(max(x, f(-87.8)), f(88.8))
    k = f(np.floor(_fma_f32(c, bits(0x3FB8AA3B), f(0.5))))
    k = min(max(k, f(-127)), f(127))
    r = _fma_f32(bits(0xBF318000), k, c)
    r = _fma_f32(bits(0x395E8083), k, r)
    p = _fma_f32(r, bits(0x39506967), bits(0x3AB743CE))
    for coefficient in (0x3C088908, 0x3D2AA9C1, 0x3E2AAAAA):
        p = _fma_f32(p, r, bits(coefficient))
    p = _fma_f32(p, r, f(0.5))
    e = f(_fma_f32(p, f(r * r), r) + f(1))
    return e, np.uint32((int(k) + 127) << 23).view(np.float32)


def test_exp_and_sigmoid_bit_exact(core, rng):
    """vexp and vsigmoid (whole rows vectorized) have the bits of the exponential unit's
    steps computed one by one: exp = e^r * 2^n, sigmoid = 1 / fma(e^r, 2^n, 1) of -x, for
    a row of 1013 values (not a multiple of any vector width) over and beyond the clamp
    range, at its bounds, at the reduction's rounding points, tiny, signed zeros, ±inf,
    NaN."""
    values = np.concatenate([
        rng.uniform(-100, 100, 600), rng.uniform(-3, 3, 200),
        np.arange(-130, 131) * np.log(2) - 0.5 * np.log(2),    # x·log2e + 1/2 near integers
        [-87.8, 88.8, -87.80001, 88.80001, 1e-30, -1e-30, 1e-45, 0.0, -0.0, np.inf,
         -np.inf, np.nan, 1e4, -1e4]]).astype(np.float32)[:1013]
    assert values.size == 1013
    image = SramImage()
    s_addr, e_addr, g_addr = image.put(values), image.reserve(4 * 1013), image.reserve(4 * 1013)
    box = dict(n0=1, n1=1, n2=1013, dst_s0=0, dst_s1=0, dst_s2=1, src_s0=0, src_s1=0, src_s2=1)
    result = run_on_sram(core, image, instr("vexp", "f32", dst=e_addr, src=s_addr, **box),
                         instr("vsigmoid", "f32", dst=g_addr, src=s_addr, **box))
    with np.errstate(over="ignore", invalid="ignore"):
        exps = [np.float32(e * s) for e, s in map(_exp_unit, values)]
        sigmoids = [np.float32(1) / _fma_f32(e, s, np.float32(1)) if not np.isnan(e) else e
                    for e, s in (_exp_unit(-v) for v in values)]
    for addr, expected in ((e_addr, exps), (g_addr, sigmoids)):
        out = result.view(addr, "f32", 1013)
        np.testing.assert_array_equal(out.view(np.uint32),
                                      np.array(expected, np.float32).view(np.uint32))


def _stock_tanh(x: np.ndarray) -> np.ndarray:
    """math.tanh of f32 `x` by stock IREE llvm-cpu (its polynomial approximation)."""
    import iree.compiler
    import iree.runtime
    mlir = (f"func.func @t(%x: tensor<{x.size}xf32>) -> tensor<{x.size}xf32> {{\n"
            f"  %y = math.tanh %x : tensor<{x.size}xf32>\n"
            f"  return %y : tensor<{x.size}xf32>\n}}\n")
    vmfb = iree.compiler.compile_str(mlir, target_backends=["llvm-cpu"],
                                     extra_args=["--iree-llvmcpu-target-cpu=host"])
    return iree.runtime.load_vm_flatbuffer(vmfb, driver="local-task").t(x).to_host()


def test_tanh_has_stock_bits(core, rng):
    """vtanh's f32 bits are stock llvm-cpu's math.tanh: a dense sweep around 0, every
    value near the tiny-|x| cutoff (4e-4), 1 and the clamp (7.9988), a dense sweep of
    ±1..±9, values over many magnitudes, random bit patterns (NaN payloads included),
    ±0, ±inf. Stock's runtime flushes subnormal inputs to ±0; the vector engine keeps
    them (tanh x = x)."""
    def around(c, k):
        v = np.arange(-k, k, dtype=np.int64) + int(np.float32(c).view(np.int32))
        return v.astype(np.int32).view(np.float32)
    parts = [np.linspace(-1e-2, 1e-2, 20001), np.linspace(1e-4, 1e-3, 10001),
             np.linspace(1, 9, 40001)]
    parts += [around(c, 2000) for c in (4e-4, 1.0, 7.99881172180175781, 8.0)]
    parts += [rng.uniform(-1, 1, 1000) * 10.0 ** e for e in range(-8, 4)]
    parts += [rng.integers(0, 1 << 32, 10000, dtype=np.uint64).astype(np.uint32)
              .view(np.float32)]
    parts += [np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFC12345, 0x00000001,
                        0x80400000], np.uint32).view(np.float32)]
    parts += [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-45])]
    half = np.concatenate([np.asarray(p).astype(np.float32) for p in parts])
    x = np.concatenate([half, -half])
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(x.nbytes)
    box = dict(n0=1, n1=1, n2=x.size, dst_s0=0, dst_s1=0, dst_s2=1, src_s0=0, src_s1=0,
               src_s2=1)
    got = run_on_sram(core, image, instr("vtanh", "f32", dst=d_addr, src=s_addr, **box)) \
        .view(d_addr, "f32", x.size)
    subnormal = (x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)
    expected = np.where(subnormal, x, _stock_tanh(x))
    bad = np.nonzero(got.view(np.uint32) != expected.view(np.uint32))[0]
    assert bad.size == 0, f"{bad.size} of {x.size} differ from stock, e.g. " + ", ".join(
        f"tanh({x[i]!r}) = {got[i]!r}, stock {expected[i]!r}" for i in bad[:4])


@pytest.mark.parametrize("dtype", FLOATS)
def test_sqrt_and_rsqrt_bit_exact(core, rng, dtype):
    """Every f16 value, or f32/bf16 values of random bits and the special ones (±0, ±inf,
    NaN, negatives, subnormals): vsqrt is sqrt, vrsqrt is 1 / sqrt (both rounded in f32),
    then rounded to the dtype, as numpy computes them."""
    if dtype == "f16":
        x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    else:
        bits = rng.integers(0, 1 << 32, size=1 << 16, dtype=np.uint64).astype(np.uint32)
        special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-45, 1e-40, 4.0])
        x = from_f32(np.concatenate([bits.view(np.float32), special]), dtype)
    n = x.size
    image = SramImage()
    s_addr, sqrt_addr, rsqrt_addr = image.put(x), image.reserve(x.nbytes), image.reserve(x.nbytes)
    result = run_on_sram(core, image, *(
        instr(op, dtype, dst=dst, src=s_addr, n0=1, n1=1, n2=n, dst_s2=1, src_s2=1)
        for op, dst in (("vsqrt", sqrt_addr), ("vrsqrt", rsqrt_addr))))
    xf = to_f32(x, dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(xf)
        expected = {sqrt_addr: root, rsqrt_addr: np.float32(1) / root}
    for addr, values in expected.items():
        got = to_f32(result.view(addr, dtype, n), dtype)
        want = _round(values, dtype)
        assert (np.isnan(got) == np.isnan(want)).all()
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(got[numbers].view(np.uint32), want[numbers].view(np.uint32))


@pytest.mark.parametrize("dtype", ["i8", "i32"])
def test_integer_copy_and_relu(core, rng, dtype):
    src = random_values(rng, dtype, (6, 10))
    image = SramImage()
    s_addr, d_addr = image.put(src), image.reserve(src.nbytes)
    op = "vcopy" if dtype == "i8" else "vrelu"
    result = run_on_sram(core, image, instr(
        op, dtype, dst=d_addr, src=s_addr, n0=1, n1=10, n2=6, dst_s1=6, dst_s2=1, src_s1=1,
        src_s2=10))
    expected = src.T if op == "vcopy" else np.maximum(src.T, 0)
    np.testing.assert_array_equal(result.view(d_addr, dtype, (10, 6)), expected)


def _cvt_reference(x, src, dst, scale):
    v = x.astype(np.float64) if src in ("i8", "i32", "u8") else to_f32(x, src).astype(np.float64)
    v = v * np.float64(np.float32(scale if scale else 1.0))
    if dst in ("i8", "i32", "u8"):
        info = np.iinfo(NP_DTYPES[dst])
        return np.clip(np.rint(np.nan_to_num(v, nan=0.0)), info.min, info.max).astype(NP_DTYPES[dst])
    return from_f32(v.astype(np.float32), dst)


CVT_CASES = [("f32", "i8", 0.37), ("i32", "i8", 0.0123), ("i8", "f32", 0.05), ("i32", "f32", 0.0),
             ("f32", "f16", 0.0), ("f16", "f32", 0.0), ("f32", "bf16", 0.0), ("bf16", "f32", 0.0),
             ("f32", "i32", 3.0), ("f16", "bf16", 2.0), ("i8", "i32", 0.0), ("f32", "f32", 0.5),
             ("u8", "f32", 0.05), ("u8", "i32", 0.0), ("f32", "u8", 0.37), ("i32", "u8", 0.5)]


@pytest.mark.parametrize("src,dst,scale", CVT_CASES)
def test_vcvt(core, rng, src, dst, scale):
    x = random_values(rng, src, (5, 7, 9))
    if src in FLOATS:
        x = from_f32(to_f32(x, src) * 200, src)        # exercise saturation and rounding
        x.ravel()[:4] = from_f32(np.array([2.5, -3.5, 1e30, -1e30], np.float32), src)
    image = SramImage()
    s_addr = image.put(x)
    d_addr = image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vcvt", dst, dst=d_addr, src=s_addr, n0=5, n1=7, n2=9, dst_s0=63, dst_s1=9, dst_s2=1,
        src_s0=63, src_s1=9, src_s2=1, scale=isa.f32_bits(scale),
        src_dtype=int(isa.DType[src.upper()])))
    np.testing.assert_array_equal(result.view(d_addr, dst, x.shape),
                                  _cvt_reference(x, src, dst, scale))


@pytest.mark.parametrize("src,dst,scale", [("i32", "i8", 0.0123), ("f32", "u8", 0.37),
                                             ("i8", "i32", 0.0)])
def test_vcvt_strided(core, rng, src, dst, scale):
    """Every third source element into every second destination one: as dense."""
    x = random_values(rng, src, (4, 90))
    if src in FLOATS:
        x = from_f32(to_f32(x, src) * 200, src)
        x.ravel()[:3] = from_f32(np.array([np.nan, 2.5, -1e30], np.float32), src)
    image = SramImage()
    s_addr = image.put(x)
    d_addr = image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vcvt", dst, dst=d_addr, src=s_addr, n0=1, n1=4, n2=30, dst_s1=60, dst_s2=2,
        src_s1=90, src_s2=3, scale=isa.f32_bits(scale),
        src_dtype=int(isa.DType[src.upper()])))
    written = result.view(d_addr, dst, (4, 30, 2))[:, :, 0]
    np.testing.assert_array_equal(written, _cvt_reference(x[:, ::3], src, dst, scale))


def test_i64_to_f32_rounds_once(core, rng):
    """An i64 (ONNX's ids and masks) converts to f32 as arith.sitofp does, one rounding to
    nearest even: values beyond 2^24, beyond 2^53 (where a detour through f64 would round
    twice), ties, the extremes."""
    x = np.concatenate([rng.integers(-2**63, 2**63 - 1, 300, dtype=np.int64),
                        rng.integers(-2**30, 2**30, 300, dtype=np.int64),
                        np.int64([0, 1, -1, 2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**53 + 1,
                                  2**60 + 2**36 + 1, 2**63 - 1, -2**63,
                                  (1 << 62) + (1 << 38) + (1 << 37) + 1])])
    image = SramImage()
    s_addr = image.put(x)
    d_addr = image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vcvt", "f32", dst=d_addr, src=s_addr, n0=1, n1=1, n2=x.size, dst_s2=1, src_s2=1,
        src_dtype=int(isa.DType.I64)))
    np.testing.assert_array_equal(result.view(d_addr, "f32", x.size), x.astype(np.float32))


def test_f16_conversions_exhaustive(core, rng):
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    floats = np.concatenate([rng.integers(0, 1 << 32, size=200000, dtype=np.uint64)
                             .astype(np.uint32).view(np.float32),
                             np.float32([65504, 65519.99, 65520, 6e-8, 3e-8, 2.98e-8, -0.0])])
    image = SramImage()
    h_addr, f_addr = image.put(halves), image.put(floats)
    h_out, f_out = image.reserve(halves.size * 4), image.reserve(floats.size * 2)
    b_out = image.reserve(floats.size * 2)

    def cvt(dst, src, d, s, n):
        return instr("vcvt", dst, dst=d, src=s, n0=1, n1=1, n2=n, dst_s2=1, src_s2=1,
                     src_dtype=int(isa.DType[src.upper()]))

    result = run_on_sram(core, image, cvt("f32", "f16", h_out, h_addr, halves.size),
                         cvt("f16", "f32", f_out, f_addr, floats.size),
                         cvt("bf16", "f32", b_out, f_addr, floats.size))
    np.testing.assert_array_equal(result.view(h_out, "f32", halves.size),
                                  halves.view(np.float16).astype(np.float32))
    with np.errstate(over="ignore"):
        expected_h = floats.astype(np.float16)
    np.testing.assert_array_equal(result.view(f_out, "f16", floats.size), expected_h)
    got_b = result.view(b_out, "bf16", floats.size)
    np.testing.assert_array_equal(got_b, bf16_round(floats))


def _pool_reference(x, kernel, stride, dilation, ho, wo, avg, include_pad, pads, valid):
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    taps = [x[:, ky * dh:ky * dh + (ho - 1) * sh + 1:sh, kx * dw:kx * dw + (wo - 1) * sw + 1:sw]
            for ky in range(kh) for kx in range(kw)]
    if not avg:
        return np.max(taps, axis=0)
    total = np.sum(np.array(taps, np.float64), axis=0)
    if include_pad:
        return total / (kh * kw)

    def count(o, s, k, d, begin, n):
        pos = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d
        return ((pos >= begin) & (pos < begin + n)).sum(axis=1)

    rows = count(ho, sh, kh, dh, pads[0], valid[0])
    cols = count(wo, sw, kw, dw, pads[1], valid[1])
    with np.errstate(invalid="ignore"):
        return total / (rows[:, None] * cols[None, :])


@pytest.mark.parametrize("mode", ["max", "avg", "avg_include_pad"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_vpool(core, rng, mode, dtype):
    avg, include_pad = mode != "max", mode == "avg_include_pad"
    flags = (F.POOL_AVG if avg else 0) | (F.COUNT_INCLUDE_PAD if include_pad else 0)
    for _ in range(6):
        c = int(rng.integers(1, 5))
        kernel = tuple(int(v) for v in rng.integers(1, 4, size=2))
        stride = tuple(int(v) for v in rng.integers(1, 3, size=2))
        dilation = tuple(int(v) for v in rng.integers(1, 3, size=2))
        ho, wo = (int(v) for v in rng.integers(1, 9, size=2))
        pads = tuple(int(v) for v in rng.integers(0, 2, size=2))
        hi = (ho - 1) * stride[0] + (kernel[0] - 1) * dilation[0] + 1
        wi = (wo - 1) * stride[1] + (kernel[1] - 1) * dilation[1] + 1
        pads = (min(pads[0], (hi - 1) // 2), min(pads[1], (wi - 1) // 2))
        valid = (hi - 2 * pads[0], wi - 2 * pads[1])
        x = random_values(rng, dtype, (c, hi, wi))
        xf = to_f32(x, dtype).copy()
        # padding holds what fill writes: 0 for average pooling, -inf for max
        pad_value = 0.0 if avg else -np.inf
        mask = np.ones((hi, wi), bool)
        mask[pads[0]:pads[0] + valid[0], pads[1]:pads[1] + valid[1]] = False
        xf[:, mask] = pad_value
        x = from_f32(xf, dtype)
        image = SramImage()
        s_addr, d_addr = image.put(x), image.reserve(c * ho * wo * 4)
        result = run_on_sram(core, image, instr(
            "vpool", dtype, flags, dst=d_addr, src=s_addr, c=c, hi=hi, wi=wi, ho=ho, wo=wo,
            kh_kw=kernel, sh_sw=stride, dh_dw=dilation, pt_pl=pads, vh_vw=valid))
        expected = _pool_reference(to_f32(x, dtype), kernel, stride, dilation, ho, wo, avg,
                                   include_pad, pads, valid)
        counts = np.isfinite(expected)
        expected = np.where(counts, expected, 0 if avg else expected)
        out = to_f32(result.view(d_addr, dtype, (c, ho, wo)), dtype)
        tol = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}[dtype]
        np.testing.assert_allclose(out, _round(expected.astype(np.float32), dtype), rtol=tol,
                                   atol=tol)


@pytest.mark.parametrize("stride", [1, 2, 3])
@pytest.mark.parametrize("avg", [False, True])
def test_vpool_long_rows_bit_exact(core, rng, stride, avg):
    """Rows longer than a vector (the strides 1 and 2 have loops of their own), with NaN
    and infinities among the values: each output takes its taps in window order, a max
    keeping a NaN, so the result is numpy's tap-by-tap f32 fold bit for bit."""
    c, (kh, kw), ho, wo = 2, (3, 2), 5, 67
    hi, wi = (ho - 1) * stride + kh, (wo - 1) * stride + kw
    x = rng.standard_normal((c, hi, wi)).astype(np.float32)
    x.flat[rng.choice(x.size, 12, replace=False)] = [np.nan, np.inf, -np.inf] * 4
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(c * ho * wo * 4)
    result = run_on_sram(core, image, instr(
        "vpool", "f32", F.POOL_AVG if avg else 0, dst=d_addr, src=s_addr, c=c, hi=hi, wi=wi,
        ho=ho, wo=wo, kh_kw=(kh, kw), sh_sw=(stride, stride), dh_dw=(1, 1), pt_pl=(0, 0),
        vh_vw=(hi, wi)))
    acc = np.full((c, ho, wo), 0.0 if avg else -np.inf, np.float32)
    with np.errstate(invalid="ignore"):
        for ky in range(kh):
            for kx in range(kw):
                tap = x[:, ky:ky + (ho - 1) * stride + 1:stride,
                        kx:kx + (wo - 1) * stride + 1:stride]
                acc = acc + tap if avg else np.where(np.isnan(acc) | (acc >= tap), acc, tap)
        expected = acc / np.float32(kh * kw) if avg else acc
    np.testing.assert_array_equal(result.view(d_addr, "f32", (c, ho, wo)), expected)


@pytest.mark.parametrize("mode", ["sum", "max", "mean"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_vreduce(core, rng, mode, dtype):
    flags = {"sum": 0, "max": F.REDUCE_MAX, "mean": F.REDUCE_MEAN}[mode]
    for outer, inner in ((1, 1), (3, 17), (5, 1000), (2, 1537)):
        x = random_values(rng, dtype, (outer, inner))
        image = SramImage()
        s_addr, d_addr = image.put(x), image.reserve(outer * 4)
        result = run_on_sram(core, image, instr("vreduce", dtype, flags, dst=d_addr,
                                                src=s_addr, outer=outer, inner=inner))
        xf = to_f32(x, dtype).astype(np.float64)
        expected = {"sum": xf.sum(1), "max": xf.max(1), "mean": xf.mean(1)}[mode]
        out = to_f32(result.view(d_addr, dtype, outer), dtype)
        tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1e-2}[dtype]
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.sqrt(inner))


def test_in_place_elementwise(core, rng):
    x = rng.standard_normal(300).astype(np.float32)
    image = SramImage()
    addr = image.put(x)
    result = run_on_sram(core, image, instr("vrelu", dst=addr, src=addr, n0=1, n1=1, n2=300,
                                            dst_s2=1, src_s2=1),
                         instr("vadd", dst=addr, lhs=addr, rhs=addr, n0=1, n1=1, n2=300,
                               dst_s2=1, lhs_s2=1, rhs_s2=1))
    np.testing.assert_array_equal(result.view(addr, "f32", 300), 2 * np.maximum(x, 0))


@pytest.mark.parametrize("op", ["vclamp", "vround"])
def test_clamp_of_long_rows_keeps_nan_and_the_bounds(core, rng, op):
    """Rows long enough for the vector loops: a NaN stays NaN, infinities and values
    past the bounds take the bound, the bounds themselves and -0.0 inside stay."""
    x = (rng.standard_normal(3000) * 2).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, -0.5, 0.75, -0.0, 1e30, -1e30]
    x[1000:1100] = np.nan
    if op == "vround":
        x = np.rint(x)
    lo, hi = np.float32(-0.5), np.float32(0.75)
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        op, "f32", dst=d_addr, src=s_addr, n0=1, n1=2, n2=x.size // 2, dst_s1=x.size // 2,
        dst_s2=1, src_s1=x.size // 2, src_s2=1, p0=isa.f32_bits(lo), p1=isa.f32_bits(hi)))
    expected = np.minimum(np.maximum(x, lo), hi)
    np.testing.assert_array_equal(result.view(d_addr, "f32", x.shape).view(np.uint32),
                                  expected.view(np.uint32))


@pytest.mark.parametrize("lo, hi", [(-np.inf, np.inf), (-125.0, 130.0)])
def test_vround_rounds_half_to_even_and_clamps(core, rng, lo, hi):
    x = (rng.standard_normal(4000) * 300).astype(np.float32)
    x[:8] = [0.5, 1.5, 2.5, -0.5, -2.5, 1e30, -0.0, 8388609.0]
    x[8:400] = np.round(x[8:400] * 2) / 2            # many ties
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vround", "f32", dst=d_addr, src=s_addr, n0=1, n1=1, n2=x.size, dst_s2=1, src_s2=1,
        p0=isa.f32_bits(lo), p1=isa.f32_bits(hi)))
    out = result.view(d_addr, "f32", x.shape)
    expected = np.minimum(np.maximum(np.rint(x), np.float32(lo)), np.float32(hi))
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def _half_away(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)                       # exact: no tie is lost to rounding
    return np.where(wide >= 0, np.floor(wide + 0.5), np.ceil(wide - 0.5)).astype(np.float32)


@pytest.mark.parametrize("flag, reference", [
    (isa.Flag.ROUND_FLOOR, np.floor), (isa.Flag.ROUND_CEIL, np.ceil),
    (isa.Flag.ROUND_HALF_AWAY, _half_away)])
def test_vround_modes(core, rng, flag, reference):
    """math.floor, math.ceil and math.round (ties away from zero), then the clamp."""
    x = (rng.standard_normal(4000) * 300).astype(np.float32)
    x[:9] = [0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.0, 8388609.0, -1e30]
    x[9:400] = np.round(x[9:400] * 2) / 2            # many ties
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vround", "f32", int(flag), dst=d_addr, src=s_addr, n0=1, n1=1, n2=x.size, dst_s2=1,
        src_s2=1, p0=isa.f32_bits(-1e6), p1=isa.f32_bits(1e6)))
    expected = np.clip(reference(x), np.float32(-1e6), np.float32(1e6)).astype(np.float32)
    np.testing.assert_array_equal(result.view(d_addr, "f32", x.shape), expected)


@pytest.mark.parametrize("dst", ["i8", "i32"])
def test_vcvt_truncate_rounds_toward_zero_and_saturates(core, rng, dst):
    """arith.fptosi: toward zero; out of range saturates (the IR's value is poison)."""
    x = (rng.standard_normal(3000) * 100).astype(np.float32)
    x[:6] = [2.9, -2.9, 127.99, -128.99, 1e10, np.nan]
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vcvt", dst, flags=int(F.TRUNCATE), dst=d_addr, src=s_addr, n0=1, n1=1, n2=x.size,
        dst_s2=1, src_s2=1, src_dtype=int(isa.DType.F32)))
    info = np.iinfo(NP_DTYPES[dst])
    expected = np.clip(np.trunc(np.nan_to_num(x, nan=0.0)).astype(np.float64), info.min,
                       info.max).astype(NP_DTYPES[dst])
    np.testing.assert_array_equal(result.view(d_addr, dst, x.shape), expected)


@pytest.mark.parametrize("dtype", FLOATS)
def test_vfma_rounds_once(core, rng, dtype):
    """dst = lhs·rhs + dst with one rounding (numpy: the product and sum in f64, exact
    for f32 operands but the sum, rounded once to f32 except at a double-rounding tie)."""
    n = 3000
    lhs, rhs, acc = (random_values(rng, dtype, n) for _ in range(3))
    image = SramImage()
    l_addr, r_addr, d_addr = image.put(lhs), image.put(rhs), image.put(acc)
    result = run_on_sram(core, image, instr(
        "vfma", dtype, dst=d_addr, lhs=l_addr, rhs=r_addr, n0=1, n1=1, n2=n, dst_s2=1,
        lhs_s2=1, rhs_s2=1))
    out = to_f32(result.view(d_addr, dtype, (n,)), dtype)
    L, R, A = (to_f32(v, dtype).astype(np.float64) for v in (lhs, rhs, acc))
    expected = _round((L * R + A).astype(np.float32), dtype)
    assert np.mean(out == expected) > 0.999
    separate = _round(to_f32(lhs, dtype) * to_f32(rhs, dtype), dtype)
    if dtype == "f32":     # the fused result is not the twice-rounded one everywhere
        assert np.any(out != _round(separate + to_f32(acc, dtype), dtype))


def test_vfma_i32_wraps(core, rng):
    """dst = lhs·rhs + dst in i32 modulo 2^32 (a quantized zero-point correction)."""
    n = 3000
    lhs, rhs, acc = (rng.integers(-2**31, 2**31, n, dtype=np.int32) for _ in range(3))
    lhs[:2], rhs[:2], acc[:2] = [2**31 - 1, -2**31], [2, -1], [5, -1]
    image = SramImage()
    l_addr, r_addr, d_addr = image.put(lhs), image.put(rhs), image.put(acc)
    result = run_on_sram(core, image, instr(
        "vfma", "i32", dst=d_addr, lhs=l_addr, rhs=r_addr, n0=1, n1=1, n2=n, dst_s2=1,
        lhs_s2=1, rhs_s2=1))
    expected = np.mod(lhs.astype(np.int64) * rhs + acc, 2**32).astype(np.uint32)
    np.testing.assert_array_equal(result.view(d_addr, "i32", (n,)).view(np.uint32), expected)


@pytest.mark.parametrize("or_equal", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
def test_vselgt_keeps_the_destination_unless_lhs_is_greater(core, rng, dtype, or_equal):
    """dst = lhs > rhs ? lhs : dst (lhs >= rhs with flag or_equal), an ordered compare:
    NaNs keep dst, and so do equal operands unless or_equal."""
    n = 1000
    lhs, rhs, acc = (random_values(rng, dtype, n) for _ in range(3))
    special = from_f32(np.array([np.nan, 1.0, 2.0, np.inf, -np.inf], np.float32), dtype)
    lhs[:5], rhs[:5] = special, from_f32(np.array([0.0, np.nan, 2.0, 1.0, -1.0], np.float32),
                                         dtype)
    image = SramImage()
    l_addr, r_addr, d_addr = image.put(lhs), image.put(rhs), image.put(acc)
    result = run_on_sram(core, image, instr(
        "vselgt", dtype, dst=d_addr, lhs=l_addr, rhs=r_addr, n0=1, n1=1, n2=n, dst_s2=1,
        lhs_s2=1, rhs_s2=1, flags=isa.Flag.OR_EQUAL if or_equal else 0))
    L, R, A = (to_f32(v, dtype) for v in (lhs, rhs, acc))
    np.testing.assert_array_equal(to_f32(result.view(d_addr, dtype, (n,)), dtype),
                                  np.where(L >= R if or_equal else L > R, L, A))


# arith.cmpf's predicates as vcmp flags: the outcomes (less, equal, greater, unordered)
# each makes true, against numpy's comparisons (NaN compares false in numpy).
CMPF = {"oeq": F.CMP_EQUAL, "one": F.CMP_LESS | F.CMP_GREATER,
        "ugt": F.CMP_GREATER | F.CMP_UNORDERED, "ole": F.CMP_LESS | F.CMP_EQUAL,
        "uno": F.CMP_UNORDERED, "true": F.CMP_LESS | F.CMP_EQUAL | F.CMP_GREATER |
        F.CMP_UNORDERED}
CMPF_NUMPY = {"oeq": lambda a, b: a == b, "one": lambda a, b: (a < b) | (a > b),
              "ugt": lambda a, b: ~(a <= b), "ole": lambda a, b: a <= b,
              "uno": lambda a, b: np.isnan(a) | np.isnan(b),
              "true": lambda a, b: np.ones(a.shape, bool)}


def _compare_operands(rng, dtype, n):
    """lhs, rhs with equal pairs, NaNs and infinities among random values."""
    lhs, rhs = random_values(rng, dtype, n), random_values(rng, dtype, n)
    rhs[::4] = lhs[::4]
    if dtype != "i32":
        special = from_f32(np.array([np.nan, 1.0, np.nan, np.inf, -np.inf, 0.0], np.float32), dtype)
        lhs[1:7], rhs[1:7] = special, from_f32(
            np.array([0.0, np.nan, np.nan, np.inf, 1.0, -0.0], np.float32), dtype)
    return lhs, rhs


@pytest.mark.parametrize("predicate", list(CMPF))
@pytest.mark.parametrize("dtype", FLOATS + ["i32"])
def test_vcmp_gives_one_for_the_outcomes_its_flags_name(core, rng, dtype, predicate):
    """dst = 1 where lhs compares with rhs as one of the flagged outcomes, else 0: with
    NaNs (unordered), equal values, infinities and -0.0 == 0.0."""
    n = 300
    lhs, rhs = _compare_operands(rng, dtype, n)
    image = SramImage()
    l_addr, r_addr, d_addr = image.put(lhs), image.put(rhs), image.reserve(n * 4)
    result = run_on_sram(core, image, instr(
        "vcmp", dtype, dst=d_addr, lhs=l_addr, rhs=r_addr, n0=1, n1=1, n2=n, dst_s2=1,
        lhs_s2=1, rhs_s2=1, flags=CMPF[predicate]))
    out = result.view(d_addr, dtype, (n,))
    L, R = (v if dtype == "i32" else to_f32(v, dtype) for v in (lhs, rhs))
    expected = CMPF_NUMPY[predicate](L, R)
    got = out if dtype == "i32" else to_f32(out, dtype)
    np.testing.assert_array_equal(got, expected.astype(got.dtype))


@pytest.mark.parametrize("dtype", FLOATS + ["i32"])
def test_vselect_takes_rhs_where_lhs_is_nonzero(core, rng, dtype):
    """dst = lhs != 0 ? rhs : dst, for 0/1 conditions and others (a NaN or -0.0
    condition: NaN is nonzero, -0.0 is zero)."""
    n = 300
    cond = from_f32(rng.integers(0, 2, n).astype(np.float32), dtype) if dtype != "i32" \
        else rng.integers(0, 2, n).astype(np.int32)
    if dtype != "i32":
        cond[:3] = from_f32(np.array([np.nan, -0.0, 2.5], np.float32), dtype)
    else:
        cond[:2] = [-7, 1 << 30]
    rhs, keep = random_values(rng, dtype, n), random_values(rng, dtype, n)
    image = SramImage()
    c_addr, r_addr, d_addr = image.put(cond), image.put(rhs), image.put(keep)
    result = run_on_sram(core, image, instr(
        "vselect", dtype, dst=d_addr, lhs=c_addr, rhs=r_addr, n0=1, n1=1, n2=n, dst_s2=1,
        lhs_s2=1, rhs_s2=1))
    C = cond if dtype == "i32" else to_f32(cond, dtype)
    expected = np.where((C != 0) | np.isnan(C.astype(np.float64)), rhs, keep)
    np.testing.assert_array_equal(result.view(d_addr, dtype, (n,)), expected)


def test_vand_is_bitwise_and(core, rng):
    """dst = lhs & rhs on i32 (an i8 mask's low bit: m & 1), negative values included."""
    n = 300
    lhs = random_values(rng, "i32", n)
    rhs = random_values(rng, "i32", n)
    rhs[::2] = 1
    image = SramImage()
    l_addr, r_addr, d_addr = image.put(lhs), image.put(rhs), image.reserve(n * 4)
    result = run_on_sram(core, image, instr(
        "vand", "i32", dst=d_addr, lhs=l_addr, rhs=r_addr, n0=1, n1=1, n2=n, dst_s2=1,
        lhs_s2=1, rhs_s2=1))
    np.testing.assert_array_equal(result.view(d_addr, "i32", (n,)), lhs & rhs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_hswish_has_the_bits_of_scale_clamp_mul(core, rng, dtype):
    """vhswish in one pass computes what vscale, vclamp [0, 1] and vmul compute as three
    instructions, each storing its result in the dtype: the same bits, on values around
    the clamp's corners (x = -3 and 3 for p0 = 1/6, p1 = 0.5) and random ones."""
    n = 4096
    x = np.concatenate([rng.uniform(-4, 4, n // 2), rng.standard_normal(n // 2) * 50])
    src = from_f32(x.astype(np.float32), dtype)
    box = dict(n0=1, n1=1, n2=n, dst_s0=0, dst_s1=0, dst_s2=1, src_s0=0, src_s1=0, src_s2=1)
    params = dict(p0=1 / 6, p1=0.5)
    image = SramImage()
    s_addr, fused, t_addr, three = (image.put(src), image.reserve(n * 4), image.reserve(n * 4),
                                    image.reserve(n * 4))
    result = run_on_sram(
        core, image, instr("vhswish", dtype, dst=fused, src=s_addr, **box, **params),
        instr("vscale", dtype, dst=t_addr, src=s_addr, **box, **params),
        instr("vclamp", dtype, dst=t_addr, src=t_addr, **box, p0=0.0, p1=1.0),
        instr("vmul", dtype, dst=three, lhs=s_addr, rhs=t_addr, n0=1, n1=1, n2=n, dst_s0=0,
              dst_s1=0, dst_s2=1, lhs_s0=0, lhs_s1=0, lhs_s2=1, rhs_s0=0, rhs_s1=0, rhs_s2=1))
    np.testing.assert_array_equal(result.view(fused, dtype, n), result.view(three, dtype, n))


def test_vnarrow_rounds_f32_to_the_nearest_f16(core, rng):
    """vnarrow keeps an f32 value rounded to f16 (ties to even; past 65520 infinity; f16
    subnormals; NaN stays NaN): numpy's float16 conversion, on random bit patterns, the
    edges of the range and values halfway between two f16 values."""
    halves = np.arange(0, 65536, 7, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)].astype(np.float64)
    ties = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)
    x = np.concatenate([rng.integers(0, 1 << 32, size=20000, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32), ties,
                        np.float32([65504, 65519.99, 65520, 6e-8, 3e-8, 2.98e-8, -0.0, np.inf])])
    image = SramImage()
    s_addr, d_addr = image.put(x), image.reserve(x.size * 4)
    result = run_on_sram(core, image, instr(
        "vnarrow", "f32", dst=d_addr, src=s_addr, n0=1, n1=1, n2=x.size, dst_s2=1, src_s2=1))
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(result.view(d_addr, "f32", x.size), expected)
