"""`BytecodeModule`: a loaded and fully verified .vmfb.

    mod = BytecodeModule.from_file("model.vmfb")   # or .from_bytes(data)
    mod.name, mod.version, mod.exported_function_names(), mod.imports

Loading parses the container, reads the FlatBuffer, checks the bytecode version
(17.0) and feature bits, and verifies every function; any problem is a StatusError.
The module is immutable and may be shared by several VmContexts.
"""
from executable_format.errors import excerpt
from hal_driver.vm.buffer import VmBuffer
from hal_driver.vm.container import parse_archive
from hal_driver.vm.module_loader import load_module_def
from hal_driver.vm.verifier import verify_module


class BytecodeModule:
    def __init__(self, data):
        self._data = data
        self.definition = load_module_def(parse_archive(data))
        self.name = self.definition.name
        self.version = self.definition.version
        self.imports = self.definition.imports
        self.exports = {}
        for export in self.definition.exports:
            self.exports.setdefault(export.name, export.internal_ordinal)
        self._debug_names = self._map_debug_names()
        self.rodata_buffers = [VmBuffer(segment, mutable=False) for segment in self.definition.rodata]
        self.functions, signatures = verify_module(self.definition, self.describe)
        self.internal_cconvs = signatures.internal
        self.import_cconvs = signatures.imports

    @classmethod
    def from_bytes(cls, data) -> "BytecodeModule":
        return cls(data)

    @classmethod
    def from_file(cls, path) -> "BytecodeModule":
        with open(path, "rb") as f:
            return cls(f.read())

    def __repr__(self) -> str:
        return f"BytecodeModule({self.name!r}, {len(self.functions)} functions)"

    def exported_function_names(self) -> list:
        return [export.name for export in self.definition.exports]

    def _map_debug_names(self) -> dict:
        """Internal ordinal -> debug source map index. IREE 3.13 may emit fewer source
        maps than functions; then maps are matched to exports by name."""
        debug = self.definition.debug
        if len(debug.function_names) == len(self.definition.descriptors):
            return {i: i for i in range(len(debug.function_names))}
        by_name = {name: i for i, name in enumerate(debug.function_names) if name}
        return {ordinal: by_name[name] for name, ordinal in self.exports.items() if name in by_name}

    def function_name(self, ordinal: int) -> str:
        for name, internal in self.exports.items():
            if internal == ordinal:
                return name
        index = self._debug_names.get(ordinal)
        if index is not None and self.definition.debug.function_names[index]:
            return excerpt(self.definition.debug.function_names[index])
        return f"<internal {ordinal}>"

    def source_location(self, ordinal: int, offset: int) -> str | None:
        """The source location of the op at bytecode `offset`, when debug info has one."""
        index = self._debug_names.get(ordinal)
        if index is None:
            return None
        best = None
        for op_offset, text in self.definition.debug.locations[index]:
            if op_offset > offset:
                break
            best = text
        return best

    def describe(self, ordinal: int, offset: int) -> str:
        """`module.function+OFFSET (source location)` for messages."""
        site = f"{self.name}.{self.function_name(ordinal)}+{offset:08X}"
        location = self.source_location(ordinal, offset)
        return f"{site} ({location})" if location else site
