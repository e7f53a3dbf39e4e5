"""Python API for running .vmfb files on npu-sim, shaped like `iree.runtime`.

    module = load_vm_flatbuffer_file("model.vmfb")          # driver="npu-sim"
    y = module.main(np.ones((2, 3), np.float32), x2)           # numpy in, numpy out
    module.last_call_stats    # dispatches, npu/host dispatches, npu cycles, times

Arguments are numpy arrays (turned into hal.buffer_views in npu-sim DRAM), Python
numbers for scalar arguments, or hal/VM refs passed through. The program itself
checks its inputs (hal.buffer_view.assert), so a wrong shape or dtype raises the
program's StatusError. Another driver (e.g. "local-task") loads the file with the
stock `iree.runtime` instead.
"""
import time
from dataclasses import dataclass

import numpy as np

from hal_driver.device import element_type as et
from hal_driver.device.buffer_view import BufferView
from hal_driver.device.device import Device
from hal_driver.device.driver import DRIVER_NAME, create_device, is_npu_sim_uri
from hal_driver.device.fence import Fence
from hal_driver.device.memory import BufferUsage, MemoryType
from hal_driver.device.statistics import DeviceStatistics
from hal_driver.hal import create_hal_module
from hal_driver.status import StatusCode, StatusError

INPUT_MEMORY_TYPE = int(MemoryType.DEVICE_LOCAL)
INPUT_USAGE = int(BufferUsage.DEFAULT | BufferUsage.MAPPING)
_ELEMENT_TYPES: dict[np.dtype, int] = {}    # et.from_dtype of each dtype met, made once


@dataclass
class CallStats:
    """What one call did on the device."""
    dispatches: int
    npu_dispatches: int
    host_dispatches: int
    npu_cycles: int
    simulated_seconds: float
    wall_seconds: float
    device: DeviceStatistics


def buffer_view_from_array(device: Device, array: np.ndarray,
                           element_type: int | None = None) -> BufferView:
    """Copies `array` into a new npu-sim buffer; the element type defaults to the
    dtype's (signless for integers, as compiled programs expect)."""
    array = np.asarray(array)   # keeps rank-0 arrays rank 0; any strides (copied once)
    if element_type is None:
        element_type = _ELEMENT_TYPES.get(array.dtype)
        if element_type is None:
            element_type = _ELEMENT_TYPES[array.dtype] = et.from_dtype(array.dtype)
    buffer = device.allocator.allocate(INPUT_MEMORY_TYPE, INPUT_USAGE, array.nbytes,
                                       zeroed=False)
    buffer.view().view(array.dtype).reshape(array.shape)[...] = array
    device.statistics.record_host_transfer(to_device=array.nbytes)
    return BufferView(buffer, array.shape, element_type)


def array_from_buffer_view(device: Device, view: BufferView) -> np.ndarray:
    """A numpy copy of the view's contents (counted as a device-to-host transfer)."""
    array = view.to_numpy()
    device.statistics.record_host_transfer(to_host=array.nbytes)
    return array


class ModuleFunction:
    """One exported function; call it with numpy arrays and numbers."""

    def __init__(self, bound: "BoundModule", name: str, vm_function):
        from hal_driver.vm.cconv import parse_cconv
        self.bound = bound
        self.name = name
        self.vm_function = vm_function
        self.cconv = vm_function.cconv
        self.reflection = dict(getattr(vm_function, "reflection", None) or {})
        self.argument_types, self.result_types = parse_cconv(self.cconv)
        self.is_async = self.reflection.get("iree.abi.model") == "coarse-fences"

    @property
    def declaration(self) -> str:
        return self.reflection.get("iree.abi.declaration", "")

    @property
    def user_argument_types(self) -> tuple:
        """Argument types without the wait/signal fences of the async ABI."""
        return self.argument_types[:-2] if self.is_async else self.argument_types

    def __call__(self, *args):
        if len(args) != len(self.user_argument_types):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{self.name} takes {len(self.user_argument_types)} arguments, "
                              f"{len(args)} given")
        values = [self._to_vm(arg, kind) for arg, kind in zip(args, self.user_argument_types)]
        results = [self._from_vm(self.bound.device, r) for r in self.invoke(values)]
        return None if not results else results[0] if len(results) == 1 else tuple(results)

    def invoke(self, values: list) -> list:
        """Calls with VM values (refs, ints, floats); returns VM values. Records stats."""
        device = self.bound.device
        before, start = device.statistics.snapshot(), time.perf_counter()
        signal = None
        if self.is_async:
            signal = Fence([(device.create_semaphore(0), 1)])
            values = list(values) + [None, signal]
        device.deadline_failure = None
        try:
            results = self.bound.context.invoke(self.vm_function, list(values))
            if signal is not None:
                signal.wait()
        except StatusError as status:
            raise _with_deadline_failure(device, status) from None
        wall = time.perf_counter() - start
        self.bound.last_call = (before, device.statistics.snapshot(), wall)
        return list(results)

    def _to_vm(self, arg, kind):
        if isinstance(arg, np.ndarray) or (kind == "r" and isinstance(arg, list)):
            return buffer_view_from_array(self.bound.device, np.asarray(arg))
        if isinstance(arg, np.generic):
            return arg.item()
        return arg

    @staticmethod
    def _from_vm(device: Device, value):
        return array_from_buffer_view(device, value) if isinstance(value, BufferView) else value


