"""Hand-assembled modules: opcodes the compiler never emits, ref move semantics,
and the verifier's rejection of malformed bytecode. Well-formed modules are also
run on iree.runtime and must give the same results."""
import math

import pytest

from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import BytecodeModule, VmContext
from hal_driver.vm.opcodes import FEATURE_EXT_F32, FEATURE_EXT_F64

from .assembler import IMPORT, Function, build_module, ref

F64 = FEATURE_EXT_F64


def _iree(data: bytes, args, types):
    import iree.runtime as rt
    instance = rt.VmInstance()
    module = rt.VmModule.copy_buffer(instance, data)
    context = rt.VmContext(instance, modules=[module])
    arguments = rt.VmVariantList(len(args))
    for value, kind in zip(args, types):
        arguments.push_float(value) if kind in "fF" else arguments.push_int(value)
    results = rt.VmVariantList(4)
    context.invoke(module.lookup_function("f0"), arguments, results)
    return [results.get_variant(i) for i in range(results.size)]


def _ours(data: bytes, args):
    module = BytecodeModule.from_bytes(data)
    context = VmContext([module])
    return context.invoke(context.lookup_function(f"{module.name}.f0"), args)


def _unary(mnemonic, cconv, requirements):
    f = Function().block("entry").op(mnemonic, 0, 2).op("return", [2])
    return build_module([(cconv, f, 4, 0, requirements)])


@pytest.mark.parametrize("mnemonic,cconv,inputs", [
    ("cast.si32.f64", "0i_F", [0, 1, -1, 2 ** 31 - 1, -2 ** 31]),
    ("cast.ui32.f64", "0i_F", [0, 1, -1, -2 ** 31]),
    ("cast.f64.si32", "0F_i", [0.0, 2.5, -2.5, 0.49999999999999994, 1e10, -1e10, 16777217.0, math.nan]),
    ("cast.f64.ui32", "0F_i", [0.0, 2.5, 3e9, 1.5e10]),
])
def test_casts_without_a_dialect_op_match_iree(mnemonic, cconv, inputs):
    data = _unary(mnemonic, cconv, F64)
    for value in inputs:
        assert _ours(data, [value]) == _iree(data, [value], cconv[1]), (mnemonic, value)


def test_indirect_globals_match_iree():
    f = (Function().block("entry")
         .op("const.i32", 8, 2)
         .op("global.store.indirect.i64", 2, 0)      # i64 arg (regs 0:1) at byte 8
         .op("global.load.indirect.i64", 2, 4)
         .op("const.i32", 4, 3)
         .op("global.store.indirect.i32", 3, 3)      # stores 4 at byte 4
         .op("global.load.indirect.i32", 3, 6)
         .op("const.f32", 0.75, 7)
         .op("const.i32", 16, 3)
         .op("global.store.indirect.f32", 3, 7)
         .op("global.load.indirect.f32", 3, 7)
         .op("const.f64", -0.125, 8)
         .op("const.i32", 24, 3)
         .op("global.store.indirect.f64", 3, 8)
         .op("global.load.indirect.f64", 3, 10)
         .op("return", [4, 6, 7, 10]))
    data = build_module([("0I_IifF", f, 12, 0, FEATURE_EXT_F32 | F64)], global_bytes=32)
    assert _ours(data, [-(1 << 50)]) == _iree(data, [-(1 << 50)], "I") == [-(1 << 50), 4, 0.75, -0.125]


def test_indirect_global_out_of_range():
    f = (Function().block("entry").op("global.load.indirect.i32", 0, 1).op("return", [1]))
    data = build_module([("0i_i", f, 2, 0)], global_bytes=8)
    assert _ours(data, [4]) == [0]
    with pytest.raises(StatusError) as error:
        _ours(data, [5])
    assert error.value.code == StatusCode.OUT_OF_RANGE and "test.f0+00000001" in error.value.message


def test_indirect_global_refs():
    f = (Function().block("entry")
         .op("const.ref.rodata", 0, ref(0))
         .op("global.store.indirect.ref", 0, 1, ref(0, move=True))
         .op("cmp.nz.ref", ref(0), 1)
         .op("global.load.indirect.ref", 0, 1, ref(1))
         .op("buffer.length", ref(1), 2)
         .op("discard.refs", [ref(1)])
         .op("return", [1, 2]))
    data = build_module([("0i_iI", f, 4, 2)], types=("i32", "!vm.buffer"), rodata=[b"abcde"],
                        global_refs=2)
    assert _ours(data, [1]) == _iree(data, [1], "i") == [0, 5]
    with pytest.raises(StatusError) as error:
        _ours(data, [2])
    assert error.value.code == StatusCode.OUT_OF_RANGE


