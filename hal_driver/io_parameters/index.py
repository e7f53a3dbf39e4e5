"""`ParameterIndex`, `ParameterIndexEntry` and `ParameterProvider` with the names and
behaviour of iree.runtime's: an index maps keys to parameter contents (host buffers,
splats, or entries of loaded .irpa archives); a provider serves one index under a scope.
"""
import os

import numpy as np

from hal_driver.io_parameters.archive import ArchiveEntry, read_archive
from hal_driver.status import StatusCode, StatusError


class ParameterIndexEntry:
    def __init__(self, entry: ArchiveEntry, writable: bool = False):
        self._entry = entry
        self.writable = writable

    @property
    def key(self) -> str:
        return self._entry.key

    @property
    def length(self) -> int:
        return self._entry.length

    @property
    def metadata(self) -> bytes:
        return self._entry.metadata

    @property
    def is_file(self) -> bool:
        return self._entry.data is not None

    @property
    def is_splat(self) -> bool:
        return self._entry.pattern is not None

    @property
    def file_view(self) -> memoryview:
        if not self.is_file:
            raise ValueError("Entry is not file storage based")
        return self._entry.data

    @property
    def splat_pattern(self) -> bytes:
        if not self.is_splat:
            raise ValueError("Entry is not a splat")
        return self._entry.pattern

    def contents(self) -> memoryview:
        """The stored bytes; a splat has none (see `read`)."""
        if not self.is_file:
            raise ValueError("Entry is not file storage based")
        return self._entry.data

    def read(self, offset: int, length: int) -> memoryview:
        """`length` bytes from `offset` (a splat's pattern repeated over just that range)."""
        if self.is_file:
            return self._entry.data[offset:offset + length]
        pattern = self._entry.pattern
        start = offset % len(pattern)
        repeats = -(-(start + length) // len(pattern))
        return memoryview(pattern * repeats)[start:start + length]

    def __repr__(self) -> str:
        return f"<ParameterIndexEntry '{self.key}' {self.length} bytes>"


class ParameterIndex:
    def __init__(self):
        self._entries: list[ParameterIndexEntry] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i) -> ParameterIndexEntry:
        return self._entries[i]

    def items(self) -> list[tuple[str, ParameterIndexEntry]]:
        return [(entry.key, entry) for entry in self._entries]

    def reserve(self, new_capacity: int) -> None:
        """Nothing to reserve in a Python list."""

    def add_buffer(self, key: str, buffer, *, readable: bool = True, writable: bool = False,
                   metadata: bytes | str | None = None) -> None:
        view = memoryview(buffer).cast("B")
        if writable and view.readonly:
            raise ValueError("cannot add a read-only buffer as writable")
        self._add(ArchiveEntry(key, len(view), _metadata(metadata), data=view), writable)

    def add_splat(self, key: str, pattern, total_length: int, *,
                  metadata: bytes | str | None = None) -> None:
        pattern = np.asarray(pattern).tobytes() if not isinstance(pattern, bytes) else pattern
        if len(pattern) not in (1, 2, 4, 8, 16) or total_length % len(pattern):
            raise ValueError(f"splat pattern of {len(pattern)} bytes cannot fill {total_length}")
        self._add(ArchiveEntry(key, total_length, _metadata(metadata), pattern=pattern), False)

    def load(self, file_path: str, format: str | None = None, readable: bool = True,
             writable: bool = False, mmap: bool | None = None, *, mode: str | None = None) -> None:
        """Adds the entries of an .irpa archive (memory mapped, read-only). The format
        defaults to the file's extension; .gguf and .safetensors files convert to .irpa
        with the wheel's iree-convert-parameters."""
        format = format or os.path.splitext(str(file_path))[1].lstrip(".") or "irpa"
        if format != "irpa":
            raise StatusError(StatusCode.UNIMPLEMENTED,
                              f"parameter file format `{format}` is not supported on npu-sim; "
                              f"convert it to .irpa with iree-convert-parameters")
        for entry in read_archive(str(file_path)):
            self._add(entry, False)

    def create_provider(self, *, scope: str = "",
                        max_concurrent_operations: int | None = None) -> "ParameterProvider":
        return ParameterProvider(self, scope)

    def lookup(self, key: str) -> ParameterIndexEntry:
        for entry in self._entries:
            if entry.key == key:
                return entry
        raise StatusError(StatusCode.NOT_FOUND, f"no parameter found in index with key '{key}'")

    def _add(self, entry: ArchiveEntry, writable: bool) -> None:
        self._entries.append(ParameterIndexEntry(entry, writable))


def _metadata(metadata: bytes | str | None) -> bytes:
    return metadata.encode() if isinstance(metadata, str) else bytes(metadata or b"")


class ParameterProvider:
    """Serves `index` to programs that ask for parameters of `scope`."""

    def __init__(self, index: ParameterIndex, scope: str):
        self.index = index
        self.scope = scope

    def handles(self, scope: str) -> bool:
        return scope == self.scope
