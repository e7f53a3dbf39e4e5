"""Builds executable handlers from verified instructions.

Each instruction becomes a closure `h(r, R)` over its decoded operands, where `r` is
the frame's value registers and `R` its ref registers. A handler returns None to
fall through, an int to jump to that instruction index, or a control tuple
(see interpreter.py) for calls, returns and yields.

Value registers hold Python numbers: i32 and f32 values in their register, i64 and
f64 values whole in the even register of their pair (the odd one is reserved).
Every handler reads all of its operands before writing its result, so results may
reuse operand registers; a moved ref (bit 0x4000) is cleared from its register
after being read.
"""
import struct

from hal_driver.status import StatusCode, StatusError, known_status_code
from hal_driver.vm import opcodes, values
from hal_driver.vm.buffer import VmBuffer, siphash24
from hal_driver.vm.list import VmList, normalize_type, ref_matches
from hal_driver.vm.ref import ref_type_text
from hal_driver.vm.opcodes import IMPORT_BIT, REF_MASK, REF_MOVE_BIT, REF_TYPE_BIT

CALL, GENERATOR, IMPORT, RETURN, YIELD = "call", "generator", "import", "return", "yield"

# Value operations: mnemonic -> expression over operands A, B, C (registers read
# in field order); the last register field is the result.
_VALUE_OPS = {
    "add.i32": "W32(A + B)", "sub.i32": "W32(A - B)", "mul.i32": "W32(A * B)",
    "div.i32.s": "DIVS(A, B, 32)", "div.i32.u": "W32((A & M32) // (B & M32))",
    "rem.i32.s": "REMS(A, B)", "rem.i32.u": "W32((A & M32) % (B & M32))",
    "fma.i32": "W32(A * B + C)", "abs.i32": "W32(abs(A))",
    "min.i32.s": "B if B < A else A", "max.i32.s": "B if A < B else A",
    "min.i32.u": "B if (B & M32) < (A & M32) else A", "max.i32.u": "B if (A & M32) < (B & M32) else A",
    "not.i32": "~A", "and.i32": "A & B", "or.i32": "A | B", "xor.i32": "A ^ B",
    "ctlz.i32": "CTLZ(A, 32)",
    "shl.i32": "W32(A << (B & 31))", "shr.i32.s": "A >> (B & 31)", "shr.i32.u": "W32((A & M32) >> (B & 31))",
    "add.i64": "W64(A + B)", "sub.i64": "W64(A - B)", "mul.i64": "W64(A * B)",
    "div.i64.s": "DIVS(A, B, 64)", "div.i64.u": "W64((A & M64) // (B & M64))",
    "rem.i64.s": "REMS(A, B)", "rem.i64.u": "W64((A & M64) % (B & M64))",
    "fma.i64": "W64(A * B + C)", "abs.i64": "W64(abs(A))",
    "min.i64.s": "B if B < A else A", "max.i64.s": "B if A < B else A",
    "min.i64.u": "B if (B & M64) < (A & M64) else A", "max.i64.u": "B if (A & M64) < (B & M64) else A",
    "not.i64": "~A", "and.i64": "A & B", "or.i64": "A | B", "xor.i64": "A ^ B",
    "ctlz.i64": "CTLZ(A, 64)",
    "shl.i64": "W64(A << (B & 63))", "shr.i64.s": "A >> (B & 63)", "shr.i64.u": "W64((A & M64) >> (B & 63))",
    "trunc.i32.i8": "A & 0xFF", "trunc.i32.i16": "A & 0xFFFF", "trunc.i64.i32": "W32(A)",
    "ext.i8.i32.s": "((A & 0xFF) ^ 0x80) - 0x80", "ext.i8.i32.u": "A & 0xFF",
    "ext.i16.i32.s": "((A & 0xFFFF) ^ 0x8000) - 0x8000", "ext.i16.i32.u": "A & 0xFFFF",
    "ext.i32.i64.s": "A", "ext.i32.i64.u": "A & M32",
    "cmp.eq.i32": "1 if A == B else 0", "cmp.ne.i32": "1 if A != B else 0",
    "cmp.lt.i32.s": "1 if A < B else 0", "cmp.lt.i32.u": "1 if (A & M32) < (B & M32) else 0",
    "cmp.nz.i32": "1 if A else 0",
    "cmp.eq.i64": "1 if A == B else 0", "cmp.ne.i64": "1 if A != B else 0",
    "cmp.lt.i64.s": "1 if A < B else 0", "cmp.lt.i64.u": "1 if (A & M64) < (B & M64) else 0",
    "cmp.nz.i64": "1 if A else 0",
    "select.i32": "B if A else C", "select.i64": "B if A else C",
    "select.f32": "B if A else C", "select.f64": "B if A else C",
    # f32: computed in double, rounded to f32 after every operation.
    "add.f32": "F32(A + B)", "sub.f32": "F32(A - B)", "mul.f32": "F32(A * B)",
    "div.f32": "F32(FDIV(A, B))", "rem.f32": "F32B['remainder'](A, B)",
    "fma.f32": "F32(F32(A * B) + C)", "abs.f32": "abs(float(A))", "neg.f32": "-float(A)",
    "ceil.f32": "F32U['ceil'](A)", "floor.f32": "F32U['floor'](A)", "round.f32": "F32U['round'](A)",
    "round.f32.even": "ROUND_EVEN(A, F32U['round'])",
    "min.f32": "B if B < A else A", "max.f32": "B if A < B else A",
    "atan.f32": "F32U['atan'](A)", "atan2.f32": "F32B['atan2'](A, B)", "cos.f32": "F32U['cos'](A)",
    "sin.f32": "F32U['sin'](A)", "exp.f32": "F32U['exp'](A)", "exp2.f32": "F32U['exp2'](A)",
    "expm1.f32": "F32U['expm1'](A)", "log.f32": "F32U['log'](A)", "log10.f32": "F32U['log10'](A)",
    "log1p.f32": "F32U['log1p'](A)", "log2.f32": "F32U['log2'](A)", "pow.f32": "F32B['pow'](A, B)",
    "rsqrt.f32": "F32(FDIV(1.0, F32U['sqrt'](A)))", "sqrt.f32": "F32U['sqrt'](A)",
    "tanh.f32": "F32U['tanh'](A)", "erf.f32": "F32U['erf'](A)",
    "cast.si32.f32": "F32(float(A))", "cast.ui32.f32": "F32(float(A & M32))",
    "cast.si64.f32": "INT_F32(A)", "cast.ui64.f32": "INT_F32(A & M64)",
    "cast.f32.si32": "V.cast_f32_si32(A)", "cast.f32.ui32": "V.cast_f32_ui32(A)",
    "cast.f32.si64": "V.cast_f32_si64(A)", "cast.f32.ui64": "V.cast_f32_ui64(A)",
    "bitcast.i32.f32": "V.bitcast_i32_f32(A)", "bitcast.f32.i32": "V.bitcast_f32_i32(A)",
    "cmp.eq.f32.o": "1 if A == B else 0", "cmp.eq.f32.u": "1 if A != A or B != B or A == B else 0",
    "cmp.ne.f32.o": "1 if A != B else 0", "cmp.ne.f32.u": "1 if A != B else 0",
    "cmp.lt.f32.o": "1 if A < B else 0", "cmp.lt.f32.u": "1 if A != A or B != B or A < B else 0",
    "cmp.lte.f32.o": "1 if A <= B else 0", "cmp.lte.f32.u": "1 if A != A or B != B or A <= B else 0",
    "cmp.nan.f32": "1 if A != A else 0",
    # f64
    "add.f64": "A + B", "sub.f64": "A - B", "mul.f64": "A * B", "div.f64": "FDIV(A, B)",
    "rem.f64": "F64B['remainder'](A, B)", "fma.f64": "A * B + C",
    "abs.f64": "abs(float(A))", "neg.f64": "-float(A)",
    "ceil.f64": "F64U['ceil'](A)", "floor.f64": "F64U['floor'](A)", "round.f64": "F64U['round'](A)",
    "round.f64.even": "ROUND_EVEN(A, F64U['round'])",
    "min.f64": "B if B < A else A", "max.f64": "B if A < B else A",
    "atan.f64": "F64U['atan'](A)", "atan2.f64": "F64B['atan2'](A, B)", "cos.f64": "F64U['cos'](A)",
    "sin.f64": "F64U['sin'](A)", "exp.f64": "F64U['exp'](A)", "exp2.f64": "F64U['exp2'](A)",
    "expm1.f64": "F64U['expm1'](A)", "log.f64": "F64U['log'](A)", "log10.f64": "F64U['log10'](A)",
    "log1p.f64": "F64U['log1p'](A)", "log2.f64": "F64U['log2'](A)", "pow.f64": "F64B['pow'](A, B)",
    "rsqrt.f64": "FDIV(1.0, F64U['sqrt'](A))", "sqrt.f64": "F64U['sqrt'](A)",
    "tanh.f64": "F64U['tanh'](A)", "erf.f64": "F64U['erf'](A)",
    "trunc.f64.f32": "F32(A)", "ext.f32.f64": "float(A)",
    "cast.si32.f64": "float(A)", "cast.ui32.f64": "float(A & M32)",
    "cast.si64.f64": "float(A)", "cast.ui64.f64": "float(A & M64)",
    "cast.f64.si32": "V.cast_f64_si32(A)", "cast.f64.ui32": "V.cast_f64_ui32(A)",
    "cast.f64.si64": "V.cast_f64_si64(A)", "cast.f64.ui64": "V.cast_f64_ui64(A)",
    "bitcast.i64.f64": "V.bitcast_i64_f64(A)", "bitcast.f64.i64": "V.bitcast_f64_i64(A)",
    "cmp.eq.f64.o": "1 if A == B else 0", "cmp.eq.f64.u": "1 if A != A or B != B or A == B else 0",
    "cmp.ne.f64.o": "1 if A != B else 0", "cmp.ne.f64.u": "1 if A != B else 0",
    "cmp.lt.f64.o": "1 if A < B else 0", "cmp.lt.f64.u": "1 if A != A or B != B or A < B else 0",
    "cmp.lte.f64.o": "1 if A <= B else 0", "cmp.lte.f64.u": "1 if A != A or B != B or A <= B else 0",
    "cmp.nan.f64": "1 if A != A else 0",
}

