"""iree-run-module for npu-sim: `--device=npu-sim` runs here with the stock tool's
flags and output; any other device execs the stock `iree-run-module` unchanged.

Extra flags: `--npu_sim_machine_<param>=V` (machine overrides), `--npu_sim_trace=FILE.json`
(Chrome trace of NPU dispatches), `--npu_sim_stats` (dispatch and cycle counts on stderr),
`--npu_sim_dispatch_timeout_ms=N` (wall-clock deadline of each NPU dispatch, 0: none;
past it the dispatch fails with DEADLINE_EXCEEDED).

Ctrl-C (SIGINT) stops a running NPU dispatch within milliseconds and ends the process as
it ends the stock tool: killed by SIGINT (exit status 130 in a shell), no traceback.
"""
import gc
import os
import signal
import subprocess
import sys

from hal_driver.device.driver import (DRIVER_DESCRIPTION, DRIVER_NAME, create_device,
                                      enumerate_devices)
from hal_driver.runtime import BoundModule, buffer_view_from_array
from hal_driver.status import StatusCode, StatusError
from hal_driver.tools.buffer_view_text import HostTensor
from hal_driver.tools.comparison import Tolerance, compare_results
from hal_driver.tools.flags import (Flags, apply_device_flags, device_flags, exec_stock_tool,
                                    expand_flagfiles, flag_values, machine_from_overrides,
                                    stock_tool_path, wants_npu_sim)
from hal_driver.tools.function_io import parse_inputs, print_results, to_host, write_outputs
from hal_driver.tools.parameters import needs_parameters, parameters_module

STOCK_TOOL = "iree-run-module"
FLAGS = {
    "device": [], "module": [], "parameters": [], "function": "", "input": [], "output": [],
    "expected_output": [], "output_max_element_count": 1024, "print_statistics": False,
    "equality_mode": "approximate", "expected_f16_threshold": 0.001,
    "expected_f32_threshold": 0.0001, "expected_f64_threshold": 0.0001,
    "expected_bf16_threshold": 0.01, "expected_rtol": 1e-5,
    "npu_sim_trace": "", "npu_sim_stats": False, **device_flags(),
}


def annotate(status: StatusError, context: str) -> StatusError:
    """Appends context the way IREE annotates a status (`message; context`)."""
    return StatusError(status.code, f"{status.message}; {context}")


def report(status: StatusError) -> int:
    print(" ".join(str(status).split("\n")), file=sys.stderr)
    return 1


def run_tool(body) -> int:
    """A tool's whole run, `body()` -> exit status: a failure status, Ctrl-C or a bug of
    ours ends it as the stock tools end (one line on stderr, or death by SIGINT), never
    with a traceback."""
    try:
        return body()
    except StatusError as status:
        return report(status)
    except KeyboardInterrupt:
        return exit_interrupted()
    except Exception as error:   # a bug of ours: still one line, never a traceback
        return report(StatusError(StatusCode.INTERNAL, f"{type(error).__name__}: {error}"))


def main(argv: list[str] | None = None) -> int:
    original = sys.argv[1:] if argv is None else argv
    return run_tool(lambda: _main(original))


def _main(original: list[str]) -> int:
    argv = expand_flagfiles(original, FLAGS)
    if "--help" in argv and wants_npu_sim(argv):
        return print_help()
    if "--list_drivers" in argv:
        return list_drivers()
    if any(a == "--list_devices" or a.startswith("--list_devices=") for a in argv):
        return list_devices(argv)
    if not wants_npu_sim(argv):
        exec_stock_tool(STOCK_TOOL, original)
    return run(Flags(argv, FLAGS))


