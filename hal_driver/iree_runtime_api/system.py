"""`Config`, `SystemContext` and the `load_vm_*` helpers of iree.runtime's system API.
`Config("npu-sim")` (or a config whose device is an npu-sim device) runs here; any other
config is the stock runtime's, and the SystemContext made with it is the stock one."""
from hal_driver.device.device import Device
from hal_driver.device.driver import is_npu_sim_uri
from hal_driver.hal import create_hal_module as create_npu_hal_module
from hal_driver.io_parameters import ParameterProvider
from hal_driver.io_parameters import create_io_parameters_module as create_npu_io_module
from hal_driver.iree_runtime_api.drivers import get_device
from hal_driver.iree_runtime_api.function import FunctionInvoker
from hal_driver.iree_runtime_api.parameters import to_stock_provider
from hal_driver.iree_runtime_api.stock import is_stock, stock
from hal_driver.iree_runtime_api.vm import VmInstance, VmModule, to_stock_module
from hal_driver.status import StatusError
from hal_driver.vm import VmContext

TARGET_BACKEND_TO_DRIVER = stock.TARGET_BACKEND_TO_DRIVER


class Config:
    """npu-sim when `driver_name` starts with npu-sim or `device` is an npu-sim device;
    otherwise a stock `iree.runtime.Config`."""

    def __new__(cls, driver_name: str | None = None, *, device=None):
        if device is not None and driver_name is not None:
            raise ValueError("Either 'device' or 'driver_name' can be specified (not both)")
        ours = isinstance(device, Device) or (
            driver_name is not None and is_npu_sim_uri(driver_name.split(",")[0].strip()))
        if not ours:
            return stock.Config(driver_name, device=device)
        return super().__new__(cls)

    def __init__(self, driver_name: str | None = None, *, device=None):
        self.device = device if device is not None else get_device(driver_name.split(",")[0])
        self.vm_instance = VmInstance()
        self.default_vm_modules = (create_hal_module(self.vm_instance, self.device),)


def create_hal_module(instance, device=None, devices=None, debug_sink=None):
    if is_stock(instance) or is_stock(device) or any(is_stock(d) for d in devices or ()):
        return stock.create_hal_module(instance, device=device, devices=devices,
                                       debug_sink=debug_sink)
    devices = list(devices or ()) + ([device] if device is not None else [])
    if not devices:
        raise ValueError("At least one device must be specified")
    return VmModule(create_npu_hal_module(devices))


def create_io_parameters_module(instance, *providers):
    if is_stock(instance):
        return stock.create_io_parameters_module(
            instance, *[to_stock_provider(p) for p in providers])
    for provider in providers:
        if not isinstance(provider, ParameterProvider):
            raise TypeError(f"expected a ParameterProvider, got {type(provider).__name__}")
    return VmModule(create_npu_io_module(list(providers)))


class BoundModule:
    """A module of a SystemContext; `module["f"]` / `module.f` are its functions."""

    def __init__(self, context: "SystemContext", vm_module: VmModule):
        self._context = context
        self._vm_module = vm_module
        self._lazy_functions = {}

    @property
    def name(self) -> str:
        return self._vm_module.name

    @property
    def vm_module(self) -> VmModule:
        return self._vm_module

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name)

    def __getitem__(self, name):
        invoker = self._lazy_functions.get(name)
        if invoker is None:
            vm_function = self._vm_module.lookup_function(name)
            if vm_function is None:
                raise KeyError(f"Function '{name}' not found in module '{self}'")
            invoker = self._lazy_functions[name] = FunctionInvoker(
                self._context.vm_context, self._context.config.device, vm_function)
        return invoker

    def __repr__(self) -> str:
        return f"<BoundModule {self._vm_module!r}>"


class BoundModules(dict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name)


class SystemContext:
    """Modules linked in one VM context on the config's device."""

    def __new__(cls, vm_modules=None, config=None):
        config = config if config is not None else Config()
        if is_stock(config):
            modules = None if vm_modules is None else [
                to_stock_module(m, config.vm_instance) for m in vm_modules]
            return stock.SystemContext(vm_modules=modules, config=config)
        return super().__new__(cls)

    def __init__(self, vm_modules=None, config=None):
        self._config = config
        self._is_dynamic = vm_modules is None
        self._bound_modules = BoundModules()
        self._vm_context = VmContext([])
        self._register(config.default_vm_modules)
        if vm_modules is not None:
            self._register(vm_modules)

    @property
    def vm_context(self) -> VmContext:
        return self._vm_context

    @property
    def is_dynamic(self) -> bool:
        return self._is_dynamic

    @property
    def config(self) -> Config:
        return self._config

    @property
    def instance(self) -> VmInstance:
        return self._config.vm_instance

    @property
    def modules(self) -> BoundModules:
        return self._bound_modules

    def add_vm_modules(self, vm_modules) -> None:
        assert self._is_dynamic, "Cannot 'add_module' on a static context"
        for module in vm_modules:
            if module.name in self._bound_modules:
                raise ValueError(f"Attempt to register duplicate VmModule: '{module.name}'")
        self._register(vm_modules)

    def add_vm_module(self, vm_module) -> None:
        self.add_vm_modules((vm_module,))

    def _register(self, vm_modules) -> None:
        for module in vm_modules:
            if not isinstance(module, VmModule):
                raise ValueError(f"VmModule '{module.name}' belongs to another runtime; create "
                                 f"it with the npu-sim Config's vm_instance")
            try:
                self._vm_context.register_modules([module.module])
            except StatusError as status:
                raise ValueError(f"Error registering modules: {status}") from None
            self._bound_modules[module.name] = BoundModule(self, module)


def load_vm_modules(*vm_modules, config=None):
    context = SystemContext(vm_modules=vm_modules, config=config)
    return [context.modules[m.name] for m in vm_modules]


def load_vm_module(vm_module, config=None):
    return load_vm_modules(vm_module, config=config)[0]


def _create_config(*, driver=None, backend=None):
    if driver is None and backend is None:
        raise ValueError("Either 'driver' or 'backend' must be specified, but got "
                         "'None' for both.")
    if backend is not None and driver is not None:
        raise ValueError("Cannot specify both 'driver' and a 'backend' to infer the driver from.")
    return Config(driver if driver is not None else TARGET_BACKEND_TO_DRIVER[backend])


def load_vm_flatbuffer(vm_flatbuffer: bytes, *, driver=None, backend=None):
    config = _create_config(driver=driver, backend=backend)
    return load_vm_module(VmModule.copy_buffer(config.vm_instance, vm_flatbuffer), config)


def load_vm_flatbuffer_file(path: str, *, driver=None, backend=None, destroy_callback=None):
    config = _create_config(driver=driver, backend=backend)
    module = VmModule.mmap(config.vm_instance, str(path), destroy_callback=destroy_callback)
    return load_vm_module(module, config)
