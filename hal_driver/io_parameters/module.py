"""The `io_parameters` native module: the imports the 3.13 compiler emits for
externalised parameters (runtime/src/iree/modules/io/parameters/module.c), over
`ParameterProvider`s and npu-sim devices.

  load(device, affinity, wait, signal, scope, target affinity, memory type, usage,
       key_table, key_data, spans) -> list of new buffers, one per span
  gather(device, affinity, wait, signal, scope, target buffer, key_table, key_data, spans)
  scatter(device, affinity, wait, signal, source buffer, scope, key_table, key_data, spans)

key_table holds (u32 offset, u32 length) per span into key_data; spans holds
(u64 parameter offset, u64 buffer offset, u64 length). The transfers are queue reads
and writes of the device, ordered after `wait` and signalling `signal`.
"""
import functools
import struct

from hal_driver.device.buffer import Buffer
from hal_driver.device.device import Device
from hal_driver.device.fence import Fence
from hal_driver.device.file import File
from hal_driver.device.memory import MemoryAccess
from hal_driver.hal.refs import deref, deref_or_null, vm_bytes
from hal_driver.io_parameters.index import ParameterIndexEntry, ParameterProvider
from hal_driver.status import StatusCode, StatusError
from hal_driver.vm.list import VmList
from hal_driver.vm.native_module import NativeModule

MODULE_NAME = "io_parameters"
MODULE_VERSION = 0
EXPORTS = {"gather": "0rIrrrrrrr_v", "load": "0rIrrrIiirrr_r", "scatter": "0rIrrrrrrr_v"}
KEY = struct.Struct("<II")
SPAN = struct.Struct("<QQQ")


def create_io_parameters_module(providers: list[ParameterProvider]) -> NativeModule:
    module = NativeModule(MODULE_NAME, MODULE_VERSION)
    providers = list(providers)
    for name, fn in (("gather", gather), ("load", load), ("scatter", scatter)):
        module.add(name, EXPORTS[name], functools.partial(fn, providers))
    return module


def load(providers, device, queue_affinity, wait, signal, scope, target_affinity, memory_type,
         usage, key_table, key_data, spans):
    device = deref(device, Device)
    provider = _provider(providers, scope)
    requests = _requests(provider, key_table, key_data, spans)
    buffers = [device.allocator.allocate(memory_type, usage, length, zeroed=False)
               for _, _, _, length in requests]
    transfers = [(entry, offset, buffer, 0, length)
                 for (entry, offset, _, length), buffer in zip(requests, buffers)]
    _submit(device, wait, signal, transfers, _read)
    return VmList("hal.buffer", buffers)


def gather(providers, device, queue_affinity, wait, signal, scope, target, key_table, key_data,
           spans):
    device = deref(device, Device)
    transfers = _span_transfers(providers, scope, deref(target, Buffer), key_table, key_data,
                                spans)
    _submit(device, wait, signal, transfers, _read)


def scatter(providers, device, queue_affinity, wait, signal, source, scope, key_table, key_data,
            spans):
    device = deref(device, Device)
    transfers = _span_transfers(providers, scope, deref(source, Buffer), key_table, key_data,
                                spans)
    for entry, *_ in transfers:
        if not entry.writable:
            raise StatusError(StatusCode.PERMISSION_DENIED,
                              f"parameter `{entry.key}` is read-only; cannot scatter into it")
    _submit(device, wait, signal, transfers, _write)


def _span_transfers(providers, scope, buffer, key_table, key_data, spans) -> list:
    """(entry, entry offset, buffer, buffer offset, length) of each span of a gather or
    scatter between the scope's parameters and one buffer."""
    provider = _provider(providers, scope)
    return [(entry, offset, buffer, buffer_offset, length) for entry, offset, buffer_offset,
            length in _requests(provider, key_table, key_data, spans)]


def _provider(providers, scope) -> ParameterProvider:
    name = bytes(vm_bytes(scope)).decode() if scope is not None else ""
    for provider in providers:
        if provider.handles(name):
            return provider
    raise StatusError(StatusCode.NOT_FOUND,
                      f"no provider registered that handles scopes like '{name}'")


def _requests(provider, key_table, key_data, spans) -> list:
    """(entry, parameter offset, buffer offset, length) per span, ranges checked."""
    table, keys, spans = vm_bytes(key_table), vm_bytes(key_data), vm_bytes(spans)
    if len(spans) % SPAN.size:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          "buffer span storage must be aligned to iree_io_parameters_span_entry_t")
    count = len(spans) // SPAN.size
    if len(table) < count * KEY.size:
        raise StatusError(StatusCode.INVALID_ARGUMENT, "key string table must have enough data "
                          "to service all defined spans")
    requests = []
    for i in range(count):
        key_offset, key_length = KEY.unpack_from(table, i * KEY.size)
        if key_offset + key_length > len(keys):
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"attempted to access an address outside of the valid buffer range "
                              f"(offset={key_offset}, length={key_length}, "
                              f"data_capacity={len(keys)})")
        key = bytes(keys[key_offset:key_offset + key_length]).decode()
        parameter_offset, buffer_offset, length = SPAN.unpack_from(spans, i * SPAN.size)
        entry = provider.index.lookup(key)
        if parameter_offset + length > entry.length:
            raise StatusError(StatusCode.OUT_OF_RANGE,
                              f"parameter `{key}` range [{parameter_offset}, "
                              f"{parameter_offset + length}) is out of its {entry.length} bytes")
        requests.append((entry, parameter_offset, buffer_offset, length))
    return requests


def _read(device, waits, signals, entry: ParameterIndexEntry, offset, buffer, buffer_offset,
          length):
    device.queue_read(waits, signals, File(entry.read(offset, length), MemoryAccess.READ), 0,
                      buffer, buffer_offset, length)


def _write(device, waits, signals, entry: ParameterIndexEntry, offset, buffer, buffer_offset,
           length):
    device.queue_write(waits, signals, buffer, buffer_offset,
                       File(entry.contents(), MemoryAccess.READ | MemoryAccess.WRITE),
                       offset, length)


def _timepoints(fence) -> list:
    fence = deref_or_null(fence, Fence)
    return fence.timepoints if fence else []


def _submit(device, wait, signal, transfers: list, transfer) -> None:
    """One queue operation per transfer, in order: the first waits on `wait`, the last
    signals `signal` (the queue runs them in submission order)."""
    waits = _timepoints(wait)
    signals = _timepoints(signal)
    if not transfers:
        device.queue_barrier(waits, signals)
        return
    for i, args in enumerate(transfers):
        last = i == len(transfers) - 1
        transfer(device, waits if i == 0 else [], signals if last else [], *args)
