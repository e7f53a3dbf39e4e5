"""Parameters for programs compiled with externalised weights: the `io_parameters`
VM module over parameter indices and .irpa archives.

    index = ParameterIndex(); index.load("weights.irpa")    # or add_buffer / add_splat
    module = create_io_parameters_module([index.create_provider(scope="model")])
    VmContext([hal_module, module, bytecode_module])
"""
from hal_driver.io_parameters.index import ParameterIndex, ParameterIndexEntry, ParameterProvider
from hal_driver.io_parameters.module import create_io_parameters_module

__all__ = ["ParameterIndex", "ParameterIndexEntry", "ParameterProvider",
           "create_io_parameters_module"]
