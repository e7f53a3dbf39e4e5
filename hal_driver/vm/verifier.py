"""Decodes and verifies a function's bytecode before anything executes.

Every field is bounds-checked while decoding; then every register index, ordinal,
type id, global offset, branch target and call signature is checked against the
module. The result is a list of `Instruction`s (block markers dropped) plus a map
from block offsets to instruction indices. A malformed function raises a
StatusError naming the function and the bytecode offset of the bad instruction.
"""
import struct
from dataclasses import dataclass

from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import opcodes
from hal_driver.vm.opcodes import IMPORT_BIT, REF_MASK, REF_MOVE_BIT, REF_TYPE_BIT
from hal_driver.vm.cconv import is_variadic, parse_cconv, register_placement


_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")

@dataclass(frozen=True)
class Instruction:
    offset: int          # bytecode offset within the function
    mnemonic: str
    operands: tuple


@dataclass
class VerifiedFunction:
    ordinal: int
    instructions: list
    block_index: dict    # block marker offset -> index of the instruction after it


class _Fail(Exception):
    def __init__(self, code, message):
        self.code = code
        self.message = message
        self.offset = 0


class _Decoder:
    """Reads one function's bytecode with range checks."""

    def __init__(self, data: memoryview, module, descriptor):
        self.data = data
        self.end = len(data)
        self.pc = 0
        self.module = module
        self.i32_count = descriptor.i32_registers
        self.ref_count = descriptor.ref_registers
        self.requirements = descriptor.requirements
        self.branch_targets = []
        self.readers = self.field_readers()

    def need(self, n: int) -> None:
        if self.pc + n > self.end:
            raise _Fail(StatusCode.DATA_LOSS,
                        f"bytecode truncated: need {n} bytes at {self.pc:08X} of {self.end}")

    def u8(self) -> int:
        self.need(1)
        self.pc += 1
        return self.data[self.pc - 1]

    def unpack(self, fmt: struct.Struct):
        self.need(fmt.size)
        (value,) = fmt.unpack_from(self.data, self.pc)
        self.pc += fmt.size
        return value

    def align2(self) -> None:
        self.pc += self.pc & 1

    # Register checks ----------------------------------------------------------
    def i32_reg(self, reg: int) -> int:
        if reg & REF_TYPE_BIT:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"i32 register required but ref register {reg:#06x} provided")
        if reg >= self.i32_count:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"i32 register ordinal {reg} out of range {self.i32_count}")
        return reg

    def i64_reg(self, reg: int) -> int:
        self.i32_reg(reg)
        if reg & 1:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"i64 register ordinal {reg} not 8-byte aligned")
        if reg + 1 >= self.i32_count:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"i64 register ordinal {reg}:{reg + 1} out of range {self.i32_count}")
        return reg

    def ref_reg(self, reg: int, allow_move: bool) -> tuple:
        if not reg & REF_TYPE_BIT:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"ref register required but non-ref {reg} provided")
        if reg & REF_MOVE_BIT and not allow_move:
            raise _Fail(StatusCode.INVALID_ARGUMENT, "ref register has MOVE bit but op does not support MOVE")
        if reg & REF_MASK >= self.ref_count:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"ref register ordinal {reg & REF_MASK} out of range {self.ref_count}")
        return reg & REF_MASK, bool(reg & REF_MOVE_BIT)

    def any_reg(self, reg: int) -> int:
        if reg & REF_TYPE_BIT:
            self.ref_reg(reg, allow_move=True)
        else:
            self.i32_reg(reg)
        return reg

    def typed_reg(self, reg: int, kind: str):
        """Checks `reg` against a cconv type character."""
        if kind == "r":
            return self.ref_reg(reg, allow_move=True)
        return self.i64_reg(reg) if kind in "IF" else self.i32_reg(reg)

    # Field decoders -----------------------------------------------------------
    def u16_list(self) -> tuple:
        self.align2()
        count = self.unpack(_U16)
        self.need(2 * count)
        values = struct.unpack_from(f"<{count}H", self.data, self.pc)
        self.pc += 2 * count
        return values

    def remap(self) -> tuple:
        values = self.u16_list_pairs()
        for src, dst in values:
            if bool(src & REF_TYPE_BIT) != bool(dst & REF_TYPE_BIT):
                raise _Fail(StatusCode.INVALID_ARGUMENT, f"branch remaps register {src:#06x} to a different bank {dst:#06x}")
            self.any_reg(src)
            self.any_reg(dst & ~REF_MOVE_BIT)
        return values

    def u16_list_pairs(self) -> tuple:
        self.align2()
        count = self.unpack(_U16)
        self.need(4 * count)
        flat = struct.unpack_from(f"<{2 * count}H", self.data, self.pc)
        self.pc += 4 * count
        return tuple(zip(flat[0::2], flat[1::2]))

    def branch_target(self) -> int:
        target = self.unpack(_U32)
        self.branch_targets.append(target)
        return target

    def global_offset(self, width: int) -> int:
        offset = self.unpack(_U32)
        if offset + width > self.module.global_bytes:
            raise _Fail(StatusCode.INVALID_ARGUMENT,
                        f"global byte_offset out of range: {offset} (rwdata={self.module.global_bytes})")
        return offset

    def ordinal(self, limit: int, what: str) -> int:
        value = self.unpack(_U32)
        if value >= limit:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"{what} ordinal {value} out of range {limit}")
        return value

    def function(self) -> int:
        value = self.unpack(_U32)
        if value & IMPORT_BIT:
            limit = len(self.module.imports)
            if value & ~IMPORT_BIT >= limit:
                raise _Fail(StatusCode.INVALID_ARGUMENT, f"import ordinal {value & ~IMPORT_BIT} out of range {limit}")
        elif value >= len(self.module.descriptors):
            raise _Fail(StatusCode.INVALID_ARGUMENT,
                        f"function ordinal {value} out of range {len(self.module.descriptors)}")
        return value

    def string(self) -> str:
        length = self.unpack(_U16)
        self.need(length)
        text = bytes(self.data[self.pc:self.pc + length]).decode("utf-8", errors="replace")
        self.pc += length
        return text

    def list_of(self, check):
        return lambda: tuple(check(r) for r in self.u16_list())

    def branch_table(self) -> tuple:
        count = self.unpack(_U16)
        return tuple((self.branch_target(), self.remap()) for _ in range(count))

    def field_readers(self) -> dict:
        """Field kind (see opcodes.py) -> a function decoding and checking it."""
        reg = lambda: self.unpack(_U16)
        i32 = lambda: self.i32_reg(reg())
        i64 = lambda: self.i64_reg(reg())
        ref_list = self.list_of(lambda r: self.ref_reg(r, allow_move=True))
        return {
            "i": i32, "f": i32, "I": i64, "F": i64,
            "r": lambda: self.ref_reg(reg(), allow_move=False)[0],
            "R": lambda: self.ref_reg(reg(), allow_move=True),
            "g4": lambda: self.global_offset(4), "g8": lambda: self.global_offset(8),
            "gr": lambda: self.ordinal(self.module.global_ref_count, "global ref"),
            "k4": lambda: self.unpack(_I32), "k8": lambda: self.unpack(_I64),
            "kf": lambda: self.unpack(_F32), "kF": lambda: self.unpack(_F64),
            "ro": lambda: self.ordinal(len(self.module.rodata), "rodata"),
            "ty": lambda: self.ordinal(len(self.module.types), "type"),
            "fn": self.function, "s": self.string,
            "Li": self.list_of(self.i32_reg), "Lf": self.list_of(self.i32_reg),
            "LI": self.list_of(self.i64_reg), "LF": self.list_of(self.i64_reg),
            "Lr": ref_list, "La": self.list_of(self.any_reg), "Lc": self.u16_list,
            "b": self.branch_target, "m": self.remap, "T": self.branch_table,
        }

    def instruction(self):
        opcode = self.u8()
        ops = opcodes.CORE_OPS
        prefixed = opcodes.PREFIXED_OPS.get(opcode)
        if prefixed is not None:
            ops, opcode = prefixed, self.u8()
        info = ops.get(opcode)
        if info is None:
            raise _Fail(StatusCode.INVALID_ARGUMENT, f"unknown opcode {opcode:#04x}")
        if info.feature and not self.requirements & info.feature:
            raise _Fail(StatusCode.INVALID_ARGUMENT,
                        f"`{info.mnemonic}` needs feature 0x{info.feature:X} the function does not declare "
                        f"(requirements 0x{self.requirements:X})")
        readers = self.readers
        return info.mnemonic, tuple([readers[kind]() for kind in info.fields])


