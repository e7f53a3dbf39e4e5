"""`VmInstance`, `VmModule` and `VmFunction` as iree.runtime names them, over this
project's VM. A `VmModule` made with a stock `VmInstance` is a stock module; one made
here keeps its flatbuffer so a stock context can still load it."""
from dataclasses import dataclass, field

from hal_driver.iree_runtime_api.stock import is_stock, stock
from hal_driver.status import StatusError
from hal_driver.vm import BytecodeModule, NativeModule


class VmInstance:
    """Holds nothing: this VM keeps no per-instance state."""

    def __repr__(self) -> str:
        return "<VmInstance npu-sim>"


@dataclass(frozen=True)
class VmFunction:
    module_name: str
    name: str
    cconv: str
    reflection: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<VmFunction {self.name}({self.cconv}), reflection = {self.reflection}>"


class VmModule:
    def __init__(self, module, flatbuffer: bytes | None = None):
        self.module = module            # BytecodeModule or NativeModule
        self.flatbuffer = flatbuffer    # what a stock instance loads it from

    @staticmethod
    def copy_buffer(instance, buffer) -> "VmModule":
        if is_stock(instance):
            return stock.VmModule.copy_buffer(instance, buffer)
        return VmModule._from_bytes(bytes(buffer), "aligned memory")

    @staticmethod
    def from_buffer(instance, buffer, warn_if_copy: bool = True) -> "VmModule":
        if is_stock(instance):
            return stock.VmModule.from_buffer(instance, buffer, warn_if_copy=warn_if_copy)
        return VmModule._from_bytes(bytes(buffer), "aligned memory")

    @staticmethod
    def from_flatbuffer(instance, buffer, warn_if_copy: bool = True) -> "VmModule":
        if is_stock(instance):
            return stock.VmModule.from_flatbuffer(instance, buffer, warn_if_copy=warn_if_copy)
        return VmModule._from_bytes(bytes(buffer), "aligned memory")

    @staticmethod
    def wrap_buffer(instance, buffer, destroy_callback=None) -> "VmModule":
        if is_stock(instance):
            return stock.VmModule.wrap_buffer(instance, buffer, destroy_callback=destroy_callback)
        return VmModule._released(VmModule._from_bytes(bytes(buffer), "aligned memory"),
                                  destroy_callback)

    @staticmethod
    def mmap(instance, filepath: str, destroy_callback=None) -> "VmModule":
        if is_stock(instance):
            return stock.VmModule.mmap(instance, filepath, destroy_callback=destroy_callback)
        try:
            with open(filepath, "rb") as f:
                data = f.read()
        except OSError as error:
            raise ValueError(f"Error mapping file '{filepath}': {error.strerror}") from None
        return VmModule._released(VmModule._from_bytes(data, "mapped file"), destroy_callback)

    @staticmethod
    def _released(module: "VmModule", destroy_callback) -> "VmModule":
        """The module keeps a copy, so the caller's memory or file is released at once."""
        if destroy_callback is not None:
            destroy_callback()
        return module

    @staticmethod
    def _from_bytes(data: bytes, source: str) -> "VmModule":
        try:
            return VmModule(BytecodeModule.from_bytes(data), data)
        except StatusError as status:
            raise ValueError(f"Error creating vm module from {source}: {status}") from None

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def version(self) -> int:
        return self.module.version

    @property
    def function_names(self) -> list[str]:
        if isinstance(self.module, NativeModule):
            return sorted(self.module.functions)
        return list(self.module.exported_function_names())

    @property
    def stashed_flatbuffer_blob(self):
        return self.flatbuffer

    def lookup_function(self, name: str) -> VmFunction | None:
        if isinstance(self.module, NativeModule):
            native = self.module.functions.get(name)
            return None if native is None else VmFunction(self.name, name, native.cconv)
        if name not in self.module.exports:
            return None
        signature = self.module.definition.signatures[self.module.exports[name]]
        return VmFunction(self.name, name, signature.cconv, dict(signature.attrs))

    def __repr__(self) -> str:
        return f"<VmModule {self.name} : [{', '.join(self.function_names)}]>"


def to_stock_module(module, instance):
    """`module` for a stock context: stock modules as they are, ours from their flatbuffer."""
    if is_stock(module):
        return module
    if module.flatbuffer is None:
        raise ValueError(f"VmModule '{module.name}' was created for npu-sim and cannot be "
                         f"used with another driver")
    return stock.VmModule.copy_buffer(instance, module.flatbuffer)
