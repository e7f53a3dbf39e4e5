"""Edits at the hal phase: put the npu-fb bytes into NPU executables and make the module
select an `npu*` device.

The stock hal phase links the executables of each backend into one (its default,
`--iree-hal-link-executables`; docs/compiler.md): the NPU stubs, all of the vmvx backend,
become one executable (`<module>_linked_vmvx`, variant `npu_fb`) with one export per NPU
dispatch, unless there is only one; the host fallbacks become one llvm-cpu library. So an
npu-fb binary gets the npu-fb of every export the host program looks up in it: one plan's
bytes as they are, or several linked into one npu-fb executable (link_npu_fb), whose
exports the runtime looks up by name like those of a linked llvm-cpu library.

Host-fallback executables keep their llvm-cpu binary (format embedded-elf-x86_64), which
an npu device also accepts, so only the device id query and its status message change.
"""
import numpy as np

from iree.compiler import ir

from compiler_target.errors import CompileError
from compiler_target.executable_sources import NPU_FORMAT, executables, symbol_name
from executable_format.builder import ExecutableBuilder, ProgramBuilder
from executable_format.isa import CONST_POOL, OPCODES
from executable_format.reader import read_executable

NPU_DEVICE_PATTERN = "npu*"
NPU_MIME_TYPE = "application/x-flatbuffers"
# The instructions that address DRAM (isa "dma" layout: a[0] binding, a[1] dram_offset).
_DMA_OPCODES = [info.code for info in OPCODES.values() if info.layout == "dma"]


def install_npu_binaries(module, npu_fb_by_export: dict[str, bytes]) -> None:
    """Replaces the stub binary of each npu-fb executable with the npu-fb of the exports
    looked up in it. `npu_fb_by_export`: export symbol -> its plan's npu-fb, in dispatch
    order (the order of a linked executable's exports)."""
    looked_up = _exports_looked_up(module)
    with module.context, ir.Location.unknown():
        for executable in executables(module):
            name = symbol_name(executable)
            for binary in executable.regions[0].blocks[0].operations:
                if binary.operation.name != "hal.executable.binary" or \
                        _string(binary, "format") != NPU_FORMAT:
                    continue
                variant = symbol_name(binary)
                exports = looked_up.get((name, variant), set())
                if not exports or not exports <= npu_fb_by_export.keys():
                    raise CompileError(
                        f"internal error: npu-fb executable @{name} has exports "
                        f"{sorted(exports)} looked up, not all of them npu dispatches")
                parts = list(dict.fromkeys(  # an executable of several exports: one part
                    data for export, data in npu_fb_by_export.items() if export in exports))
                data = parts[0] if len(parts) == 1 else link_npu_fb(parts)
                binary.attributes["data"] = _byte_vector(data, f"{name}_{variant}")
                binary.attributes["mime_type"] = ir.StringAttr.get(NPU_MIME_TYPE)


def _exports_looked_up(module) -> dict[tuple[str, str], set[str]]:
    """(executable, variant) -> the exports the host program looks up in it (at the hal
    phase, `hal.executable.lookup.function` with entry_point = @executable::@variant::@export)."""
    found: dict[tuple[str, str], set[str]] = {}

    def visit(op):
        if op.name == "hal.executable.lookup.function":
            executable, variant, export = ir.SymbolRefAttr(op.attributes["entry_point"]).value
            found.setdefault((executable, variant), set()).add(export)
        return ir.WalkResult.ADVANCE

    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "hal.executable":
            op.operation.walk(visit)
    return found


def link_npu_fb(parts: list[bytes]) -> bytes:
    """One npu-fb executable with the exports of every part, in order. The parts' constant
    pools are concatenated (each at a 64-byte aligned offset), and each DMA that names the
    constant pool moves by the offset its part's pool got; everything else is copied. The
    parts are the code generator's, verified as they were built; the result is verified."""
    sources = [read_executable(part, verified=True) for part in parts]
    machine, version = sources[0].machine, sources[0].version
    builder = ExecutableBuilder(machine=machine, version=version)
    names = set()
    for executable in sources:
        if (executable.machine, executable.version) != (machine, version):
            raise CompileError("internal error: npu-fb executables for different machines or "
                               "format versions cannot be linked")
        base = builder.add_constants(executable.constants) if executable.constants else 0
        for export in executable.exports:
            if export.name in names:
                raise CompileError(f"internal error: two npu-fb exports named '{export.name}'")
            names.add(export.name)
            debug = export.debug
            parametric = export.parametric
            builder.add_export(
                export.name, [(b.flags, b.min_size) for b in export.bindings],
                export.constant_count, _relocated(export.program, base),
                export.workgroup_count,
                debug=None if debug is None else {"dispatch_name": debug.dispatch_name,
                                                  "source_location": debug.source_location,
                                                  "npu_ir": debug.npu_ir},
                views=[(v.binding, v.offset_constant, v.min_size, v.offset_scale, v.offset_base,
                        v.step_constant, v.step_scale) for v in export.views],
                roofline=export.roofline,
                parametric=None if parametric is None else (parametric.source,
                                                            parametric.dim_constants))
    return builder.finish()


def _relocated(program, pool_offset: int):
    """A ProgramBuilder with the program's instructions, constant pool DMAs moved by
    `pool_offset` bytes."""
    records = program.records().copy()
    if pool_offset:
        in_pool = np.isin(records["opcode"], _DMA_OPCODES) & (records["a"][:, 0] == CONST_POOL)
        offsets = records["a"][in_pool, 1].astype(np.uint64) + pool_offset
        if (offsets >= 1 << 32).any():
            raise CompileError("the linked npu-fb constant pool exceeds 4 GiB")
        records["a"][in_pool, 1] = offsets
    builder = ProgramBuilder(sram_bytes=program.sram_bytes)
    builder.append_records(records)
    return builder


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
