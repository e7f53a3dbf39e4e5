"""IREE-style command-line flags: `--name=value`, repeated list flags, bare booleans.

Also decides where a command runs: npu-sim devices in our runtime, every other
device in the stock tool of the same name (exec'd with the arguments unchanged).
"""
import os
import sys

from hal_driver.device.driver import is_npu_sim_uri
from hal_driver.status import StatusCode, StatusError

MACHINE_PREFIX = "npu_sim_machine_"
# --npu_sim_dispatch_timeout_ms=N: the wall-clock deadline of each NPU dispatch in
# milliseconds (0: none); a dispatch that runs longer fails with DEADLINE_EXCEEDED.
DISPATCH_TIMEOUT_FLAG = "npu_sim_dispatch_timeout_ms"


def device_flags() -> dict:
    """The npu-sim device flags of the tools, {name: default}; `apply_device_flags` hands
    their values to a device."""
    from hal_driver.device.npu_core import DEFAULT_DISPATCH_TIMEOUT_MS
    return {DISPATCH_TIMEOUT_FLAG: DEFAULT_DISPATCH_TIMEOUT_MS}


def apply_device_flags(device, flags: "Flags") -> None:
    device.dispatch_timeout_ms = getattr(flags, DISPATCH_TIMEOUT_FLAG)


def flag_values(argv: list[str], name: str) -> list[str]:
    prefix = f"--{name}="
    return [a[len(prefix):] for a in argv if a.startswith(prefix)]


def expand_flagfiles(argv: list[str], spec: dict) -> list[str]:
    """`--flagfile=path` replaced in place by the flags in the file (iree/base/tooling/
    flags.c): one `--name[=value]` per line, name and value trimmed; blank lines and
    lines starting with `#` or `//` skipped; positional arguments are not allowed."""
    expanded = []
    for arg in argv:
        name, _, path = arg.partition("=")
        if name != "--flagfile":
            expanded.append(arg)
            continue
        if not path:
            raise StatusError(StatusCode.INVALID_ARGUMENT, "--flagfile= requires a file path")
        expanded += expand_flagfiles(_flagfile_flags(path, spec), spec)
    return expanded


def _flagfile_flags(path: str, spec: dict) -> list[str]:
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError:
        raise StatusError(StatusCode.NOT_FOUND, f"failed to open file '{path}'; "
                          f"while trying to parse flagfile") from None
    flags = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        if not line.startswith("--"):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{path}:{number}: positional arguments not allowed in flag files")
        name, has_value, value = line[2:].partition("=")
        name = name.strip()
        if name not in spec and name != "flagfile" and not name.startswith(MACHINE_PREFIX):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"{path}:{number}: flag '{name}' not recognized")
        flags.append(f"--{name}={value.strip()}" if has_value else f"--{name}")
    return flags


def wants_npu_sim(argv: list[str]) -> bool:
    devices = flag_values(argv, "device")
    if any(is_npu_sim_uri(d) for d in devices) and len(devices) > 1:
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          "npu-sim cannot be combined with other --device= flags")
    return bool(devices) and is_npu_sim_uri(devices[0])


def stock_tool_path(tool: str) -> str:
    """The stock IREE tool installed next to this Python (the project's .venv)."""
    return os.path.join(os.path.dirname(sys.executable), tool)


def exec_stock_tool(tool: str, argv: list[str]) -> None:
    """Replaces this process with the stock tool, arguments unchanged."""
    path = stock_tool_path(tool)
    os.execv(path, [path] + argv)


class Flags:
    """Parses `argv` against `spec` ({name: default}); a list default makes a list
    flag, a bool default a boolean. `--npu_sim_machine_<param>=V` are collected in
    `machine_overrides`."""

    def __init__(self, argv: list[str], spec: dict):
        self.values = {name: (list(d) if isinstance(d, list) else d) for name, d in spec.items()}
        self.machine_overrides: dict[str, str] = {}
        for arg in argv:
            self._parse(arg, spec)

    def __getattr__(self, name: str):
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def _parse(self, arg: str, spec: dict) -> None:
        if not arg.startswith("--"):
            raise StatusError(StatusCode.INVALID_ARGUMENT,
                              f"unexpected positional argument `{arg}`; flags are --name=value")
        name, has_value, value = arg[2:].partition("=")
        if name.startswith(MACHINE_PREFIX):
            self.machine_overrides[name[len(MACHINE_PREFIX):]] = value
            return
        if name not in spec:
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"unknown flag `--{name}`")
        default = spec[name]
        if isinstance(default, list):
            self.values[name].append(value)
        elif isinstance(default, bool):
            self.values[name] = _parse_bool(name, value if has_value else "true")
        elif not has_value:
            raise StatusError(StatusCode.INVALID_ARGUMENT, f"flag `--{name}` needs a value")
        else:
            self.values[name] = _convert(name, value, type(default))


def _parse_bool(name: str, value: str) -> bool:
    if value in ("true", "1", "True"):
        return True
    if value in ("false", "0", "False"):
        return False
    raise StatusError(StatusCode.INVALID_ARGUMENT, f"flag `--{name}` expects true or false")


def _convert(name: str, value: str, kind: type):
    try:
        return kind(value)
    except ValueError:
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"flag `--{name}` expects a {kind.__name__}, got `{value}`") from None


def machine_from_overrides(overrides: dict[str, str]):
    from executable_format.machine import MachineConfig
    try:
        return MachineConfig.from_overrides(overrides)
    except ValueError as error:
        raise StatusError(StatusCode.INVALID_ARGUMENT, str(error)) from None
