"""The `hal` module that compiled programs import, implemented over npu-sim devices."""
from hal_driver.hal.module import HalModuleState, create_hal_module

__all__ = ["HalModuleState", "create_hal_module"]
