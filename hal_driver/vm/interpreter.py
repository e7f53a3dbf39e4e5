"""Executes bytecode with an explicit frame stack (no Python recursion).

`compile_function` turns a verified function into a list of handlers once per
module state (handlers.py); `Invocation` runs a call to completion or until it
yields. Frames are bytecode frames or generator frames (a native import that
returned a generator: each `yield` inside it suspends the invocation, like
IREE's DEFERRED status; the generator's return value is the import's result).

Call boundaries:
  * internal calls copy argument registers into the callee's frame, placed by the
    callee's calling convention (i32/f32 next register, i64/f64 next even pair,
    refs next ref register); `return` copies registers into the caller's result
    registers;
  * imports and host calls marshal through Python values by the import's
    calling convention (see native_module.py), also when the import is another
    bytecode module's export. The handler of a call to a native import does the
    whole call itself, with an argument reader generated for its registers
    (`_arg_reader`), so the common case never leaves the handler loop.
"""
import struct
import types

from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import values
from hal_driver.vm.cconv import register_placement
from hal_driver.vm.handlers import CALL, GENERATOR, IMPORT, RETURN, YIELD, HandlerBuilder
from hal_driver.vm.native_module import NativeFunction
from hal_driver.vm.ref import REF_CLASSES, ref_type
from hal_driver.vm.opcodes import IMPORT_BIT, REF_MASK, REF_MOVE_BIT, REF_TYPE_BIT

MAX_FRAMES = 4096



def _import_context(name: str) -> str:
    """What IREE's VM appends to the status of a failed import call."""
    return f"while invoking native function {name}; while calling import"

class CompiledFunction:
    __slots__ = ("module", "ordinal", "code", "offsets", "arg_types", "arg_places",
                 "result_types", "i32_count", "ref_count")

    def __init__(self, module, ordinal, code, offsets, cconv, descriptor):
        self.module = module
        self.ordinal = ordinal
        self.code = code
        self.offsets = offsets
        self.arg_types, self.result_types = cconv if cconv else ((), ())
        self.arg_places = tuple(register_placement(self.arg_types))   # enter_frame's
        self.i32_count = descriptor.i32_registers
        self.ref_count = descriptor.ref_registers

    def describe(self, pc: int) -> str:
        return self.module.describe(self.ordinal, self.offsets[min(pc, len(self.offsets) - 1)])


class Frame:
    __slots__ = ("function", "state", "regs", "refs", "pc", "pending", "boundary")

    def __init__(self, function, state, boundary):
        self.function = function
        self.state = state
        self.regs = [0] * function.i32_count
        self.refs = [None] * function.ref_count
        self.pc = 0
        self.pending = None      # the result destinations of the call in progress
        self.boundary = boundary  # entered from the host or an import: results as Python values


class GeneratorFrame:
    __slots__ = ("generator", "name", "result_types")

    def __init__(self, generator, name, result_types):
        self.generator = generator
        self.name = name
        self.result_types = result_types


class NativeTarget:
    """An import resolved to a NativeFunction."""

    def __init__(self, function: NativeFunction, full_name: str, result_types):
        self.function = function
        self.full_name = full_name
        self.result_types = result_types


class BytecodeTarget:
    """An import resolved to another bytecode module's export."""

    def __init__(self, state, ordinal: int, full_name: str):
        self.state = state
        self.ordinal = ordinal
        self.full_name = full_name


def _fell_off_end(r, R):
    raise StatusError(StatusCode.INVALID_ARGUMENT, "execution ran past the end of the function")


def compile_function(state, ordinal: int) -> CompiledFunction:
    module = state.module
    verified = module.functions[ordinal]
    builder = HandlerBuilder(state, verified.block_index)
    code, offsets = [], []
    for index, inst in enumerate(verified.instructions):
        if inst.mnemonic in _CALL_BUILDERS:
            handler = _CALL_BUILDERS[inst.mnemonic](state, builder, *inst.operands)
        else:
            handler = builder.build(inst)
        code.append(handler)
        offsets.append(inst.offset)
    code.append(_fell_off_end)
    offsets.append(module.definition.descriptors[ordinal].bytecode_length)
    return CompiledFunction(module, ordinal, code, offsets, module.internal_cconvs[ordinal],
                            module.definition.descriptors[ordinal])


# Call instructions ------------------------------------------------------------
def _internal_call(state, function, src, dst, resume):
    args, _ = state.module.internal_cconvs[function]
    value_moves, ref_moves = [], []
    for kind, reg, place in zip(args, src, register_placement(args)):
        if kind == "r":
            ref_moves.append((reg & REF_MASK, bool(reg & REF_MOVE_BIT), place))
        else:
            value_moves.append((reg, place))
    control = (CALL, function, tuple(value_moves), tuple(ref_moves), dst, resume)
    return lambda r, R: control


