"""HostLibrary's ABI plumbing and its errors, using a hand-written library
(fake_library.c) and one small stock llvm-cpu executable."""
import concurrent.futures
import contextlib
import subprocess

import numpy as np
import pytest

from hal_driver.device.host_library import HostLibrary
from hal_driver.status import StatusCode, StatusError

from .buffers import aligned_bytes, binding_for
from .iree_tools import compile_mlir

EMBEDDED = "embedded-elf-x86_64"

ADD = """
func.func @add(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %0 = arith.addf %a, %b : tensor<64xf32>
  return %0 : tensor<64xf32>
}
"""


@pytest.fixture(scope="module")
def add_executable(tmp_path_factory):
    """(executable, export name, workgroup count) of a 64-element add."""
    compiled = compile_mlir(ADD, tmp_path_factory.mktemp("add"))
    [dispatch] = compiled.dispatches
    executable = HostLibrary(*compiled.only_executable())
    yield executable, dispatch.export_name, dispatch.workgroup_count
    executable.close()


@contextlib.contextmanager
def raises(code: StatusCode, match: str):
    """pytest.raises for a StatusError with `code` whose str() matches `match`."""
    with pytest.raises(StatusError, match=match) as info:
        yield info
    assert info.value.code == code, str(info.value)


# ---- Loading -------------------------------------------------------------------

def test_garbage_bytes():
    with raises(StatusCode.INVALID_ARGUMENT, "not an ELF file"):
        HostLibrary(EMBEDDED, b"\x00garbage" * 100)


def test_empty_bytes():
    with raises(StatusCode.INVALID_ARGUMENT, "not an ELF file"):
        HostLibrary(EMBEDDED, b"")


def test_elf_for_another_machine(fake_library):
    data = bytearray(fake_library())
    data[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64
    with raises(StatusCode.INVALID_ARGUMENT, "not a 64-bit little-endian x86-64 ELF"):
        HostLibrary(EMBEDDED, bytes(data))


def test_truncated_elf(fake_library):
    data = fake_library()[:200]
    with raises(StatusCode.INVALID_ARGUMENT, "program headers .* do not lie in its 200 bytes"):
        HostLibrary(EMBEDDED, data)


def test_shared_object_without_query_symbol(tmp_path):
    source = tmp_path / "plain.c"
    source.write_text("int plain(void) { return 0; }\n")
    output = tmp_path / "plain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(source), "-o", str(output)],
                   check=True)
    with raises(StatusCode.INVALID_ARGUMENT, "no `iree_hal_executable_library_query`"):
        HostLibrary(EMBEDDED, output.read_bytes())


def test_unsupported_format(fake_library):
    with raises(StatusCode.UNIMPLEMENTED, "format `vmvx-bytecode-fb` is not supported"):
        HostLibrary("vmvx-bytecode-fb", fake_library())


def test_other_abi_version(fake_library):
    with raises(StatusCode.FAILED_PRECONDITION, "does not support ABI version 6"):
        HostLibrary(EMBEDDED, fake_library(FAKE_VERSION=5))


def test_required_import_is_not_provided(fake_library):
    data = fake_library(FAKE_IMPORT='"mylib_fn_v1"')
    with raises(StatusCode.NOT_FOUND, "requires import `mylib_fn_v1`"):
        HostLibrary(EMBEDDED, data)


def test_optional_import_resolves_to_null(fake_library):
    with HostLibrary(EMBEDDED, fake_library(FAKE_IMPORT='"?mylib_fn_v1"')) as e:
        assert e.export_names == ["record", "fail_at_1_2_0"]


def test_executable_constant_count_must_match(fake_library):
    data = fake_library(FAKE_CONSTANTS=2)
    with raises(StatusCode.INVALID_ARGUMENT, "declares 2 constants; 0 provided"):
        HostLibrary(EMBEDDED, data)


def test_same_bytes_load_twice_independently(fake_library):
    data = fake_library()
    first, second = HostLibrary(EMBEDDED, data), HostLibrary(EMBEDDED, data)
    first.close()
    out = aligned_bytes(64)
    second.dispatch(0, (1, 1, 1), [5], [out])
    assert out.view(np.uint32)[0] == 5
    second.close()


# ---- Exports and dispatch plumbing -------------------------------------------

def test_export_info(fake_library):
    with HostLibrary(EMBEDDED, fake_library()) as executable:
        assert executable.name == "fake"
        info = executable.export_info(executable.lookup("record"))
        assert info.name == "record"
        assert (info.binding_count, info.constant_count) == (1, 1)
        assert info.workgroup_size == (4, 2, 1)
        assert info.local_memory_pages == 2


