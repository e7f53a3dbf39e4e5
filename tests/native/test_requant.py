"""vrequant against numpy: per-channel records, each f32 step rounded once (the fma
exactly), the rounding modes, the clamp, the table lookup; bad records are errors."""
from fractions import Fraction

import numpy as np
import pytest

from executable_format import isa
from hal_driver.status import StatusError
from tests.native.programs import NP_DTYPES, SramImage, instr, run_on_sram

F = isa.Flag
ROUNDINGS = {0: np.rint, int(F.ROUND_FLOOR): np.floor, int(F.ROUND_CEIL): np.ceil,
             int(F.ROUND_HALF_AWAY): lambda v: np.where(v >= 0, np.floor(v + 0.5),
                                                        np.ceil(v - 0.5))}


def _f32_nearest(exact: Fraction) -> np.float32:
    """The f32 nearest to an exact rational, ties to even."""
    guess = np.float32(float(exact))
    below, above = (np.nextafter(guess, np.float32(-np.inf)), guess) if Fraction(
        float(guess)) > exact else (guess, np.nextafter(guess, np.float32(np.inf)))
    low, high = exact - Fraction(float(below)), Fraction(float(above)) - exact
    if low != high:
        return below if low < high else above
    return below if int(below.view(np.uint32)) % 2 == 0 else above


def _fma(a: np.ndarray, b: np.float32, c: np.float32) -> np.ndarray:
    fb, fc = Fraction(float(b)), Fraction(float(c))
    flat = [_f32_nearest(Fraction(float(x)) * fb + fc) if np.isfinite(x) else x * b + c
            for x in a.ravel()]
    return np.array(flat, np.float32).reshape(a.shape)


def _records(image: SramImage, params: list[dict], tables: list[np.ndarray],
             table_addr: int | None = None) -> int:
    words = np.zeros((len(params), len(isa.REQUANT_RECORD)), np.uint32)
    for row, (p, table) in enumerate(zip(params, tables)):
        words[row, 0] = np.int32(p["zero"]).view(np.uint32)
        for col, name in enumerate(("mul", "fma_mul", "fma_add", "div", "lo", "hi"), 1):
            words[row, col] = isa.f32_bits(p[name])
        words[row, 7] = image.put(table) if table_addr is None else table_addr
    return image.put(words)


def _reference(src, p, table, flags):
    v = (src.astype(np.int64) - p["zero"]).astype(np.int32).astype(np.float32)
    v = v * np.float32(p["mul"])
    v = _fma(v, np.float32(p["fma_mul"]), np.float32(p["fma_add"]))
    v = v / np.float32(p["div"])
    q = np.clip(ROUNDINGS[flags](v), np.float32(p["lo"]), np.float32(p["hi"]))
    return table[(q - np.float32(p["lo"])).astype(np.int64)]


@pytest.mark.parametrize("dtype, flags", [("i8", 0), ("u8", 0), ("f32", 0),
                                          ("i8", int(F.ROUND_FLOOR)), ("i8", int(F.ROUND_CEIL)),
                                          ("i8", int(F.ROUND_HALF_AWAY))])
def test_vrequant_matches_numpy(core, rng, dtype, flags):
    channels, rows, cols = 3, 4, 50
    src = rng.integers(-40000, 40000, (channels, rows, cols)).astype(np.int32)
    src.flat[:4] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, 123]
    params = [{"zero": int(rng.integers(-500, 500)), "mul": float(rng.uniform(0.001, 0.05)),
               "fma_mul": float(rng.uniform(0.001, 0.02)),
               "fma_add": float(rng.uniform(-1, 1)) if c else -0.0,
               "div": float(rng.uniform(0.01, 0.05)), "lo": float(-100 - c), "hi": float(120 + c)}
              for c in range(channels)]
    if dtype == "f32":
        tables = [rng.standard_normal(int(p["hi"] - p["lo"]) + 1).astype(np.float32)
                  for p in params]
    else:
        info = np.iinfo(NP_DTYPES[dtype])
        tables = [rng.integers(info.min, info.max + 1, int(p["hi"] - p["lo"]) + 1)
                  .astype(NP_DTYPES[dtype]) for p in params]
    image = SramImage()
    s_addr = image.put(src)
    p_addr = _records(image, params, tables)
    d_addr = image.reserve(src.size * 4)
    result = run_on_sram(core, image, instr(
        "vrequant", dtype, flags, dst=d_addr, src=s_addr, n0=channels, n1=rows, n2=cols,
        dst_s0=rows * cols, dst_s1=cols, dst_s2=1, src_s0=rows * cols, src_s1=cols, src_s2=1,
        params=p_addr, par_s0=1))
    expected = np.stack([_reference(src[c], params[c], tables[c], flags)
                         for c in range(channels)])
    np.testing.assert_array_equal(result.view(d_addr, dtype, src.shape), expected)


