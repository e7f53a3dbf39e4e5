"""Drivers and devices as iree.runtime names them: npu-sim here, every other driver in
the stock runtime. Devices are cached by URI, as the stock `get_device` does, so every
`Config("npu-sim")` of a process shares one device and its arrays."""
import threading

from hal_driver.device.device import Device
from hal_driver.device.driver import DRIVER_NAME, create_device, enumerate_devices, is_npu_sim_uri
from hal_driver.iree_runtime_api.stock import stock
from hal_driver.status import StatusError

_DEVICES: dict[str, Device] = {}
_LOCK = threading.Lock()


class HalDriver:
    """The npu-sim driver, with the stock HalDriver's methods."""

    @staticmethod
    def query() -> list[str]:
        return query_available_drivers()

    def query_available_devices(self) -> list[dict]:
        return [{"device_id": i, "path": info.path, "name": "default"}
                for i, info in enumerate(enumerate_devices())]

    def create_default_device(self) -> Device:
        return self.create_device_by_uri(DRIVER_NAME)

    def create_device(self, device_id: int) -> Device:
        return self.create_device_by_uri(f"{DRIVER_NAME}://{device_id}")

    def create_device_by_uri(self, device_uri: str) -> Device:
        try:
            return create_device(device_uri)
        except StatusError as status:
            raise ValueError(f"Error creating device: {status}") from None

    def __repr__(self) -> str:
        return f"<HalDriver {DRIVER_NAME}>"


def query_available_drivers() -> list[str]:
    """The stock runtime's drivers and npu-sim."""
    return sorted([*stock.query_available_drivers(), DRIVER_NAME])


def get_driver(device_uri: str):
    if is_npu_sim_uri(device_uri):
        return HalDriver()
    return stock.get_driver(device_uri)


def get_device(device_uri: str, cache: bool = True):
    if not is_npu_sim_uri(device_uri):
        return stock.get_device(device_uri, cache=cache)
    with _LOCK:
        key = DRIVER_NAME if device_uri in (DRIVER_NAME, f"{DRIVER_NAME}://") else device_uri
        if cache and key in _DEVICES:
            return _DEVICES[key]
        device = HalDriver().create_device_by_uri(device_uri)
        if cache:
            _DEVICES[key] = device
        return device


def get_first_device(device_uris=None, cache: bool = True):
    """npu-sim when it is the first URI; otherwise the stock choice."""
    if device_uris and is_npu_sim_uri(device_uris[0]):
        return get_device(device_uris[0], cache=cache)
    return stock.get_first_device(device_uris, cache=cache)
