"""Aligned numpy buffers for dispatch bindings."""
import numpy as np


def aligned_bytes(nbytes: int, alignment: int = 64) -> np.ndarray:
    """A zeroed uint8 array of `nbytes` whose data starts on an `alignment` boundary."""
    raw = np.zeros(nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes]


def binding_for(array: np.ndarray) -> np.ndarray:
    """An aligned uint8 binding holding a copy of `array`'s bytes."""
    binding = aligned_bytes(array.nbytes)
    binding[:] = np.ascontiguousarray(array).view(np.uint8).ravel()
    return binding
