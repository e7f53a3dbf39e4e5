"""hal.file: a read-only file backed by host memory (hal.ex.file.from_memory)."""
from hal_driver.device.buffer import Buffer
from hal_driver.device.memory import MemoryAccess
from hal_driver.status import StatusCode, StatusError


class File:

    def __init__(self, contents: memoryview, access: int):
        self.contents = contents
        self.access = access

    @property
    def length(self) -> int:
        return len(self.contents)

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.length:
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"file range out of bounds (offset={offset}, length={length}, "
                              f"file length={self.length})")

    def read_into(self, offset: int, target: Buffer, target_offset: int, length: int) -> None:
        self._check(offset, length)
        target.write(target_offset, self.contents[offset:offset + length])

    def write_from(self, source: Buffer, source_offset: int, offset: int, length: int) -> None:
        if not self.access & MemoryAccess.WRITE:
            raise StatusError(StatusCode.PERMISSION_DENIED, "file is read-only")
        self._check(offset, length)
        self.contents[offset:offset + length] = source.read(source_offset, length)
