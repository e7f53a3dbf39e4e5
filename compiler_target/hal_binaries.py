"""Edits at the hal phase: put the npu-fb bytes into NPU executables and make the module
select an `npu*` device.

Host-fallback executables keep their llvm-cpu binary (format embedded-elf-x86_64), which
an npu device also accepts, so only the device id query and its status message change.
"""
import numpy as np

from iree.compiler import ir

from compiler_target.executable_sources import NPU_FORMAT, executables, symbol_name

NPU_DEVICE_PATTERN = "npu*"
NPU_MIME_TYPE = "application/x-flatbuffers"


def install_npu_binaries(module, npu_fb_by_executable: dict[str, bytes]) -> None:
    """Replaces the stub binary of each named executable with its npu-fb bytes."""
    with module.context, ir.Location.unknown():
        for executable in executables(module):
            name = symbol_name(executable)
            if name not in npu_fb_by_executable:
                continue
            binary = executable.regions[0].blocks[0].operations[0]
            data = npu_fb_by_executable[name]
            binary.attributes["data"] = _byte_vector(data, f"{name}_npu_fb")
            binary.attributes["format"] = ir.StringAttr.get(NPU_FORMAT)
            binary.attributes["mime_type"] = ir.StringAttr.get(NPU_MIME_TYPE)


def _byte_vector(data: bytes, resource_name: str):
    vector_type = ir.VectorType.get([len(data)], ir.IntegerType.get_signless(8))
    array = np.frombuffer(data, dtype=np.int8)
    return ir.DenseResourceElementsAttr.get_from_buffer(array, resource_name, vector_type)


def select_npu_device(module) -> None:
    """Device selection: `hal.device.id` must match npu* instead of the stock local*."""
    def visit(op):
        if op.name == "hal.device.query" and _string(op, "category") == "hal.device.id":
            op.attributes["key"] = ir.StringAttr.get(NPU_DEVICE_PATTERN)
        elif op.name == "util.status.check_ok" and "message" in op.attributes:
            message = _string(op, "message")
            if '#hal.device.target<"local"' in message:
                op.attributes["message"] = ir.StringAttr.get(
                    message.replace('#hal.device.target<"local"', '#hal.device.target<"npu"'))
        return ir.WalkResult.ADVANCE

    with module.context:
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "util.initializer":
                op.operation.walk(visit)


def _string(op, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value