_ENV = {
    "W32": values.i32, "W64": values.i64, "M32": 0xFFFFFFFF, "M64": 0xFFFFFFFFFFFFFFFF,
    "DIVS": values.div_s, "REMS": values.rem_s, "CTLZ": values.ctlz, "F32": values.to_f32,
    "FDIV": values.fdiv, "F32U": values.F32_UNARY, "F32B": values.F32_BINARY,
    "F64U": values.F64_UNARY, "F64B": values.F64_BINARY, "ROUND_EVEN": values.round_even,
    "INT_F32": values.int_to_f32, "V": values,
}


def _value_factory(expression: str, arity: int):
    names = "ABC"[:arity]
    params = ", ".join(f"o{i}" for i in range(arity))
    reads = "; ".join(f"{n} = r[o{i}]" for i, n in enumerate(names))
    source = (f"def make({params}, d):\n"
              f"    def h(r, R):\n"
              f"        {reads}\n"
              f"        r[d] = {expression}\n"
              f"    return h\n")
    scope = dict(_ENV)
    exec(compile(source, "<vm-value-op>", "exec"), scope)
    return scope["make"]


def _register_arity(mnemonic: str) -> int:
    """Number of operand registers (all register fields but the trailing result)."""
    for table in (opcodes.CORE_OPS, opcodes.EXT_F32_OPS, opcodes.EXT_F64_OPS):
        for info in table.values():
            if info.mnemonic == mnemonic:
                assert all(kind in "iIfF" for kind in info.fields), mnemonic
                return len(info.fields) - 1
    raise KeyError(mnemonic)