@pytest.mark.parametrize("move,expected", [(False, [1, 1]), (True, [0, 1])])
def test_assign_ref_move_clears_source(move, expected):
    f = (Function().block("entry")
         .op("const.ref.rodata", 0, ref(0))
         .op("assign.ref", ref(0, move), ref(1))
         .op("cmp.nz.ref", ref(0), 0)
         .op("cmp.nz.ref", ref(1), 1)
         .op("discard.refs", [ref(0), ref(1)])
         .op("return", [0, 1]))
    data = build_module([("0v_ii", f, 2, 2)], types=("i32", "!vm.buffer"), rodata=[b"x"])
    assert _ours(data, []) == _iree(data, [], "") == expected


def test_select_ref_reads_operands_before_writing_and_releases_moves():
    # r1 = select(cond, move r1, move r0): the result reuses an operand register.
    f = (Function().block("entry")
         .op("const.ref.rodata", 0, ref(0))
         .op("const.ref.rodata", 1, ref(1))
         .op("select.ref", 0, 1, ref(1, True), ref(0, True), ref(1))
         .op("cmp.nz.ref", ref(0), 1)
         .op("buffer.length", ref(1), 2)
         .op("discard.refs", [ref(1)])
         .op("return", [1, 2]))
    data = build_module([("0i_iI", f, 4, 2)], types=("i32", "!vm.buffer"), rodata=[b"abc", b"hello"])
    for cond in (0, 1):
        assert _ours(data, [cond]) == _iree(data, [cond], "i") == [0, 5 if cond else 3]


def test_list_ref_type_mismatch_reads_null_and_value_from_ref_slot_fails():
    f = (Function().block("entry")
         .op("const.i32", 1, 1)
         .op("list.alloc", 2, 1, ref(0))
         .op("list.resize", ref(0), 1)
         .op("const.ref.rodata", 0, ref(1))
         .op("const.i32.zero", 2)
         .op("list.set.ref", ref(0), 2, ref(1, True))
         .op("list.get.ref", ref(0), 2, 3, ref(2))   # as !vm.list: wrong type -> null
         .op("cmp.nz.ref", ref(2), 3)
         .op("list.get.ref", ref(0), 2, 1, ref(2))   # as !vm.buffer
         .op("cmp.nz.ref", ref(2), 4)
         .op("cond_br", 0, "read", [], "done", [])
         .block("read")
         .op("list.get.i32", ref(0), 2, 5)
         .op("br", "done", [])
         .block("done")
         .op("discard.refs", [ref(0), ref(2)])
         .op("return", [3, 4]))
    data = build_module([("0i_ii", f, 6, 3)], types=("i32", "!vm.buffer", "!vm.opaque", "!vm.list<?>"),
                        rodata=[b"z"])
    assert _ours(data, [0]) == _iree(data, [0], "i") == [0, 1]
    with pytest.raises(StatusError) as error:
        _ours(data, [1])
    assert error.value.code == StatusCode.FAILED_PRECONDITION


def test_call_places_i64_arguments_on_even_registers():
    callee = Function().block("entry").op("trunc.i64.i32", 2, 1).op("add.i32", 0, 1, 0).op("return", [0])
    caller = (Function().block("entry")
              .op("call", 1, [0, 2], [0])
              .op("return", [0]))
    data = build_module([("0iI_i", caller, 4, 0), ("0iI_i", callee, 4, 0)], exports={"f0": 0})
    assert _ours(data, [5, 7]) == _iree(data, [5, 7], "iI") == [12]


# Verifier ---------------------------------------------------------------------
def _reject(function, cconv="0v_v", i32=4, refs=2, code=StatusCode.INVALID_ARGUMENT, **kwargs):
    data = build_module([(cconv, function, i32, refs, kwargs.pop("requirements", 0))], **kwargs)
    with pytest.raises(StatusError) as error:
        BytecodeModule.from_bytes(data)
    assert error.value.code == code, error.value
    return error.value.message


def _body():
    return Function().block("entry")


def test_verifier_rejects_register_out_of_range():
    message = _reject(_body().op("add.i32", 0, 9, 1).op("return", []))
    assert "test.f0+00000001" in message and "register ordinal 9 out of range 4" in message


def test_verifier_rejects_odd_i64_register():
    assert "not 8-byte aligned" in _reject(_body().op("add.i64", 1, 2, 2).op("return", []))


