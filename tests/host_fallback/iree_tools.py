"""Test helpers: compile MLIR with the stock llvm-cpu backend and read what the host
program does with the result (which exports it dispatches, over which grid)."""
import dataclasses
import pathlib
import re
import subprocess
import sys
import zipfile

import iree.compiler

IREE_COMPILE = pathlib.Path(sys.prefix) / "bin" / "iree-compile"
IREE_LLD = pathlib.Path(iree.compiler.__file__).parent / "_mlir_libs" / "iree-lld"

# Portable x86-64 fallback code (see docs/host-fallback.md).
LLVM_CPU_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=x86-64-v2",
]
SYSTEM_ELF_FLAGS = ["--iree-llvmcpu-link-embedded=false"]
SYSTEM_ELF_IREE_LLD_FLAGS = SYSTEM_ELF_FLAGS + [
    f"--iree-llvmcpu-system-linker-path={IREE_LLD} -flavor gnu"]

_FORMAT_SUFFIXES = {
    "_embedded_elf_x86_64.so": "embedded-elf-x86_64",
    "_system_elf_x86_64.so": "system-elf-x86_64",
}


@dataclasses.dataclass
class Dispatch:
    """One `hal.command_buffer.dispatch` of the host program with static operands."""
    export_name: str
    workgroup_count: tuple[int, int, int]
    constants: list[int]
    binding_lengths: list[int]  # bytes of each binding range the program passes


@dataclasses.dataclass
class Compiled:
    executables: dict[str, tuple[str, bytes]]  # vmfb file name -> (format, bytes)
    dispatches: list[Dispatch]

    def only_executable(self) -> tuple[str, bytes]:
        assert len(self.executables) == 1, list(self.executables)
        return next(iter(self.executables.values()))


def compile_mlir(source: str, workdir: pathlib.Path, extra_flags=()) -> Compiled:
    """Compiles `source` to a vmfb and to VM MLIR (for the host program)."""
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / "input.mlir"
    src.write_text(source)
    flags = LLVM_CPU_FLAGS + list(extra_flags)
    vmfb = workdir / "module.vmfb"
    vm_mlir = workdir / "module.vm.mlir"
    _run([IREE_COMPILE, src, *flags, "-o", vmfb])
    _run([IREE_COMPILE, src, *flags, "--compile-to=vm", "-o", vm_mlir])
    return Compiled(extract_executables(vmfb), static_dispatches(vm_mlir.read_text()))


def _run(args) -> None:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]


def extract_executables(vmfb: pathlib.Path) -> dict[str, tuple[str, bytes]]:
    """The executable binaries stored in the vmfb ZIP, keyed by member name."""
    executables = {}
    with zipfile.ZipFile(vmfb) as archive:
        for name in archive.namelist():
            for suffix, format in _FORMAT_SUFFIXES.items():
                if name.endswith(suffix):
                    executables[name] = (format, archive.read(name))
    return executables


_RODATA_STRING = re.compile(r'vm\.rodata private @(\S+) <[^>]*> "([^"]*)"')
_CONST_INT = re.compile(r"(%\S+) = vm\.const\.i(?:32|64) (-?\d+)")
_CONST_ZERO = re.compile(r"(%\S+) = vm\.const\.i(?:32|64)\.zero")
_CONST_RODATA = re.compile(r"(%\S+) = vm\.const\.ref\.rodata @(\S+) ")
_LOOKUP = re.compile(
    r"(%\S+) = vm\.call @hal\.executable\.lookup\.function\(%[^,]+, (%[^)]+)\)")
_DISPATCH = re.compile(
    r"vm\.call\.variadic @hal\.command_buffer\.dispatch\("
    r"%[^,]+, %[^,]+, (%[^,]+), (%[^,]+), (%[^,]+), (%[^,]+), %[^,]+, "
    r"\[([^\]]*)\], \[([^\]]*)\]")
# (ordinal, binding table slot, buffer, offset, length)
_BINDING_LENGTH = re.compile(r"\(%[^,]+, %[^,]+, %[^,]+, %[^,]+, (%[^)]+)\)")


def static_dispatches(vm_mlir: str) -> list[Dispatch]:
    """Dispatches of the host program, in order, whose operands are all constants.

    The program looks the function id up by export name
    (`hal.executable.lookup.function`) and passes that id to
    `hal.command_buffer.dispatch` with the workgroup count and push constants.
    """
    strings = dict(_RODATA_STRING.findall(vm_mlir))
    dispatches = []
    for function in vm_mlir.split("vm.func ")[1:]:
        values = {name: int(v) for name, v in _CONST_INT.findall(function)}
        values.update({name: 0 for name in _CONST_ZERO.findall(function)})
        refs = {name: strings.get(sym) for name, sym in _CONST_RODATA.findall(function)}
        lookups = {name: refs[ref] for name, ref in _LOOKUP.findall(function)}
        for fid, x, y, z, constants, bindings in _DISPATCH.findall(function):
            operands = [c.strip() for c in constants.split(",") if c.strip()]
            lengths = _BINDING_LENGTH.findall(bindings)
            if all(v in values for v in (x, y, z, *operands, *lengths)):
                dispatches.append(Dispatch(
                    lookups[fid], (values[x], values[y], values[z]),
                    [values[c] for c in operands], [values[n] for n in lengths]))
    return dispatches