def _arg_plan(items, segments, src) -> tuple:
    """Static plan for reading import arguments: per top-level cconv item, either
    (kind, reg) or a tuple of span elements, each a tuple of (kind, reg)."""
    plan = []
    regs = iter(src)
    for position, item in enumerate(items):
        if isinstance(item, tuple):
            count = segments[position]
            plan.append(tuple(tuple((kind, next(regs)) for kind in item) for _ in range(count)))
        else:
            plan.append((item, next(regs)))
    return tuple(plan)


def _import_call(state, function, segments, src, dst, resume):
    ordinal = function & ~IMPORT_BIT
    args, results = state.module.import_cconvs[ordinal]
    plan = _arg_plan(args, segments, src)
    target = state.imports[ordinal]
    if isinstance(target, NativeTarget):
        return _native_import(target, _arg_reader(plan), dst, resume)
    if target is None:
        name = state.module.imports[ordinal].name

        def unresolved(r, R):
            raise StatusError(StatusCode.NOT_FOUND,
                              f"optional import `{name}` (ordinal {ordinal}) not resolved")
        return unresolved
    control = (IMPORT, target, plan, (dst, results), resume)
    return lambda r, R: control


def _native_import(target: NativeTarget, read, dst, resume):
    """The handler of a call to a native function: reads its arguments, calls it on
    the spot and writes its results, then goes on at `resume` (None: the next
    instruction). A function that returns a generator is left to the interpreter
    (GENERATOR control)."""
    fn, name, result_types = target.function.fn, target.full_name, target.result_types
    context = _import_context(name)
    write = _result_writer(dst, result_types, name)
    pending = (dst, result_types)

    def h(r, R):
        args = read(r, R)
        try:
            returned = fn(*args)
        except StatusError as e:
            raise e.annotate(context) from None
        except Exception as e:
            raise StatusError(StatusCode.INTERNAL, f"{type(e).__name__}: {e}; {context}") from e
        if returned.__class__ is types.GeneratorType:
            return (GENERATOR, returned, name, result_types, pending, resume)
        if write is not None:
            write(returned, r, R)
        return resume
    return h


def _call(state, builder, function, src, dst):
    if function & IMPORT_BIT:
        return _import_call(state, function, None, src, dst, None)
    return _internal_call(state, function, src, dst, None)


def _call_yieldable(state, builder, function, src, resume_target, dst):
    resume = builder.block_index[resume_target]
    if function & IMPORT_BIT:
        return _import_call(state, function, None, src, dst, resume)
    return _internal_call(state, function, src, dst, resume)


def _call_variadic(state, builder, function, segments, src, dst):
    return _import_call(state, function, segments, src, dst, None)


def _call_variadic_yieldable(state, builder, function, segments, src, resume_target, dst):
    return _import_call(state, function, segments, src, dst, builder.block_index[resume_target])


def _return(state, builder, src):
    control = (RETURN, src)
    return lambda r, R: control


_CALL_BUILDERS = {
    "call": _call,
    "call.yieldable": _call_yieldable,
    "call.variadic": _call_variadic,
    "call.variadic.yieldable": _call_variadic_yieldable,
    "return": _return,
}


# Marshalling between registers and Python values --------------------------------
def _read_value(kind, reg, r, R):
    if kind == "r":
        index = reg & REF_MASK
        value = R[index]
        if reg & REF_MOVE_BIT:
            R[index] = None
        return value
    value = r[reg]
    if kind in "iI":
        if value.__class__ is float:
            return values.bitcast_f32_i32(value) if kind == "i" else values.bitcast_f64_i64(value)
        return value
    if value.__class__ is int:
        return values.bitcast_i32_f32(value) if kind == "f" else values.bitcast_i64_f64(value)
    return value


def read_import_args(plan, r, R) -> list:
    args = []
    for entry in plan:
        if entry and entry[0].__class__ is str:
            args.append(_read_value(entry[0], entry[1], r, R))
        else:
            args.append([tuple(_read_value(kind, reg, r, R) for kind, reg in element) for element in entry])
    return args


def _arg_reader(plan):
    """`read(r, R) -> tuple`: what read_import_args returns for `plan`, as one function
    generated for the call site (the registers and their kinds are fixed)."""
    lines, names = [], []

    def read(kind, reg) -> str:
        name = f"v{len(names)}"
        names.append(name)
        if kind == "r":
            lines.append(f"    {name} = R[{reg & REF_MASK}]")
            if reg & REF_MOVE_BIT:
                lines.append(f"    R[{reg & REF_MASK}] = None")
        else:
            lines.append(f"    {name} = r[{reg}]")
            other, convert = _BITCAST_READS[kind]
            lines.append(f"    if {name}.__class__ is {other}: {name} = {convert}({name})")
        return name

    items = []
    for entry in plan:
        if entry and entry[0].__class__ is str:
            items.append(read(*entry))
        else:
            elements = [f"({''.join(read(kind, reg) + ', ' for kind, reg in element)})"
                        for element in entry]
            items.append(f"[{', '.join(elements)}]")
    source = "def read(r, R):\n" + "".join(line + "\n" for line in lines) + \
             f"    return ({''.join(item + ', ' for item in items)})\n"
    scope = {"values": values}
    exec(compile(source, "<vm-import-args>", "exec"), scope)
    return scope["read"]


