"""iree-check-module for npu-sim: runs every exported function of a module compiled from
an IREE e2e op test (check.expect_* ops) as a test case, each in a fresh context on a
fresh npu-sim device, with IREE's `check` module (hal_driver/check), and prints
googletest's report as the stock tool does. Exit status 0 when every test passes.

    iree-check-module --device=npu-sim --module=x.vmfb [--npu_sim_...]

A test fails when it records a failed expectation or when its call fails. Functions
named `__*` or containing `$` are skipped; one that takes arguments or returns results
is an error, as in IREE. A module that imports a `check` function this module does not
provide is refused: an unresolved optional import would silently skip the check.
`--expect_failure` inverts the exit status (every test must fail). Other devices: the
pinned wheels ship no iree-check-module, so they are refused with a clear error.
"""
import sys
import time

from hal_driver.check import CheckState, create_check_module
from hal_driver.check.module import EXPORTS, MODULE_NAME
from hal_driver.device.driver import create_device
from hal_driver.runtime import BoundModule
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools.flags import (Flags, apply_device_flags, device_flags, expand_flagfiles,
                                    machine_from_overrides, wants_npu_sim)
from hal_driver.tools.run_module import annotate, report

FLAGS = {"device": [], "module": [], "expect_failure": False, **device_flags()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        argv = expand_flagfiles(argv, FLAGS)
        if "--help" in argv:
            print(__doc__)
            return 0
        if not wants_npu_sim(argv):
            raise StatusError(StatusCode.UNIMPLEMENTED,
                              "this iree-check-module runs --device=npu-sim only; the pinned "
                              "iree-base-runtime wheel ships no iree-check-module for other "
                              "devices")
        flags = Flags(argv, FLAGS)
        failed = run_tests(flags)
        return int(not failed) if flags.expect_failure else int(bool(failed))
    except StatusError as status:
        return report(status)


def load_tests(flags: Flags):
    """The bytecode module and its test functions (export names)."""
    from hal_driver.vm import BytecodeModule
    if len(flags.module) != 1:
        raise StatusError(StatusCode.INVALID_ARGUMENT, "exactly one --module= is required")
    path = flags.module[0]
    try:
        module = BytecodeModule.from_file(path)
    except OSError as error:
        raise StatusError(StatusCode.NOT_FOUND,
                          f"failed to open file '{path}': {error.strerror}") from None
    except StatusError as status:
        raise annotate(status, f"loading bytecode module at '{path}'") from None
    _refuse_unknown_checks(module)
    tests = [name for name in module.exported_function_names()
             if not name.startswith("__") and "$" not in name]
    return module, tests


def _refuse_unknown_checks(module) -> None:
    prefix = MODULE_NAME + "."
    for imported in module.definition.imports:
        if imported.name.startswith(prefix) and imported.name[len(prefix):] not in EXPORTS:
            raise StatusError(StatusCode.NOT_FOUND,
                              f"module imports `{imported.name}`, which the check module does "
                              f"not provide (it has {', '.join(sorted(EXPORTS))}); the check "
                              f"would be skipped")


def run_tests(flags: Flags) -> list[str]:
    """Runs every test, printing googletest's report; returns the failed tests' names."""
    module, tests = load_tests(flags)
    suite = module.name
    print(f"[==========] Running {len(tests)} tests from 1 test suite.")
    print("[----------] Global test environment set-up.")
    print(f"[----------] {len(tests)} tests from {suite}")
    failed, start = [], time.perf_counter()
    for name in tests:
        print(f"[ RUN      ] {suite}.{name}", flush=True)
        test_start = time.perf_counter()
        failures = run_test(flags, module, name)
        milliseconds = int((time.perf_counter() - test_start) * 1000)
        for failure in failures:
            print(f"Failure\n{failure}")
        if failures:
            failed.append(f"{suite}.{name}")
            print(f"[  FAILED  ] {suite}.{name} ({milliseconds} ms)")
        else:
            print(f"[       OK ] {suite}.{name} ({milliseconds} ms)")
    total = int((time.perf_counter() - start) * 1000)
    print(f"[----------] {len(tests)} tests from {suite} ({total} ms total)\n")
    print("[----------] Global test environment tear-down")
    print(f"[==========] {len(tests)} tests from 1 test suite ran. ({total} ms total)")
    print(f"[  PASSED  ] {len(tests) - len(failed)} tests.")
    if failed:
        print(f"[  FAILED  ] {len(failed)} tests, listed below:")
        for name in failed:
            print(f"[  FAILED  ] {name}")
        print(f"\n {len(failed)} FAILED TESTS")
    return failed


def run_test(flags: Flags, module, name: str) -> list[str]:
    """The failures of one test function, run in a fresh context on a fresh device."""
    state = CheckState()
    device = create_device(flags.device[0], machine=machine_from_overrides(flags.machine_overrides))
    try:
        apply_device_flags(device, flags)
        bound = BoundModule(module, device, (create_check_module(state),))
        function = bound.lookup(name)
        if function.argument_types or function.result_types:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"expected function with no inputs or outputs, but export "
                              f"'{name}' has signature '{function.vm_function.cconv}'")
        function.invoke([])
    except StatusError as status:
        state.failures.append(f"Value of: iree_vm_invoke(...)\n{status}")
    finally:
        device.close()
    return state.failures


if __name__ == "__main__":
    sys.exit(main())