def test_grid_constants_and_local_memory_reach_every_workgroup(fake_library):
    data = fake_library(FAKE_CONSTANTS=1)
    with HostLibrary(EMBEDDED, data, constants=[1000]) as executable:
        out = aligned_bytes(4 * 3 * 5 * 2)
        executable.dispatch(0, (3, 5, 2), [20], [out])
        np.testing.assert_array_equal(out.view(np.uint32), 1020 + np.arange(30))
        # numpy integers work as well as Python ints.
        out[:] = 0
        executable.dispatch(np.int64(0), np.array([3, 5, 2]), np.array([20], np.uint32),
                            [out])
        np.testing.assert_array_equal(out.view(np.uint32), 1020 + np.arange(30))


def test_concurrent_dispatches(fake_library):
    with HostLibrary(EMBEDDED, fake_library()) as executable:
        outputs = [aligned_bytes(4 * 64) for _ in range(4)]

        def work(index):
            for _ in range(50):
                executable.dispatch(0, (8, 8, 1), [index], [outputs[index]])

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(work, range(4)))
        for index, out in enumerate(outputs):
            np.testing.assert_array_equal(out.view(np.uint32), index + np.arange(64))


def test_workgroup_failure_names_export_and_workgroup(fake_library):
    with HostLibrary(EMBEDDED, fake_library()) as executable:
        with raises(StatusCode.INTERNAL,
                    r"dispatch of `fail_at_1_2_0`: workgroup \(1, 2, 0\) returned 7"):
            executable.dispatch(1, (4, 4, 1), [], [])


def test_empty_grid_runs_nothing(fake_library):
    with HostLibrary(EMBEDDED, fake_library()) as executable:
        executable.dispatch(1, (4, 0, 1), [], [])


def test_unknown_export(add_executable):
    executable, _, _ = add_executable
    with raises(StatusCode.NOT_FOUND, "no export named `nope`"):
        executable.lookup("nope")


def test_ordinal_out_of_range(add_executable):
    executable, _, count = add_executable
    with raises(StatusCode.OUT_OF_RANGE, "export ordinal 3 out of range"):
        executable.dispatch(3, count, [], [])


def add_bindings():
    return [binding_for(np.ones(64, np.float32)) for _ in range(3)]


def test_wrong_binding_count(add_executable):
    executable, name, count = add_executable
    with raises(StatusCode.INVALID_ARGUMENT, "2 bindings provided; export takes 3"):
        executable.dispatch(executable.lookup(name), count, [], add_bindings()[:2])


def test_wrong_constant_count(add_executable):
    executable, name, count = add_executable
    with raises(StatusCode.INVALID_ARGUMENT, "1 constants provided; export takes 0"):
        executable.dispatch(executable.lookup(name), count, [1], add_bindings())


def test_misaligned_binding(add_executable):
    executable, name, count = add_executable
    bindings = add_bindings()
    bindings[1] = aligned_bytes(256 + 4)[4:]
    with raises(StatusCode.INVALID_ARGUMENT, "binding 1 address .* is not 64-byte aligned"):
        executable.dispatch(executable.lookup(name), count, [], bindings)


def test_read_only_binding(add_executable):
    executable, name, count = add_executable
    bindings = add_bindings()
    bindings[2] = bytes(256)
    with raises(StatusCode.INVALID_ARGUMENT, "binding 2 is not a writable"):
        executable.dispatch(executable.lookup(name), count, [], bindings)


def test_non_contiguous_binding(add_executable):
    executable, name, count = add_executable
    bindings = add_bindings()
    bindings[0] = aligned_bytes(512)[::2]
    with raises(StatusCode.INVALID_ARGUMENT, "binding 0 is not a writable contiguous"):
        executable.dispatch(executable.lookup(name), count, [], bindings)


@pytest.mark.parametrize("count", [(1, 1), (1, 1, 1 << 16), (-1, 1, 1), (1.0, 1, 1)])
def test_bad_workgroup_count(add_executable, count):
    executable, name, _ = add_executable
    with raises(StatusCode.INVALID_ARGUMENT, "workgroup count .* invalid"):
        executable.dispatch(executable.lookup(name), count, [], add_bindings())


def test_bad_constant_value(fake_library):
    with HostLibrary(EMBEDDED, fake_library()) as executable:
        with raises(StatusCode.INVALID_ARGUMENT, "constant 0 is 4294967296"):
            executable.dispatch(0, (1, 1, 1), [1 << 32], [aligned_bytes(64)])


def test_use_after_close(fake_library):
    executable = HostLibrary(EMBEDDED, fake_library())
    executable.close()
    executable.close()
    with raises(StatusCode.FAILED_PRECONDITION, "has been closed"):
        executable.dispatch(0, (1, 1, 1), [0], [aligned_bytes(64)])
