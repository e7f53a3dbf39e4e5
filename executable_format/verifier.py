"""verify(data): every check an npu-fb buffer must pass before anything uses it.

First the flatbuffer structure (structure.py: every offset, vector and string in bounds),
then the meaning: identifier and version, machine parameters, exports, and each program
instruction by instruction (opcode, dtype, flags, unused fields, shapes, semaphores, and
the SRAM/DRAM ranges of ranges.py against the machine, the program and the bindings).
Failures raise FormatError("npu-fb verification failed: <where>: <what>").
"""
import numpy as np

from .cost import (ELEMENT_WORK, PROGRAM_WORK_PER_SRAM_BYTE, instruction_elements,
                   instruction_macs, program_work_limit)
from .errors import FormatError, excerpt
from .generated import npu_executable_generated as fb
from .isa import (BYTE_INTS, CONST_POOL, DTYPE_BYTES, DTYPE_NAMES, ELEMENTS_PER_SRAM_BYTE,
                  ENGINE_NAMES, HALF_FLOATS, INSTRUCTION_BYTES, INSTRUCTION_DTYPE,
                  MACS_PER_SRAM_BYTE, OPCODE_FLAGS, OPCODES, ROUNDING_FLAGS,
                  UNUSED_FIELDS, DType, Engine, Flag, f32_bits, unpack_pair)
from .machine import MachineConfig
from .ranges import Access, Accesses, instruction_accesses, program_accesses
from .structure import check_structure
from .version import VERSION_MAJOR

MAC_DTYPES = set(DTYPE_NAMES) - {DType.I64}     # a roofline's peak rate is of one of these
PAST_WORK_LIMIT = "exceeds the per-program limit"    # a program's work past program_work_limit
F32_ONE = f32_bits(1.0)

READ_ONLY = fb.BindingFlags.ReadOnly         # the only binding flag
ENGINES = (Engine.DMA_IN, Engine.DMA_OUT, Engine.MAC, Engine.VECTOR)   # signal/wait targets
# Per opcode: the dtype codes and the flag bits it takes.
_DTYPES = {code: frozenset(int(d) for d in info.dtypes) for code, info in OPCODES.items()}
_FLAGS = {code: int(sum(OPCODE_FLAGS.get(info.name, {}).values()))
          for code, info in OPCODES.items()}


def verify(data) -> None:
    """Raises FormatError naming the first problem of the npu-fb buffer `data`."""
    try:
        _verify(bytes(data))
    except FormatError as error:
        raise FormatError(f"npu-fb verification failed: {error}") from None