def test_verifier_rejects_ref_bank_confusion_and_bad_move_bits():
    assert "ref register required" in _reject(_body().op("cmp.nz.ref", 0, 0).op("return", []))
    assert "i32 register required" in _reject(_body().op("add.i32", ref(0), 0, 0).op("return", []))
    assert "MOVE" in _reject(_body().op("cmp.nz.ref", ref(0, True), 0).op("return", []))


def test_verifier_rejects_bad_branch_targets():
    f = _body().op("br", "nowhere", []).block("next").op("return", [])
    assert "not a block start" in _reject(f, blocks={0: 2})
    f = _body().op("const.i32.zero", 0).op("br", "entry", [])
    f.labels["entry"] = 1       # into the middle of an instruction
    assert "not a block start" in _reject(f)


def test_verifier_rejects_truncation_and_unknown_opcodes():
    assert "truncated" in _reject(_body().raw(b"\x22\x00"), code=StatusCode.DATA_LOSS)
    assert "unknown opcode" in _reject(_body().raw(b"\xf0"))
    assert "unknown opcode" in _reject(_body().raw(b"\xe0\xff"), requirements=FEATURE_EXT_F32)


def test_verifier_rejects_undeclared_extension_ops():
    message = _reject(_body().op("add.f32", 0, 1, 2).op("return", []))
    assert "add.f32" in message and "feature" in message


def test_verifier_rejects_out_of_range_ordinals():
    assert "import ordinal" in _reject(_body().op("call", IMPORT | 3, [], []).op("return", []))
    assert "function ordinal" in _reject(_body().op("call", 7, [], []).op("return", []))
    assert "global byte_offset" in _reject(_body().op("global.load.i32", 4, 0).op("return", []),
                                           global_bytes=4)
    assert "type ordinal" in _reject(_body().op("list.alloc", 5, 0, ref(0)).op("return", []))
    assert "rodata ordinal" in _reject(_body().op("const.ref.rodata", 0, ref(0)).op("return", []))


def test_verifier_checks_calls_against_calling_conventions():
    assert "call arguments" in _reject(_body().op("call", 0, [0], []).op("return", []))
    assert "return" in _reject(_body().op("return", [0]))
    message = _reject(_body().op("return", [1]), cconv="0v_I")
    assert "not 8-byte aligned" in message


def test_verifier_rejects_frames_too_small_for_arguments():
    # i32 registers 0-3 and the i64 pair 4:5 need 6; 4 declared stay 4 when rounded up
    assert "out of range" in _reject(_body().op("return", []), cconv="0iiiiI_v", i32=4)


def test_loader_rejects_wrong_version_and_features():
    f = _body().op("return", [])
    with pytest.raises(StatusError) as error:
        BytecodeModule.from_bytes(build_module([("0v_v", f, 0, 0)], version=(16 << 16)))
    assert "bytecode version mismatch" in error.value.message and "16.0" in error.value.message
    with pytest.raises(StatusError) as error:
        BytecodeModule.from_bytes(build_module([("0v_v", f, 0, 0)], requirements=1 << 7))
    assert "unsupported features" in error.value.message


def test_falling_off_the_end_is_an_error():
    f = _body().op("const.i32.zero", 0).op("fail", 0, "never")
    data = build_module([("0v_v", f, 1, 0)])
    with pytest.raises(StatusError) as error:
        _ours(data, [])
    assert "past the end" in error.value.message


def test_switch_ref_cast_any_ref_and_null_refs():
    f = (Function().block("entry")
         .op("const.ref.rodata", 0, ref(0))
         .op("const.ref.rodata", 1, ref(1))
         .op("const.ref.zero", ref(2))
         .op("switch.ref", 0, 1, ref(2), [ref(0), ref(1)], ref(3))
         .op("cmp.nz.ref", ref(3), 1)
         .op("cast.any.ref", ref(3), 1, ref(3))
         .op("cond_br", 1, "len", [], "done", [(1, 2)])
         .block("len")
         .op("buffer.length", ref(3), 2)
         .op("trunc.i64.i32", 2, 2)
         .op("br", "done", [])
         .block("done")
         .op("trace", "event", [ref(0, True), 1])
         .op("print", "event", [ref(1, True)])
         .op("cmp.nz.ref", ref(0), 3)
         .op("discard.refs", [ref(2), ref(3)])
         .op("return", [1, 2, 3]))
    data = build_module([("0i_iii", f, 4, 4)], types=("i32", "!vm.buffer"), rodata=[b"ab", b"cde"])
    for index in (-1, 0, 1, 2):
        assert _ours(data, [index]) == _iree(data, [index], "i"), index


