"""dma.load / dma.store 4-D boxes (transposes, strides, every dtype), fill, const pool."""
import numpy as np
import pytest

from tests.native.programs import NP_DTYPES, SramImage, dma, instr, program, random_values, \
    run_on_sram

DTYPES = ["f32", "f16", "bf16", "i8", "i32"]


def _gather(flat: np.ndarray, offset: int, counts, strides) -> np.ndarray:
    idx = offset + sum(np.arange(n).reshape([-1 if d == i else 1 for d in range(4)]) * s
                       for i, (n, s) in enumerate(zip(counts, strides)))
    return flat[idx]


def _random_layout(rng, counts):
    """Strides of a dense (sometimes padded) layout of `counts` in a random dimension
    order, and its length in elements."""
    order = rng.permutation(4)            # a dense layout in a random dimension order
    strides = [0] * 4
    step = 1
    for d in order[::-1]:
        strides[d] = int(step)
        step *= counts[d] + int(rng.integers(0, 2))     # sometimes padded
    return strides, step


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_store_boxes(core, rng, dtype):
    for _ in range(10):
        counts = [int(v) for v in rng.integers(1, 6, size=4)]
        dram_s, dram_len = _random_layout(rng, counts)
        sram_s, _ = _random_layout(rng, counts)
        sram_len = 1 + sum((n - 1) * s for n, s in zip(counts, sram_s))
        np_dtype = NP_DTYPES[dtype]
        elem = np.dtype(np_dtype).itemsize
        src = random_values(rng, dtype, dram_len + 3)
        dram_offset = int(rng.integers(0, 3)) * elem
        sram_addr = 64 * int(rng.integers(0, 4))
        out = np.zeros(dram_len + 3, np_dtype)
        prog = program(dma("dma.load", 0, dram_offset, sram_addr, counts, dram_s, sram_s, dtype),
                       dma("dma.store", 1, dram_offset, sram_addr, counts, dram_s, sram_s, dtype))
        stats = core.execute(prog, [src.view(np.uint8), out.view(np.uint8)])
        off = dram_offset // elem
        expected = _gather(src, off, counts, dram_s)
        np.testing.assert_array_equal(_gather(out, off, counts, dram_s), expected)
        touched = np.zeros(out.shape, bool)
        touched[_gather(np.arange(out.size), off, counts, dram_s)] = True
        assert not out[~touched].any()
        moved = int(np.prod(counts)) * elem
        assert stats.dram_read_bytes == stats.dram_write_bytes == moved
        assert stats.sram_peak_bytes == sram_addr + sram_len * elem


def test_nhwc_to_chw_transpose(core, rng):
    h, w, c = 5, 7, 3
    nhwc = rng.standard_normal((h, w, c)).astype(np.float32)
    # box (c, h, w): DRAM strides (1, w*c, c), SRAM dense CHW (h*w, w, 1)
    load = dma("dma.load", 0, 0, 0, (1, c, h, w), (0, 1, w * c, c), (0, h * w, w, 1))
    out = np.zeros(c * h * w, np.float32)
    prog = program(load, dma("dma.store", 1, 0, 0, (1, 1, 1, c * h * w), (0, 0, 0, 1),
                             (0, 0, 0, 1)))
    core.execute(prog, [nhwc.view(np.uint8), out.view(np.uint8)])
    np.testing.assert_array_equal(out.reshape(c, h, w), nhwc.transpose(2, 0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill(core, rng, dtype):
    np_dtype = NP_DTYPES[dtype]
    value = random_values(rng, dtype, ())
    bits = int(np.array(value).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[
        np.dtype(np_dtype).itemsize]))
    image = SramImage()
    base = image.put(random_values(rng, dtype, 400))
    counts, strides = (2, 3, 4, 5), (120, 40, 10, 2)
    result = run_on_sram(core, image, instr(
        "fill", dtype, sram_addr=base + 2 * np.dtype(np_dtype).itemsize,
        n0=2, n1=3, n2=4, n3=5, s0=120, s1=40, s2=10, s3=2, value=bits))
    out = result.view(base, dtype, 400)
    before = np.frombuffer(bytes(image.data[base:base + out.nbytes]), np_dtype)
    idx = _gather(np.arange(400), 2, counts, strides).ravel()
    expected = before.copy()
    expected[idx] = value
    np.testing.assert_array_equal(out, expected)
    assert result.stats.busy_cycles["dma_in"] > 0


def test_const_pool_load(core, rng):
    pool = rng.standard_normal(100).astype(np.float32)
    out = np.zeros(40, np.float32)
    prog = program(dma("dma.load", 0xFFFFFFFF, 40, 0, (1, 1, 4, 10), (0, 0, 20, 2),
                       (0, 0, 10, 1)),
                   dma("dma.store", 0, 0, 0, (1, 1, 1, 40), (0, 0, 0, 1), (0, 0, 0, 1)))
    core.execute(prog, [out.view(np.uint8)], const_pool=pool.tobytes())
    np.testing.assert_array_equal(out.reshape(4, 10), pool[10:10 + 80].reshape(4, 20)[:, ::2])


def test_bindings_accept_buffer_kinds(core):
    data = bytearray(range(64))
    out = memoryview(bytearray(64))
    prog = program(dma("dma.load", 0, 0, 0, (1, 1, 1, 64), (0, 0, 0, 1), (0, 0, 0, 1), "i8"),
                   dma("dma.store", 1, 0, 0, (1, 1, 1, 64), (0, 0, 0, 1), (0, 0, 0, 1), "i8"))
    core.execute(prog, [data, out])
    assert bytes(out) == bytes(data)


def test_concurrent_executions_on_one_core(core, rng):
    """The device's queue thread and others may share a core: executions serialize."""
    import threading

    def worker(seed, failures):
        data = np.random.default_rng(seed).integers(0, 255, size=4096, dtype=np.uint8)
        out = np.zeros_like(data)
        prog = program(dma("dma.load", 0, 0, 0, (1, 1, 1, 4096), (0, 0, 0, 1), (0, 0, 0, 1),
                           "i8"),
                       dma("dma.store", 1, 0, 0, (1, 1, 1, 4096), (0, 0, 0, 1), (0, 0, 0, 1),
                           "i8"))
        for _ in range(50):
            core.execute(prog, [data, out])
            if not np.array_equal(out, data):
                failures.append(seed)

    failures = []
    threads = [threading.Thread(target=worker, args=(seed, failures)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