def exit_interrupted() -> int:
    """Ctrl-C: the stock tool has no SIGINT handler, so it dies by the signal (a shell
    reports 130). Do the same once the device is closed (the running dispatch stopped at
    the signal): flush what was printed, restore the default action and re-raise it. No
    traceback, no further output."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    return 128 + signal.SIGINT      # only if SIGINT is blocked


def print_help() -> int:
    print(__doc__)
    print("Flags (--name=value; list flags repeat):")
    for name, default in FLAGS.items():
        print(f"  --{name}" + ("" if isinstance(default, list) else f" (default: {default!r})"))
    print("  --npu_sim_machine_<param>=V (see executable_format/machine.py)")
    return 0


def list_drivers() -> int:
    stock = _stock_output(["--list_drivers"])
    header = [line for line in stock if line.startswith("#") or not line.strip()]
    drivers = [line for line in stock if line not in header]
    drivers.append(f"{DRIVER_NAME:>16}: {DRIVER_DESCRIPTION}")
    drivers.sort(key=lambda line: line.split(":")[0].strip())
    print("\n".join(header + drivers))
    return 0


def list_devices(argv: list[str]) -> int:
    wanted = (flag_values(argv, "list_devices") or [""])[0]
    if wanted != DRIVER_NAME:
        print("\n".join(_stock_output(["--list_devices" + (f"={wanted}" if wanted else "")])))
    if wanted in ("", DRIVER_NAME):
        for info in enumerate_devices():
            print(f"{DRIVER_NAME}://{info.path}")
    return 0


def _stock_output(args: list[str]) -> list[str]:
    result = subprocess.run([stock_tool_path(STOCK_TOOL)] + args, capture_output=True, text=True)
    return result.stdout.splitlines()


def load_bytecode_module(path: str):
    """The `--module=` file at `path` (`-`: stdin), with the stock tool's errors."""
    from hal_driver.vm import BytecodeModule
    try:
        return (BytecodeModule.from_bytes(sys.stdin.buffer.read()) if path == "-"
                else BytecodeModule.from_file(path))
    except OSError as error:
        raise StatusError(StatusCode.NOT_FOUND, f"failed to open file '{path}': "
                          f"{error.strerror}; loading bytecode module at '{path}'") from None
    except StatusError as status:
        raise annotate(status, f"loading bytecode module at '{path}'") from None


def load_program(flags: Flags, device) -> BoundModule:
    if not flags.module:
        raise StatusError(StatusCode.INVALID_ARGUMENT, "no --module= specified")
    modules = [load_bytecode_module(path) for path in flags.module]
    if needs_parameters(modules):
        try:
            modules.insert(0, parameters_module(flags.parameters))
        except StatusError as status:
            raise annotate(status, f"resolving dependencies for '{modules[-1].name}'; "
                                   f"creating VM context") from None
    return BoundModule(modules[-1], device, tuple(modules[:-1]))


def choose_function(bound: BoundModule, name: str):
    if name:
        try:
            return bound.lookup(name)
        except StatusError as status:
            raise annotate(status, f"looking up function '{name}'") from None
    public = [n for n in bound.function_names if not n.startswith("__") and "$" not in n]
    if not public:
        raise StatusError(StatusCode.INVALID_ARGUMENT, "no exported functions found in module; "
                          "at least one must be present")
    if len(public) > 1:
        raise StatusError(StatusCode.INVALID_ARGUMENT, "more than one exported function present; "
                          "--function= must be specified explicitly")
    return bound.lookup(public[0])


def run(flags: Flags) -> int:
    if flags.npu_sim_trace:
        check_trace_path(flags.npu_sim_trace)
    device = create_device(flags.device[0], machine=machine_from_overrides(flags.machine_overrides),
                           trace=bool(flags.npu_sim_trace))
    try:
        apply_device_flags(device, flags)
        try:
            bound = load_program(flags, device)
            function = choose_function(bound, flags.function)
        except StatusError as status:
            raise annotate(status, "creating run context") from None
        try:
            exit_code = run_function(flags, bound, function)
        except StatusError as status:
            if not function.declaration:  # as the stock tool: only a declared signature is shown
                raise
            raise annotate(status, f"`{function.declaration}`") from None
        finally:
            del function, bound   # release the context's buffers before the statistics
            finish(flags, device)
        return exit_code
    finally:
        device.close()


