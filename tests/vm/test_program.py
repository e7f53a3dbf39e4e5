"""Control flow, calls, globals, initializers, buffers, lists, refs, failures and
yields (modules/program.mlir), compared with iree.runtime where possible."""
import random

import pytest

from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import BytecodeModule, VmContext

from .conftest import IreeRunner

CASES = {
    "sum_loop": ("i", lambda rng: [rng.randrange(0, 40)]),
    "fib": ("i", lambda rng: [rng.randrange(0, 92)]),
    "mixed_call": ("iIfF", lambda rng: [rng.randrange(-2 ** 31, 2 ** 31), rng.randrange(-2 ** 63, 2 ** 63),
                                        0.5 * rng.randrange(-100, 100), rng.uniform(-1e6, 1e6)]),
    "table": ("i", lambda rng: [rng.randrange(-2, 5)]),
    "globals": ("iIfF", lambda rng: [rng.randrange(-100, 100), rng.randrange(-2 ** 40, 2 ** 40), 0.25, -1.5]),
    "buffers": ("iIfF", lambda rng: [rng.randrange(-2 ** 31, 2 ** 31), rng.randrange(-2 ** 63, 2 ** 63),
                                     0.125 * rng.randrange(-1000, 1000), rng.uniform(-1e9, 1e9)]),
    "lists": ("iIf", lambda rng: [rng.randrange(-2 ** 31, 2 ** 31), rng.randrange(-2 ** 63, 2 ** 63), 0.75]),
    "refs": ("i", lambda rng: [rng.randrange(0, 2)]),
    "fail_with": ("i", lambda rng: [0]),
    "checked": ("ii", lambda rng: [5, 5]),
}


@pytest.fixture(scope="module")
def program(compile_mlir):
    return compile_mlir.module_file("program.mlir")


@pytest.fixture
def context(program):
    module = BytecodeModule.from_file(program)
    return module, VmContext([module])


def _call(context, name, args):
    module, ctx = context
    return ctx.invoke(ctx.lookup_function(f"{module.name}.{name}"), args)


def test_results_match_iree_runtime(program):
    rng = random.Random(7)
    iree = IreeRunner(program)
    module = BytecodeModule.from_file(program)
    ours = VmContext([module])
    for name, (types, make_args) in CASES.items():
        function = ours.lookup_function(f"program.{name}")
        for _ in range(6):
            args = make_args(rng)
            assert ours.invoke(function, args) == iree(name, args, types), (name, args)


def test_initializer_ran_and_globals_persist(context):
    first = _call(context, "globals", [1, 0, 0.0, 0.0])
    second = _call(context, "globals", [1, 0, 0.0, 0.0])
    assert first[0] == 8 and first[-1] == 1      # initial 7 + 1; __init stored a buffer
    assert second[0] == 6                        # the indirect store wrote 5 in between


def test_fail_carries_status_code_and_site(context):
    with pytest.raises(StatusError) as error:
        _call(context, "fail_with", [int(StatusCode.RESOURCE_EXHAUSTED)])
    assert error.value.code == StatusCode.RESOURCE_EXHAUSTED
    assert "requested failure" in error.value.message
    assert "program.fail_with+" in error.value.message


def test_sites_name_source_locations_when_debug_info_has_them(program):
    # iree-compile 3.13 keeps a source map only for the last function (here __init).
    module = BytecodeModule.from_file(program)
    init = module.exports["__init"]
    assert ".mlir:13:" in module.describe(init, 1)
    assert module.describe(module.exports["fib"], 4).startswith("program.fib+00000004")


def test_fail_with_unknown_code_is_unknown(context):
    with pytest.raises(StatusError) as error:
        _call(context, "fail_with", [99])
    assert error.value.code == StatusCode.UNKNOWN and "99" in error.value.message


def test_check_ops_fail_with_failed_precondition(context):
    with pytest.raises(StatusError) as error:
        _call(context, "checked", [1, 2])
    assert error.value.code == StatusCode.FAILED_PRECONDITION
    assert "a must equal b" in error.value.message


def test_rodata_is_read_only(context):
    with pytest.raises(StatusError) as error:
        _call(context, "store_rodata", [1])
    assert error.value.code == StatusCode.PERMISSION_DENIED


@pytest.mark.parametrize("index", [5, -1, 1 << 62])
def test_buffer_load_out_of_range(context, index):
    with pytest.raises(StatusError) as error:
        _call(context, "load_out_of_range", [index])
    assert error.value.code == StatusCode.OUT_OF_RANGE


def test_rodata_buffers_are_zero_copy_views(program):
    module = BytecodeModule.from_file(program)
    (buffer,) = module.rodata_buffers
    assert not buffer.mutable and buffer.data.readonly
    assert bytes(buffer.data[:4]) == bytes([1, 2, 3, 250])
    assert buffer.data.obj is not None


def test_yield_suspends_and_resumes(context):
    module, ctx = context
    invocation = ctx.begin(ctx.lookup_function("program.yields"), [3])
    yields = 0
    while not invocation.run():
        yields += 1
    assert yields == 3 and invocation.results == [3]
    assert _call(context, "yields", [5]) == [5]


def test_argument_errors(context):
    module, ctx = context
    function = ctx.lookup_function("program.fib")
    with pytest.raises(StatusError) as error:
        ctx.invoke(function, [])
    assert error.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(StatusError):
        ctx.invoke(function, ["x"])
    with pytest.raises(StatusError) as error:
        ctx.lookup_function("program.nope")
    assert error.value.code == StatusCode.NOT_FOUND
