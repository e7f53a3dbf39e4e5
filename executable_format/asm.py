"""assemble(text): npu-fb assembly text to verified npu-fb bytes.

The syntax (docs/npu-fb-format.md) in short:

    .version 2.0                                  # optional, default the current version
    .machine sram_bytes=1048576, mac_cols=16      # optional overrides of the default machine
    .constants align 64                           # pad the constant pool to a multiple of 64
    .constants f32 0.5, -1.0                      # append data: hex | f32 | f16 | bf16 | i8 | i32 | u8
    .export conv bindings=[ro:4096,rw:8192] constant_count=0 workgroup_count=1x1x1
    .export c2 bindings=[ro:0,rw:0] views=[0+pc0:4096,1+pc1*-2048+63488:2048] constant_count=2 ...
                                                  # views: BINDING+pcK[*SCALE][+pcJ*STEP][+BASE]:SIZE,
                                                  # addressed as bindings 2, 3 (after the bindings)
    .dispatch_name "conv_dispatch_0"              # optional debug strings (JSON literals)
    .sram_bytes 65536                             # optional, default the highest SRAM byte used
    .roofline macs=1024, dtype=f32, read=4096, write=8192   # optional: the true roofline
    .parametric dims=pc0,pc1 "hal.executable ..."   # optional: extents given at dispatch time
        dma.load.f32 binding=0, dram_offset=0, sram_addr=0x0, n0=1, ...
        end

Errors are FormatError("<source>:<line>: <problem>").
"""
import json
import re

from .builder import OPTIONAL_FIELDS, ExecutableBuilder, ProgramBuilder
from .cost import Roofline
from .errors import FormatError
from .isa import (CONST_POOL, DTYPE_BYTES, F32_FIELDS, OPCODE_FLAGS, OPCODES_BY_NAME,
                  OPERAND_COUNT, PAIR_FIELDS, DType, Engine, pack_pair, used_fields)
from .machine import MachineConfig
from .scalars import encode_value
from .syntax import (BINDING_FLAG_NAMES, COMMENT, CONSTANT_KINDS, DTYPES_BY_NAME,
                     ROOFLINE_KEYS, SIGNAL_ENGINES)
from .version import VERSION_MAJOR, VERSION_MINOR

_INSTRUCTION_ERROR = re.compile(r"export (\d+) instruction (\d+)")


class _LineError(Exception):
    """A problem on the current line (the assembler adds source and line number)."""


def assemble(text: str, source: str = "<asm>") -> bytes:
    assembler = _Assembler()
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            assembler.line(_strip_comment(line).strip(), number)
        except _LineError as error:
            raise FormatError(f"{source}:{number}: {error}") from None
    try:
        return assembler.finish()
    except FormatError as error:
        raise FormatError(f"{source}{assembler.locate(str(error))}: {error}") from None


class _Export:
    def __init__(self, name: str, options: dict):
        self.name = name
        self.options = options
        self.debug: dict[str, str] = {}
        self.program = ProgramBuilder()
        self.lines: list[int] = []        # source line of each instruction


