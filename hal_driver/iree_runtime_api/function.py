"""`FunctionInvoker`: calls one exported function the way iree.runtime's does.

Arguments are numpy arrays or other array-likes (copied into npu-sim memory),
DeviceArrays (passed as they are, no copy), Python numbers, lists (a `vm.list`) or VM
refs; buffer view results come back as DeviceArrays that stay on the device. A failing
call raises ValueError("Error invoking function: <status>"), as the stock runtime does."""
import numpy as np

from hal_driver.device.buffer_view import BufferView
from hal_driver.iree_runtime_api.device_array import DeviceArray
from hal_driver.runtime import buffer_view_from_array
from hal_driver.status import StatusError
from hal_driver.vm import VmList
from hal_driver.vm.ref import ref_type


class FunctionInvoker:
    def __init__(self, vm_context, device, vm_function):
        self._vm_context = vm_context     # hal_driver.vm.VmContext
        self._device = device
        self._vm_function = vm_function

    @property
    def vm_function(self):
        return self._vm_function

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise ValueError("keyword arguments need the function's iree.abi reflection, "
                             "which this module does not have")
        function = self._vm_context.lookup_function(
            f"{self._vm_function.module_name}.{self._vm_function.name}")
        values = [self._to_vm(arg) for arg in args]
        try:
            results = self._vm_context.invoke(function, values)
        except StatusError as status:
            raise ValueError(f"Error invoking function: {status}") from None
        results = [self._from_vm(value) for value in results]
        return None if not results else results[0] if len(results) == 1 else tuple(results)

    def _to_vm(self, arg):
        if isinstance(arg, DeviceArray):
            return arg.buffer_view
        if arg is None or isinstance(arg, (int, float)) or ref_type(arg) is not None:
            return arg
        if isinstance(arg, (list, tuple)):
            return VmList("?", [self._to_vm(item) for item in arg])
        array = np.asarray(arg)    # numpy values and other array-likes (copied to the device)
        return buffer_view_from_array(self._device,
                                      array.astype(np.int8) if array.dtype == bool else array)

    def _from_vm(self, value):
        if isinstance(value, BufferView):
            return DeviceArray(self._device, value, implicit_host_transfer=True)
        return value

    def __repr__(self) -> str:
        return repr(self._vm_function)