# A value register read as `kind` holding a number of the other class is bitcast
# (as _read_value does).
_BITCAST_READS = {"i": ("float", "values.bitcast_f32_i32"), "I": ("float", "values.bitcast_f64_i64"),
                  "f": ("int", "values.bitcast_i32_f32"), "F": ("int", "values.bitcast_i64_f64")}


def _result_writer(dst, result_types, name: str):
    """`write(returned, r, R)`: a native function's return value into the result
    registers `dst`, converted as _place_results does; None when there are no results."""
    if not result_types:
        return None
    if len(result_types) == 1:
        [kind], [reg] = result_types, dst
        if kind == "r":
            index = reg & REF_MASK

            def write_ref(value, r, R):
                if value is None or value.__class__ in REF_CLASSES:   # known refs: no check
                    R[index] = value
                else:
                    R[index] = to_register_value("r", value, "result 0")
            return write_ref

        def write_value(value, r, R):
            r[reg] = to_register_value(kind, value, "result 0")
        return write_value

    def write(returned, r, R):
        for i, (reg, kind, value) in enumerate(
                zip(dst, result_types, normalize_results(returned, result_types, name))):
            converted = to_register_value(kind, value, f"result {i}")
            if kind == "r":
                R[reg & REF_MASK] = converted
            else:
                r[reg] = converted
    return write


def to_register_value(kind: str, value, what: str):
    """Converts a Python value for a register of cconv type `kind`."""
    try:
        if kind == "r":
            if value is not None and ref_type(value) is None:
                raise TypeError(f"expected a ref or None, got {type(value).__name__}")
            return value
        if kind == "i":
            return values.i32(_as_int(value))
        if kind == "I":
            return values.i64(_as_int(value))
        if kind == "f":
            return values.to_f32(float(value))
        return float(value)
    except (TypeError, ValueError) as e:
        raise StatusError(StatusCode.INVALID_ARGUMENT, f"{what}: {e}") from None


def _as_int(value) -> int:
    if isinstance(value, float) or not hasattr(value, "__index__"):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value.__index__()


def normalize_results(returned, result_types, name: str) -> list:
    """A native function's return (None / value / tuple) as a list of values."""
    count = len(result_types)
    if count == 0:
        return []
    if count == 1:
        return [returned]
    if not isinstance(returned, (tuple, list)) or len(returned) != count:
        raise StatusError(StatusCode.INTERNAL, f"`{name}` must return a tuple of {count} values, got {returned!r}")
    return list(returned)


def enter_frame(function: CompiledFunction, state, args, what: str) -> Frame:
    """A boundary frame for `function` with Python `args` placed by its cconv."""
    if len(args) != len(function.arg_types):
        raise StatusError(StatusCode.INVALID_ARGUMENT,
                          f"{what} takes {len(function.arg_types)} arguments, {len(args)} given")
    frame = Frame(function, state, boundary=True)
    for i, (kind, value, place) in enumerate(zip(function.arg_types, args, function.arg_places)):
        if kind == "r" and (value is None or value.__class__ in REF_CLASSES):
            frame.refs[place] = value           # a known ref: nothing to convert or check
            continue
        converted = to_register_value(kind, value, f"{what} argument {i}")
        if kind == "r":
            frame.refs[place] = converted
        else:
            frame.regs[place] = converted
    return frame


def _place_results(frame: Frame, results: list) -> None:
    """Writes Python `results` into the registers `frame` is waiting on."""
    dst, result_types = frame.pending
    frame.pending = None
    for i, (reg, kind, value) in enumerate(zip(dst, result_types, results)):
        converted = to_register_value(kind, value, f"result {i}")
        if kind == "r":
            frame.refs[reg & REF_MASK] = converted
        else:
            frame.regs[reg] = converted


def _collect_results(frame: Frame, src) -> list:
    results = []
    for kind, reg in zip(frame.function.result_types, src):
        if kind == "r":
            results.append(frame.refs[reg & REF_MASK])
        else:
            results.append(_read_value(kind, reg, frame.regs, frame.refs))
    return results


_PYTHON_FAULTS = (ZeroDivisionError, OverflowError, ValueError, TypeError, IndexError,
                  KeyError, AttributeError, MemoryError, RecursionError, struct.error)


