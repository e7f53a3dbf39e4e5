"""hal.ex.file.from_memory: a read-only hal.file over a vm.buffer's memory."""
from hal_driver.device.device import Device
from hal_driver.device.file import File
from hal_driver.device.memory import MemoryAccess
from hal_driver.hal.refs import deref, vm_range
from hal_driver.status import StatusCode, StatusError


def from_memory(state, device, queue_affinity, access, buffer, offset, length, flags):
    deref(device, Device)
    if access & ~MemoryAccess.READ:
        raise StatusError(StatusCode.PERMISSION_DENIED,
                          "only read-only memory can be accessed via a file handle (today)")
    return File(vm_range(buffer, offset, length), access)


EXPORTS = {"ex.file.from_memory": from_memory}
