"""The `hal` native module: all 60 imports of the 3.13 hal module over npu-sim devices."""
import functools
from dataclasses import dataclass

from hal_driver.device.device import Device
from hal_driver.hal import (allocator, buffer, buffer_view, channel, command_buffer, device,
                            executable, fence, file)
from hal_driver.hal.exports import EXPORTS
from hal_driver.vm.native_module import NativeModule

HAL_MODULE_VERSION = 7
_IMPLEMENTATIONS = {name: fn for part in (allocator, buffer, buffer_view, channel, command_buffer,
                                          device, executable, fence, file)
                    for name, fn in part.EXPORTS.items()}


@dataclass
class HalModuleState:
    """What the imports share: the devices of the context (hal.devices.*)."""
    devices: list[Device]


def create_hal_module(devices: list[Device]) -> NativeModule:
    missing = set(EXPORTS) ^ set(_IMPLEMENTATIONS)
    assert not missing, f"hal exports without implementation or cconv: {sorted(missing)}"
    state = HalModuleState(list(devices))
    module = NativeModule("hal", HAL_MODULE_VERSION)
    for name, cconv in sorted(EXPORTS.items()):
        module.add(name, cconv, functools.partial(_IMPLEMENTATIONS[name], state))
    return module
