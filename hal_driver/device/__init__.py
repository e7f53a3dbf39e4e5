"""The npu-sim HAL device, one file per HAL object as IREE's null driver does.

Where to start: driver.py (create_device from a URI) and device.py (the device: its
allocator, executable cache, queue and NPU core).
  driver.py              npu-sim URIs and flags -> Device
  device.py              the device: queue operations, dispatch to NPU core or host
  allocator.py           DRAM allocation and accounting
  buffer.py              buffers and allocations (guard-paged storage)
  buffer_view.py         shape + element type + encoding over a buffer
  command_buffer.py      recorded commands replayed by the queue
  queue.py               the in-order queue and its worker thread
  semaphore.py, fence.py timeline semaphores and fences
  file.py                hal.file over host memory
  executable_cache.py    prepares executables by format
  executable.py          npu-fb executables (NPU core) and host executables (CPU)
  executable_specialiser.py  parametric npu-fb exports specialised per extents
  host_library.py     llvm-cpu libraries through native/host_dispatch.c
  npu_core.py            the NPU core: native/npu_core.c through cffi
  statistics.py, trace.py  dispatch counts, cycles, Chrome traces
  element_type.py, memory.py  HAL element types, memory types and usage bits
"""
