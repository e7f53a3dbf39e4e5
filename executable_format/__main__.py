"""Command line: verify, disassemble and assemble npu-fb executables.

    python -m executable_format verify FILE.npufb
    python -m executable_format disasm FILE.npufb [-o FILE.s]
    python -m executable_format asm FILE.s [-o FILE.npufb]

Exit 0 on success; exit 1 with one `error: ...` line on stderr for bad input.
"""
import argparse
import pathlib
import sys

from .asm import assemble
from .disasm import disassemble
from .errors import FormatError
from .reader import read_executable


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        args.command(args)
    except FormatError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: {error.filename or ''}: {error.strerror or error}", file=sys.stderr)
        return 1
    return 0


def _verify(args) -> None:
    exe = read_executable(pathlib.Path(args.file).read_bytes())
    instructions = sum(export.program.instruction_count for export in exe.exports)
    print(f"{args.file}: ok (npu-fb {exe.version[0]}.{exe.version[1]}, "
          f"{len(exe.exports)} exports, {instructions} instructions)")


def _disasm(args) -> None:
    text = disassemble(pathlib.Path(args.file).read_bytes())
    if args.output:
        pathlib.Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)


def _asm(args) -> None:
    source = pathlib.Path(args.file)
    try:
        text = source.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{source}: not UTF-8 assembly text") from None
    data = assemble(text, source=str(source))
    pathlib.Path(args.output or source.with_suffix(".npufb")).write_bytes(data)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m executable_format",
                                     description="npu-fb executable tools")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    verify = commands.add_parser("verify", help="verify an npu-fb file")
    verify.add_argument("file")
    verify.set_defaults(command=_verify)
    disasm = commands.add_parser("disasm", help="disassemble an npu-fb file")
    disasm.add_argument("file")
    disasm.add_argument("-o", "--output", help="write the text here instead of stdout")
    disasm.set_defaults(command=_disasm)
    asm = commands.add_parser("asm", help="assemble text into an npu-fb file")
    asm.add_argument("file")
    asm.add_argument("-o", "--output", help="output file (default: FILE with .npufb)")
    asm.set_defaults(command=_asm)
    return parser


if __name__ == "__main__":
    sys.exit(main())
