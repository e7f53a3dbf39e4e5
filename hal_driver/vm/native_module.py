"""Modules implemented in Python that bytecode modules import (e.g. `hal`).

A bytecode import `hal.buffer.assert` with calling convention `0rrrIi_v` resolves to
`NativeModule("hal").functions["buffer.assert"]`. The VM marshals by the cconv:

  i -> int (i32, signed)   I -> int (i64, signed)   f -> float   F -> float
  r -> VmRef or None       C...D (variadic span) -> list of tuples, one tuple per
                           element, each tuple holding that element's fields in order

and calls `fn(*args)`. The function returns None for a `_v` result list, the value
itself for one result, and a tuple for more. It raises `StatusError` to fail; the VM
annotates the error with the calling function. Functions may block (e.g. waiting on a
fence); they run on the caller's thread.
"""
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class NativeFunction:
    name: str
    cconv: str
    fn: Callable


@dataclass
class NativeModule:
    name: str
    version: int = 0
    functions: dict[str, NativeFunction] = field(default_factory=dict)

    def add(self, name: str, cconv: str, fn: Callable) -> None:
        self.functions[name] = NativeFunction(name, cconv, fn)
