"""hal.buffer_view: a buffer with a shape, an element type and an encoding."""
import math
from typing import Sequence

import numpy as np

from hal_driver.device import element_type as et
from hal_driver.device.buffer import Buffer
from hal_driver.status import StatusCode, StatusError

ENCODING_OPAQUE = 0
ENCODING_DENSE_ROW_MAJOR = 1


class BufferView:

    def __init__(self, buffer: Buffer, shape: Sequence[int], element_type: int,
                 encoding_type: int = ENCODING_DENSE_ROW_MAJOR):
        self.buffer = buffer
        self.shape = tuple(map(int, shape))
        self.element_type = element_type
        self.encoding_type = encoding_type

    @property
    def rank(self) -> int:
        return len(self.shape)

    def dim(self, index: int) -> int:
        if not 0 <= index < self.rank:
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"dimension index {index} out of range for rank {self.rank}")
        return self.shape[index]

    @property
    def element_count(self) -> int:
        return math.prod(self.shape)

    @property
    def byte_length(self) -> int:
        return self.element_count * et.byte_size(self.element_type)

    def to_numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array of the view's shape."""
        data = self.buffer.map(0, self.byte_length)
        return data.view(et.to_dtype(self.element_type)).reshape(self.shape).copy()

    def describe(self) -> str:
        """`2x3xf32` (shape and element type as IREE prints them)."""
        return "x".join([str(d) for d in self.shape] + [et.name(self.element_type)])


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


def assert_view(view: BufferView, element_type: int, encoding_type: int,
                shape: Sequence[int]) -> None:
    """hal.buffer_view.assert with IREE's messages (modules/hal/utils/buffer_diagnostics.c),
    which the caller prefixes with the assert's own message."""
    shape = tuple(shape)
    if (view.encoding_type == encoding_type and view.element_type == element_type
            and view.shape == shape):
        return      # what every call of a compiled program asserts: nothing to report
    if view.encoding_type not in (ENCODING_OPAQUE, encoding_type):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"encoding mismatch; expected {encoding_type:08X} but "
                          f"have {view.encoding_type:08X}")
    if not et.compatible(view.element_type, element_type):
        raise StatusError(
            StatusCode.INVALID_ARGUMENT,
            f"element type mismatch; expected {et.name(element_type)} "
            f"({element_type:08X}) but have {et.name(view.element_type)} ({view.element_type:08X})")
    problem = None
    if view.rank != len(shape):
        problem = (f"shape rank mismatch; expected {len(shape)}"
                   f"{' (scalar)' if not shape else ''} but have {view.rank}"
                   f"{' (scalar)' if not view.shape else ''}")
    else:
        for i, (actual, expected) in enumerate(zip(view.shape, shape)):
            if actual != expected:
                problem = (f"shape dimension {i} mismatch; expected {expected} "
                           f"but have {actual}")
                break
    if problem:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"{problem}; expected shape `{format_shape(shape)}`, "
                          f"actual shape `{format_shape(view.shape)}`")
