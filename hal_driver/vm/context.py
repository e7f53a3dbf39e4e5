"""`VmContext`: module instances linked together, and host calls into them.

    ctx = VmContext([hal_native_module, bytecode_module])
    fn = ctx.lookup_function("module.main")     # NOT_FOUND if missing
    results = ctx.invoke(fn, [1, 2.0, some_ref])  # -> list

Modules are registered in order. For each bytecode module the context checks its
declared dependencies, resolves its imports by fully qualified name against the
modules registered before it (the callee's calling convention must equal the
import's), creates its state (zeroed globals) and runs its `__init` export if any.
`invoke` runs a call to completion; a program that yields (`vm.yield`, or a
native import returning a generator) is resumed until it finishes. `begin` returns
the Invocation for callers that want to interleave work at yield points.
"""
import types
from dataclasses import dataclass, field

from hal_driver.status import StatusCode, StatusError
from hal_driver.vm.bytecode_module import BytecodeModule
from hal_driver.vm.cconv import parse_cconv
from hal_driver.vm.interpreter import (BytecodeTarget, Invocation, NativeTarget, compile_function,
                                       enter_frame, normalize_results, to_register_value)
from hal_driver.vm.native_module import NativeModule

INIT_FUNCTION = "__init"


def _drain(generator):
    """Runs a generator native function to completion; returns its return value."""
    while True:
        try:
            next(generator)
        except StopIteration as stop:
            return stop.value


@dataclass(frozen=True)
class VmFunction:
    """A function the host can invoke. `reflection` holds the export's attributes."""
    name: str                 # fully qualified, e.g. `module.main`
    cconv: str
    reflection: dict = field(default_factory=dict)
    module: object = None     # BytecodeModule or NativeModule
    ordinal: int = -1         # internal ordinal for bytecode functions


class ModuleState:
    """Per-context state of one bytecode module: globals, resolved imports and the
    module's functions compiled into handlers on first use."""

    def __init__(self, module: BytecodeModule):
        definition = module.definition
        self.module = module
        self.rwdata = bytearray(definition.global_bytes)
        self.global_refs = [None] * definition.global_ref_count
        self.imports = [None] * len(definition.imports)
        self._compiled = {}

    def function(self, ordinal: int):
        compiled = self._compiled.get(ordinal)
        if compiled is None:
            compiled = self._compiled[ordinal] = compile_function(self, ordinal)
        return compiled


class VmContext:
    def __init__(self, modules):
        self.modules = []
        self._states = {}
        self.register_modules(modules)

    def register_modules(self, modules) -> None:
        """Registers further modules after those already in the context, in order."""
        for module in modules:
            self._register(module)

    # Registration ----------------------------------------------------------------
    def _find_module(self, name: str):
        for module in self.modules:
            if module.name == name:
                return module
        return None

    def _register(self, module) -> None:
        if not isinstance(module, (NativeModule, BytecodeModule)):
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"cannot register {type(module).__name__} in a VmContext")
        if self._find_module(module.name) is not None:
            raise StatusError(StatusCode.ALREADY_EXISTS, f"a module named `{module.name}` is already registered")
        if isinstance(module, NativeModule):
            self.modules.append(module)
            return
        self._check_dependencies(module)
        state = ModuleState(module)
        for ordinal, import_def in enumerate(module.imports):
            state.imports[ordinal] = self._resolve(module, ordinal, import_def)
        self.modules.append(module)
        self._states[module.name] = state
        if INIT_FUNCTION in module.exports:
            self.invoke(self.lookup_function(f"{module.name}.{INIT_FUNCTION}"), [])

    def _check_dependencies(self, module: BytecodeModule) -> None:
        for dependency in module.definition.dependencies:
            provider = self._find_module(dependency.name)
            if provider is None:
                if dependency.optional:
                    continue
                raise StatusError(StatusCode.NOT_FOUND,
                                  f"module `{module.name}` depends on module `{dependency.name}`, "
                                  f"which is not registered before it")
            if provider.version < dependency.minimum_version:
                raise StatusError(StatusCode.FAILED_PRECONDITION,
                                  f"module `{module.name}` requires `{dependency.name}` version >= "
                                  f"{dependency.minimum_version}, have {provider.version}")

    def _resolve(self, module: BytecodeModule, ordinal: int, import_def):
        name = import_def.name
        expected = import_def.signature.cconv
        module_name, _, function_name = name.partition(".")
        provider = self._find_module(module_name)
        target, actual = None, None
        if isinstance(provider, NativeModule):
            native = provider.functions.get(function_name)
            if native is not None:
                actual = native.cconv
                target = NativeTarget(native, name, parse_cconv(native.cconv)[1])
        elif provider is not None and function_name in provider.exports:
            internal = provider.exports[function_name]
            actual = provider.definition.signatures[internal].cconv
            target = BytecodeTarget(self._states[provider.name], internal, name)
        if target is None:
            if import_def.optional:
                return None
            raise StatusError(StatusCode.NOT_FOUND,
                              f"required import `{name}` (ordinal {ordinal}) of module `{module.name}` not found")
        if expected is not None and actual != expected:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"import `{name}` of module `{module.name}` expects calling convention "
                              f"`{expected}` but the provider has `{actual}`")
        if module.import_cconvs[ordinal] is None:
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"import `{name}` has no valid calling convention")
        return target

    # Calls -----------------------------------------------------------------------
    def lookup_function(self, full_name: str) -> VmFunction:
        module_name, _, function_name = full_name.partition(".")
        module = self._find_module(module_name)
        if isinstance(module, BytecodeModule) and function_name in module.exports:
            ordinal = module.exports[function_name]
            signature = module.definition.signatures[ordinal]
            return VmFunction(full_name, signature.cconv, dict(signature.attrs), module, ordinal)
        if isinstance(module, NativeModule) and function_name in module.functions:
            native = module.functions[function_name]
            return VmFunction(full_name, native.cconv, {}, module)
        raise StatusError(StatusCode.NOT_FOUND, f"function `{full_name}` not found in the context")

    def begin(self, fn: VmFunction, args) -> Invocation:
        """Starts a call of bytecode function `fn`; drive it with `Invocation.run()`."""
        state = self._states.get(getattr(fn.module, "name", None))
        if state is None or state.module is not fn.module:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"function `{fn.name}` is not a bytecode function of this context")
        return Invocation(enter_frame(state.function(fn.ordinal), state, list(args), f"`{fn.name}`"))

    def invoke(self, fn: VmFunction, args) -> list:
        """Calls `fn` with Python ints/floats/VmRefs and returns its results as a list."""
        if isinstance(fn.module, NativeModule):
            return self._invoke_native(fn, list(args))
        invocation = self.begin(fn, args)
        while not invocation.run():
            pass
        return invocation.results

    @staticmethod
    def _invoke_native(fn: VmFunction, args: list) -> list:
        arg_types, result_types = parse_cconv(fn.cconv)
        if len(args) != len(arg_types):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"`{fn.name}` takes {len(arg_types)} arguments, {len(args)} given")
        native = fn.module.functions[fn.name.partition(".")[2]]
        returned = native.fn(*args)
        if isinstance(returned, types.GeneratorType):
            returned = _drain(returned)
        results = normalize_results(returned, result_types, fn.name)
        return [to_register_value(kind, value, f"`{fn.name}` result")
                for kind, value in zip(result_types, results)]
