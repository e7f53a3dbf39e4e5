"""IREE's own VM op tests on our VM: the `.vmasm` files of IREE's
runtime/src/iree/vm/test, assembled with the pinned wheel's `iree-as-module`.

    python -m tests.vm.iree_op_tests DIR        # DIR holds IREE's *.vmasm files

The sources are IREE's and are not part of this repository: copy them from an IREE
checkout of the pinned version into DIR. As IREE's bytecode_module_test does, every
export named `test_*` must return and every `fail_*` must fail, each in a fresh
context. Modules that import `yieldable_test` (async_ops) get `yieldable_test_module`
below: our implementation of the native module IREE's test harness provides
(`yield_n(arg, n)` returns arg + n after yielding n times; `yield_variadic_sum(xs..., n)`
returns sum(xs) + n after yielding n times).
"""
import pathlib
import subprocess
import sys
import tempfile

from hal_driver.status import StatusError
from hal_driver.vm import BytecodeModule, NativeModule, VmContext

IREE_AS_MODULE = pathlib.Path(sys.prefix) / "bin" / "iree-as-module"


def yieldable_test_module() -> NativeModule:
    module = NativeModule("yieldable_test")

    def yield_n(arg: int, count: int):
        for _ in range(max(count, 0)):
            yield
        return arg + max(count, 0)

    def yield_variadic_sum(values, count: int):
        for _ in range(max(count, 0)):
            yield
        return sum(v for (v,) in values) + max(count, 0)

    module.add("yield_n", "0ii_i", yield_n)
    module.add("yield_variadic_sum", "0CiDi_i", yield_variadic_sum)
    return module


def assemble(source: pathlib.Path, out_dir: pathlib.Path) -> bytes:
    out = out_dir / f"{source.stem}.vmfb"
    subprocess.run([str(IREE_AS_MODULE), f"--output={out}", str(source)], check=True,
                   capture_output=True)
    return out.read_bytes()


def run_export(data: bytes, module_name: str, export: str) -> str | None:
    """None if the export behaved (test_* returned, fail_* failed), else why not."""
    context = VmContext([yieldable_test_module(), BytecodeModule.from_bytes(data)])
    invocation = context.begin(context.lookup_function(f"{module_name}.{export}"), [])
    try:
        while not invocation.run():
            pass
    except StatusError as e:
        return None if export.startswith("fail_") else f"failed: {e}"
    return "returned; expected a failure" if export.startswith("fail_") else None


def run_file(source: pathlib.Path, out_dir: pathlib.Path) -> tuple[int, list[str]]:
    """(exports run, problems) of one .vmasm file."""
    data = assemble(source, out_dir)
    module = BytecodeModule.from_bytes(data)
    exports = [n for n in module.exported_function_names()
               if n.startswith(("test_", "fail_"))]
    problems = []
    for export in exports:
        problem = run_export(data, module.name, export)
        if problem:
            problems.append(f"{source.stem}.{export}: {problem}")
    return len(exports), problems


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    sources = sorted(pathlib.Path(sys.argv[1]).glob("*.vmasm"))
    total, problems = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for source in sources:
            count, found = run_file(source, pathlib.Path(tmp))
            total += count
            problems += found
            print(f"{source.stem}: {count - len(found)}/{count}")
    for problem in problems:
        print(problem)
    print(f"{total - len(problems)} of {total} exports behave in {len(sources)} files")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