def _fault_status(error: Exception) -> StatusError:
    if isinstance(error, ZeroDivisionError):
        return StatusError(StatusCode.INVALID_ARGUMENT, "integer division by zero")
    if isinstance(error, MemoryError):
        return StatusError(StatusCode.RESOURCE_EXHAUSTED, "out of memory")
    return StatusError(StatusCode.INTERNAL, f"{type(error).__name__}: {error}")


class Invocation:
    """One call from the host: `run()` returns True when finished (see `.results`)
    and False when the program yielded; call `run()` again to resume."""

    def __init__(self, frame):
        self.stack = [frame]
        self.results = None

    @property
    def done(self) -> bool:
        return not self.stack

    def run(self) -> bool:
        stack = self.stack
        while stack:
            frame = stack[-1]
            if frame.__class__ is GeneratorFrame:
                if not self._step_generator(frame):
                    return False
                continue
            code, r, R, pc = frame.function.code, frame.regs, frame.refs, frame.pc
            try:
                while True:
                    control = code[pc](r, R)
                    if control is None:
                        pc += 1
                    elif control.__class__ is int:
                        pc = control
                    else:
                        break
            except StatusError as e:
                raise self._unwind(e, frame, pc) from None
            except _PYTHON_FAULTS as e:
                raise self._unwind(_fault_status(e), frame, pc) from e
            kind = control[0]
            if kind is YIELD:
                frame.pc = control[1]
                return False
            if kind is RETURN:
                self._return(frame, control[1])
                continue
            resume = control[-1]
            frame.pc = pc + 1 if resume is None else resume
            if kind is GENERATOR:
                _, generator, name, result_types, frame.pending, _ = control
                self._push(GeneratorFrame(generator, name, result_types))
                continue
            try:
                if kind is CALL:
                    self._call(frame, control)
                else:
                    self._call_import(frame, control)
            except StatusError as e:
                raise self._unwind(e, frame, pc) from None
        return True

    def _push(self, frame) -> None:
        if len(self.stack) >= MAX_FRAMES:
            raise StatusError(StatusCode.RESOURCE_EXHAUSTED, f"VM stack overflow ({MAX_FRAMES} frames)")
        self.stack.append(frame)

    def _call(self, caller: Frame, control) -> None:
        _, ordinal, value_moves, ref_moves, dst, _ = control
        state = caller.state
        callee = Frame(state.function(ordinal), state, boundary=False)
        r, R, regs, refs = caller.regs, caller.refs, callee.regs, callee.refs
        for src, place in value_moves:
            regs[place] = r[src]
        for src, move, place in ref_moves:
            refs[place] = R[src]
            if move:
                R[src] = None
        caller.pending = dst
        self._push(callee)

    def _call_import(self, caller: Frame, control) -> None:
        """A call of an import that another bytecode module exports."""
        _, target, plan, pending, _ = control
        args = read_import_args(plan, caller.regs, caller.refs)
        caller.pending = pending
        self._push(enter_frame(target.state.function(target.ordinal), target.state, args,
                               target.full_name))

    def _step_generator(self, frame: GeneratorFrame) -> bool:
        try:
            next(frame.generator)
            return False
        except StopIteration as stop:
            results = normalize_results(stop.value, frame.result_types, frame.name)
        except StatusError as e:
            self.stack.pop()
            raise self._unwind(e.annotate(_import_context(frame.name)), None, 0) from None
        except Exception as e:
            self.stack.pop()
            error = StatusError(StatusCode.INTERNAL,
                                f"{type(e).__name__}: {e}; {_import_context(frame.name)}")
            raise self._unwind(error, None, 0) from e
        self.stack.pop()
        self._deliver(results)
        return True

    def _deliver(self, results: list) -> None:
        if self.stack:
            _place_results(self.stack[-1], results)
        else:
            self.results = results

    def _return(self, frame: Frame, src) -> None:
        self.stack.pop()
        if frame.boundary:
            self._deliver(_collect_results(frame, src))
            return
        caller = self.stack[-1]
        dst, caller.pending = caller.pending, None
        r, R, cr, cR = frame.regs, frame.refs, caller.regs, caller.refs
        for s, d in zip(src, dst):
            if s & REF_TYPE_BIT:
                cR[d & REF_MASK] = R[s & REF_MASK]
            else:
                cr[d] = r[s]

    def _unwind(self, error: StatusError, frame, pc: int) -> StatusError:
        """Annotates `error` with the failing site and the bytecode call stack."""
        sites = []
        if frame is not None:
            sites.append(frame.function.describe(pc))
            self.stack.pop()
        for outer in reversed(self.stack):
            if outer.__class__ is Frame:
                sites.append(outer.function.describe(max(outer.pc - 1, 0)))
        self.stack.clear()
        if not sites:
            return error
        return StatusError(error.code, f"{error.message}; at " + "; called from ".join(sites))
