"""A model compiled by the stock iree-compile (llvm-cpu) loads and verifies; its
imports are the `hal.*` functions with their calling conventions."""
import io
import zipfile

import pytest

from hal_driver.vm import BytecodeModule, NativeModule, VmBuffer, VmContext, VmRef
from hal_driver.vm.cconv import parse_cconv
from hal_driver.vm.container import parse_archive

LLVM_CPU = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=generic"]


@pytest.fixture(scope="session")
def matmul_vmfb(compile_mlir):
    return compile_mlir.module_file("matmul.mlir", LLVM_CPU)


def test_loads_with_hal_imports(matmul_vmfb):
    module = BytecodeModule.from_file(matmul_vmfb)
    assert module.definition.bytecode_version == (17 << 16) | 0    # IREE 3.13: bytecode 17.0
    assert module.name == "module"
    assert set(module.exported_function_names()) >= {"main", "__init"}
    imports = {i.name: i.signature.cconv for i in module.imports}
    assert all(name.startswith("hal.") for name in imports)
    assert imports["hal.command_buffer.dispatch"] == "0rrIiiiICiDCiirIID_v"
    assert imports["hal.fence.await"] == "0iICrD_i"
    assert imports["hal.executable.create"] == "0rIrrr_r"
    assert imports["hal.buffer_view.create"] == "0rIIiiCID_r"
    main = module.definition.signatures[module.exports["main"]]
    assert main.cconv == "0rr_r"
    assert "tensor<4x8xf32>" in main.attrs["iree.abi.declaration"]
    assert [(d.name, d.minimum_version) for d in module.definition.dependencies] == [("hal", 7)]


def test_external_rodata_is_the_zip_member(matmul_vmfb):
    data = matmul_vmfb.read_bytes()
    archive = parse_archive(data)
    module = BytecodeModule.from_bytes(data)
    assert archive.rodata_offset % 64 == 0
    # The executable binary is stored after the FlatBuffer and is also a ZIP member.
    (elf,) = [bytes(s) for s in module.definition.rodata if bytes(s[:4]) == b"\x7fELF"]
    with zipfile.ZipFile(io.BytesIO(data)) as archive_file:
        members = [archive_file.read(name) for name in archive_file.namelist() if name != "module.fb"]
    assert members == [elf]


def test_context_requires_the_hal_module(matmul_vmfb):
    from hal_driver.status import StatusError
    module = BytecodeModule.from_file(matmul_vmfb)
    with pytest.raises(StatusError):
        VmContext([NativeModule("other"), module])


class _Dummy(VmRef):
    def __init__(self, vm_type: str):
        self.vm_type = vm_type


_RESULT_TYPES = {"devices.get": "hal.device", "device.allocator": "hal.allocator",
                 "buffer_view.buffer": "hal.buffer", "device.queue.alloca": "hal.buffer",
                 "allocator.allocate": "hal.buffer"}
_INT_RESULTS = {"devices.count": 1, "device.query.i64": (1, 1), "fence.await": 0}


def _recording_hal(module, calls: list) -> NativeModule:
    """A stand-in `hal` that records calls and returns placeholder refs."""
    hal = NativeModule("hal", version=7)
    for import_def in module.imports:
        name = import_def.name.partition(".")[2]
        _, results = parse_cconv(import_def.signature.cconv)

        def fn(*args, name=name, results=results):
            calls.append((name, args))
            if name in _INT_RESULTS:
                return _INT_RESULTS[name]
            out = [0 if kind in "iI" else _Dummy(_RESULT_TYPES.get(name, "hal." + name.split(".")[0]))
                   for kind in results]
            return None if not out else out[0] if len(out) == 1 else tuple(out)
        hal.add(name, import_def.signature.cconv, fn)
    return hal


def test_init_and_main_run_against_a_recording_hal(matmul_vmfb):
    module = BytecodeModule.from_file(matmul_vmfb)
    calls = []
    context = VmContext([_recording_hal(module, calls), module])
    created = [args for name, args in calls if name == "executable.create"]
    assert len(created) == 1
    device, affinity, format_buffer, data, constants = created[0]
    assert isinstance(format_buffer, VmBuffer) and bytes(format_buffer.data) == b"embedded-elf-x86_64"
    assert isinstance(data, VmBuffer) and not data.mutable and bytes(data.data[:4]) == b"\x7fELF"
    assert affinity == -1 and constants is None
    # The command buffer is recorded once in __init (variadic spans of bindings).
    (dispatch,) = [args for name, args in calls if name == "command_buffer.dispatch"]
    assert dispatch[-2] == [] and [binding[-1] for binding in dispatch[-1]] == [128, 512, 256]
    calls.clear()
    (result,) = context.invoke(context.lookup_function("module.main"),
                               [_Dummy("hal.buffer_view"), _Dummy("hal.buffer_view")])
    assert result.vm_type == "hal.buffer_view"
    names = [name for name, _ in calls]
    assert "fence.await" in names and "device.queue.execute.indirect" in names
