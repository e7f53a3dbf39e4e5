"""hal.executable.* imports."""
from hal_driver.device.device import Device
from hal_driver.device.executable import Executable
from hal_driver.hal.refs import deref, vm_bytes, vm_string
from hal_driver.status import StatusCode, StatusError


def create(state, device, queue_affinity, format, data, constants):
    """Prepares an executable from its format string, bytes and optional constants buffer."""
    device = deref(device, Device)
    values = ()
    if constants is not None:
        raw = vm_bytes(constants)
        if len(raw) % 4:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"constant buffer data must contain 4-byte elements but data "
                              f"length is {len(raw)}")
        values = tuple(raw.cast("I"))
    return device.executable_cache.prepare(vm_string(format), vm_bytes(data), values)


def lookup_function(state, executable, name):
    return deref(executable, Executable).lookup_function(vm_string(name))


EXPORTS = {
    "executable.create": create,
    "executable.lookup.function": lookup_function,
}