@pytest.mark.parametrize("source", ["i8", "u8", "f32"])
def test_vrequant_reads_byte_and_float_sources(core, rng, source):
    """With flag src_i8/src_u8 the source is bytes widened to i32 (then less the zero
    point, as an i32 source); with src_f32 the steps start from the f32 value itself
    (a quantize: x / scale rounded, then a table), the record's zero not read."""
    n = 400
    if source == "f32":
        src = (rng.standard_normal(n) * 3).astype(np.float32)
        src[:4] = [np.nan, np.inf, -np.inf, 0.5]
    else:
        info = np.iinfo(NP_DTYPES[source])
        src = rng.integers(info.min, info.max + 1, n).astype(NP_DTYPES[source])
    p = {"zero": 0 if source == "f32" else 7, "mul": 0.75, "fma_mul": 1.0, "fma_add": -0.0,
         "div": 0.0625, "lo": -100.0, "hi": 90.0}
    table = rng.standard_normal(191).astype(np.float32)
    image = SramImage()
    s_addr = image.put(src)
    p_addr = _records(image, [dict(p, zero=12345) if source == "f32" else p], [table])
    d_addr = image.reserve(n * 4)
    flag = {"i8": F.SRC_I8, "u8": F.SRC_U8, "f32": F.SRC_F32}[source]
    result = run_on_sram(core, image, instr(
        "vrequant", "f32", int(flag), dst=d_addr, src=s_addr, n0=1, n1=1, n2=n, dst_s2=1,
        src_s2=1, params=p_addr))
    if source == "f32":
        v = src * np.float32(p["mul"]) / np.float32(p["div"])
        q = np.clip(np.nan_to_num(np.rint(v), nan=p["lo"]), p["lo"], p["hi"])
        expected = table[(q - p["lo"]).astype(np.int64)]
    else:
        expected = _reference(src.astype(np.int32), p, table, 0)
    np.testing.assert_array_equal(result.view(d_addr, "f32", (n,)), expected)


@pytest.mark.parametrize("dtype", ["i8", "i32"])
def test_vrequant_strided_rows_longer_than_a_run(core, rng, dtype):
    """Rows of 300 elements (the row loop works in runs of 256) read every third i32
    and written every second element, as dense ones: the same values."""
    rows, n = 2, 300
    src = rng.integers(-40000, 40000, (rows, n * 3)).astype(np.int32)
    p = {"zero": -17, "mul": 0.02, "fma_mul": 0.5, "fma_add": 0.25, "div": 0.125,
         "lo": -128.0, "hi": 127.0}
    info = np.iinfo(NP_DTYPES[dtype])
    table = rng.integers(max(info.min, -2**20), min(info.max, 2**20), 256).astype(
        NP_DTYPES[dtype])
    image = SramImage()
    s_addr = image.put(src)
    p_addr = _records(image, [p], [table])
    d_addr = image.reserve(rows * n * 2 * 4)
    result = run_on_sram(core, image, instr(
        "vrequant", dtype, dst=d_addr, src=s_addr, n0=1, n1=rows, n2=n, dst_s1=2 * n,
        dst_s2=2, src_s1=3 * n, src_s2=3, params=p_addr))
    written = result.view(d_addr, dtype, (rows, n, 2))[:, :, 0]
    np.testing.assert_array_equal(written, _reference(src[:, ::3], p, table, 0))


def test_vrequant_channel_on_the_innermost_dim(core, rng):
    """A matmul tile [m][n] with the channel along n: records indexed by par_s2."""
    m, n = 6, 40
    src = rng.integers(-3000, 3000, (m, n)).astype(np.int32)
    table = np.arange(-128, 128).astype(np.int8)
    params = [{"zero": int(z), "mul": 1.0, "fma_mul": 0.03, "fma_add": -0.0, "div": 1.0,
               "lo": -128.0, "hi": 127.0} for z in rng.integers(-50, 50, n)]
    image = SramImage()
    s_addr = image.put(src)
    p_addr = _records(image, params, [table] * n)
    d_addr = image.reserve(src.size)
    result = run_on_sram(core, image, instr(
        "vrequant", "i8", dst=d_addr, src=s_addr, n0=1, n1=m, n2=n, dst_s1=n, dst_s2=1,
        src_s1=n, src_s2=1, params=p_addr, par_s2=1))
    expected = np.stack([_reference(src[:, j], params[j], table, 0) for j in range(n)], 1)
    np.testing.assert_array_equal(result.view(d_addr, "i8", src.shape), expected)


@pytest.mark.parametrize("lo, hi, table_addr, message", [
    (-128.5, 127.0, None, "not integers"),
    (10.0, 5.0, None, "not integers"),
    (0.0, 256.0, None, "at most 256"),
    (0.0, 3.0, (2 << 20) - 2, "within SRAM")])
def test_vrequant_rejects_bad_records(core, lo, hi, table_addr, message):
    image = SramImage()
    src = np.zeros(4, np.int32)
    s_addr = image.put(src)
    params = [{"zero": 0, "mul": 1.0, "fma_mul": 1.0, "fma_add": 0.0, "div": 1.0,
               "lo": lo, "hi": hi}]
    p_addr = _records(image, params, [np.zeros(4, np.int8)], table_addr)
    d_addr = image.reserve(4)
    with pytest.raises(StatusError, match=f"record 0: .*{message}"):
        run_on_sram(core, image, instr("vrequant", "i8", dst=d_addr, src=s_addr, n0=1, n1=1,
                                       n2=4, dst_s2=1, src_s2=1, params=p_addr))


def test_vrequant_rejects_a_bad_record_along_the_row(core):
    """Records per column (par_s2): a bad one is named by its index, before any row."""
    image = SramImage()
    s_addr = image.put(np.zeros((3, 5), np.int32))
    params = [{"zero": 0, "mul": 1.0, "fma_mul": 1.0, "fma_add": 0.0, "div": 1.0,
               "lo": -1.0 if k != 3 else 2.0, "hi": 1.0} for k in range(5)]
    p_addr = _records(image, params, [np.zeros(3, np.int8)] * 5)
    d_addr = image.reserve(15)
    with pytest.raises(StatusError, match="record 3: .*not integers"):
        run_on_sram(core, image, instr("vrequant", "i8", dst=d_addr, src=s_addr, n0=1, n1=3,
                                       n2=5, dst_s1=5, dst_s2=1, src_s1=5, src_s2=1,
                                       params=p_addr, par_s2=1))