class _Assembler:
    def __init__(self):
        self.version = (VERSION_MAJOR, VERSION_MINOR)
        self.machine: dict[str, str] = {}
        self.constants = bytearray()
        self.exports: list[_Export] = []

    def line(self, line: str, number: int) -> None:
        if not line:
            return
        if not line.startswith("."):
            self.current().lines.append(number)
            _instruction(self.current().program, line)
            return
        directive, _, rest = line.partition(" ")
        handler = _DIRECTIVES.get(directive)
        if handler is None:
            raise _LineError(f"unknown directive {directive!r}")
        handler(self, rest.strip())

    def current(self) -> _Export:
        if not self.exports:
            raise _LineError("instructions and export directives need an .export first")
        return self.exports[-1]

    def finish(self) -> bytes:
        builder = ExecutableBuilder(machine=MachineConfig.from_overrides(self.machine),
                                    version=self.version)
        if self.constants:
            builder.add_constants(bytes(self.constants))
        for export in self.exports:
            builder.add_export(export.name, program=export.program, debug=export.debug,
                               **export.options)
        return builder.finish()

    def locate(self, message: str) -> str:
        """':<line>' of the instruction a verifier message names, else ''."""
        match = _INSTRUCTION_ERROR.search(message)
        if not match:
            return ""
        export, index = int(match.group(1)), int(match.group(2))
        return f":{self.exports[export].lines[index]}"

    # --- directives ---------------------------------------------------------------------

    def version_directive(self, rest: str) -> None:
        match = re.fullmatch(r"(\d+)\.(\d+)", rest)
        if not match:
            raise _LineError(f".version needs MAJOR.MINOR, got {rest!r}")
        self.version = (_u32(match.group(1), "version major"),
                        _u32(match.group(2), "version minor"))

    def machine_directive(self, rest: str) -> None:
        for key, value in _assignments(rest).items():
            if key in self.machine:
                raise _LineError(f"machine parameter {key!r} is set twice")
            try:
                MachineConfig.from_overrides({key: value})
            except ValueError as error:
                raise _LineError(str(error)) from None
            self.machine[key] = value

    def constants_directive(self, rest: str) -> None:
        kind, _, values = rest.partition(" ")
        if kind == "align":
            alignment = _integer(values.strip(), "align")
            if alignment < 1:
                raise _LineError("align needs a positive alignment")
            self.constants.extend(bytes(-len(self.constants) % alignment))
        elif kind == "hex":
            try:
                self.constants.extend(bytes.fromhex(values))
            except ValueError:
                raise _LineError("hex constants need pairs of hex digits") from None
        elif kind in CONSTANT_KINDS:
            dtype = DType(DTYPES_BY_NAME[kind])
            for token in values.replace(",", " ").split():
                number = _number(token, kind)
                bits = _encode(dtype, number)
                self.constants.extend(bits.to_bytes(DTYPE_BYTES[dtype], "little"))
        else:
            raise _LineError(f".constants needs align or one of {', '.join(CONSTANT_KINDS)}")

    def export_directive(self, rest: str) -> None:
        name, rest = _name(rest)
        if any(export.name == name for export in self.exports):
            raise _LineError(f"export {name!r} is defined twice")
        options = {}
        for key, value in _assignments(rest, separator=None).items():
            if key == "bindings":
                options["bindings"] = _bindings(value)
            elif key == "views":
                options["views"] = _views(value)
            elif key == "constant_count":
                options["constant_count"] = _u32(value, key)
            elif key == "workgroup_count":
                options["workgroup_count"] = _counts(value)
            else:
                raise _LineError(f".export has no option {key!r}")
        options.setdefault("bindings", [])
        self.exports.append(_Export(name, options))

    def debug_directive(self, key: str, rest: str) -> None:
        export = self.current()
        if key in export.debug:
            raise _LineError(f".{key} is given twice")
        value, tail = _string(rest)
        if tail.strip():
            raise _LineError(f"unexpected {tail.strip()!r} after the string")
        export.debug[key] = value

    def roofline_directive(self, rest: str) -> None:
        export = self.current()
        if "roofline" in export.options:
            raise _LineError(".roofline is given twice")
        values = _assignments(rest)
        if sorted(values) != sorted(ROOFLINE_KEYS) or values["dtype"] not in DTYPES_BY_NAME:
            raise _LineError(f".roofline needs macs=N, dtype=DTYPE, read=N, write=N, got {rest!r}")
        export.options["roofline"] = Roofline(
            _u64(values["macs"], "macs"), values["dtype"], _u64(values["read"], "read"),
            _u64(values["write"], "write"))

    def parametric_directive(self, rest: str) -> None:
        """`.parametric dims=pc0,pc1 "SOURCE"`: the extent constants and source of a
        dispatch specialised at dispatch time."""
        export = self.current()
        if "parametric" in export.options:
            raise _LineError(".parametric is given twice")
        dims, _, tail = rest.strip().partition(" ")
        if not dims.startswith("dims="):
            raise _LineError(f'.parametric needs dims=pcK[,pcK...] "SOURCE", got {rest!r}')
        ordinals = []
        for token in dims[len("dims="):].split(","):
            if not token.startswith("pc"):
                raise _LineError(f".parametric dims are push constants pcK, got {token!r}")
            ordinals.append(_u32(token[2:], "parametric dim"))
        source, tail = _string(tail)
        if tail.strip():
            raise _LineError(f"unexpected {tail.strip()!r} after the string")
        export.options["parametric"] = (source, tuple(ordinals))

    def sram_bytes_directive(self, rest: str) -> None:
        self.current().program.sram_bytes = _u32(rest, ".sram_bytes")


