"""Imports: NativeModule marshalling by cconv (scalars, refs, variadic spans),
generator imports that yield, optional imports, bytecode-to-bytecode imports."""
import pytest

from hal_driver.status import StatusCode, StatusError
from hal_driver.vm import BytecodeModule, NativeModule, VmBuffer, VmContext


class Recorder:
    def __init__(self):
        self.calls = []
        self.yields = 0

    def module(self) -> NativeModule:
        native = NativeModule("native")
        native.add("add", "0iI_I", self.add)
        native.add("scale", "0fF_fF", lambda x, y: (x * 2.0, y * 3.0))
        native.add("pack", "0rCiDCirD_i", self.pack)
        native.add("make", "0i_r", lambda n: VmBuffer(bytearray(n)))
        native.add("wait", "0i_i", self.wait)
        return native

    def add(self, a, b):
        self.calls.append(("add", a, b))
        return a + b

    def pack(self, buffer, xs, pairs):
        self.calls.append(("pack", bytes(buffer.data), xs, [(i, len(b.data)) for i, b in pairs]))
        return sum(x for (x,) in xs) * 100 + len(pairs)

    def wait(self, x):
        for _ in range(x):
            self.yields += 1
            yield
        return x * 10


@pytest.fixture(scope="module")
def paths(compile_mlir):
    return compile_mlir.module_file("imports.mlir"), compile_mlir.module_file("other.mlir")


@pytest.fixture
def setup(paths):
    recorder = Recorder()
    imports, other = (BytecodeModule.from_file(p) for p in paths)
    context = VmContext([recorder.module(), other, imports])
    return recorder, context


def _call(context, name, args):
    return context.invoke(context.lookup_function(f"imports.{name}"), args)


def test_scalar_marshalling(setup):
    recorder, context = setup
    assert _call(context, "scalars", [-5, 1 << 40, 1.5, 0.25]) == [(1 << 40) - 5, 3.0, 0.75]
    assert recorder.calls == [("add", -5, 1 << 40)]


def test_variadic_spans_become_lists_of_tuples(setup):
    recorder, context = setup
    assert _call(context, "variadic", [4, 5]) == [(4 + 5 + 3) * 100 + 2]
    assert recorder.calls == [("pack", b"hi", [(4,), (5,), (3,)], [(4, 3), (5, 2)])]


def test_empty_variadic_spans(setup):
    recorder, context = setup
    assert _call(context, "variadic_empty", []) == [0]
    assert recorder.calls == [("pack", b"hi", [], [])]


def test_generator_import_yields_and_resumes(setup):
    recorder, context = setup
    invocation = context.begin(context.lookup_function("imports.waits"), [3])
    suspended = 0
    while not invocation.run():
        suspended += 1
    assert suspended == 3 and recorder.yields == 3 and invocation.results == [31]
    assert _call(context, "waits", [0]) == [1]


def test_optional_import_unresolved(setup):
    _, context = setup
    assert _call(context, "optional", [9]) == [0, 9]
    with pytest.raises(StatusError) as error:
        _call(context, "call_missing", [1])
    assert error.value.code == StatusCode.NOT_FOUND and "native.missing" in error.value.message


def test_bytecode_to_bytecode_import_keeps_callee_state(setup):
    _, context = setup
    assert _call(context, "cross_module", [20]) == [42, 1]
    assert _call(context, "cross_module", [-1]) == [0, 2]


def test_native_errors_are_annotated(paths):
    recorder = Recorder()
    native = recorder.module()

    def failing(a, b):
        raise StatusError(StatusCode.ABORTED, "no")
    native.add("add", "0iI_I", failing)
    imports, other = (BytecodeModule.from_file(p) for p in paths)
    context = VmContext([native, other, imports])
    with pytest.raises(StatusError) as error:
        _call(context, "scalars", [1, 2, 1.0, 1.0])
    assert error.value.code == StatusCode.ABORTED
    assert error.value.message.startswith(
        "no; while invoking native function native.add; while calling import")
    assert "imports.scalars+" in error.value.message


def test_wrong_native_result_type_is_rejected(paths):
    recorder = Recorder()
    native = recorder.module()
    native.add("make", "0i_r", lambda n: 5)
    imports, other = (BytecodeModule.from_file(p) for p in paths)
    context = VmContext([native, other, imports])
    with pytest.raises(StatusError) as error:
        _call(context, "variadic", [1, 2])
    assert error.value.code == StatusCode.INVALID_ARGUMENT


def test_import_resolution_errors(paths):
    imports, other = (BytecodeModule.from_file(p) for p in paths)
    with pytest.raises(StatusError) as error:
        VmContext([Recorder().module(), imports])      # `other` missing
    assert error.value.code == StatusCode.NOT_FOUND
    bad = Recorder().module()
    bad.add("add", "0ii_i", lambda a, b: a + b)
    with pytest.raises(StatusError) as error:
        VmContext([bad, other, imports])
    assert error.value.code == StatusCode.INVALID_ARGUMENT and "0iI_I" in error.value.message
    native = Recorder().module()
    del native.functions["scale"]
    with pytest.raises(StatusError) as error:
        VmContext([native, other, imports])
    assert "native.scale" in error.value.message


def test_native_functions_can_be_invoked_directly(setup):
    recorder, context = setup
    assert context.invoke(context.lookup_function("native.add"), [1, 2]) == [3]


def test_generator_native_invoked_directly_runs_to_completion(setup):
    recorder, context = setup
    assert context.invoke(context.lookup_function("native.wait"), [2]) == [20]
    assert recorder.yields == 2
