"""What a new user does: the README's commands, the stock tools' flags as IREE's docs use
them, and the mistakes a user can make. Every mistake must print one line on stderr, exit
non-zero and show no Python traceback; run-module mistakes are compared with the stock
iree-run-module (local-task, the same model compiled for llvm-cpu): same status code
and the same message where the stock tool's is about the user's input."""
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.samples import REPO, SAMPLES_DIR

IREE_COMPILE = REPO / "bin" / "iree-compile"
IREE_RUN_MODULE = REPO / "bin" / "iree-run-module"
STOCK_RUN_MODULE = Path(sys.executable).parent / "iree-run-module"
STATUS = re.compile(r"(?:^|: )([A-Z_]{4,}); ")
SAMPLE = "host_fallback"        # 4x64 f32 in, 4x32 f32 out; one npu and one host dispatch
FUNCTION = "HostFallback"


def run(args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def readme_block(language: str) -> str:
    """The first ```language block of the README's "Use it like IREE" section."""
    section = (REPO / "README.md").read_text().split("## Use it like IREE", 1)[1]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def assert_one_clear_line(result: subprocess.CompletedProcess) -> str:
    """The run failed with exactly one non-empty stderr line and no traceback."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    return lines[0]


# -- the README


@pytest.fixture(scope="module")
def readme_dir(tmp_path_factory) -> Path:
    """A directory laid out like the repository for the README's relative paths: bin/ and
    .venv/ (links to the real ones) and a copy of samples/ (the commands write into it)."""
    root = tmp_path_factory.mktemp("readme")
    (root / "bin").symlink_to(REPO / "bin")
    (root / ".venv").symlink_to(Path(sys.executable).parents[1])
    shutil.copytree(SAMPLES_DIR, root / "samples",
                    ignore=shutil.ignore_patterns("*.npy", "__pycache__"))
    (root / "build").mkdir()
    return root


def new_user_environment() -> dict:
    """The environment of a fresh shell after `make install`: the venv is not activated."""
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return {**env, "PATH": os.pathsep.join(path)}


def test_readme_commands(readme_dir):
    """The "Use it like IREE" block, verbatim, in a shell without the venv activated."""
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_block("")],
                            cwd=readme_dir, env=new_user_environment(), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[SUCCESS] all function outputs matched their expected values." in result.stdout
    assert re.search(r"^Dispatch #0 SingleConv\S+: .* -> npu \(", result.stderr, re.M)
    assert "Compiled 1 dispatch (1 npu, 0 host)" in result.stderr
    assert "DEVICE_LOCAL" in result.stderr             # --print_statistics
    assert len(list((readme_dir / "build" / "asm").glob("*.s"))) == 1


def test_readme_python_api(readme_dir):
    """The README's Python snippet, with `x` the sample's input (the shell commands of
    test_readme_commands generated it)."""
    x_path = readme_dir / "samples" / "onnx_conv" / "input_0.npy"
    if not x_path.exists():
        run([sys.executable, readme_dir / "samples" / "onnx_conv" / "make_model.py"])
    program = ("import numpy as np\n"
               "x = np.load('samples/onnx_conv/input_0.npy')\n"
               + readme_block("python") +
               "np.save('build/python_api_y.npy', y)\n")
    result = run([sys.executable, "-c", program], cwd=readme_dir)
    assert result.returncode == 0, result.stderr
    y = np.load(readme_dir / "build" / "python_api_y.npy")
    expected = np.load(readme_dir / "samples" / "onnx_conv" / "expected_0.npy")
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


# -- stock iree-run-module flags


@pytest.fixture(scope="module")
def files(generated, npu_build, cpu_vmfb, tmp_path_factory) -> dict:
    """The sample's vmfbs and inputs, plus the files users get wrong."""
    d = tmp_path_factory.mktemp("cli")
    g = generated(SAMPLE)
    x = np.load(g.input)
    x.tofile(d / "x.bin")
    np.save(d / "x_f64.npy", x.astype(np.float64))
    np.save(d / "x_3x64.npy", x[:3])
    npu_vmfb = npu_build(SAMPLE).vmfb
    (d / "garbage.vmfb").write_bytes(b"not a vmfb\n")
    (d / "random.npy").write_bytes(np.random.default_rng(0).bytes(200))
    (d / "empty.npy").write_bytes(b"")
    (d / "truncated.vmfb").write_bytes(npu_vmfb.read_bytes()[:4096])
    return {"npu": npu_vmfb, "cpu": cpu_vmfb(SAMPLE), "x": g.input, "expected": g.expected,
            "onnx": g.onnx, "dir": d}


def run_npu(files, *flags) -> subprocess.CompletedProcess:
    return run([IREE_RUN_MODULE, "--device=npu-sim", f"--module={files['npu']}", *flags])


def test_function_raw_input_and_npy_output(files):
    """`--function`, a shaped raw input (`4x64xf32=@x.bin`) and `--output=@y.npy`."""
    out = files["dir"] / "y.npy"
    result = run_npu(files, f"--function={FUNCTION}", f"--input=4x64xf32=@{files['dir'] / 'x.bin'}",
                     f"--output=@{out}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"EXEC @{FUNCTION}")
    np.testing.assert_allclose(np.load(out), np.load(files["expected"]), rtol=1e-4, atol=1e-4)


def test_shaped_input_from_npy_reads_raw_bytes_like_stock(files):
    """`--input=4x64xf32=@x.npy`: with a shape the file is raw data in both tools (the
    .npy header is read as values); only `@x.npy` parses numpy files."""
    out_npu, out_cpu = files["dir"] / "raw_npu.npy", files["dir"] / "raw_cpu.npy"
    flags = [f"--function={FUNCTION}", f"--input=4x64xf32=@{files['x']}"]
    ours = run_npu(files, *flags, f"--output=@{out_npu}")
    stock = run([STOCK_RUN_MODULE, "--device=local-task", f"--module={files['cpu']}", *flags,
                 f"--output=@{out_cpu}"])
    assert ours.returncode == 0 and stock.returncode == 0, ours.stderr + stock.stderr
    assert np.load(out_npu).shape == np.load(out_cpu).shape == (4, 32)


def test_expected_output_success_and_failure_like_stock(files):
    good = run_npu(files, f"--input=@{files['x']}", f"--expected_output=@{files['expected']}")
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[-1] == \
        "[SUCCESS] all function outputs matched their expected values."
    flags = [f"--input=@{files['x']}", f"--expected_output=@{files['x']}"]
    ours = run_npu(files, *flags)
    stock = run([STOCK_RUN_MODULE, "--device=local-task", f"--module={files['cpu']}", *flags])
    assert ours.returncode == stock.returncode == 1
    assert ours.stdout.splitlines()[1] == stock.stdout.splitlines()[1] == (
        "[FAILED] result[0]: metadata is 4x32xf32; expected that the view matches 4x64xf32; "
        "expected that the view is equal to contents of a view of 4x64xf32")


# -- mistakes, compared with the stock iree-run-module
# (id, flags with {x} {dir} placeholders, module: "vmfb" (the tool's own), "other" (the
#  other tool's), "onnx" or a file in {dir},
#  status code of ours, status code of stock, text both messages contain)

RUN_MISTAKES = [
    ("wrong-shape", ["--input=3x64xf32=0"], "vmfb", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
     "tensor shape dimension 0 mismatch; expected 4 but have 3; "
     "expected shape `4x64`, actual shape `3x64`"),
    ("wrong-shape-npy", ["--input=@{dir}/x_3x64.npy"], "vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "tensor shape dimension 0 mismatch"),
    ("wrong-dtype", ["--input=4x64xi32=1"], "vmfb", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
     "tensor element type mismatch; expected f32 (21000020) but have i32 (10000020)"),
    ("wrong-dtype-npy", ["--input=@{dir}/x_f64.npy"], "vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "tensor element type mismatch; expected f32 (21000020) but have f64"),
    ("missing-function", ["--function=nope", "--input=@{x}"], "vmfb", "NOT_FOUND", "NOT_FOUND",
     "no function `nope` exported by module"),
    ("missing-module", ["--input=@{x}"], "{dir}/missing.vmfb", "NOT_FOUND", "NOT_FOUND",
     "failed to open file"),
    # stock reports a missing input file as UNKNOWN ("unable to open file ... with mode 2")
    ("missing-input-file", ["--input=@{dir}/missing.npy"], "vmfb", "NOT_FOUND", "UNKNOWN",
     "parsing input `@{dir}/missing.npy`"),
    ("unsupported-flag", ["--bogus_flag", "--input=@{x}"], "vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "bogus_flag"),
    ("garbage-vmfb", ["--input=@{x}"], "{dir}/garbage.vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "FlatBuffer data is not present or less than 16 bytes"),
    ("truncated-vmfb", ["--input=@{x}"], "{dir}/truncated.vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "FlatBuffer length prefix out of bounds"),
    # each tool given the vmfb compiled for the other one's device
    ("other-target-vmfb", ["--input=@{x}"], "other", "INCOMPATIBLE", "INCOMPATIBLE",
     "HAL device `__device_0` not found or unavailable"),
    ("onnx-as-module", ["--input=@{x}"], "onnx", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
     "loading bytecode module at"),
    # the messages differ: "function expects 1 inputs but 0 were provided" (ours) and
    # "input list and function mismatch; expected 1 arguments but passed 0" (stock)
    ("no-input", [], "vmfb", "INVALID_ARGUMENT", "INVALID_ARGUMENT", ""),
    ("extra-input", ["--input=@{x}", "--input=@{x}"], "vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "parsing function inputs"),
    ("unparsable-value", ["--input=4x64xf32=abc"], "vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "parsing input `4x64xf32=abc`"),
    ("input-too-large-for-memory", ["--input=100000x100000x100000xf32=0"], "vmfb",
     "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED", "parsing input `100000x100000x100000xf32=0`"),
    ("input-element-count-overflow", ["--input=100000x100000x100000x100000xf32=0"], "vmfb",
     "OUT_OF_RANGE", "OUT_OF_RANGE", "shape element count overflows device size at dimension 3"),
    ("input-dimension-beyond-int64", ["--input=10000000000000000000xf32=0"], "vmfb",
     "INVALID_ARGUMENT", "INVALID_ARGUMENT",
     "shape[0] invalid value '10000000000000000000' of '10000000000000000000'"),
    ("random-bytes-npy", ["--input=@{dir}/random.npy"], "vmfb", "INVALID_ARGUMENT",
     "INVALID_ARGUMENT", "npy header magic mismatch"),
    ("empty-npy", ["--input=@{dir}/empty.npy"], "vmfb", "OUT_OF_RANGE", "OUT_OF_RANGE",
     "end-of-file"),
]


def module_path(files, module: str, device: str) -> str:
    if module == "vmfb":
        return str(files["npu" if device == "npu-sim" else "cpu"])
    if module == "other":
        return str(files["cpu" if device == "npu-sim" else "npu"])
    if module == "onnx":
        return str(files["onnx"])
    return module.format(dir=files["dir"])


def mistake_run(files, tool, device, flags, module) -> subprocess.CompletedProcess:
    args = [f.format(x=files["x"], dir=files["dir"]) for f in flags]
    return run([tool, f"--device={device}", f"--module={module_path(files, module, device)}",
                *args])


@pytest.mark.parametrize("case", RUN_MISTAKES, ids=[c[0] for c in RUN_MISTAKES])
def test_run_module_mistake_like_stock(files, case):
    _, flags, module, our_code, stock_code, shared = case
    shared = shared.format(dir=files["dir"])
    line = assert_one_clear_line(mistake_run(files, IREE_RUN_MODULE, "npu-sim", flags, module))
    stock = mistake_run(files, STOCK_RUN_MODULE, "local-task", flags, module)
    assert stock.returncode != 0
    assert STATUS.search(line)[1] == our_code, line
    assert STATUS.search(stock.stderr)[1] == stock_code, stock.stderr
    assert shared in line, line
    assert shared in stock.stderr, stock.stderr


# -- corrupt vmfbs: one line naming the damage, quoting at most a short escaped excerpt
# (id, member (a name suffix), bytes in it, their replacement, what the line starts with)

CORRUPT_VMFBS = [
    ("module-name-not-utf8", "module.fb", b"\x06\x00\x00\x00module", b"\x06\x00\x00\x00\xffodule",
     "DATA_LOSS; malformed bytecode module: module name `\\xffodule` is not valid UTF-8; "
     "loading bytecode module at"),
    ("export-name-not-utf8", "module.fb", b"\x0c\x00\x00\x00HostFallback\x00",
     b"\x0c\x00\x00\x00\xffostFallback\x00",
     "DATA_LOSS; malformed bytecode module: export 1 name `\\xffostFallback` is not valid "
     "UTF-8; loading bytecode module at"),
    # the name's length reaches 5800 bytes into the flatbuffer's binary data
    ("module-name-length-damaged", "module.fb", b"\x06\x00\x00\x00module",
     b"\xa8\x16\x00\x00module", "DATA_LOSS; malformed bytecode module: module name `module\\x00"),
    ("host-library-name-not-utf8", "_embedded_elf_x86_64.so", b"HostFallback$async_dispatch_1\x00",
     b"\xffostFallback$async_dispatch_1\x00",
     "DATA_LOSS; malformed host executable: library name "
     "`\\xffostFallback$async_dispatch_1` is not valid UTF-8; while invoking native function "
     "hal.executable.create; while calling import"),
    ("npu-fb-identifier", "_npu_fb.fb", b"NPUF", b"XXXX",
     "INVALID_ARGUMENT; executable npu-fb verification failed: file identifier b'XXXX' is "
     "not b'NPUF'; while invoking native function hal.executable.create; while calling "
     "import; at "),
]


def corrupt_copy(vmfb: Path, member_suffix: str, old: bytes, new: bytes, out: Path) -> Path:
    """`vmfb` with the first `old` inside the data of its member named *`member_suffix`
    replaced by `new`."""
    data = bytearray(vmfb.read_bytes())
    with zipfile.ZipFile(vmfb) as archive:
        info, = [i for i in archive.infolist() if i.filename.endswith(member_suffix)]
    name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_length + extra_length
    at = data.index(old, start, start + info.file_size)
    data[at:at + len(old)] = new
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("case", CORRUPT_VMFBS, ids=[c[0] for c in CORRUPT_VMFBS])
def test_corrupt_vmfb_is_one_short_line(files, case):
    name, member, old, new, message = case
    vmfb = corrupt_copy(files["npu"], member, old, new, files["dir"] / f"{name}.vmfb")
    line = assert_one_clear_line(run([IREE_RUN_MODULE, "--device=npu-sim", f"--module={vmfb}",
                                      f"--input=@{files['x']}"]))
    assert line.startswith(message), line
    assert line.isprintable() and len(line) < 400, line
    assert line.count("verification failed") <= 1, line


def test_error_context_names_the_function_like_stock(files):
    """The model has no `iree.abi.declaration` (ONNX imports): the stock tool ends the
    context with `invoking function 'HostFallback'`, without an empty declaration."""
    line = assert_one_clear_line(run_npu(files, "--input=3x64xf32=0"))
    assert line.endswith("invoking function 'HostFallback'"), line


NPU_SIM_MISTAKES = [
    ("other-machine", ["--npu_sim_machine_sram_bytes=1048576"],
     "FAILED_PRECONDITION; executable npu-fb was compiled for a different NPU machine "
     "configuration: sram_bytes=2097152 (device: 1048576)"),
    ("unknown-machine-parameter", ["--npu_sim_machine_bogus=1"],
     "INVALID_ARGUMENT; unknown NPU machine parameter 'bogus'"),
    ("unwritable-output", ["--output=@{dir}/no/such/dir/y.npy"],
     "unable to open file"),
]


@pytest.mark.parametrize("case", NPU_SIM_MISTAKES, ids=[c[0] for c in NPU_SIM_MISTAKES])
def test_npu_sim_mistake(files, case):
    _, flags, message = case
    args = [f.format(dir=files["dir"]) for f in flags]
    line = assert_one_clear_line(run_npu(files, f"--input=@{files['x']}", *args))
    assert message in line, line


# -- iree-compile mistakes

TINY_MLIR = """
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.atan %a : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
"""

COMPILE_MISTAKES = [
    ("missing-input", ["{dir}/missing.mlir"],
     "iree-compile: error: cannot open input file '{dir}/missing.mlir': No such file or directory"),
    ("malformed-mlir", ["{dir}/bad.mlir"], "iree-compile: error: {dir}/bad.mlir:1:17: "),
    ("malformed-onnx", ["{dir}/bad.onnx"],
     "iree-compile: error: {dir}/bad.onnx: not a valid ONNX model"),
    ("unknown-flag", ["{dir}/tiny.mlir", "--bogus-flag"],
     "iree-compile: error: Unknown command line argument '--bogus-flag'"),
    ("unknown-npu-flag", ["{dir}/tiny.mlir", "--iree-npu-bogus=1"],
     "iree-compile: error: unknown npu flag '--iree-npu-bogus'"),
    ("bad-machine-parameter", ["{dir}/tiny.mlir", "--iree-npu-machine-sram-bytes=lots"],
     "iree-compile: error: invalid --iree-npu-machine-* flag: NPU machine parameter "
     "'sram_bytes' needs an integer, got 'lots'"),
    ("bad-fallback-value", ["{dir}/tiny.mlir", "--iree-npu-fallback=maybe"],
     "iree-compile: error: --iree-npu-fallback=maybe: expected --iree-npu-fallback=host or =error"),
    ("unsupported-stock-flag", ["{dir}/tiny.mlir", "--dump-compilation-phases-to={dir}/phases"],
     "iree-compile: error: --dump-compilation-phases-to is not supported with the npu target"),
    ("unwritable-dump-dir", ["{dir}/tiny.mlir", "--iree-npu-dump-asm={dir}/tiny.mlir/asm"],
     "iree-compile: error: "),
    ("unwritable-report", ["{dir}/tiny.mlir", "--iree-npu-dispatch-report={dir}/no/dir/r.txt"],
     "iree-compile: error: "),
    ("fallback-error", ["{dir}/tiny.mlir", "--iree-npu-fallback=error"],
     "iree-compile: error: dispatch #0 main_dispatch_0_elementwise_8_f32 cannot run on npu: "
     "not supported on npu: linalg.generic: math.atan in an elementwise body has no NPU "
     "equivalent (--iree-npu-fallback=error)"),
]


@pytest.fixture(scope="module")
def compile_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("compile")
    (d / "tiny.mlir").write_text(TINY_MLIR)
    (d / "bad.mlir").write_text("func.func @main(\n")
    (d / "bad.onnx").write_bytes(b"not an onnx model\n")
    return d


def test_compile_with_stock_flags_then_run(compile_dir):
    """IREE's documented spelling: --iree-hal-target-device, --iree-input-type,
    --output-format, -o; then a literal --input. math.atan runs on the host."""
    vmfb = compile_dir / "tiny.vmfb"
    compiled = run([IREE_COMPILE, "--iree-hal-target-device=npu", "--iree-input-type=auto",
                    "--output-format=vm-bytecode", compile_dir / "tiny.mlir", "-o", vmfb])
    assert compiled.returncode == 0, compiled.stderr
    ran = run([IREE_RUN_MODULE, "--device=npu-sim", f"--module={vmfb}", "--function=main",
               "--input=2x4xf32=0 1 2 3 4 5 6 7"])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == ("2x4xf32=[0 0.785398 1.10715 1.24905]"
                                           "[1.32582 1.3734 1.40565 1.4289]")


def test_compile_to_phase_from_stdin(compile_dir):
    """`-` reads stdin; --compile-to stops at a phase and prints its IR."""
    result = subprocess.run([str(IREE_COMPILE), "--iree-hal-target-backends=npu",
                             "--compile-to=executable-sources", "-"], input=TINY_MLIR,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("hal.executable private @main_dispatch_0") == 1


@pytest.mark.parametrize("case", COMPILE_MISTAKES, ids=[c[0] for c in COMPILE_MISTAKES])
def test_compile_mistake(compile_dir, case):
    _, args, message = case
    args = [a.format(dir=compile_dir) for a in args]
    result = run([IREE_COMPILE, "--iree-hal-target-backends=npu", *args,
                  "-o", compile_dir / "out.vmfb"])
    line = assert_one_clear_line(result)
    assert line.startswith(message.format(dir=compile_dir)), line
    assert result.returncode == 1
