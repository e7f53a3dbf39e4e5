"""The npu-sim HAL driver: device enumeration and creation from a URI."""
from dataclasses import dataclass

from hal_driver.device.device import DEVICE_ID, Device
from hal_driver.status import StatusCode, StatusError

DRIVER_NAME = "npu-sim"
DRIVER_DESCRIPTION = "Simulated NPU (npu-fb executables, host-CPU fallback)"


@dataclass(frozen=True)
class DeviceInfo:
    path: str
    name: str


def enumerate_devices() -> list[DeviceInfo]:
    return [DeviceInfo(path="", name=f"{DEVICE_ID}: one simulated NPU core")]


def is_npu_sim_uri(uri: str) -> bool:
    return uri == DRIVER_NAME or uri.startswith(f"{DRIVER_NAME}://")


def create_device(uri: str = DRIVER_NAME, machine=None, trace: bool = False) -> Device:
    """`npu-sim` or `npu-sim://` (the only device, path empty or 0)."""
    if not is_npu_sim_uri(uri):
        raise StatusError(StatusCode.NOT_FOUND, f"'{uri}' is not an npu-sim device URI")
    path = uri[len(DRIVER_NAME) + 3:] if "://" in uri else ""
    if path not in ("", "0"):
        raise StatusError(StatusCode.NOT_FOUND,
                          f"npu-sim has no device '{path}' (available: npu-sim://)")
    return Device(machine=machine, trace=trace)
