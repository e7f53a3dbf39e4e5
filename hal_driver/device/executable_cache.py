"""The executable cache: prepares executables of the formats npu-sim can run.

`npu-fb` programs run on the simulated NPU core; host formats (llvm-cpu output,
see docs/host-fallback.md) run as host fallback. Prepared executables are reused
when the same format and bytes are prepared again.
"""
import hashlib
import threading

from executable_format.errors import excerpt
from hal_driver.device.executable import NPU_FORMAT, Executable, HostExecutable, NpuExecutable
from hal_driver.device.host_library import SUPPORTED_FORMATS as HOST_FORMATS
from hal_driver.status import StatusCode, StatusError


class ExecutableCache:
    def __init__(self, machine):
        self.machine = machine
        self._prepared: dict[tuple, Executable] = {}
        self._lock = threading.Lock()

    def can_prepare(self, format: str) -> bool:
        return format == NPU_FORMAT or format in HOST_FORMATS

    def prepare(self, format: str, data: bytes, constants: tuple[int, ...] = ()) -> Executable:
        """The executable for `data`; `constants` are executable-level constants."""
        data = bytes(data)
        key = (format, hashlib.sha256(data).digest(), tuple(constants))
        with self._lock:
            if key not in self._prepared:
                self._prepared[key] = self._create(format, data, tuple(constants))
            return self._prepared[key]

    def _create(self, format: str, data: bytes, constants: tuple[int, ...]) -> Executable:
        if format == NPU_FORMAT:
            if constants:
                raise StatusError(StatusCode.INVALID_ARGUMENT,
                                  "npu-fb executables take no executable-level constants")
            return NpuExecutable(data, self.machine)
        if format in HOST_FORMATS:
            return HostExecutable(format, data, constants)
        supported = ", ".join((NPU_FORMAT,) + HOST_FORMATS)
        raise StatusError(StatusCode.NOT_FOUND,
                          f"no executable loader for format '{excerpt(format)}' on npu-sim "
                          f"(supported: {supported})")