def check_trace_path(path: str) -> None:
    """Fails before the run when the trace file could not be written after it."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise StatusError(StatusCode.NOT_FOUND,
                          f"--npu_sim_trace={path}: directory '{directory}' does not exist")
    if os.path.isdir(path):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"--npu_sim_trace={path}: is a directory")
    if not os.access(path if os.path.exists(path) else directory, os.W_OK):
        raise StatusError(StatusCode.PERMISSION_DENIED,
                          f"--npu_sim_trace={path}: not writable")


def function_arguments(specs: list[str], function, device) -> list:
    """The `--input=` values as VM arguments of `function`, checked against its arity."""
    try:
        inputs = parse_inputs(specs, function.user_argument_types)
        if len(inputs) != len(function.user_argument_types):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"function expects {len(function.user_argument_types)} inputs but "
                              f"{len(inputs)} were provided")
    except StatusError as status:
        raise annotate(status, "parsing function inputs") from None
    return [_to_vm(device, value) for value in inputs]


def run_function(flags: Flags, bound: BoundModule, function) -> int:
    arguments = function_arguments(flags.input, function, bound.device)
    print(f"EXEC @{function.name}", flush=True)
    try:
        results = function.invoke(arguments)
    except StatusError as status:
        raise annotate(status, f"invoking function '{function.name}'") from None
    host = [to_host(value, kind) for value, kind in zip(results, function.result_types)]
    try:
        return process_results(flags, function, host)
    except StatusError as status:
        raise annotate(status, "processing function outputs") from None


def _to_vm(device, value):
    if isinstance(value, HostTensor):
        return buffer_view_from_array(device, value.array, value.element_type)
    if isinstance(value, tuple):
        return value[1]
    return value


def process_results(flags: Flags, function, results: list) -> int:
    if flags.expected_output:
        try:
            expected = parse_inputs(flags.expected_output, function.result_types,
                                    allow_ignored=True)
        except StatusError as status:
            raise annotate(status, "parsing expected function outputs") from None
        matched, text = compare_results(expected, results, _tolerance(flags))
        sys.stdout.write(text)
        if matched:
            print("[SUCCESS] all function outputs matched their expected values.")
        sys.stdout.flush()
        return 0 if matched else 1
    if flags.output:
        write_outputs(results, flags.output, flags.output_max_element_count)
    else:
        print_results(results, flags.output_max_element_count)
    sys.stdout.flush()
    return 0


def _tolerance(flags: Flags) -> Tolerance:
    if flags.equality_mode not in ("approximate", "exact"):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"--equality_mode must be approximate or exact, got `{flags.equality_mode}`")
    return Tolerance(flags.equality_mode, flags.expected_f16_threshold,
                     flags.expected_f32_threshold, flags.expected_f64_threshold,
                     flags.expected_bf16_threshold, flags.expected_rtol)


def finish(flags: Flags, device) -> None:
    """Statistics and trace output after the program's resources are released."""
    gc.collect()
    if flags.print_statistics:
        sys.stderr.write(f"Device: {device.id}\n{device.allocator.format_statistics()}\n")
    if flags.npu_sim_stats:
        sys.stderr.write(format_npu_statistics(device))
    if flags.npu_sim_trace:
        try:
            device.trace.write(flags.npu_sim_trace)
        except OSError as error:
            raise StatusError(StatusCode.UNKNOWN, f"unable to open file `{flags.npu_sim_trace}`: "
                              f"{error.strerror}; writing --npu_sim_trace") from None


def format_npu_statistics(device) -> str:
    s = device.statistics.snapshot()
    seconds = s.npu_cycles / device.machine.clock_hz
    lines = ["[[ npu-sim statistics ]]",
             f"dispatches: {s.dispatches} (npu: {s.npu_dispatches}, host fallback: "
             f"{s.host_dispatches})",
             f"npu cycles: {s.npu_cycles} ({seconds * 1e3:.6f} ms simulated at "
             f"{device.machine.clock_hz / 1e9:g} GHz)",
             f"stall cycles: {s.stall_cycles}",
             f"dram bytes: {s.dram_bytes}",
             f"macs: {s.macs} executed, {s.useful_macs} useful",
             f"roofline cycles: {round(s.roofline_cycles)} (true roofline: "
             f"{s.roofline_cycles / s.npu_cycles if s.npu_cycles else 0:.2f} of npu cycles)",
             f"sram peak bytes: {s.sram_peak_bytes}"]
    lines += [f"{engine} busy cycles: {cycles}" for engine, cycles in
              sorted(s.engine_busy_cycles.items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
