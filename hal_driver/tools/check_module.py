"""iree-check-module for npu-sim: runs every exported function of a module compiled from
an IREE e2e op test (check.expect_* ops) as a googletest test case, each in a fresh VM
context on a fresh npu-sim device with IREE's `check` module (hal_driver/check), and
prints googletest's report as the stock tool (tools/iree-check-module-main.cc) does.

    iree-check-module --device=npu-sim --module=x.vmfb [--expect_failure] [--npu_sim_...]

Exit status 0 when every test passes, 1 otherwise. A test fails when one of its checks
does not hold (each failed check is printed with IREE's message) or when its call fails.
Functions named `__*` or containing `$` are skipped; one that takes arguments or returns
results fails the run, as in IREE. `--module` repeats: the last is the module under test,
earlier ones are modules it imports. `--expect_failure`: a run that fails is a success
("Test failed as expected") and one that passes a failure.

Unlike the stock tool, a module that imports a `check` function this module does not
provide (or with another calling convention) is refused: the import is optional, so the
VM would skip the check silently. Other devices: the pinned iree-base-runtime wheel ships
no iree-check-module, so they are refused with an error.

npu-sim flags: `--npu_sim_stats` (per test on stderr: dispatches, how many ran on the
NPU and on the host, NPU cycles), `--npu_sim_dispatch_timeout_ms=N`,
`--npu_sim_machine_<param>=V` (as iree-run-module).
"""
import sys
import time

from hal_driver.check import CheckState, create_check_module
from hal_driver.check.module import MODULE_NAME
from hal_driver.device.driver import create_device
from hal_driver.runtime import BoundModule
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools import gtest_report
from hal_driver.tools.flags import (Flags, apply_device_flags, device_flags, expand_flagfiles,
                                    machine_from_overrides, wants_npu_sim)
from hal_driver.tools.run_module import load_bytecode_module, run_tool
from hal_driver.vm.cconv import parse_cconv

FLAGS = {"device": [], "module": [], "expect_failure": False, "npu_sim_stats": False,
         **device_flags()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_tool(lambda: _main(argv))


def _main(argv: list[str]) -> int:
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
    exit_code, status = run(flags)
    return conclude(flags.expect_failure, exit_code, status)


def conclude(expect_failure: bool, exit_code: int, status: StatusError | None) -> int:
    """The stock tool's last words and exit status."""
    if expect_failure:
        if exit_code == 0:
            print("Test passed but expected failure")
            return 1
        print("Test failed as expected")
        return 0
    if exit_code != 0:
        print(f"Test failed\n{status if status is not None else 'OK'}")
    return exit_code


def run(flags: Flags) -> tuple[int, StatusError | None]:
    """(exit code, the status that stopped the run before its tests, if one did)."""
    try:
        if not flags.module:
            raise StatusError(StatusCode.INVALID_ARGUMENT, "no --module= specified")
        modules = [load_bytecode_module(path) for path in flags.module]
        for module in modules:
            refuse_unprovided_checks(module)
        tests = test_functions(modules[-1])
    except StatusError as status:
        return 1, status
    results = []
    print(gtest_report.header(modules[-1].name, len(tests)), end="", flush=True)
    start = time.perf_counter()
    for name, ordinal in tests:
        results.append(run_test(flags, modules, name, ordinal))
    print(gtest_report.footer(modules[-1].name, results, time.perf_counter() - start),
          end="", flush=True)
    return (1 if any(r.failures for r in results) else 0), None


def refuse_unprovided_checks(module) -> None:
    """Every `check.*` import must bind to this check module with the same calling
    convention: an unresolved optional import would make the VM skip the check."""
    provided = create_check_module(CheckState()).functions
    for imported in module.definition.imports:
        module_name, _, function = imported.name.partition(".")
        if module_name != MODULE_NAME:
            continue
        cconv = imported.signature.cconv
        if function not in provided:
            raise StatusError(StatusCode.NOT_FOUND,
                              f"module `{module.name}` imports `{imported.name}`, which the "
                              f"check module does not provide (it has "
                              f"{', '.join(sorted(provided))}); its checks would be skipped")
        if cconv != provided[function].cconv:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"module `{module.name}` imports `{imported.name}` with calling "
                              f"convention `{cconv}` but the check module's is "
                              f"`{provided[function].cconv}`; its checks would be skipped")


def test_functions(module) -> list[tuple[str, int]]:
    """(name, export ordinal) of the test functions, in export order."""
    tests = []
    for ordinal, export in enumerate(module.definition.exports):
        if export.name.startswith("__") or "$" in export.name:
            continue
        cconv = module.definition.signatures[export.internal_ordinal].cconv
        arguments, results = parse_cconv(cconv)
        if arguments or results:
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"expected function with no inputs or outputs, but export "
                              f"'{export.name}' has signature '{cconv}'")
        tests.append((export.name, ordinal))
    return tests


def run_test(flags: Flags, modules: list, name: str, ordinal: int) -> gtest_report.TestResult:
    """Runs one test in a fresh context on a fresh device, printing its lines."""
    suite = modules[-1].name
    print(gtest_report.test_start(suite, name), end="", flush=True)
    start = time.perf_counter()
    failures = []
    state = CheckState()
    device = create_device(flags.device[0], machine=machine_from_overrides(flags.machine_overrides))
    try:
        apply_device_flags(device, flags)
        bound = BoundModule(modules[-1], device, (create_check_module(state), *modules[:-1]))
        bound.lookup(name).invoke([])
    except StatusError as status:
        failures.append(gtest_report.invoke_failure(status))
    finally:
        statistics = device.statistics.snapshot()
        device.close()
    failures = [gtest_report.check_failure(f.check, f.message) for f in state.failures] + failures
    result = gtest_report.TestResult(suite, name, ordinal, failures, time.perf_counter() - start)
    print(gtest_report.test_end(result), end="", flush=True)
    if flags.npu_sim_stats:
        sys.stderr.write(gtest_report.npu_statistics(result, statistics))
    return result


if __name__ == "__main__":
    sys.exit(main())
