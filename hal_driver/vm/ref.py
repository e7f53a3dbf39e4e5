"""The objects a VM ref register can hold, and their IREE type names.

A ref value is a Python object whose type has an IREE type name without the leading
`!` (e.g. `hal.buffer`, `vm.buffer`, `vm.list`): the VM's own objects derive from
`VmRef` and name their type in `vm_type`; objects defined outside the VM (the HAL
device's buffers, fences, ...) know nothing of it, and the module that hands them to
programs registers their type names (`register_ref_type`, done by the hal module). The
VM checks a ref against the type the bytecode declares by comparing names. A null ref
is `None`. Reference counting is Python's own.
"""
from typing import ClassVar


class VmRef:
    """Base of the VM's own ref objects."""
    vm_type: ClassVar[str] = ""


_REGISTERED: dict[type, str | None] = {}
# Classes ref_type has found to be refs (a class never stops being one): the VM checks
# a value's class against this set before calling ref_type.
REF_CLASSES: set[type] = set()


def register_ref_type(cls: type, name: str) -> None:
    """Makes instances of `cls` (and of its subclasses) refs of IREE type `name`."""
    _REGISTERED[cls] = name
    for known in [k for k, v in _REGISTERED.items() if v is None]:
        del _REGISTERED[known]          # forget cached negatives: they may be refs now


def ref_type(value) -> str | None:
    """The IREE type name of a ref value, or None if `value` is not a ref."""
    if isinstance(value, VmRef):
        REF_CLASSES.add(type(value))
        return value.vm_type
    cls = type(value)
    try:
        name = _REGISTERED[cls]
    except KeyError:
        name = next((_REGISTERED[base] for base in cls.__mro__[1:]
                     if _REGISTERED.get(base)), None)
        _REGISTERED[cls] = name         # subclasses resolve once
    if name is not None:
        REF_CLASSES.add(cls)
    return name


def ref_type_text(value) -> str:
    """A ref's type name for messages; a non-ref's Python type."""
    return ref_type(value) or type(value).__name__
