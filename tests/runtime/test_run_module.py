"""bin/iree-run-module --device=npu-sim against the stock iree-run-module on local-task:
same stdout, same exit codes; user errors are one line on stderr."""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from hal_driver.tools import run_module
from tests.runtime.conftest import compile_pair

REPO = pathlib.Path(__file__).resolve().parents[2]
STOCK = pathlib.Path(sys.executable).parent / "iree-run-module"


def stock(vmfb, *args):
    result = subprocess.run([str(STOCK), "--device=local-task", f"--module={vmfb}", *args],
                            capture_output=True, text=True)
    return result.returncode, result.stdout


def ours(capsys, vmfb, *args):
    code = run_module.main(["--device=npu-sim", f"--module={vmfb}", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


CASES = [
    ["--function=main", "--input=2x3xf32=1 2 3 4 5 6", "--input=2x3xf32=1"],
    ["--function=main", "--input=2x3xf32=[1 2 3][4 5 6]", "--input=2x3xf32=0.1,0.2,0.3,1e8,-5,7"],
    ["--function=two", "--input=4xi32=1 2 3 4"],
    ["--function=dynamic", "--input=5xf32=0 1 2 3 -1"],
    ["--function=dynamic", "--input=2000xf32=0.5", "--output_max_element_count=7"],
    ["--function=main", "--input=2x3xf32=1 2 3 4 5 6", "--input=2x3xf32=1",
     "--expected_output=2x3xf32=2 6 12 20 30 42"],
    ["--function=main", "--input=2x3xf32=1 2 3 4 5 6", "--input=2x3xf32=1",
     "--expected_output=2x3xf32=2 6 12 20 30 43"],
    ["--function=main", "--input=2x3xf32=1 2 3 4 5 6", "--input=2x3xf32=1",
     "--expected_output=2x3xf32=2 6 12 20 30 42.00001"],
    ["--function=two", "--input=4xi32=1 2 3 4", "--expected_output=4xi32=2 4 6 8",
     "--expected_output=4xi32=1 2 3 5"],
    ["--function=two", "--input=4xi32=1 2 3 4", "--expected_output=(ignored)",
     "--expected_output=4xf32=1 2 3 4"],
    ["--function=two", "--input=4xi32=1 2 3 4", "--output=-", "--output="],
    ["--function=scalar", "--input=f32=2.5", "--input=-7", "--input=1e-3"],
    ["--function=scalar", "--input=f32=2.5", "--input=7", "--input=1.5", "--output=-",
     "--output=-", "--output=-"],
    ["--function=ints", "--input=3xi8=1 -2 100", "--input=2xi64=5 -9000000000",
     "--input=2xf16=1.5 0.1"],
]


@pytest.mark.parametrize("args", CASES, ids=range(len(CASES)))
def test_output_matches_the_stock_tool(capsys, models, args):
    stock_vmfb, npu_vmfb = models["elementwise"]
    code, out, err = ours(capsys, npu_vmfb, *args)
    assert (code, out) == stock(stock_vmfb, *args), err


def test_npy_and_binary_files(capsys, models, tmp_path):
    stock_vmfb, npu_vmfb = models["elementwise"]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with open(tmp_path / "in.npy", "wb") as f:
        np.save(f, a)
        np.save(f, a * 2)
    (tmp_path / "b.bin").write_bytes(np.full(6, 3, np.float32).tobytes())
    for tool, vmfb in (("stock", stock_vmfb), ("ours", npu_vmfb)):
        args = [f"--input=@{tmp_path}/in.npy", f"--input=+{tmp_path}/in.npy", "--function=main",
                f"--output=@{tmp_path}/{tool}.npy"]
        assert (ours(capsys, vmfb, *args)[0] if tool == "ours" else stock(vmfb, *args)[0]) == 0
        args = [f"--input=2x3xf32=@{tmp_path}/b.bin", f"--input=@{tmp_path}/in.npy",
                "--function=main", f"--output=+{tmp_path}/{tool}.npy"]
        assert (ours(capsys, vmfb, *args)[0] if tool == "ours" else stock(vmfb, *args)[0]) == 0
    for tool in ("stock", "ours"):
        with open(tmp_path / f"{tool}.npy", "rb") as f:
            first, second = np.load(f), np.load(f)
        np.testing.assert_array_equal(first, (a + 2 * a) * a)
        np.testing.assert_array_equal(second, (3 + a) * 3)


@pytest.mark.parametrize("args, message", [
    (["--module=/nonexistent.vmfb", "--function=main"], "NOT_FOUND; failed to open file"),
    (["--function=nope"], "NOT_FOUND; no function `nope` exported by module"),
    ([], "more than one exported function present; --function= must be specified explicitly"),
    (["--function=main", "--input=2x2xf32=1 2 3 4 5 6", "--input=2x3xf32=1"],
     "OUT_OF_RANGE; output data overflow: element_capacity=4 < dst_i=4; parsing input "
     "`2x2xf32=1 2 3 4 5 6`; parsing function inputs; `sync func @main("),
    (["--function=main", "--input=2x3xq32=1", "--input=2x3xf32=1"],
     "unsupported element type 'q32'"),
    (["--function=main", "--input=3x3xf32=1", "--input=2x3xf32=1"],
     "input0 shape dimension 0 mismatch; expected 2 but have 3; expected shape `2x3`, actual "
     "shape `3x3`"),
    (["--function=main", "--input=2x3xf32=1"], "function expects 2 inputs but 1 were provided"),
    (["--function=main", "--bogus=1"], "unknown flag `--bogus`"),
    (["--function=scalar", "--input=f32=1", "--input=x", "--input=1"],
     "INVALID_ARGUMENT; parsing value `x` as i32; parsing input `x`; parsing function inputs"),
    (["--function=main", "--npu_sim_machine_sram_bytes=0"], "must be positive"),
    (["--function=main", "--input=100000x100000x100000xf32=0", "--input=2x3xf32=1"],
     "RESOURCE_EXHAUSTED; out of host memory allocating 4000000000000000 bytes for a "
     "100000x100000x100000xf32 tensor; parsing input `100000x100000x100000xf32=0`"),
    (["--function=main", "--input=4611686018427387904xf32=0", "--input=2x3xf32=1"],
     "OUT_OF_RANGE; packed byte count overflows device size; parsing input"),
])
def test_user_errors_are_one_line(capsys, models, args, message):
    npu_vmfb = models["elementwise"][1]
    argv = ["--device=npu-sim", *([] if any(a.startswith("--module") for a in args)
                                  else [f"--module={npu_vmfb}"]), *args]
    code = run_module.main(argv)
    err = capsys.readouterr().err
    assert code == 1
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_input_file_that_is_not_npy(capsys, models, tmp_path):
    """Bytes without the .npy magic are not "pickled (object) data": numpy's guess at
    what a non-.npy file holds."""
    path = tmp_path / "random.npy"
    path.write_bytes(np.random.default_rng(0).bytes(200))
    code, out, err = ours(capsys, models["elementwise"][1], "--function=main",
                          f"--input=@{path}", "--input=2x3xf32=1")
    assert (code, out) == (1, "")
    assert err.startswith(f"INVALID_ARGUMENT; '{path}' is not a valid .npy file: npy header "
                          f"magic mismatch; parsing input `@{path}`; parsing function inputs")
    assert err.count("\n") == 1


def test_unwritable_trace_fails_before_running(capsys, models, tmp_path):
    """The trace is written after the run: a path that cannot be written fails first,
    not after the results were printed."""
    trace = tmp_path / "missing" / "t.json"
    code, out, err = ours(capsys, models["elementwise"][1], "--function=two",
                          "--input=4xi32=1 2 3 4", f"--npu_sim_trace={trace}")
    assert (code, out) == (1, "")
    assert err == (f"NOT_FOUND; --npu_sim_trace={trace}: directory '{trace.parent}' does not "
                   f"exist\n")
    code, out, err = ours(capsys, models["elementwise"][1], "--function=two",
                          "--input=4xi32=1 2 3 4", f"--npu_sim_trace={tmp_path}")
    assert (code, out, err) == (1, "", f"INVALID_ARGUMENT; --npu_sim_trace={tmp_path}: is a "
                                       f"directory\n")


def test_launcher_statistics_and_trace(models, tmp_path):
    npu_vmfb = models["elementwise"][1]
    result = subprocess.run(
        [str(REPO / "bin/iree-run-module"), "--device=npu-sim://", f"--module={npu_vmfb}",
         "--function=two", "--input=4xi32=1 2 3 4", "--print_statistics", "--npu_sim_stats",
         f"--npu_sim_trace={tmp_path}/trace.json", "--npu_sim_machine_clock_hz=2000000000"],
        capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("EXEC @two\nresult[0]: hal.buffer_view\n4xi32=2 4 6 8\n")
    assert "Device: npu-sim\n[[ iree_hal_allocator_t memory statistics ]]" in result.stderr
    assert "0B live" in result.stderr
    assert "dispatches: 1 (npu: 0, host fallback: 1)" in result.stderr
    assert "at 2 GHz" in result.stderr
    assert (tmp_path / "trace.json").exists()


def test_launcher_runs_other_devices_with_the_stock_tool(models):
    stock_vmfb = models["elementwise"][0]
    args = [f"--module={stock_vmfb}", "--function=two", "--input=4xi32=1 2 3 4"]
    ours = subprocess.run([str(REPO / "bin/iree-run-module"), "--device=local-sync", *args],
                          capture_output=True, text=True)
    theirs = subprocess.run([str(STOCK), "--device=local-sync", *args], capture_output=True,
                            text=True)
    assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout) == \
        (0, theirs.stdout)


def test_listings_include_npu_sim(capsys):
    assert run_module.main(["--list_drivers"]) == 0
    drivers = capsys.readouterr().out
    assert "         npu-sim: " in drivers and "      local-task: " in drivers
    assert run_module.main(["--list_devices"]) == 0
    assert capsys.readouterr().out.splitlines()[-3:] == ["local-sync://", "local-task://",
                                                         "npu-sim://"]


def test_onnx_sample_matches_its_reference_outputs(capsys, small_cnn):
    sample = small_cnn.parent    # the sample's generated input and onnx-reference output
    code, out, err = ours(capsys, small_cnn, f"--input=@{sample}/input_0.npy",
                          f"--expected_output=@{sample}/expected_0.npy", "--npu_sim_stats")
    assert code == 0, err
    assert out == ("EXEC @SmallCNN\n"
                   "[SUCCESS] all function outputs matched their expected values.\n")
    assert "host fallback: 9" in err


PARAMETER_CASES = [
    ["--parameters=model=ARCHIVE", "--input=2x4xf32=1 2 3 4 5 6 7 8"],
    ["--parameters=ARCHIVE", "--input=2x4xf32=1"],                  # scope "" only
    ["--input=2x4xf32=1"],                                          # no parameters
    ["--parameters=model=missing.irpa", "--input=2x4xf32=1"],
    ["--parameters=other=ARCHIVE", "--parameters=model=ARCHIVE", "--input=2x4xf32=-1",
     "--expected_output=2x8xf32=0"],
]


@pytest.mark.parametrize("args", PARAMETER_CASES, ids=range(len(PARAMETER_CASES)))
def test_parameter_archives_as_the_stock_tool(capsys, models, parameter_archive, args):
    """--parameters=[scope=]file.irpa: same output and exit code as the stock tool; the
    same first error (its status code and message, without the call context)."""
    args = [a.replace("ARCHIVE", str(parameter_archive)) for a in args]
    stock_vmfb, npu_vmfb = models["params"]
    result = subprocess.run([str(STOCK), "--device=local-task", f"--module={stock_vmfb}", *args],
                            capture_output=True, text=True)
    code, out, err = ours(capsys, npu_vmfb, *args)
    assert (code, out) == (result.returncode, result.stdout), err
    if code and not out:
        assert err.split(";")[0] == result.stderr.split(": ", 1)[1].split(";")[0]
        assert _message(err) == _message(result.stderr)


def _message(stderr: str) -> str:
    """The error's own message: no source location, import annotation or context."""
    text = stderr.split(": ", 1)[1] if stderr.startswith("c/") else stderr
    return text.split(";")[1].strip()


def _compare_with_stock(capsys, model, models, args):
    """Same exit code and stdout as the stock tool; on failure the same status code and
    message (stock prefixes a source location, its context differs)."""
    stock_vmfb, npu_vmfb = models[model]
    result = subprocess.run([str(STOCK), "--device=local-task", f"--module={stock_vmfb}", *args],
                            capture_output=True, text=True)
    code, out, err = ours(capsys, npu_vmfb, *args)
    assert (code, out) == (result.returncode, result.stdout), err
    if code and not out:
        stock_err = result.stderr.split("\n")[-2] if "FLAGS ERROR" in result.stderr \
            else result.stderr
        stock_err = stock_err.split(": ", 1)[1] if stock_err.startswith("c/") else stock_err
        assert err.strip().split("; ")[:2] == stock_err.strip().split("; ")[:2]


@pytest.mark.parametrize("values", ["01 00 01 01", "FF 00 01 10", "[01 00][01 01]", "01", "",
                                    "zz 1g 01 00", "1 0 1 1", "0100 01", "01 00 00 01 01",
                                    "01 00"])
def test_i1_values_are_hex_bytes_as_in_the_stock_tool(capsys, models, values):
    _compare_with_stock(capsys, "bools", models, [f"--input=4xi1={values}"])


def test_rank0_and_bool_npy_inputs_as_in_the_stock_tool(capsys, models, tmp_path):
    np.save(tmp_path / "x.npy", np.array(2.5, np.float32))
    np.save(tmp_path / "b.npy", np.array([True, False, True, True]))
    _compare_with_stock(capsys, "elementwise", models, [
        "--function=scalar", f"--input=@{tmp_path}/x.npy", "--input=7", "--input=1.5"])
    _compare_with_stock(capsys, "bools", models, [f"--input=@{tmp_path}/b.npy"])


@pytest.mark.parametrize("lines", [
    ["# a comment", "", "  // another", "--function = main ", "--input=2x3xf32=1 2 3 4 5 6"],
    ["--function=main", "--flagfile=NESTED", "--input=2x3xf32=5"],
    ["main"],
    ["--bogus=1"],
    ["--flagfile="],
    ["--flagfile=MISSING"],
])
def test_flagfile_as_in_the_stock_tool(capsys, models, tmp_path, lines):
    (tmp_path / "nested.txt").write_text("--input=2x3xf32=[1 2 3][4 5 6]\n")
    text = "\n".join(lines).replace("NESTED", str(tmp_path / "nested.txt"))
    (tmp_path / "flags.txt").write_text(text.replace("MISSING", str(tmp_path / "no.txt")))
    args = [f"--flagfile={tmp_path / 'flags.txt'}"]
    if len(lines) > 3:
        args.append("--input=2x3xf32=1")
    _compare_with_stock(capsys, "elementwise", models, args)


def test_a_flagfile_can_choose_the_device(tmp_path, models):
    stock_vmfb, npu_vmfb = models["elementwise"]
    (tmp_path / "flags.txt").write_text(f"--device=npu-sim\n--module={npu_vmfb}\n"
                                        "--function=two\n--input=4xi32=1 2 3 4\n")
    result = subprocess.run([str(REPO / "bin/iree-run-module"),
                             f"--flagfile={tmp_path / 'flags.txt'}", "--npu_sim_stats"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "4xi32=2 4 6 8" in result.stdout
    assert "npu-sim statistics" in result.stderr


def test_parameters_gathered_into_one_buffer(capsys, tmp_path, parameter_archive):
    """The discrete memory model makes the compiler gather all parameters into one
    buffer (io_parameters.gather instead of load)."""
    stock_vmfb, npu_vmfb = compile_pair("params", tmp_path,
                                        ("--iree-stream-resource-memory-model=discrete",))
    args = [f"--parameters=model={parameter_archive}", "--input=2x4xf32=1 2 3 4 5 6 7 8"]
    result = subprocess.run([str(STOCK), "--device=local-task", f"--module={stock_vmfb}", *args],
                            capture_output=True, text=True)
    code, out, err = ours(capsys, npu_vmfb, *args)
    assert (code, out) == (0, result.stdout), err
