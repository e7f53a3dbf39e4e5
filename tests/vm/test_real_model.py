"""A model compiled by the stock iree-compile (llvm-cpu) loads and verifies; its
imports are the `hal.*` functions with their calling conventions."""
import io
import zipfile

import pytest

from hal_driver.vm import BytecodeModule, NativeModule, VmContext
from hal_driver.vm.container import parse_archive

LLVM_CPU = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=generic"]


@pytest.fixture(scope="session")
def matmul_vmfb(compile_mlir):
    return compile_mlir.module_file("matmul.mlir", LLVM_CPU)


def test_loads_with_hal_imports(matmul_vmfb):
    module = BytecodeModule.from_file(matmul_vmfb)
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