_DIRECTIVES = {
    ".version": _Assembler.version_directive,
    ".machine": _Assembler.machine_directive,
    ".constants": _Assembler.constants_directive,
    ".export": _Assembler.export_directive,
    ".sram_bytes": _Assembler.sram_bytes_directive,
    ".roofline": _Assembler.roofline_directive,
    ".parametric": _Assembler.parametric_directive,
    ".dispatch_name": lambda self, rest: self.debug_directive("dispatch_name", rest),
    ".source_location": lambda self, rest: self.debug_directive("source_location", rest),
    ".npu_ir": lambda self, rest: self.debug_directive("npu_ir", rest),
}


# --- instructions -----------------------------------------------------------------------

def _instruction(program: ProgramBuilder, line: str) -> None:
    mnemonic, _, rest = line.partition(" ")
    opcode, dtype = _mnemonic(mnemonic)
    info = OPCODES_BY_NAME[opcode]
    operands = _assignments(rest)
    flags = _flags(opcode, operands.pop("flags", ""))
    fields = used_fields(opcode)
    for name in operands:
        if name not in fields:
            raise _LineError(f"{opcode} has no field {name!r}")
    a = [0] * OPERAND_COUNT
    for slot, name in enumerate(info.fields):
        if name in operands:
            a[slot] = _field(opcode, name, operands[name], dtype)
        elif name in fields and name not in OPTIONAL_FIELDS:
            raise _LineError(f"{opcode} needs field {name!r}")
    program.emit_raw(info.code, int(dtype), flags, a)


def _mnemonic(token: str) -> tuple[str, DType]:
    if token in OPCODES_BY_NAME:
        if OPCODES_BY_NAME[token].engine != Engine.CONTROL:
            raise _LineError(f"{token} needs a dtype suffix, e.g. {token}.f32")
        return token, DType.F32
    opcode, _, dtype = token.rpartition(".")
    if opcode not in OPCODES_BY_NAME:
        raise _LineError(f"unknown opcode {token!r}")
    if dtype not in DTYPES_BY_NAME:
        raise _LineError(f"unknown dtype {dtype!r} in {token!r}")
    return opcode, DType(DTYPES_BY_NAME[dtype])


def _flags(opcode: str, text: str) -> int:
    names = OPCODE_FLAGS.get(opcode, {})
    bits = 0
    for name in filter(None, (part.strip() for part in text.split("|"))):
        if name not in names:
            raise _LineError(f"{opcode} has no flag {name!r}")
        bits |= names[name]
    return bits


def _field(opcode: str, name: str, text: str, dtype: DType) -> int:
    if name == "binding":
        return CONST_POOL if text == "const" else _u32(text, name)
    if name == "engine" and opcode in ("signal", "wait"):
        if text not in SIGNAL_ENGINES:
            raise _LineError(f"engine must be one of {', '.join(SIGNAL_ENGINES)}, got {text!r}")
        return SIGNAL_ENGINES[text]
    if name == "src_dtype":
        if text not in DTYPES_BY_NAME:
            raise _LineError(f"unknown src_dtype {text!r}")
        return DTYPES_BY_NAME[text]
    if name in PAIR_FIELDS:
        match = re.fullmatch(r"(\d+)x(\d+)", text)
        if not match or max(int(match.group(1)), int(match.group(2))) > 0xFFFF:
            raise _LineError(f"{name} needs LOWxHIGH (each < 65536), got {text!r}")
        return pack_pair(int(match.group(1)), int(match.group(2)))
    if name in F32_FIELDS:
        return _u32(text, name) if _is_hex(text) else _encode(DType.F32, _number(text, name))
    if opcode == "fill" and name == "value":
        if _is_hex(text) and dtype in (DType.F32, DType.F16, DType.BF16):
            return _u32(text, name)
        return _encode(dtype, _number(text, name))
    return _u32(text, name)


# --- tokens -----------------------------------------------------------------------------