class _Signatures:
    """Parsed calling conventions of the module's internal functions and imports."""

    def __init__(self, module):
        self.internal = [self._parse(s.cconv) for s in module.signatures]
        self.imports = [self._parse(i.signature.cconv) for i in module.imports]

    @staticmethod
    def _parse(cconv):
        if cconv is None:
            return None
        try:
            return parse_cconv(cconv)
        except StatusError:
            return None

    def callee(self, function: int):
        if function & IMPORT_BIT:
            return self.imports[function & ~IMPORT_BIT], "import"
        return self.internal[function], "function"


def _check_values(decoder: _Decoder, regs: tuple, types: tuple, what: str) -> None:
    if len(regs) != len(types):
        raise _Fail(StatusCode.INVALID_ARGUMENT, f"{what}: {len(regs)} registers for {len(types)} values")
    for reg, kind in zip(regs, types):
        decoder.typed_reg(reg, kind)


def _check_call(decoder, signatures, mnemonic, operands, own_results) -> None:
    if mnemonic == "return":
        _check_values(decoder, operands[0], own_results, "return")
        return
    function = operands[0]
    if mnemonic == "import_resolved":
        if not function & IMPORT_BIT:
            raise _Fail(StatusCode.INVALID_ARGUMENT, "import_resolved of a non-import function")
        return
    cconv, what = signatures.callee(function)
    if cconv is None:
        raise _Fail(StatusCode.INVALID_ARGUMENT, f"callee {what} {function & ~IMPORT_BIT} has no valid calling convention")
    args, results = cconv
    dst = operands[-1]
    if mnemonic in ("call.variadic", "call.variadic.yieldable"):
        if not function & IMPORT_BIT:
            raise _Fail(StatusCode.INVALID_ARGUMENT, "variadic calls are only supported for imports")
        segments, src = operands[1], operands[2]
        if len(segments) != len(args):
            raise _Fail(StatusCode.INVALID_ARGUMENT,
                        f"variadic call has {len(segments)} segments for {len(args)} arguments")
        flat = []
        for item, count in zip(args, segments):
            flat.extend(item * count if isinstance(item, tuple) else (item,))
        _check_values(decoder, src, tuple(flat), "variadic call arguments")
    else:
        if is_variadic(args):
            raise _Fail(StatusCode.INVALID_ARGUMENT, "non-variadic call of a variadic function")
        _check_values(decoder, operands[1], args, "call arguments")
    if is_variadic(results):
        raise _Fail(StatusCode.INVALID_ARGUMENT, "variadic results are not supported")
    _check_values(decoder, dst, results, "call results")


