"""native/guarded_memory.c: device memory regions, pooled and reused."""
import mmap

from native._host_dispatch import ffi, lib

LARGE = (3 << 20) + 12345       # over GM_POOLED_BYTES, a size no other test uses


def _end(pointer, length: int) -> int:
    """The address after the region's last byte: the 64-byte aligned length past it."""
    return int(ffi.cast("uintptr_t", pointer)) + (length + 63) // 64 * 64


def test_a_released_large_region_is_reused():
    """A model's transient buffers come back with the same sizes on every call: a
    released region bigger than the pooled sizes is kept and handed, with its bytes, to
    the next acquire of its size (a fresh mapping would be zero), or zeroed again when
    asked; its guard page still follows its last byte."""
    first = lib.gm_acquire(LARGE, 1)
    ffi.buffer(first, LARGE)[0:4] = b"\x01\x02\x03\x04"
    lib.gm_release(first, LARGE)
    kept = lib.gm_acquire(LARGE, 0)
    assert ffi.buffer(kept, LARGE)[0:4] == b"\x01\x02\x03\x04"
    assert _end(kept, LARGE) % mmap.PAGESIZE == 0
    lib.gm_release(kept, LARGE)
    zeroed = lib.gm_acquire(LARGE, 1)
    try:
        assert bytes(ffi.buffer(zeroed, LARGE)) == bytes(LARGE)
    finally:
        lib.gm_release(zeroed, LARGE)


def test_a_large_region_is_not_reused_for_another_size():
    first = lib.gm_acquire(LARGE, 1)
    ffi.buffer(first, LARGE)[0:4] = b"\x01\x02\x03\x04"
    lib.gm_release(first, LARGE)
    other = lib.gm_acquire(LARGE + mmap.PAGESIZE, 0)
    try:
        assert bytes(ffi.buffer(other, LARGE + mmap.PAGESIZE)) == bytes(LARGE + mmap.PAGESIZE)
        assert _end(other, LARGE + mmap.PAGESIZE) % mmap.PAGESIZE == 0
    finally:
        lib.gm_release(other, LARGE + mmap.PAGESIZE)