VALUE_FACTORIES = {m: _value_factory(e, _register_arity(m)) for m, e in _VALUE_OPS.items()}


def _error(code: StatusCode, message: str) -> StatusError:
    return StatusError(code, message)


def _as_buffer(ref, what: str) -> VmBuffer:
    if not isinstance(ref, VmBuffer):
        raise _error(StatusCode.INVALID_ARGUMENT, f"{what} is null" if ref is None
                     else f"{what} is a `{ref_type_text(ref)}`, not a vm.buffer")
    return ref


def _as_list(ref) -> VmList:
    if not isinstance(ref, VmList):
        raise _error(StatusCode.INVALID_ARGUMENT, "list is null" if ref is None
                     else f"list operand is a `{ref_type_text(ref)}`, not a vm.list")
    return ref


def _check_ref_type(ref, type_name: str) -> None:
    if not ref_matches(ref, type_name):
        raise _error(StatusCode.INVALID_ARGUMENT,
                     f"ref type mismatch: have `{ref_type_text(ref)}`, "
                     f"require `{type_name}`")


def _u32(value: int) -> int:
    return value & 0xFFFFFFFF


def _u64(value: int) -> int:
    return value & 0xFFFFFFFFFFFFFFFF


class HandlerBuilder:
    """Turns the instructions of one function into handlers for one module state."""

    def __init__(self, state, block_index: dict):
        self.state = state
        self.block_index = block_index
        self.type_names = [normalize_type(t) for t in state.module.definition.types]

    def build(self, inst):
        factory = VALUE_FACTORIES.get(inst.mnemonic)
        if factory is not None:
            return factory(*inst.operands)
        method = getattr(self, "op_" + inst.mnemonic.replace(".", "_"))
        return method(*inst.operands)

    # Constants -----------------------------------------------------------------
    def op_const_i32(self, value, d):
        def h(r, R):
            r[d] = value
        return h

    op_const_i64 = op_const_i32
    op_const_f32 = op_const_i32
    op_const_f64 = op_const_i32

    def op_const_i32_zero(self, d):
        return self.op_const_i32(0, d)

    op_const_i64_zero = op_const_i32_zero

    def op_const_f32_zero(self, d):
        return self.op_const_i32(0.0, d)

    op_const_f64_zero = op_const_f32_zero

    def op_const_ref_zero(self, d):
        index = d[0]

        def h(r, R):
            R[index] = None
        return h

    def op_const_ref_rodata(self, ordinal, d):
        buffer = self.state.module.rodata_buffers[ordinal]
        index = d[0]

        def h(r, R):
            R[index] = buffer
        return h

    # Globals -------------------------------------------------------------------
    def _global_load(self, fmt, offset, d):
        unpack, rw = struct.Struct(fmt).unpack_from, self.state.rwdata

        def h(r, R):
            r[d] = unpack(rw, offset)[0]
        return h

    def _global_store(self, fmt, offset, v):
        pack, rw = struct.Struct(fmt).pack_into, self.state.rwdata

        def h(r, R):
            pack(rw, offset, r[v])
        return h

    def _indirect(self, offset_reg, width):
        rw = self.state.rwdata

        def offset_of(r):
            offset = _u32(r[offset_reg])
            if offset + width > len(rw):
                raise _error(StatusCode.OUT_OF_RANGE, f"global byte_offset out of range: {offset} (rwdata={len(rw)})")
            return offset
        return offset_of

    def _global_load_indirect(self, fmt, offset_reg, d):
        unpack, rw = struct.Struct(fmt).unpack_from, self.state.rwdata
        offset_of = self._indirect(offset_reg, struct.calcsize(fmt))

        def h(r, R):
            r[d] = unpack(rw, offset_of(r))[0]
        return h

    def _global_store_indirect(self, fmt, offset_reg, v):
        pack, rw = struct.Struct(fmt).pack_into, self.state.rwdata
        offset_of = self._indirect(offset_reg, struct.calcsize(fmt))

        def h(r, R):
            pack(rw, offset_of(r), r[v])
        return h

    def op_global_load_i32(self, o, d): return self._global_load("<i", o, d)
    def op_global_load_i64(self, o, d): return self._global_load("<q", o, d)
    def op_global_load_f32(self, o, d): return self._global_load("<f", o, d)
    def op_global_load_f64(self, o, d): return self._global_load("<d", o, d)
    def op_global_store_i32(self, o, v): return self._global_store("<i", o, v)
    def op_global_store_i64(self, o, v): return self._global_store("<q", o, v)
    def op_global_store_f32(self, o, v): return self._global_store("<f", o, v)
    def op_global_store_f64(self, o, v): return self._global_store("<d", o, v)
    def op_global_load_indirect_i32(self, o, d): return self._global_load_indirect("<i", o, d)
    def op_global_load_indirect_i64(self, o, d): return self._global_load_indirect("<q", o, d)
    def op_global_load_indirect_f32(self, o, d): return self._global_load_indirect("<f", o, d)
    def op_global_load_indirect_f64(self, o, d): return self._global_load_indirect("<d", o, d)
    def op_global_store_indirect_i32(self, o, v): return self._global_store_indirect("<i", o, v)
    def op_global_store_indirect_i64(self, o, v): return self._global_store_indirect("<q", o, v)
    def op_global_store_indirect_f32(self, o, v): return self._global_store_indirect("<f", o, v)
    def op_global_store_indirect_f64(self, o, v): return self._global_store_indirect("<d", o, v)

    def op_global_load_ref(self, ordinal, type_id, d):
        refs, type_name, index = self.state.global_refs, self.type_names[type_id], d[0]

        def h(r, R):
            value = refs[ordinal]
            _check_ref_type(value, type_name)
            R[index] = value
        return h

    def op_global_store_ref(self, ordinal, type_id, v):
        refs, type_name, (index, move) = self.state.global_refs, self.type_names[type_id], v

        def h(r, R):
            value = R[index]
            _check_ref_type(value, type_name)
            if move:
                R[index] = None
            refs[ordinal] = value
        return h

    def _global_ref_ordinal(self, r, reg):
        ordinal = _u32(r[reg])
        if ordinal >= len(self.state.global_refs):
            raise _error(StatusCode.OUT_OF_RANGE,
                         f"global ref ordinal out of range: {ordinal} (table={len(self.state.global_refs)})")
        return ordinal

    def op_global_load_indirect_ref(self, reg, type_id, d):
        refs, type_name, index = self.state.global_refs, self.type_names[type_id], d[0]

        def h(r, R):
            value = refs[self._global_ref_ordinal(r, reg)]
            _check_ref_type(value, type_name)
            R[index] = value
        return h

    def op_global_store_indirect_ref(self, reg, type_id, v):
        refs, type_name, (index, move) = self.state.global_refs, self.type_names[type_id], v

        def h(r, R):
            ordinal = self._global_ref_ordinal(r, reg)
            value = R[index]
            _check_ref_type(value, type_name)
            if move:
                R[index] = None
            refs[ordinal] = value
        return h

    # Refs ----------------------------------------------------------------------
    def op_discard_refs(self, regs):
        indices = tuple(index for index, _ in regs)

        def h(r, R):
            for index in indices:
                R[index] = None
        return h

    def op_assign_ref(self, source, d):
        (src, move), dst = source, d[0]

        def h(r, R):
            value = R[src]
            if move:
                R[src] = None
            R[dst] = value
        return h

    def op_cast_any_ref(self, source, type_id, d):
        (src, move), type_name, dst = source, self.type_names[type_id], d[0]

        def h(r, R):
            value = R[src]
            _check_ref_type(value, type_name)
            if move:
                R[src] = None
            R[dst] = value
        return h

    def op_select_ref(self, c, type_id, true_value, false_value, d):
        (t, t_move), (f, f_move), type_name, dst = true_value, false_value, self.type_names[type_id], d[0]

        def h(r, R):
            value = R[t] if r[c] else R[f]
            _check_ref_type(value, type_name)
            if t_move:
                R[t] = None
            if f_move:
                R[f] = None
            R[dst] = value
        return h

    def op_cmp_eq_ref(self, a, b, d):
        def h(r, R):
            r[d] = 1 if R[a] is R[b] else 0
        return h

    def op_cmp_ne_ref(self, a, b, d):
        def h(r, R):
            r[d] = 0 if R[a] is R[b] else 1
        return h

    def op_cmp_nz_ref(self, a, d):
        def h(r, R):
            r[d] = 0 if R[a] is None else 1
        return h

    # Switch ----------------------------------------------------------------------
    def op_switch_i32(self, index, default, cases, d):
        count = len(cases)

        def h(r, R):
            i = r[index]
            r[d] = r[cases[i]] if 0 <= i < count else r[default]
        return h

    def op_switch_i64(self, index, default, cases, d):
        """IREE 3.13 reads a selected case as one i32 register, sign-extended (only
        the default is read as i64); mirrored so results match the stock runtime."""
        count = len(cases)
        i32 = values.i32

        def h(r, R):
            i = r[index]
            r[d] = i32(r[cases[i]]) if 0 <= i < count else r[default]
        return h

    op_switch_f32 = op_switch_i32
    op_switch_f64 = op_switch_i32

    def op_switch_ref(self, index, type_id, default, cases, d):
        type_name, dst, count = self.type_names[type_id], d[0], len(cases)

        def h(r, R):
            i = r[index]
            src, move = cases[i] if 0 <= i < count else default
            value = R[src]
            _check_ref_type(value, type_name)
            if move:
                R[src] = None
            R[dst] = value
        return h

    # Lists ---------------------------------------------------------------------
    def op_list_alloc(self, type_id, capacity, d):
        element_type, dst = self.type_names[type_id], d[0]

        def h(r, R):
            R[dst] = VmList(element_type)
        return h

    def op_list_reserve(self, lst, capacity):
        def h(r, R):
            _as_list(R[lst]).reserve(_u32(r[capacity]))
        return h

    def op_list_size(self, lst, d):
        def h(r, R):
            r[d] = len(_as_list(R[lst]))
        return h

    def op_list_resize(self, lst, size):
        def h(r, R):
            _as_list(R[lst]).resize(_u32(r[size]))
        return h

    def _list_get(self, value_type, lst, index, d):
        def h(r, R):
            r[d] = _as_list(R[lst]).get_value(_u32(r[index]), value_type)
        return h

    def _list_set(self, value_type, lst, index, v):
        def h(r, R):
            _as_list(R[lst]).set_value(_u32(r[index]), r[v], value_type)
        return h

    def op_list_get_i32(self, *a): return self._list_get("i32", *a)
    def op_list_get_i64(self, *a): return self._list_get("i64", *a)
    def op_list_get_f32(self, *a): return self._list_get("f32", *a)
    def op_list_get_f64(self, *a): return self._list_get("f64", *a)
    def op_list_set_i32(self, *a): return self._list_set("i32", *a)
    def op_list_set_i64(self, *a): return self._list_set("i64", *a)
    def op_list_set_f32(self, *a): return self._list_set("f32", *a)
    def op_list_set_f64(self, *a): return self._list_set("f64", *a)

    def op_list_get_ref(self, lst, index, type_id, d):
        type_name, dst = self.type_names[type_id], d[0]

        def h(r, R):
            value = _as_list(R[lst]).get_ref(_u32(r[index]))
            R[dst] = value if ref_matches(value, type_name) else None
        return h

    def op_list_set_ref(self, lst, index, v):
        src, move = v

        def h(r, R):
            target = _as_list(R[lst])
            target.set_ref(_u32(r[index]), R[src])
            if move:
                R[src] = None
        return h

    # Buffers -------------------------------------------------------------------
    def op_buffer_alloc(self, length, alignment, d):
        dst = d[0]

        def h(r, R):
            R[dst] = VmBuffer.allocate(r[length])
        return h

    def op_buffer_clone(self, source, offset, length, alignment, d):
        dst = d[0]

        def h(r, R):
            view = _as_buffer(R[source], "source").read(r[offset], r[length])
            R[dst] = VmBuffer(bytearray(view))
        return h

    def op_buffer_length(self, buffer, d):
        def h(r, R):
            r[d] = len(_as_buffer(R[buffer], "buffer").data)
        return h

    def op_buffer_copy(self, source, source_offset, target, target_offset, length):
        def h(r, R):
            src = _as_buffer(R[source], "source_buffer")
            dst = _as_buffer(R[target], "target_buffer")
            payload = bytes(src.read(r[source_offset], r[length]))
            dst.write(r[target_offset], payload)
        return h

    def op_buffer_compare(self, lhs, lhs_offset, rhs, rhs_offset, length, d):
        def h(r, R):
            n = r[length]
            a = _as_buffer(R[lhs], "lhs_buffer").read(r[lhs_offset], n)
            b = _as_buffer(R[rhs], "rhs_buffer").read(r[rhs_offset], n)
            r[d] = 1 if a == b else 0
        return h

    def op_buffer_hash(self, source, offset, length, d):
        def h(r, R):
            view = _as_buffer(R[source], "source_buffer").read(r[offset], r[length])
            r[d] = values.i64(siphash24(bytes(view)))
        return h

    def _buffer_load(self, fmt, buffer, offset, d):
        unpack = struct.Struct(fmt).unpack_from
        size = struct.calcsize(fmt)

        def h(r, R):
            buf = _as_buffer(R[buffer], "source_buffer")
            o = r[offset] * size
            buf.check_range(o, size)
            r[d] = unpack(buf.data, o)[0]
        return h

    def _buffer_store(self, fmt, mask, buffer, offset, v):
        pack = struct.Struct(fmt).pack_into
        size = struct.calcsize(fmt)

        def h(r, R):
            buf = _as_buffer(R[buffer], "target_buffer")
            buf.check_writable()
            o = r[offset] * size
            buf.check_range(o, size)
            value = r[v]
            pack(buf.data, o, value & mask if mask else value)
        return h

    def _buffer_fill(self, fmt, mask, buffer, offset, length, v):
        packer = struct.Struct(fmt)
        size = packer.size

        def h(r, R):
            buf = _as_buffer(R[buffer], "buffer")
            buf.check_writable()
            o, n = r[offset] * size, r[length] * size
            buf.check_range(o, n)
            value = r[v]
            buf.data[o:o + n] = packer.pack(value & mask if mask else value) * (n // size)
        return h

    def op_buffer_load_i8_u(self, *a): return self._buffer_load("<B", *a)
    def op_buffer_load_i8_s(self, *a): return self._buffer_load("<b", *a)
    def op_buffer_load_i16_u(self, *a): return self._buffer_load("<H", *a)
    def op_buffer_load_i16_s(self, *a): return self._buffer_load("<h", *a)
    def op_buffer_load_i32(self, *a): return self._buffer_load("<i", *a)
    def op_buffer_load_i64(self, *a): return self._buffer_load("<q", *a)
    def op_buffer_load_f32(self, *a): return self._buffer_load("<f", *a)
    def op_buffer_load_f64(self, *a): return self._buffer_load("<d", *a)
    def op_buffer_store_i8(self, *a): return self._buffer_store("<B", 0xFF, *a)
    def op_buffer_store_i16(self, *a): return self._buffer_store("<H", 0xFFFF, *a)
    def op_buffer_store_i32(self, *a): return self._buffer_store("<i", 0, *a)
    def op_buffer_store_i64(self, *a): return self._buffer_store("<q", 0, *a)
    def op_buffer_store_f32(self, *a): return self._buffer_store("<f", 0, *a)
    def op_buffer_store_f64(self, *a): return self._buffer_store("<d", 0, *a)
    def op_buffer_fill_i8(self, *a): return self._buffer_fill("<B", 0xFF, *a)
    def op_buffer_fill_i16(self, *a): return self._buffer_fill("<H", 0xFFFF, *a)
    def op_buffer_fill_i32(self, *a): return self._buffer_fill("<I", 0xFFFFFFFF, *a)
    def op_buffer_fill_i64(self, *a): return self._buffer_fill("<Q", 0xFFFFFFFFFFFFFFFF, *a)
    def op_buffer_fill_f32(self, *a): return self._buffer_fill("<f", 0, *a)
    def op_buffer_fill_f64(self, *a): return self._buffer_fill("<d", 0, *a)

    # Control flow ----------------------------------------------------------------
    def remapper(self, remap):
        """Returns a function applying a branch remap list in order, or None."""
        value_pairs = tuple((s, d) for s, d in remap if not s & REF_TYPE_BIT)
        ref_moves = tuple((s & REF_MASK, bool(s & REF_MOVE_BIT), d & REF_MASK)
                          for s, d in remap if s & REF_TYPE_BIT)
        if not remap:
            return None

        def apply(r, R):
            for s, d in value_pairs:
                r[d] = r[s]
            for s, move, d in ref_moves:
                value = R[s]
                if move:
                    R[s] = None
                R[d] = value
        return apply

    def jump(self, target, remap):
        index = self.block_index[target]
        apply = self.remapper(remap)
        if apply is None:
            return lambda r, R: index

        def h(r, R):
            apply(r, R)
            return index
        return h

    def op_br(self, target, remap):
        return self.jump(target, remap)

    op_break = op_br

    def op_cond_break(self, condition, target, remap):
        return self.jump(target, remap)

    def op_cond_br(self, condition, true_target, true_remap, false_target, false_remap):
        on_true, on_false = self.jump(true_target, true_remap), self.jump(false_target, false_remap)

        def h(r, R):
            return on_true(r, R) if r[condition] else on_false(r, R)
        return h

    def op_br_table(self, index, default_target, default_remap, cases):
        default = self.jump(default_target, default_remap)
        jumps = tuple(self.jump(t, m) for t, m in cases)
        count = len(jumps)

        def h(r, R):
            i = r[index]
            return jumps[i](r, R) if 0 <= i < count else default(r, R)
        return h

    def op_yield(self, target, remap):
        jump = self.jump(target, remap)

        def h(r, R):
            return (YIELD, jump(r, R))
        return h

    def op_fail(self, code_reg, message):
        def h(r, R):
            code = _u32(r[code_reg])
            if code:
                status = known_status_code(code)
                if status is None:
                    raise StatusError(StatusCode.UNKNOWN, f"(status code {code}) {message}")
                raise StatusError(status, message)
        return h

    def op_import_resolved(self, function, d):
        imports, ordinal = self.state.imports, function & ~IMPORT_BIT

        def h(r, R):
            r[d] = 0 if imports[ordinal] is None else 1
        return h

    def op_trace(self, name, regs):
        moved = tuple(reg & REF_MASK for reg in regs
                      if reg & (REF_TYPE_BIT | REF_MOVE_BIT) == REF_TYPE_BIT | REF_MOVE_BIT)

        def h(r, R):
            for index in moved:
                R[index] = None
        return h

    op_print = op_trace