def _strip_comment(line: str) -> str:
    """The line without its `#` comment (a `#` inside a "string" is not a comment)."""
    if '"' not in line:
        return line.partition(COMMENT)[0]
    in_string = escaped = False
    for index, char in enumerate(line):
        if in_string:
            escaped = char == "\\" and not escaped
            in_string = escaped or char != '"'
        elif char == '"':
            in_string = True
        elif char == COMMENT:
            return line[:index]
    return line


def _assignments(text: str, separator: str | None = ",") -> dict[str, str]:
    """`a=1, b=2` (or whitespace separated) as {name: text}."""
    result: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(separator))):
        name, equals, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name or not value:
            raise _LineError(f"expected name=value, got {part!r}")
        if name in result:
            raise _LineError(f"{name} is given twice")
        result[name] = value
    return result


def _string(text: str) -> tuple[str, str]:
    """A JSON string literal at the start of `text`, and the rest."""
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError:
        raise _LineError(f"expected a \"string\", got {text!r}") from None
    if not isinstance(value, str):
        raise _LineError(f"expected a \"string\", got {text!r}")
    return value, text[end:]


def _name(text: str) -> tuple[str, str]:
    if text.startswith('"'):
        return _string(text)
    name, _, rest = text.partition(" ")
    if not name:
        raise _LineError(".export needs a name")
    return name, rest


def _bindings(text: str) -> list[tuple[int, int]]:
    if not (text.startswith("[") and text.endswith("]")):
        raise _LineError(f"bindings needs [ro:SIZE,rw:SIZE,...], got {text!r}")
    bindings = []
    for part in filter(None, (p.strip() for p in text[1:-1].split(","))):
        access, colon, size = part.partition(":")
        if not colon or access not in BINDING_FLAG_NAMES:
            raise _LineError(f"binding needs ro:SIZE or rw:SIZE, got {part!r}")
        bindings.append((BINDING_FLAG_NAMES[access], _u64(size, "binding size")))
    return bindings


_VIEW_SYNTAX = "BINDING+pcK[*SCALE][+pcJ*STEP][+BASE]:SIZE"


def _views(text: str) -> list[tuple[int, int, int, int, int, int, int]]:
    if not (text.startswith("[") and text.endswith("]")):
        raise _LineError(f"views needs [{_VIEW_SYNTAX},...], got {text!r}")
    views = []
    for part in filter(None, (p.strip() for p in text[1:-1].split(","))):
        match = re.fullmatch(r"(\d+)\+pc(\d+)(?:\*(-?\d+))?(?:\+pc(\d+)\*(-?\d+))?([+-]\d+)?:(\S+)",
                             part)
        if not match:
            raise _LineError(f"view needs {_VIEW_SYNTAX}, got {part!r}")
        views.append((_u32(match[1], "view binding"), _u32(match[2], "view push constant"),
                      _u64(match[7], "view size"), _i64(match[3] or "1", "view scale"),
                      _i64(match[6] or "0", "view base"),
                      _u32(match[4] or "0", "view step push constant"),
                      _i64(match[5] or "0", "view step")))
    return views


def _counts(text: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"(\d+)x(\d+)x(\d+)", text)
    if not match:
        raise _LineError(f"workgroup_count needs XxYxZ, got {text!r}")
    return tuple(_u32(group, "workgroup count") for group in match.groups())


def _is_hex(text: str) -> bool:
    return text.lower().startswith("0x")


def _integer(text: str, what: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        raise _LineError(f"{what} needs an integer, got {text!r}") from None


def _u32(text: str, what: str) -> int:
    return _unsigned(text, what, 32)


def _u64(text: str, what: str) -> int:
    return _unsigned(text, what, 64)


def _i64(text: str, what: str) -> int:
    value = _integer(text, what)
    if not -(1 << 63) <= value < 1 << 63:
        raise _LineError(f"{what} {value} does not fit 64 bits")
    return value


def _unsigned(text: str, what: str, bits: int) -> int:
    value = _integer(text, what)
    if not 0 <= value < 1 << bits:
        raise _LineError(f"{what} {value} does not fit {bits} bits")
    return value


def _number(text: str, what: str) -> float | int:
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise _LineError(f"{what} needs a number, got {text!r}") from None


def _encode(dtype: DType, number) -> int:
    try:
        return encode_value(dtype, number)
    except (FormatError, OverflowError) as error:
        raise _LineError(str(error)) from None
