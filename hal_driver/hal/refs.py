"""The HAL objects as VM refs, and checked access to the refs the `hal` imports
receive (iree_*_check_deref).

The device (hal_driver/device) knows nothing of the VM; this is where its objects
become refs: each class is registered with the VM under IREE's type name.
"""
from typing import Optional, TypeVar

from hal_driver.device.allocator import Allocator
from hal_driver.device.buffer import Buffer
from hal_driver.device.buffer_view import BufferView
from hal_driver.device.command_buffer import CommandBuffer
from hal_driver.device.device import Device
from hal_driver.device.executable import Executable
from hal_driver.device.fence import Fence
from hal_driver.device.file import File
from hal_driver.device.semaphore import Semaphore
from hal_driver.status import StatusCode, StatusError
from hal_driver.vm.ref import ref_type, ref_type_text, register_ref_type

T = TypeVar("T")

REF_TYPES = {Allocator: "hal.allocator", Buffer: "hal.buffer",
             BufferView: "hal.buffer_view", CommandBuffer: "hal.command_buffer",
             Device: "hal.device", Executable: "hal.executable", Fence: "hal.fence",
             File: "hal.file", Semaphore: "hal.semaphore"}
for _cls, _name in REF_TYPES.items():
    register_ref_type(_cls, _name)


def deref(ref, cls: type[T]) -> T:
    """`ref` as a `cls`; null or another type is INVALID_ARGUMENT."""
    if ref.__class__ is cls:
        return ref
    expected = REF_TYPES[cls]
    if ref is None:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"null reference; expected {expected}")
    if ref_type(ref) != expected:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"reference type mismatch; expected {expected} but have "
                          f"{ref_type_text(ref)}")
    return ref


def deref_or_null(ref, cls: type[T]) -> Optional[T]:
    if ref is None or ref.__class__ is cls:     # the common cases, without a second call
        return ref
    return deref(ref, cls)


def vm_bytes(ref) -> memoryview:
    """The contents of a `vm.buffer` ref."""
    if ref is None or ref_type(ref) != "vm.buffer":
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"expected a vm.buffer but have {ref_type_text(ref)}")
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
