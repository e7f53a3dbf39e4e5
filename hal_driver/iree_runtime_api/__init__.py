"""iree.runtime's Python API on npu-sim: the same names, signatures, result types and
errors, with the npu-sim driver added. Other drivers are handed to the stock
`iree.runtime`, so one import serves both:

    import hal_driver.iree_runtime_api as ireert        # instead of iree.runtime
    config = ireert.Config("npu-sim")                    # or "local-task"
    ctx = ireert.SystemContext(config=config)
    ctx.add_vm_module(ireert.VmModule.copy_buffer(ctx.instance, vmfb_bytes))
    y = ctx.modules.module["main"](x)                    # DeviceArray, stays on the device
    z = other.main(y)                                    # passed on without a copy
    z.to_host()                                          # numpy

Names not defined here (HalElementType, BufferUsage, ...) are the stock runtime's.
"""
from hal_driver.iree_runtime_api.benchmark import benchmark_module
from hal_driver.iree_runtime_api.device_array import DeviceArray, asdevicearray
from hal_driver.iree_runtime_api.drivers import (HalDriver, get_device, get_driver,
                                                 get_first_device, query_available_drivers)
from hal_driver.iree_runtime_api.function import FunctionInvoker
from hal_driver.iree_runtime_api.stock import stock as _stock
from hal_driver.iree_runtime_api.system import (TARGET_BACKEND_TO_DRIVER, BoundModule, Config,
                                                SystemContext, create_hal_module,
                                                create_io_parameters_module, load_vm_flatbuffer,
                                                load_vm_flatbuffer_file, load_vm_module,
                                                load_vm_modules)
from hal_driver.iree_runtime_api.vm import VmFunction, VmInstance, VmModule
from hal_driver.io_parameters import ParameterIndex, ParameterIndexEntry, ParameterProvider

__all__ = ["benchmark_module", "DeviceArray", "asdevicearray", "HalDriver", "get_device",
           "get_driver", "get_first_device", "query_available_drivers", "FunctionInvoker",
           "TARGET_BACKEND_TO_DRIVER", "BoundModule", "Config", "SystemContext",
           "create_hal_module", "create_io_parameters_module", "load_vm_flatbuffer",
           "load_vm_flatbuffer_file", "load_vm_module", "load_vm_modules", "VmFunction",
           "VmInstance", "VmModule", "ParameterIndex", "ParameterIndexEntry",
           "ParameterProvider"]


def __getattr__(name: str):
    """Everything else is the stock runtime's (element types, usage bits, ...)."""
    return getattr(_stock, name)
