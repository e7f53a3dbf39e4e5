"""Checked access to the refs the `hal` imports receive (iree_*_check_deref)."""
from typing import Optional, TypeVar

from hal_driver.status import StatusCode, StatusError

T = TypeVar("T")


def deref(ref, cls: type[T]) -> T:
    """`ref` as a `cls`; null or another type is INVALID_ARGUMENT."""
    if ref is None:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"null reference; expected {cls.vm_type}")
    if getattr(ref, "vm_type", None) != cls.vm_type:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"reference type mismatch; expected {cls.vm_type} but have "
                          f"{getattr(ref, 'vm_type', type(ref).__name__)}")
    return ref


def deref_or_null(ref, cls: type[T]) -> Optional[T]:
    return None if ref is None else deref(ref, cls)


def vm_bytes(ref) -> memoryview:
    """The contents of a `vm.buffer` ref."""
    if ref is None or getattr(ref, "vm_type", None) != "vm.buffer":
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"expected a vm.buffer but have {getattr(ref, 'vm_type', ref)!r}")
    return memoryview(ref.data).cast("B")


def vm_string(ref) -> str:
    return bytes(vm_bytes(ref)).decode("utf-8", errors="replace")


def vm_range(ref, offset: int, length: int) -> memoryview:
    """`length` bytes (-1: to the end) of a vm.buffer at `offset`, range-checked."""
    data = vm_bytes(ref)
    if length == -1:
        length = len(data) - offset
    if offset < 0 or length < 0 or offset + length > len(data):
        raise StatusError(StatusCode.OUT_OF_RANGE,
                          f"byte range out of bounds (requested {offset}-{offset + length - 1} "
                          f"of available {len(data)})")
    return data[offset:offset + length]
