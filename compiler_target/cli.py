"""`iree-compile` with the npu target (`bin/iree-compile`, console script iree-npu-compile).

Without `--iree-hal-target-backends=npu` / `--iree-hal-target-device=npu` (or with
--help/--version) the stock `iree-compile` of this venv runs with the arguments unchanged,
after refusing an unknown target backend or an .onnx input (which it would read as MLIR
text). With it, the split pipeline runs in this process (compiler_target.pipeline); every
other stock flag still applies.
"""
import os
import subprocess
import sys

from compiler_target import options as cli_options
from compiler_target.errors import CompileError, writing

_TOOL = "iree-compile"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if cli_options.asks_for_help(argv):
        _exec_stock_compiler(argv)
    try:
        if not cli_options.targets_npu(argv):
            _check_stock_command_line(argv)
            _exec_stock_compiler(argv)
        return _compile_npu(argv)
    except CompileError as e:
        sys.stderr.write(f"{_TOOL}: error: {e}\n")
        return 1
    except Exception as e:  # a compiler bug: still one line, never a traceback
        sys.stderr.write(f"{_TOOL}: internal error: {type(e).__name__}: {e}\n")
        return 1


def _stock_compiler() -> str:
    return os.path.join(os.path.dirname(sys.executable), _TOOL)


def _exec_stock_compiler(argv: list[str]) -> None:
    os.execv(_stock_compiler(), [_stock_compiler(), *argv])


def _check_stock_command_line(argv: list[str]) -> None:
    """What the stock tool would get wrong without saying so: an ONNX file, which it reads
    as MLIR text (printing a line of binary), and named as such unless the target itself
    is unknown (a misspelled npu). Other command lines go to the stock tool untouched: it
    reports an unknown backend itself, and listing them costs a process start."""
    onnx = [path for path in cli_options.input_paths(argv) if path.endswith(".onnx")]
    if onnx:
        registered = ["npu", *_stock_backends()]
        unknown = [b for b in cli_options.target_backends(argv) if b not in registered]
        if unknown:
            raise CompileError(f"unknown target backend '{unknown[0]}' (registered backends: "
                               f"{', '.join(registered)})")
        raise CompileError(f"{onnx[0]}: ONNX input is imported only for the npu target "
                           "(--iree-hal-target-backends=npu); for other targets convert it "
                           "with iree-import-onnx first")


def _stock_backends() -> list[str]:
    """The stock compiler's registered target backends (--iree-hal-list-target-backends)."""
    listing = subprocess.run([_stock_compiler(), "--iree-hal-list-target-backends"],
                             capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in listing.splitlines()[1:] if line.strip()]


def _compile_npu(argv: list[str]) -> int:
    from compiler_target import pipeline  # loads the compiler: only for npu compiles
    options = cli_options.parse(argv)
    if options.input_path is None:
        raise CompileError("no input file (usage: iree-compile [flags] <input.mlir|input.onnx> -o <out.vmfb>)")
    if options.input_path == "-":
        source = pipeline.Source(text=sys.stdin.read())
    else:
        source = pipeline.Source(path=options.input_path)
    output = pipeline.compile_source(source, options)
    if options.output_path == "-":
        sys.stdout.buffer.write(output)
        sys.stdout.flush()
    else:
        with writing("output file", options.output_path):
            with open(options.output_path, "wb") as f:
                f.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
