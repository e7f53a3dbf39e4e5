"""The objects a VM ref register can hold.

Every ref value is a Python object deriving from `VmRef`; `vm_type` is its IREE type
name without the leading `!` (e.g. `hal.buffer`, `vm.buffer`, `vm.list`). The VM checks
a ref against the type the bytecode declares by comparing these names. A null ref is
`None`. Reference counting is Python's own.
"""
from typing import ClassVar


class VmRef:
    vm_type: ClassVar[str] = ""
