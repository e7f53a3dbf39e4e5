import numpy as np
import pytest

from hal_driver.device.driver import create_device
from hal_driver.vm.ref import VmRef


class FakeVmBuffer(VmRef):
    """Stands in for the VM's vm.buffer (a `.data` memoryview)."""
    vm_type = "vm.buffer"

    def __init__(self, data, mutable=False):
        self.data = memoryview(bytearray(data)) if mutable else memoryview(bytes(data))


def vm_str(text: str) -> FakeVmBuffer:
    return FakeVmBuffer(text.encode())


@pytest.fixture
def device():
    dev = create_device()
    yield dev
    dev.close()


@pytest.fixture
def hal(device):
    """The hal module's functions by name, bound to one npu-sim device."""
    from hal_driver.hal import create_hal_module
    module = create_hal_module([device])
    return {name: f.fn for name, f in module.functions.items()}


def f32_bytes(values) -> bytes:
    return np.asarray(values, dtype=np.float32).tobytes()
