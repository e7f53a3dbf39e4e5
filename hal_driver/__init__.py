"""The npu-sim runtime: runs .vmfb files compiled for the `npu` target (and llvm-cpu ones
retargeted to npu-sim) without the stock runtime, which cannot load a new HAL driver.

Where to start:
  runtime.py          the Python API, shaped like iree.runtime: load_vm_flatbuffer(_file)
  tools/              iree-run-module / iree-benchmark-module / iree-check-module for
                      --device=npu-sim
Layers, each using only those below it:
  iree_runtime_api/   iree.runtime's classes (VmInstance, VmContext, ...) over ours
  hal/                the `hal` VM module: HAL objects become VM refs here
  io_parameters/      the `io_parameters` VM module (parameter archives)
  check/              the `check` VM module of IREE's e2e op tests
  vm/                 the IREE VM: loader, verifier, bytecode interpreter
  device/             the npu-sim HAL device: one file per HAL object
  status.py           StatusError and IREE's status codes, used by every layer
The NPU core itself is C in native/; npu-fb is read through executable_format.
See docs/runtime.md.
"""
