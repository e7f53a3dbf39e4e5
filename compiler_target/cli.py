"""`iree-compile` with the npu target (`bin/iree-compile`, console script iree-npu-compile).

Without `--iree-hal-target-backends=npu` / `--iree-hal-target-device=npu` (or with
--help/--version) the stock `iree-compile` of this venv runs with the arguments unchanged. With it, the split pipeline
runs in this process (compiler_target.pipeline); every other stock flag still applies.
"""
import os
import sys

from compiler_target import options as cli_options
from compiler_target.errors import CompileError, writing

_TOOL = "iree-compile"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not cli_options.targets_npu(argv) or cli_options.asks_for_help(argv):
        _exec_stock_compiler(argv)
    try:
        return _compile_npu(argv)
    except CompileError as e:
        sys.stderr.write(f"{_TOOL}: error: {e}\n")
        return 1
    except Exception as e:  # a compiler bug: still one line, never a traceback
        sys.stderr.write(f"{_TOOL}: internal error: {type(e).__name__}: {e}\n")
        return 1


def _exec_stock_compiler(argv: list[str]) -> None:
    stock = os.path.join(os.path.dirname(sys.executable), _TOOL)
    os.execv(stock, [stock, *argv])


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