def _check_entry(decoder: _Decoder, cconv) -> None:
    """The function's arguments, placed by its calling convention, must fit its frame."""
    args, _ = cconv
    if is_variadic(args):
        raise _Fail(StatusCode.INVALID_ARGUMENT, "functions cannot take variadic arguments")
    for kind, reg in zip(args, register_placement(args)):
        if kind == "r":
            decoder.ref_reg(reg | REF_TYPE_BIT, allow_move=False)
        else:
            decoder.typed_reg(reg, kind)


_CALLS = frozenset({"call", "call.variadic", "call.yieldable", "call.variadic.yieldable",
                    "return", "import_resolved"})


def verify_function(module, ordinal: int, signatures: _Signatures) -> VerifiedFunction:
    """Decodes function `ordinal`; raises _Fail (with .offset set) on the first error."""
    descriptor = module.descriptors[ordinal]
    start = descriptor.bytecode_offset
    data = module.bytecode[start:start + descriptor.bytecode_length]
    decoder = _Decoder(data, module, descriptor)
    own = signatures.internal[ordinal]
    own_results = own[1] if own else None
    if own is not None:
        _check_entry(decoder, own)
    instructions = []
    block_index = {}
    offset = 0
    try:
        while decoder.pc < decoder.end:
            offset = decoder.pc
            mnemonic, operands = decoder.instruction()
            if mnemonic == "block":
                block_index[offset] = len(instructions)
                continue
            if mnemonic in _CALLS:
                if mnemonic == "return" and own_results is None:
                    raise _Fail(StatusCode.INVALID_ARGUMENT, "function without a calling convention returns")
                _check_call(decoder, signatures, mnemonic, operands, own_results)
            instructions.append(Instruction(offset, mnemonic, operands))
        if 0 not in block_index:
            offset = 0
            raise _Fail(StatusCode.INVALID_ARGUMENT, "function does not begin with a block marker")
        if len(block_index) != descriptor.block_count:
            raise _Fail(StatusCode.INVALID_ARGUMENT,
                        f"function declares {descriptor.block_count} blocks but has {len(block_index)}")
        for inst in instructions:
            for target in _targets(inst):
                if target not in block_index:
                    offset = inst.offset
                    raise _Fail(StatusCode.INVALID_ARGUMENT, f"branch target {target:08X} is not a block start")
    except _Fail as e:
        e.offset = offset
        raise
    return VerifiedFunction(ordinal, instructions, block_index)


def _targets(inst: Instruction):
    kinds = _FIELD_KINDS[inst.mnemonic]
    for kind, value in zip(kinds, inst.operands):
        if kind == "b":
            yield value
        elif kind == "T":
            for target, _ in value:
                yield target


_FIELD_KINDS = {info.mnemonic: info.fields
                for table in (opcodes.CORE_OPS, opcodes.EXT_F32_OPS, opcodes.EXT_F64_OPS)
                for info in table.values()}


def verify_module(module, describe) -> list:
    """Verifies every function; `describe(ordinal, offset)` names a failure site."""
    signatures = _Signatures(module)
    functions = []
    for ordinal in range(len(module.descriptors)):
        try:
            functions.append(verify_function(module, ordinal, signatures))
        except _Fail as e:
            raise StatusError(e.code, f"verification failed at {describe(ordinal, e.offset)}: {e.message}") from None
    return functions, signatures
