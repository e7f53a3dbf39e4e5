"""The IREE VM for .vmfb files, in Python: loader, verifier and bytecode interpreter.

    from hal_driver.vm import BytecodeModule, VmContext, VmBuffer, VmList
    mod = BytecodeModule.from_file(path)          # or .from_bytes(data); fully verified
    ctx = VmContext([hal_native_module, mod])     # resolves imports, runs `__init`
    fn = ctx.lookup_function("module.main")       # StatusError NOT_FOUND if missing
    fn.name, fn.cconv, fn.reflection              # reflection: the export's attributes
    results = ctx.invoke(fn, [args...])           # ints / floats / VmRef -> list

All failures are `hal_driver.status.StatusError`. Modules:
  container.py      .vmfb ZIP container, FlatBuffer and external rodata location
  module_loader.py  FlatBuffer -> plain objects, version and feature checks
  verifier.py       decodes and verifies every function before execution
  opcodes.py        the VM instruction set (bytecode version 17.0)
  handlers.py       instructions -> closures;  values.py  bit-exact scalar math
  interpreter.py    frames, calls, imports, yields;  context.py  VmContext
  buffer.py         VmBuffer (!vm.buffer);  list.py  VmList (!vm.list)
  native_module.py  NativeModule contract for Python-implemented imports
"""
from hal_driver.vm.buffer import VmBuffer
from hal_driver.vm.bytecode_module import BytecodeModule
from hal_driver.vm.context import VmContext, VmFunction
from hal_driver.vm.list import VmList
from hal_driver.vm.native_module import NativeFunction, NativeModule
from hal_driver.vm.ref import VmRef

__all__ = ["BytecodeModule", "VmContext", "VmFunction", "VmBuffer", "VmList",
           "NativeModule", "NativeFunction", "VmRef"]
