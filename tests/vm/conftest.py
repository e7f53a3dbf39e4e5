"""Shared helpers: compile VM-dialect MLIR at test time (cached per session) and
run the result on our VM and on the stock iree.runtime."""
import hashlib
import pathlib
import subprocess
import sys

import pytest

from hal_driver.vm import BytecodeModule, VmContext

BIN = pathlib.Path(sys.executable).parent
VM_FLAGS = ["--compile-mode=vm", "--iree-vm-target-extension-f32=true",
            "--iree-vm-target-extension-f64=true"]
SOURCES = pathlib.Path(__file__).parent / "modules"


class Compiler:
    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        self.cache = {}

    def __call__(self, source: str, flags=VM_FLAGS) -> pathlib.Path:
        key = hashlib.sha256((source + "\0".join(flags)).encode()).hexdigest()[:16]
        if key not in self.cache:
            mlir = self.directory / f"{key}.mlir"
            mlir.write_text(source)
            out = self.directory / f"{key}.vmfb"
            done = subprocess.run([str(BIN / "iree-compile"), *flags, str(mlir), "-o", str(out)],
                                  capture_output=True, text=True)
            if done.returncode:
                raise AssertionError(f"iree-compile failed for {mlir}:\n{done.stderr[-4000:]}")
            self.cache[key] = out
        return self.cache[key]

    def module_file(self, name: str, flags=VM_FLAGS) -> pathlib.Path:
        return self(SOURCES.joinpath(name).read_text(), flags)


@pytest.fixture(scope="session")
def compile_mlir(tmp_path_factory) -> Compiler:
    return Compiler(tmp_path_factory.mktemp("vm_modules"))


def run_ours(path, function: str, args, extra_modules=()):
    module = BytecodeModule.from_file(path)
    context = VmContext([*extra_modules, module])
    return context.invoke(context.lookup_function(f"{module.name}.{function}"), args)


class IreeRunner:
    """Runs exported functions of one vmfb on the stock iree.runtime."""

    def __init__(self, path):
        import iree.runtime as rt
        self.rt = rt
        self.instance = rt.VmInstance()
        self.module = rt.VmModule.mmap(self.instance, str(path))
        self.context = rt.VmContext(self.instance, modules=[self.module])

    def __call__(self, function: str, args, types: str) -> list:
        rt = self.rt
        arguments = rt.VmVariantList(len(args))
        for value, kind in zip(args, types):
            if kind in "fF":
                arguments.push_float(value)
            else:
                arguments.push_int(value)
        results = rt.VmVariantList(8)
        self.context.invoke(self.module.lookup_function(function), arguments, results)
        return [results.get_variant(i) for i in range(results.size)]
