"""`--parameters=[scope=]file.irpa` (iree/tooling/parameter_util.c): one parameter index
per scope, from the files given for it, served by an `io_parameters` module."""
from hal_driver.io_parameters import ParameterIndex, create_io_parameters_module
from hal_driver.vm import NativeModule

MODULE_NAME = "io_parameters"


def needs_parameters(modules) -> bool:
    """Whether any bytecode module depends on the io_parameters module."""
    return any(dependency.name == MODULE_NAME
               for module in modules for dependency in module.definition.dependencies)


def parameters_module(specs: list[str]) -> NativeModule:
    """The io_parameters module for the `--parameters=` values, in order."""
    indices: dict[str, ParameterIndex] = {}
    for spec in specs:
        scope, _, path = spec.rpartition("=")
        indices.setdefault(scope, ParameterIndex()).load(path)
    return create_io_parameters_module([index.create_provider(scope=scope)
                                        for scope, index in indices.items()])