def test_cast_any_ref_to_the_wrong_type_fails():
    f = (Function().block("entry")
         .op("const.ref.rodata", 0, ref(0))
         .op("cast.any.ref", ref(0, True), 1, ref(0))
         .op("discard.refs", [ref(0)])
         .op("return", []))
    data = build_module([("0v_v", f, 0, 1)], types=("i32", "!hal.buffer"), rodata=[b"x"])
    with pytest.raises(StatusError) as error:
        _ours(data, [])
    assert error.value.code == StatusCode.INVALID_ARGUMENT and "hal.buffer" in error.value.message


def test_break_ops_branch():
    f = (Function().block("entry")
         .op("break", "next", [(0, 1)])
         .block("next")
         .op("cond_break", 0, "last", [])
         .block("last")
         .op("return", [1]))
    data = build_module([("0i_i", f, 2, 0)])
    assert _ours(data, [42]) == [42]


def test_typed_f64_list():
    f = (Function().block("entry")
         .op("const.i32", 2, 2)
         .op("list.alloc", 1, 2, ref(0))
         .op("list.resize", ref(0), 2)
         .op("const.i32", 1, 3)
         .op("list.set.f64", ref(0), 3, 0)
         .op("list.get.f64", ref(0), 3, 4)
         .op("list.get.f32", ref(0), 3, 6)
         .op("discard.refs", [ref(0)])
         .op("return", [4, 6]))
    data = build_module([("0F_Ff", f, 8, 1, FEATURE_EXT_F32 | F64)], types=("i32", "f64"))
    assert _ours(data, [0.1]) == _iree(data, [0.1], "F")


def _generator_native(calls):
    from hal_driver.vm import NativeModule
    native = NativeModule("native")

    def wait(x, xs):
        calls.append((x, xs))
        yield
        yield
        return x + sum(v for (v,) in xs)
    native.add("wait", "0iCiD_i", wait)
    return native


def test_call_variadic_yieldable_resumes_at_its_block():
    f = (Function().block("entry")
         .op("const.i32", 5, 1)
         .op("call.variadic.yieldable", IMPORT | 0, [0xFFFF, 2], [0, 1, 0], "resume", [2])
         .block("resume")
         .op("return", [2]))
    data = build_module([("0i_i", f, 4, 0)], imports=[("native.wait", "0iCiD_i")])
    calls = []
    module = BytecodeModule.from_bytes(data)
    context = VmContext([_generator_native(calls), module])
    invocation = context.begin(context.lookup_function("test.f0"), [3])
    steps = 0
    while not invocation.run():
        steps += 1
    assert steps == 2 and invocation.results == [3 + 5 + 3] and calls == [(3, [(5,), (3,)])]


def test_internal_call_yieldable_of_a_yielding_function():
    callee = (Function().block("entry")
              .op("add.i32", 0, 0, 0)
              .op("yield", "after", [])
              .block("after")
              .op("return", [0]))
    caller = (Function().block("entry")
              .op("call.yieldable", 1, [0], "resume", [1])
              .block("resume")
              .op("add.i32", 1, 0, 1)
              .op("return", [1]))
    data = build_module([("0i_i", caller, 2, 0), ("0i_i", callee, 1, 0)], exports={"f0": 0})
    module = BytecodeModule.from_bytes(data)
    context = VmContext([module])
    invocation = context.begin(context.lookup_function("test.f0"), [7])
    assert invocation.run() is False and invocation.run() is True
    assert invocation.results == [21]


@pytest.mark.parametrize("cconv,declared,body_result,args", [
    ("0i_v", 0, None, [7]),            # an argument its body never reads: 0 registers declared
    ("0iii_i", 3, 2, [1, 2, 3]),       # 3 declared, 4 allocated
    ("0ii_i", 3, 3, [1, 2]),           # reads register 3 (zero): inside the rounded file
])
def test_register_counts_round_up_to_a_power_of_two_like_iree(cconv, declared, body_result, args):
    """IREE's verifier and interpreter size each register file as the declared count
    rounded up to a power of two, at least 1, and check arguments and operands against
    that; IREE's own control_flow_ops.vmasm depends on it."""
    f = Function().block("entry").op("return", [] if body_result is None else [body_result])
    data = build_module([(cconv, f, declared, 0, 0)])
    assert _ours(data, args) == _iree(data, args, cconv[1:cconv.index("_")])