def _text(raw: bytes | None, where: str) -> str:
    """A flatbuffer string as str (absent strings are ''); invalid UTF-8 is a FormatError."""
    try:
        return (raw or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(f"{where} is not valid UTF-8") from None


def _verify(data: bytes) -> None:
    check_structure(data)
    root = fb.Executable.GetRootAs(data, 0)
    if root.VersionMajor() != VERSION_MAJOR:
        raise FormatError(f"format version {root.VersionMajor()}.{root.VersionMinor()} is "
                          f"not supported (major version must be {VERSION_MAJOR})")
    machine = _machine(root)
    names: set[str] = set()
    for index in range(root.ExportsLength()):
        _check_export(index, root.Exports(index), machine, root.ConstantsLength(), names)


def _machine(root) -> MachineConfig:
    known = MachineConfig.parameter_names()
    values: dict[str, int] = {}
    for index in range(root.MachineLength()):
        param = root.Machine(index)
        key = _text(param.Key(), f"machine parameter {index} key")
        if key not in known:
            raise FormatError(f"unknown machine parameter '{excerpt(key)}'")
        if key in values:
            raise FormatError(f"machine parameter {key!r} appears twice")
        if param.Value() <= 0:
            raise FormatError(f"machine parameter {key!r} must be positive, got {param.Value()}")
        values[key] = param.Value()
    missing = [key for key in known if key not in values]
    if missing:
        raise FormatError(f"machine parameter {missing[0]!r} is missing")
    return MachineConfig(**values)


def _check_export(index: int, export, machine: MachineConfig, constants_size: int,
                  names: set[str]) -> None:
    where = f"export {index}"
    name = _text(export.Name(), f"{where} name")
    if not name:
        raise FormatError(f"{where} has an empty name")
    if not name.isprintable():
        raise FormatError(f"{where} name '{excerpt(name)}' has unprintable characters")
    if name in names:
        raise FormatError(f"{where} name {name!r} is not unique")
    names.add(name)
    if export.Ordinal() != index:
        raise FormatError(f"{where} ({name!r}) has ordinal {export.Ordinal()}")
    bindings = [export.Bindings(i) for i in range(export.BindingsLength())]
    for i, binding in enumerate(bindings):
        if binding.Flags() & ~READ_ONLY:
            raise FormatError(f"{where} binding {i} has unknown flags 0x{binding.Flags():x}")
    workgroups = [export.WorkgroupCount(i) for i in range(export.WorkgroupCountLength())]
    if len(workgroups) != 3 or min(workgroups) < 1:
        raise FormatError(f"{where} workgroup_count {workgroups} must be 3 positive counts")
    debug = export.Debug()
    if debug is not None:
        _text(debug.DispatchName(), f"{where} debug dispatch_name")
        _text(debug.SourceLocation(), f"{where} debug source_location")
        _text(debug.NpuIr(), f"{where} debug npu_ir")
    roofline = export.Roofline()
    if roofline is not None and roofline.MacDtype() not in MAC_DTYPES:
        raise FormatError(f"{where} roofline mac_dtype {roofline.MacDtype()} is unknown")
    windows = [(b.MinSize(), bool(b.Flags() & READ_ONLY)) for b in bindings]
    windows += _views(where, export, windows)
    program = export.Program()
    _check_parametric(where, export, program)
    limits = _Limits(machine, program.SramBytes(), constants_size, windows,
                     export.ConstantCount())
    instructions = program.InstructionsAsNumpy() if program.InstructionsLength() else b""
    _check_program(where, bytes(instructions), limits)


def _views(where: str, export, bindings: list[tuple[int, bool]]) -> list[tuple[int, bool]]:
    """(min_size, read_only) of each binding view, which instructions address after the
    bindings; a view is read-only when its binding is."""
    windows = []
    for k in range(export.ViewsLength()):
        view = export.Views(k)
        if view.Binding() >= len(bindings):
            raise FormatError(f"{where} view {k} names binding {view.Binding()} "
                              f"({len(bindings)} bindings)")
        if view.OffsetConstant() >= export.ConstantCount():
            raise FormatError(f"{where} view {k} takes its offset from push constant "
                              f"{view.OffsetConstant()} ({export.ConstantCount()} constants)")
        if view.StepScale() and view.StepConstant() >= export.ConstantCount():
            raise FormatError(f"{where} view {k} takes its step from push constant "
                              f"{view.StepConstant()} ({export.ConstantCount()} constants)")
        windows.append((view.MinSize(), bindings[view.Binding()][1]))
    return windows


def _check_parametric(where: str, export, program) -> None:
    """A parametric export names valid extent constants and has a lone `end` program
    (the device runs the program it specialises, never this one)."""
    parametric = export.Parametric()
    if parametric is None:
        return
    _text(parametric.Source(), f"{where} parametric source")
    ordinals = [parametric.DimConstants(i) for i in range(parametric.DimConstantsLength())]
    if not ordinals:
        raise FormatError(f"{where} parametric names no extent constants")
    if ordinals != sorted(set(ordinals)) or ordinals[-1] >= export.ConstantCount():
        raise FormatError(f"{where} parametric extent constants {ordinals} must be ascending, "
                          f"unique and < constant_count {export.ConstantCount()}")
    if program.InstructionsLength() != INSTRUCTION_BYTES:
        raise FormatError(f"{where} is parametric; its program must be a lone end, got "
                          f"{program.InstructionsLength() // INSTRUCTION_BYTES} instructions")


class _Limits:
    """What a program's accesses are checked against."""

    def __init__(self, machine: MachineConfig, sram_bytes: int, constants_size: int,
                 bindings: list[tuple[int, bool]], constant_count: int = 0):
        self.machine = machine
        self.constant_count = constant_count      # the export's push constants
        self.sram_bytes = sram_bytes
        self.constants_size = constants_size
        self.bindings = bindings          # (min_size, read_only) per binding, then per view


def _check_program(where: str, instructions: bytes, limits: _Limits) -> None:
    if limits.sram_bytes > limits.machine.sram_bytes:
        raise FormatError(f"{where} program sram_bytes {limits.sram_bytes} exceeds the "
                          f"machine's sram_bytes {limits.machine.sram_bytes}")
    if not instructions or len(instructions) % INSTRUCTION_BYTES:
        raise FormatError(f"{where} program has {len(instructions)} bytes, not a positive "
                          f"multiple of {INSTRUCTION_BYTES}")
    records = np.frombuffer(instructions, dtype=INSTRUCTION_DTYPE)
    suspects = _range_suspects(records, limits)
    semaphores = _Semaphores(limits.machine.semaphores)
    work = 0
    last = len(records) - 1
    for index, (opcode, dtype, flags, a) in enumerate(zip(
            records["opcode"].tolist(), records["dtype"].tolist(),
            records["flags"].tolist(), records["a"].tolist())):
        at = f"{where} instruction {index}"
        if opcode not in OPCODES:
            raise FormatError(f"{at}: unknown opcode {opcode}")
        at = f"{at} ({OPCODES[opcode].name})"
        try:
            work += _check_instruction(opcode, dtype, flags, a, limits, semaphores,
                                       index in suspects)
            if OPCODES[opcode].name == "end" and index != last:
                raise FormatError("end must be the last instruction only")
        except FormatError as error:
            raise FormatError(f"{at}: {error}") from None
    if OPCODES[records["opcode"][last]].name != "end":
        raise FormatError(f"{where} program does not end with end")
    limit = program_work_limit(limits.machine)
    if work > limit:
        raise FormatError(f"{where} program work {work} {PAST_WORK_LIMIT} {limit} "
                          f"(MACs + {ELEMENT_WORK} x elements; {PROGRAM_WORK_PER_SRAM_BYTE} "
                          f"per SRAM byte)")


def _check_instruction(opcode: int, dtype: int, flags: int, a: list[int], limits: _Limits,
                       semaphores: "_Semaphores", check_ranges: bool = True) -> int:
    """Checks one instruction, its memory ranges only when `check_ranges` (the program's
    other instructions' ranges passed _range_suspects); returns its work
    (cost.instruction_work)."""
    info = OPCODES[opcode]
    if dtype not in DTYPE_NAMES:
        raise FormatError(f"unknown dtype {dtype}")
    if dtype not in _DTYPES[opcode]:
        raise FormatError(f"dtype {DTYPE_NAMES[dtype]} is not allowed")
    if flags & ~_FLAGS[opcode]:
        raise FormatError(f"flags 0x{flags:x} has bits not defined for {info.name}")
    if any(a[len(info.fields):]):
        slot = next(k for k in range(len(info.fields), len(a)) if a[k])
        raise FormatError(f"unused field a[{slot}] is {a[slot]}, must be 0")
    fields = dict(zip(info.fields, a))
    for name in UNUSED_FIELDS.get(info.name, ()):
        if fields[name]:
            raise FormatError(f"unused field {name} is {fields[name]}, must be 0")
    _SHAPE_CHECKS.get(info.name, _no_check)(fields, flags, dtype)
    if info.name == "fill" and flags & Flag.PUSH_CONSTANT and \
            fields["value"] >= limits.constant_count:
        raise FormatError(f"fills push constant {fields['value']} "
                          f"({limits.constant_count} constants)")
    if info.name == "signal":
        semaphores.signal(fields["engine"], fields["sem"])
    elif info.name == "wait":
        semaphores.wait(fields["engine"], fields["sem"], fields["value"])
    work = _check_work(opcode, a, limits.machine)
    if check_ranges:
        accesses = instruction_accesses(opcode, dtype, flags, a)
        for access in accesses:
            _check_access(access, limits)
        if info.engine == Engine.MAC:
            _check_output_disjoint(accesses)
    return work


def _range_suspects(records: np.ndarray, limits: _Limits) -> set[int]:
    """The instructions whose memory ranges _check_access or _check_output_disjoint may
    reject (a superset: the per-instruction checks say which do, and why), worked out for
    the whole program at once."""
    columns = program_accesses(records)
    suspect = np.zeros(len(records), dtype=bool)
    for x in columns:
        suspect[x.rows[_range_fails(x, limits)]] = True
    for out in (x for x in columns if x.operand == "out"):      # MAC outputs
        for source in (x for x in columns if x.rows is out.rows and x is not out):
            overlaps = (out.start < source.end) & (source.start < out.end) & \
                (source.end != source.start)
            suspect[out.rows[overlaps.astype(bool)]] = True
    return set(np.flatnonzero(suspect).tolist())


def _range_fails(x: Accesses, limits: _Limits) -> np.ndarray:
    """Where _check_access would reject one operand's ranges (or cannot tell)."""
    fails = (x.elem_bytes == 0) | ((x.start % np.maximum(x.elem_bytes, 1)) != 0)
    if x.memory == "sram":
        return fails | np.asarray(x.end > min(limits.machine.sram_bytes, limits.sram_bytes),
                                  dtype=bool)
    sizes = np.array([size for size, _ in limits.bindings] + [0], dtype=object)
    read_only = np.array([ro for _, ro in limits.bindings] + [True])
    const_pool = x.binding == CONST_POOL
    known = np.where(x.binding < len(limits.bindings), x.binding, len(limits.bindings))
    beyond = np.where(const_pool, limits.constants_size, sizes[known])
    fails |= np.asarray(x.end > beyond, dtype=bool)
    fails |= x.writes & (const_pool | read_only[known])
    return fails | (~const_pool & (x.binding >= len(limits.bindings)))


def _check_work(opcode: int, a: list[int], machine: MachineConfig) -> int:
    """The per-instruction cap; returns the instruction's work (cost.instruction_work)."""
    macs = instruction_macs(opcode, a)
    work, what, per_byte = ((macs, "MACs", MACS_PER_SRAM_BYTE) if macs else
                            (instruction_elements(opcode, a), "elements", ELEMENTS_PER_SRAM_BYTE))
    limit = per_byte * machine.sram_bytes
    if work > limit:
        raise FormatError(f"{work} {what} exceed the per-instruction limit {limit} "
                          f"({per_byte} per SRAM byte)")
    return macs if macs else ELEMENT_WORK * work


def _check_output_disjoint(accesses: list[Access]) -> None:
    """A MAC instruction's output may not overlap its inputs or bias."""
    [out] = [x for x in accesses if x.writes]
    for source in accesses:
        if source is out or source.end == source.start:   # an absent bias covers nothing
            continue
        if out.start < source.end and source.start < out.end:
            raise FormatError(f"{out.operand} SRAM range [{out.start}, {out.end}) overlaps "
                              f"{source.operand} SRAM range [{source.start}, {source.end})")


class _Semaphores:
    """Program-order semaphore bookkeeping: one signalling engine each, waits satisfiable."""

    def __init__(self, count: int):
        self.count = count
        self.signals: dict[int, int] = {}
        self.engine: dict[int, int] = {}

    def _check(self, engine: int, sem: int) -> None:
        if engine not in ENGINES:
            raise FormatError(f"engine {engine} is not one of "
                              f"{', '.join(ENGINE_NAMES[e] for e in ENGINES)}")
        if sem >= self.count:
            raise FormatError(f"semaphore {sem} out of range (machine has {self.count})")

    def signal(self, engine: int, sem: int) -> None:
        self._check(engine, sem)
        first = self.engine.setdefault(sem, engine)
        if first != engine:
            raise FormatError(f"semaphore {sem} is signalled from {ENGINE_NAMES[Engine(engine)]}"
                              f" but already from {ENGINE_NAMES[Engine(first)]}")
        self.signals[sem] = self.signals.get(sem, 0) + 1

    def wait(self, engine: int, sem: int, value: int) -> None:
        self._check(engine, sem)
        if value > self.signals.get(sem, 0):
            raise FormatError(f"waits for semaphore {sem} value {value} but only "
                              f"{self.signals.get(sem, 0)} signals precede it")


def _check_access(access: Access, limits: _Limits) -> None:
    space = access.memory.upper()
    if access.start % access.elem_bytes:
        raise FormatError(f"{access.operand} {space} {'offset' if space == 'DRAM' else 'address'}"
                          f" {access.start} is not aligned to {access.elem_bytes} bytes")
    span = f"{space} range [{access.start}, {access.end}) of {access.operand}"
    if access.memory == "sram":
        if access.end > limits.machine.sram_bytes:
            raise FormatError(f"{span} exceeds sram_bytes {limits.machine.sram_bytes}")
        if access.end > limits.sram_bytes:
            raise FormatError(f"{span} exceeds the program's sram_bytes {limits.sram_bytes}")
        return
    if access.binding == CONST_POOL:
        if access.writes:
            raise FormatError("stores to the constant pool")
        if access.end > limits.constants_size:
            raise FormatError(f"{span} exceeds the constant pool of "
                              f"{limits.constants_size} bytes")
        return
    if access.binding >= len(limits.bindings):
        raise FormatError(f"binding {access.binding} out of range "
                          f"({len(limits.bindings)} bindings)")
    min_size, read_only = limits.bindings[access.binding]
    if access.writes and read_only:
        raise FormatError(f"stores to read-only binding {access.binding}")
    if access.end > min_size:
        raise FormatError(f"{span} exceeds binding {access.binding} min_size {min_size}")


def _positive(fields: dict, *names: str) -> None:
    for name in names:
        if fields[name] < 1:
            raise FormatError(f"{name} must be positive, got {fields[name]}")


def _positive_pairs(fields: dict, *names: str) -> None:
    for name in names:
        low, high = unpack_pair(fields[name])
        if low < 1 or high < 1:
            raise FormatError(f"{name} {low}x{high} must be positive")


def _window_fits(fields: dict, axis: int, size: str, out: str) -> None:
    """(out-1)·stride + (kernel-1)·dilation < size along one spatial axis."""
    kernel = unpack_pair(fields["kh_kw"])[axis]
    stride = unpack_pair(fields["sh_sw"])[axis]
    dilation = unpack_pair(fields["dh_dw"])[axis]
    if (fields[out] - 1) * stride + (kernel - 1) * dilation >= fields[size]:
        raise FormatError(f"window ({out} {fields[out]}, kernel {kernel}, stride {stride}, "
                          f"dilation {dilation}) reads past {size} {fields[size]}")


def _mac_flags(fields: dict, flags: int, dtype: int) -> None:
    if flags & Flag.MIXED_SIGN and dtype not in BYTE_INTS:
        raise FormatError(f"flag mixed_sign needs i8 or u8 operands, not {DTYPE_NAMES[dtype]}")
    if flags & Flag.NARROW_SUM and dtype not in HALF_FLOATS:
        raise FormatError(f"flag narrow_sum needs f16 or bf16 operands, not {DTYPE_NAMES[dtype]}")
    if flags & Flag.HALF_B and dtype != DType.F32:
        raise FormatError(f"flag half_b needs an f32 instruction, not {DTYPE_NAMES[dtype]}")
    if flags & Flag.ACCUMULATE and flags & Flag.BIAS:
        raise FormatError("flags accumulate and bias exclude each other")
    if not flags & Flag.BIAS and fields["bias"]:
        raise FormatError(f"bias is {fields['bias']} but the bias flag is not set")


def _no_check(fields: dict, flags: int, dtype: int) -> None:
    pass


def _check_dma(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "n0", "n1", "n2", "n3")


def _check_fill(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "n0", "n1", "n2", "n3")
    if flags & Flag.PUSH_CONSTANT:
        if DTYPE_BYTES[dtype] != 4:
            raise FormatError(f"a push constant fills 32-bit elements, not {DTYPE_NAMES[dtype]}")
        return      # the ordinal is checked against the export's constant count
    if fields["value"] >> (8 * DTYPE_BYTES[dtype]):
        raise FormatError(f"value 0x{fields['value']:x} does not fit {DTYPE_NAMES[dtype]}")


def _check_matmul(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "m", "n", "k")
    a_row = fields["m"] if flags & Flag.TRANSPOSE_A else fields["k"]
    b_row = fields["k"] if flags & Flag.TRANSPOSE_B else fields["n"]
    for ld, row in (("lda", a_row), ("ldb", b_row), ("ldo", fields["n"])):
        if fields[ld] < row:
            raise FormatError(f"{ld} {fields[ld]} is less than the row length {row}")
    _mac_flags(fields, flags, dtype)


def _check_conv2d(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "c", "hi", "wi", "f", "ho", "wo", "groups")
    _positive_pairs(fields, "kh_kw", "sh_sw", "dh_dw")
    for name in ("c", "f"):
        if fields[name] % fields["groups"]:
            raise FormatError(f"{name} {fields[name]} is not divisible by groups "
                              f"{fields['groups']}")
    _window_fits(fields, 0, "hi", "ho")
    _window_fits(fields, 1, "wi", "wo")
    _mac_flags(fields, flags, dtype)


def _check_dwconv2d(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "c", "hi", "wi", "ho", "wo")
    _positive_pairs(fields, "kh_kw", "sh_sw", "dh_dw")
    _window_fits(fields, 0, "hi", "ho")
    _window_fits(fields, 1, "wi", "wo")
    _mac_flags(fields, flags, dtype)


def _check_vector(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "n0", "n1", "n2")


def _check_vcvt(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "n0", "n1", "n2")
    if fields["src_dtype"] not in DTYPE_NAMES:
        raise FormatError(f"unknown src_dtype {fields['src_dtype']}")
    if fields["src_dtype"] == DType.I64 and (dtype != DType.F32 or flags or
                                             fields["scale"] not in (0, F32_ONE)):
        raise FormatError("src_dtype i64 converts to f32 only, unscaled, without flags")


def _check_vround(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "n0", "n1", "n2")
    if bin(flags & ROUNDING_FLAGS).count("1") > 1:
        raise FormatError("flags floor, ceil and half_away exclude each other")
    if bin(flags & ~ROUNDING_FLAGS).count("1") > 1:
        raise FormatError("flags src_i8, src_u8 and src_f32 exclude each other")


def _check_vpool(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "c", "hi", "wi", "ho", "wo")
    _positive_pairs(fields, "kh_kw", "sh_sw", "dh_dw")
    _window_fits(fields, 0, "hi", "ho")
    _window_fits(fields, 1, "wi", "wo")
    pt, pl = unpack_pair(fields["pt_pl"])
    vh, vw = unpack_pair(fields["vh_vw"])
    if pt + vh > fields["hi"] or pl + vw > fields["wi"]:
        raise FormatError(f"valid region rows [{pt}, {pt + vh}) cols [{pl}, {pl + vw}) "
                          f"exceeds the {fields['hi']}x{fields['wi']} tile")
    if flags & Flag.COUNT_INCLUDE_PAD and not flags & Flag.POOL_AVG:
        raise FormatError("flag count_include_pad needs avg")


def _check_vreduce(fields: dict, flags: int, dtype: int) -> None:
    _positive(fields, "outer", "inner")
    if flags & Flag.REDUCE_MAX and flags & Flag.REDUCE_MEAN:
        raise FormatError("flags max and mean exclude each other")


_SHAPE_CHECKS = {
    "dma.load": _check_dma, "dma.store": _check_dma, "fill": _check_fill,
    "matmul": _check_matmul, "conv2d": _check_conv2d, "dwconv2d": _check_dwconv2d,
    "vcvt": _check_vcvt, "vpool": _check_vpool, "vreduce": _check_vreduce,
    "vround": _check_vround, "vrequant": _check_vround,
}
# Every other vector opcode is an elementwise unary or binary op over 3-D boxes.
_SHAPE_CHECKS.update({info.name: _check_vector for info in OPCODES.values()
                      if info.engine == Engine.VECTOR and info.name not in _SHAPE_CHECKS})
