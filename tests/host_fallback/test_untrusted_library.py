"""Host executables are untrusted bytes: the checking ELF loader (native/elf_loader.c)
refuses what an IREE executable library does not need, and the fault guard
(native/fault_guard.c) turns a fault or an endless workgroup into a failed dispatch.

Each case that would kill the process if the guard failed runs in a child process, so
a regression shows up as a failed test with the child's exit status, not a dead run."""
import pathlib
import re
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from hal_driver.device.host_library import HostLibrary
from hal_driver.status import StatusCode, StatusError

from .buffers import aligned_bytes, binding_for
from .iree_tools import compile_mlir

EMBEDDED = "embedded-elf-x86_64"
REPO = pathlib.Path(__file__).resolve().parents[2]

ADD = """
func.func @add(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %0 = arith.addf %a, %b : tensor<64xf32>
  return %0 : tensor<64xf32>
}
"""

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
PF_X, PF_W = 1, 2
DT_NEEDED, DT_RELA, DT_RELASZ = 1, 7, 8


@pytest.fixture(scope="module")
def add_library(tmp_path_factory) -> bytes:
    """The embedded ELF of a 64-element add, as the stock llvm-cpu backend emits it."""
    return compile_mlir(ADD, tmp_path_factory.mktemp("add")).only_executable()[1]


def program_headers(data: bytes) -> list[tuple[int, tuple]]:
    """(file offset, Elf64_Phdr fields) of each program header."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phnum, = struct.unpack_from("<H", data, 56)
    return [(phoff + 56 * i, struct.unpack_from("<IIQQQQQQ", data, phoff + 56 * i))
            for i in range(phnum)]


def dynamic_entries(data: bytes) -> list[tuple[int, int, int]]:
    """(file offset, tag, value) of each dynamic entry up to DT_NULL."""
    [(_, dynamic)] = [(o, h) for o, h in program_headers(data) if h[0] == PT_DYNAMIC]
    entries, offset = [], dynamic[2]
    while True:
        tag, value = struct.unpack_from("<qQ", data, offset)
        if tag == 0:
            return entries
        entries.append((offset, tag, value))
        offset += 16


def load_error(data: bytes) -> StatusError:
    with pytest.raises(StatusError) as info:
        HostLibrary(EMBEDDED, data)
    return info.value


def test_stock_library_loads_and_runs(add_library):
    with HostLibrary(EMBEDDED, add_library) as executable:
        a = np.arange(64, dtype=np.float32)
        buffers = [binding_for(a), binding_for(2 * a), aligned_bytes(256)]
        executable.dispatch(0, (1, 1, 1), [], buffers)
        np.testing.assert_array_equal(buffers[2].view(np.float32), 3 * a)


def test_writable_and_executable_segment_is_refused(add_library):
    data = bytearray(add_library)
    [(offset, _)] = [(o, h) for o, h in program_headers(data)
                     if h[0] == PT_LOAD and h[1] & PF_X]
    struct.pack_into("<I", data, offset + 4, PF_X | PF_W | 4)
    error = load_error(bytes(data))
    assert error.code == StatusCode.INVALID_ARGUMENT
    assert "writable and executable" in error.message


def test_interpreter_segment_is_refused(add_library):
    data = bytearray(add_library)
    offset, header = [(o, h) for o, h in program_headers(data) if h[0] != PT_LOAD][-1]
    struct.pack_into("<I", data, offset, PT_INTERP)
    error = load_error(bytes(data))
    assert error.code == StatusCode.UNIMPLEMENTED and "PT_INTERP" in error.message


def test_needed_library_is_refused(add_library):
    data = bytearray(add_library)
    offset, _, _ = dynamic_entries(data)[0]
    struct.pack_into("<qQ", data, offset, DT_NEEDED, 1)     # a name inside .dynstr
    error = load_error(bytes(data))
    assert error.code == StatusCode.UNIMPLEMENTED
    assert "needs shared library" in error.message


def test_huge_segment_is_refused(add_library):
    data = bytearray(add_library)
    offset, _ = [(o, h) for o, h in program_headers(data) if h[0] == PT_LOAD][-1]
    struct.pack_into("<Q", data, offset + 40, 1 << 40)      # p_memsz
    error = load_error(bytes(data))
    assert error.code == StatusCode.INVALID_ARGUMENT and "does not fit" in error.message


def test_relocations_outside_the_image_are_refused(add_library):
    data = bytearray(add_library)
    [(offset, _, _)] = [e for e in dynamic_entries(data) if e[1] == DT_RELASZ]
    struct.pack_into("<qQ", data, offset, DT_RELASZ, 1 << 30)
    error = load_error(bytes(data))
    assert error.code == StatusCode.INVALID_ARGUMENT
    assert "relocations" in error.message and "do not lie" in error.message


def test_unknown_relocation_type_is_refused(add_library):
    data = bytearray(add_library)
    [(_, _, rela)] = [e for e in dynamic_entries(data) if e[1] == DT_RELA]
    # .rela.dyn lies in the first segment, whose file offsets equal its addresses.
    struct.pack_into("<I", data, rela + 8, 37)              # R_X86_64_IRELATIVE
    error = load_error(bytes(data))
    assert error.code == StatusCode.UNIMPLEMENTED and "relocation type 37" in error.message


def run_child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with the repository importable."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


MISBEHAVING = """
    from hal_driver.device.host_library import HostLibrary
    from hal_driver.status import StatusError
    executable = HostLibrary("embedded-elf-x86_64", bytes.fromhex(DATA))
    for name in NAMES:
        try:
            executable.dispatch(executable.lookup(name), (3, 1, 1), [], [], timeout_ms=300)
            print(name, "returned")
        except StatusError as e:
            print(name, e.code.name, e.message)
    # The guard stays usable: a well-behaved export still runs.
    executable.dispatch(1, (1, 1, 1), [], [])
    print("after: ok")
"""


@pytest.mark.parametrize("name, code, message", [
    ("segfault", "INTERNAL", r"workgroup \(0, 0, 0\) raised SIGSEGV at address 0x0"),
    ("recurse", "INTERNAL", r"workgroup \(0, 0, 0\) raised SIGSEGV"),
    ("spin", "DEADLINE_EXCEEDED", r"deadline of 300 ms exceeded in workgroup \(0, 0, 0\)"),
])
def test_misbehaving_workgroup_fails_the_dispatch(fake_library, name, code, message):
    data = fake_library(FAKE_MISBEHAVE=1)
    script = (f"DATA = {data.hex()!r}\nNAMES = [{name!r}]\n" + textwrap.dedent(MISBEHAVING))
    start = time.monotonic()
    result = run_child(script)
    assert result.returncode == 0, result.stderr[-2000:]
    first, after = result.stdout.splitlines()
    assert first.startswith(f"{name} {code} "), first
    assert re.search(message, first), first
    assert after == "after: ok"
    assert time.monotonic() - start < 30


def test_fault_outside_a_guarded_call_still_kills_the_process(fake_library):
    """The guard's handlers pass other faults on: the process dies as it did before."""
    data = fake_library(FAKE_MISBEHAVE=1)
    result = run_child(f"""
        import ctypes
        from hal_driver.device.host_library import HostLibrary
        executable = HostLibrary("embedded-elf-x86_64", bytes.fromhex({data.hex()!r}))
        executable.dispatch(1, (1, 1, 1), [], [])
        ctypes.string_at(8)
    """)
    assert result.returncode == -11, (result.returncode, result.stderr[-2000:])
