"""The command line of `iree-compile` with the npu target: which flags are the driver's,
which are the stock compiler's, and what replaces `--iree-hal-target-backends=npu`."""
from dataclasses import dataclass, field

from compiler_target.errors import CompileError

# The stock compiler produces a portable host (llvm-cpu) binary for every dispatch; NPU
# dispatches get their binary swapped after the hal phase. Executables are linked as by
# default (--iree-hal-link-executables is process-wide: turning it off would also make the
# const-eval JIT serialize each of its executables separately, +65% on an int8 model).
SURROGATE_TARGET_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=generic",
]

_NPU_PREFIX = "--iree-npu-"
_MACHINE_PREFIX = "--iree-npu-machine-"
_VALUE_FLAGS = ("--compile-from", "--compile-to", "--output-format")  # also accept "flag value"
_UNSUPPORTED_WITH_NPU = (
    "--compile-mode", "--split-input-file", "--dump-compilation-phases-to",
    "--emit-mlir-bytecode", "--emit-mlir-bytecode-version",
)


@dataclass
class NpuOptions:
    dispatch_report: str | None = None   # file path, "-" for stderr, None for no report
    fallback: str = "host"               # host | error
    dump_asm: str | None = None
    dump_ir: str | None = None
    dump_json: str | None = None
    machine: dict[str, str] = field(default_factory=dict)  # --iree-npu-machine-<key>=<value>
    codegen_jobs: int = 0                # processes lowering dispatches; 0: one per CPU


@dataclass
class CompileOptions:
    input_path: str | None = None
    output_path: str = "-"
    compile_from: str = "start"
    compile_to: str = "end"
    stock_flags: list[str] = field(default_factory=list)  # after SURROGATE_TARGET_FLAGS
    npu: NpuOptions = field(default_factory=NpuOptions)


def targets_npu(argv: list[str]) -> bool:
    """True when the command line asks for the npu target (backend or device)."""
    for arg in argv:
        for flag in ("--iree-hal-target-backends=", "--iree-hal-target-device="):
            if arg.startswith(flag) and "npu" in arg[len(flag):].split(","):
                return True
    return False


def target_backends(argv: list[str]) -> list[str]:
    """The value of every --iree-hal-target-backends= flag (the stock tool takes each value
    as one backend name)."""
    flag = "--iree-hal-target-backends="
    return [arg[len(flag):] for arg in argv if arg.startswith(flag) and arg != flag]


def input_paths(argv: list[str]) -> list[str]:
    """The positional arguments (input files) of a stock command line; a flag missing its
    value is left to the stock tool to report."""
    paths, value_next = [], False
    for arg in argv:
        if not value_next and not arg.startswith("-"):
            paths.append(arg)
        value_next = arg in ("-o", *_VALUE_FLAGS)
    return paths


def asks_for_help(argv: list[str]) -> bool:
    return any(arg in ("-h", "--help", "--help-hidden", "--help-list", "--version") for arg in argv)


def parse(argv: list[str]) -> CompileOptions:
    options = CompileOptions()
    args = _join_separate_values(argv)
    for arg in args:
        if arg.startswith(_NPU_PREFIX):
            _parse_npu_flag(arg, options.npu)
        elif _is_npu_target_flag(arg):
            continue
        elif arg.startswith("-o="):
            options.output_path = arg[3:]
        elif arg.startswith("--compile-from="):
            options.compile_from = arg.split("=", 1)[1]
        elif arg.startswith("--compile-to="):
            options.compile_to = arg.split("=", 1)[1]
        elif arg.startswith("--output-format="):
            if arg != "--output-format=vm-bytecode":
                raise CompileError(f"{arg} is not supported with the npu target (only vm-bytecode)")
        elif arg.split("=", 1)[0] in _UNSUPPORTED_WITH_NPU:
            raise CompileError(f"{arg.split('=', 1)[0]} is not supported with the npu target")
        elif arg == "-" or not arg.startswith("-"):
            if options.input_path is not None:
                raise CompileError(f"more than one input file: '{options.input_path}', '{arg}'")
            options.input_path = arg
        else:
            options.stock_flags.append(arg)
    return options


def _join_separate_values(argv: list[str]) -> list[str]:
    """`-o out.vmfb` → `-o=out.vmfb`, `--compile-to hal` → `--compile-to=hal`."""
    args, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-o", *_VALUE_FLAGS):
            if i + 1 >= len(argv):
                raise CompileError(f"{arg} requires a value")
            args.append(f"{arg}={argv[i + 1]}")
            i += 2
        else:
            args.append(arg)
            i += 1
    return args


def _is_npu_target_flag(arg: str) -> bool:
    for flag in ("--iree-hal-target-backends=", "--iree-hal-target-device="):
        if arg.startswith(flag):
            if arg[len(flag):] != "npu":
                raise CompileError(f"{arg}: the npu target cannot be combined with other targets")
            return True
    return False


def _parse_npu_flag(arg: str, npu: NpuOptions) -> None:
    name, has_value, value = arg.partition("=")
    if name.startswith(_MACHINE_PREFIX) and len(name) > len(_MACHINE_PREFIX):
        if not has_value:
            raise CompileError(f"{name} requires a value")
        npu.machine[name[len(_MACHINE_PREFIX):].replace("-", "_")] = value
    elif name == "--iree-npu-dispatch-report":
        npu.dispatch_report = value if has_value else "-"
    elif name == "--iree-npu-fallback":
        if value not in ("host", "error"):
            raise CompileError(f"{arg}: expected --iree-npu-fallback=host or =error")
        npu.fallback = value
    elif name == "--iree-npu-codegen-jobs":
        if not value.isdigit():
            raise CompileError(f"{arg}: expected --iree-npu-codegen-jobs=N, N >= 0 "
                               "(0: one process per CPU, 1: this process only)")
        npu.codegen_jobs = int(value)
    elif name in ("--iree-npu-dump-asm", "--iree-npu-dump-ir", "--iree-npu-dump-json"):
        if not value:
            raise CompileError(f"{name} requires a directory: {name}=DIR")
        setattr(npu, name.removeprefix("--iree-npu-").replace("-", "_"), value)
    else:
        raise CompileError(f"unknown npu flag '{name}' (known: --iree-npu-dispatch-report[=FILE], "
                           "--iree-npu-fallback=host|error, --iree-npu-codegen-jobs=N, "
                           "--iree-npu-dump-asm=DIR, "
                           "--iree-npu-dump-ir=DIR, --iree-npu-dump-json=DIR, "
                           "--iree-npu-machine-<param>=VALUE)")