def _with_deadline_failure(device: Device, status: StatusError) -> StatusError:
    """A dispatch stopped at its deadline fails its fences with DEADLINE_EXCEEDED, which
    hal.fence.await reports as a timeout (as IREE's hal module does), so the program fails
    with `DEADLINE_EXCEEDED; failed to wait on timepoint`: the device's record of the
    dispatch (export, deadline, where it stopped) is put in front."""
    failure = device.deadline_failure
    if status.code != StatusCode.DEADLINE_EXCEEDED or failure is None or \
            failure.message in status.message:
        return status
    return StatusError(status.code, f"{failure.message}; {status.message}")


class BoundModule:
    """A loaded module in its own VM context on one npu-sim device."""

    def __init__(self, vm_module, device: Device, dependencies: tuple = ()):
        """`dependencies` are further bytecode modules `vm_module` imports from."""
        from hal_driver.vm import VmContext
        self.vm_module = vm_module
        self.device = device
        self.hal_module = create_hal_module([device])
        self.context = VmContext([self.hal_module, *dependencies, vm_module])
        # (statistics before, statistics after, wall seconds) of the last call
        self.last_call: tuple[DeviceStatistics, DeviceStatistics, float] | None = None
        self._functions: dict[str, ModuleFunction] = {}

    @property
    def function_names(self) -> list[str]:
        return list(self.vm_module.exported_function_names())

    def lookup(self, name: str) -> ModuleFunction:
        if name not in self._functions:
            if name not in self.function_names:
                raise StatusError(StatusCode.NOT_FOUND,
                                  f"no function `{name}` exported by module "
                                  f"`{self.vm_module.name}`")
            vm_function = self.context.lookup_function(f"{self.vm_module.name}.{name}")
            self._functions[name] = ModuleFunction(self, name, vm_function)
        return self._functions[name]

    def __getattr__(self, name: str) -> ModuleFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.lookup(name)
        except StatusError:
            raise AttributeError(f"module `{self.vm_module.name}` exports no function "
                                 f"`{name}`") from None

    def __dir__(self):
        return list(super().__dir__()) + self.function_names

    @property
    def last_call_stats(self) -> CallStats | None:
        """What the last call did on the device (worked out when asked for: most calls
        are never asked)."""
        if self.last_call is None:
            return None
        before, after, wall_seconds = self.last_call
        delta = after.minus(before)
        return CallStats(delta.dispatches, delta.npu_dispatches, delta.host_dispatches,
                         delta.npu_cycles, delta.npu_cycles / self.device.machine.clock_hz,
                         wall_seconds, delta)

    def close(self) -> None:
        self.device.close()


def _npu_sim_device(driver: str, machine, trace: bool, dispatch_timeout_ms) -> Device:
    device = create_device(driver, machine=machine, trace=trace)
    if dispatch_timeout_ms is not None:
        try:
            device.dispatch_timeout_ms = dispatch_timeout_ms
        except StatusError:
            device.close()
            raise
    return device


def load_vm_flatbuffer(data: bytes, driver: str = DRIVER_NAME, *, machine=None,
                       trace: bool = False, dispatch_timeout_ms=None):
    """Loads a .vmfb from memory on `npu-sim` (or an `npu-sim://` device URI); other
    drivers go to the stock iree.runtime. `dispatch_timeout_ms`: the deadline of each NPU
    dispatch (None: the default, 60 s; 0: none), as --npu_sim_dispatch_timeout_ms."""
    if not is_npu_sim_uri(driver):
        import iree.runtime
        return iree.runtime.load_vm_flatbuffer(data, driver=driver)
    from hal_driver.vm import BytecodeModule
    return BoundModule(BytecodeModule.from_bytes(data),
                       _npu_sim_device(driver, machine, trace, dispatch_timeout_ms))


def load_vm_flatbuffer_file(path: str, driver: str = DRIVER_NAME, *, machine=None,
                            trace: bool = False, dispatch_timeout_ms=None):
    if not is_npu_sim_uri(driver):
        import iree.runtime
        return iree.runtime.load_vm_flatbuffer_file(path, driver=driver)
    from hal_driver.vm import BytecodeModule
    return BoundModule(BytecodeModule.from_file(path),
                       _npu_sim_device(driver, machine, trace, dispatch_timeout_ms))
