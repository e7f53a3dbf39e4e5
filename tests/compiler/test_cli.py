"""bin/iree-compile and the npu CLI in fresh processes: passthrough, flags, dumps, errors."""
import json
import os
import subprocess
import zipfile

import pytest
from onnx import TensorProto, helper

from tests.compiler import models, planners
from tests.compiler.conftest import IREE_COMPILE, STOCK_IREE_COMPILE, run_cli


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return path


@pytest.fixture
def chain_mlir(tmp_path):
    path = tmp_path / "chain.mlir"
    path.write_text(models.CHAIN_MLIR)
    return path


def test_llvm_cpu_through_bin_is_the_stock_tool(tmp_path):
    add_mlir = write(tmp_path, "add.mlir", models.ADD_MLIR)
    ours, stock = tmp_path / "ours.vmfb", tmp_path / "stock.vmfb"
    flags = ["--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=generic"]
    assert run_cli(*flags, add_mlir, "-o", ours).returncode == 0
    subprocess.run([str(STOCK_IREE_COMPILE), *flags, str(add_mlir), "-o", str(stock)], check=True)
    assert ours.read_bytes() == stock.read_bytes()


def test_bin_works_from_path_through_a_symlink(tmp_path):
    (tmp_path / "bin").mkdir()
    os.symlink(IREE_COMPILE, tmp_path / "bin" / "iree-compile")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    result = subprocess.run(["iree-compile", "--iree-hal-target-backends=npu", "missing.mlir"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.stderr == "iree-compile: error: cannot open input file 'missing.mlir': No such file or directory\n"


def test_dumps_and_report(chain_mlir, tmp_path):
    result = run_cli("--iree-hal-target-backends=npu", chain_mlir, "-o", tmp_path / "chain.vmfb",
                     "--iree-npu-dispatch-report", f"--iree-npu-dump-asm={tmp_path / 'asm'}",
                     f"--iree-npu-dump-ir={tmp_path / 'ir'}", f"--iree-npu-dump-json={tmp_path / 'json'}",
                     planner="alternating")
    assert result.returncode == 0, result.stderr
    report = result.stderr.splitlines()
    assert report[0].startswith("Dispatch #0 main_dispatch_0_matmul_64x64x32_f32: test op -> npu")
    assert report[-1].startswith("Compiled 3 dispatches (2 npu, 1 host) in ")
    assert sorted(os.listdir(tmp_path / "asm")) == [
        "main_dispatch_0_matmul_64x64x32_f32.s", "main_dispatch_2_reduction_64x64_f32.s"]
    assert sorted(os.listdir(tmp_path / "ir")) == [
        "main_dispatch_0_matmul_64x64x32_f32.00.npu-lowered.mlir",
        "main_dispatch_0_matmul_64x64x32_f32.01.npu-scheduled.mlir",
        "main_dispatch_0_matmul_64x64x32_f32.02.emit.mlir",
        "main_dispatch_2_reduction_64x64_f32.00.npu-lowered.mlir",
        "main_dispatch_2_reduction_64x64_f32.01.npu-scheduled.mlir",
        "main_dispatch_2_reduction_64x64_f32.02.emit.mlir"]
    assert (tmp_path / "asm" / "main_dispatch_0_matmul_64x64x32_f32.s").read_text() == \
        "; main_dispatch_0_matmul_64x64x32_f32\n  halt\n"
    tasks = json.loads((tmp_path / "json" / "chain.npu.json").read_text())["tasks"]
    assert [(t["name"], t["target"], t["depends_on"]) for t in tasks] == [
        ("main_dispatch_0_matmul_64x64x32_f32", "npu", []),
        ("main_dispatch_1_matmul_64x64x64_f32", "host", [0]),
        ("main_dispatch_2_reduction_64x64_f32", "npu", [1])]
    assert tasks[1]["reason"] == "not supported on npu: test planner"
    assert [b["buffer"] for b in tasks[0]["inputs"]] == ["external0", "external1"]
    assert tasks[0]["outputs"] == [{"binding": 2, "buffer": "transient0", "offset": 0, "length": 32768}]
    assert tasks[0]["detail"] == {"engine": "mac"}


def test_stock_flags_keep_working_with_npu(tmp_path):
    add_mlir = write(tmp_path, "add.mlir", models.ADD_MLIR)
    result = run_cli("--iree-hal-target-device=npu", add_mlir, "--compile-to=hal",
                     "--mlir-print-ir-after-all", "-o", tmp_path / "add_hal.mlir", planner="npu")
    assert result.returncode == 0, result.stderr
    assert "// -----// IR Dump After" in result.stderr
    assert 'key("hal.device.id" :: "npu*")' in (tmp_path / "add_hal.mlir").read_text()


def test_vmfb_to_stdout(tmp_path):
    path = tmp_path / "add.mlir"
    path.write_text(models.ADD_MLIR)
    result = run_cli("--iree-hal-target-backends=npu", path, planner="npu", text=False)
    assert result.returncode == 0
    (tmp_path / "add.vmfb").write_bytes(result.stdout)
    with zipfile.ZipFile(tmp_path / "add.vmfb") as archive:
        assert archive.read("add_dispatch_0_npu_fb.fb") == planners.npu_fb_bytes(
            0, "add_dispatch_0_elementwise_16_f32")


def mismatched_onnx() -> bytes:
    """A Relu whose output value_info has a symbolic dim its input fixes: the imported
    function's result type disagrees with its body (as nudenet's 320n.onnx did)."""
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [y], value_info=[y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
        .SerializeToString()


def lstm_onnx(peepholes: float) -> bytes:
    """One LSTM (hidden 2, input 3, 4 steps) whose peephole weights P are `peepholes`."""
    w, r = [helper.make_tensor(name, TensorProto.FLOAT, [1, 8, n], [0.1] * 8 * n)
            for name, n in (("w", 3), ("r", 2))]
    p = helper.make_tensor("p", TensorProto.FLOAT, [1, 6], [peepholes] * 6)
    node = helper.make_node("LSTM", ["x", "w", "r", "", "", "", "", "p"], ["y"],
                            hidden_size=2, name="lstm")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1, 1, 2])],
        initializer=[w, r, p])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
        .SerializeToString()


def contrib_op_onnx() -> bytes:
    """onnxruntime's com.microsoft.Gelu, untyped, read by a Relu."""
    nodes = [helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft", name="gelu"),
             helper.make_node("Relu", ["g"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)]) \
        .SerializeToString()


def space_to_depth_crd_onnx() -> bytes:
    """SpaceToDepth mode CRD (opset 28) of an image whose height is dynamic."""
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD", name="s2d")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, "h2", 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)]) \
        .SerializeToString()


@pytest.mark.parametrize("args, message", [
    (["missing.mlir"], "cannot open input file 'missing.mlir': No such file or directory"),
    (["{contrib_onnx}"], "contrib.onnx: node 'gelu' is com.microsoft.Gelu, an operator "
     "outside the ONNX standard whose output 'g' ONNX shape inference cannot type"),
    (["{peephole_onnx}"], "peephole.onnx: LSTM node 'lstm' has peephole weights (input P, "
     "'p'), which the ONNX importer of iree-base-compiler 3.13.0 does not apply"),
    (["{s2d_onnx}"], "s2d.onnx: SpaceToDepth node 's2d' has mode CRD, which the ONNX importer "
     "of iree-base-compiler 3.13.0 computes as mode DCR, and an input whose height or width"),
    (["{bad_mlir}"], "bad.mlir:2:8: Dialect `foo' not found for custom op 'foo.bar'"),
    (["{bad_onnx}"], "bad.onnx: not a valid ONNX model: "),
    (["{mismatched_onnx}"], "mismatched.onnx: imported ONNX module does not verify: "
     "Verification failed: error: unknown: type of return operand 0"),
    (["{add_mlir}", "--no-such-flag"], "Unknown command line argument '--no-such-flag'"),
    (["{add_mlir}", "--iree-npu-no-such-flag"], "unknown npu flag '--iree-npu-no-such-flag'"),
    (["{add_mlir}", "--iree-npu-fallback=error"],
     "dispatch #0 add_dispatch_0_elementwise_16_f32 cannot run on npu: not supported on npu: "
     "test planner (--iree-npu-fallback=error)"),
])
def test_errors_are_one_line_without_traceback(tmp_path, args, message):
    paths = {"bad_mlir": write(tmp_path, "bad.mlir", "func.func @f() {\n  %0 = foo.bar : f32\n}\n"),
             "bad_onnx": write(tmp_path, "bad.onnx", b"\x08\x07garbage"),
             "mismatched_onnx": write(tmp_path, "mismatched.onnx", mismatched_onnx()),
             "peephole_onnx": write(tmp_path, "peephole.onnx", lstm_onnx(0.5)),
             "contrib_onnx": write(tmp_path, "contrib.onnx", contrib_op_onnx()),
             "s2d_onnx": write(tmp_path, "s2d.onnx", space_to_depth_crd_onnx()),
             "add_mlir": write(tmp_path, "add.mlir", models.ADD_MLIR)}
    args = [a.format(**paths) for a in args]
    result = run_cli("--iree-hal-target-backends=npu", *args, "-o", tmp_path / "out.vmfb",
                     planner="host", cwd=tmp_path)
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("iree-compile: error: ") and message in lines[0]
    assert not (tmp_path / "out.vmfb").exists()


def test_lstm_with_zero_peepholes_compiles(tmp_path):
    """P all zeros is the LSTM without peepholes, which the importer does compute."""
    path = write(tmp_path, "lstm.onnx", lstm_onnx(0.0))
    result = run_cli("--iree-hal-target-backends=npu", path, "-o", tmp_path / "out.vmfb",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.vmfb").exists()


def test_bad_machine_flag_is_one_error_line(tmp_path):
    path = write(tmp_path, "add.mlir", models.ADD_MLIR)
    result = run_cli("--iree-hal-target-backends=npu", path, "--iree-npu-machine-no-such-param=1")
    assert result.returncode == 1
    assert result.stderr.startswith("iree-compile: error: invalid --iree-npu-machine-* flag: "
                                    "unknown NPU machine parameter 'no_such_param'")
    assert len(result.stderr.splitlines()) == 1


def test_seed_model_compiles_for_the_npu_with_the_real_code_generator(seed_onnx, tmp_path):
    vmfb = tmp_path / "model.vmfb"
    result = run_cli("--iree-hal-target-backends=npu", seed_onnx, "-o", vmfb,
                     "--iree-npu-dispatch-report", f"--iree-npu-dump-asm={tmp_path / 'asm'}",
                     f"--iree-npu-dump-json={tmp_path / 'json'}")
    assert result.returncode == 0, result.stderr
    report = result.stderr.splitlines()
    assert report[0].startswith("Dispatch #0 SingleConv$async_dispatch_0_conv_8x498x498x3x3x3_f32: ")
    assert " -> npu (" in report[0]
    assert report[1].startswith("Compiled 1 dispatch (1 npu, 0 host) in ")
    with zipfile.ZipFile(vmfb) as archive:
        assert sorted(archive.namelist()) == ["SingleConv_async_dispatch_0_npu_fb.fb", "module.fb"]
    assert os.listdir(tmp_path / "asm") == ["SingleConv_async_dispatch_0_conv_8x498x498x3x3x3_f32.s"]
    task, = json.loads((tmp_path / "json" / "model.npu.json").read_text())["tasks"]
    assert (task["target"], [b["buffer"] for b in task["inputs"]], task["outputs"][0]["length"]) == (
        "npu", ["external0", "constant0"], 8 * 498 * 498 * 4)


@pytest.mark.parametrize("name, text, location", [
    ("empty.mlir", "", "0:0"),
    ("module.mlir", "module {}\n", "1:1"),
    ("private.mlir", "func.func private @f() {\n  return\n}\n", "0:0"),
])
def test_program_without_functions_is_refused_like_stock(tmp_path, name, text, location):
    """The stock tool writes no vmfb for a program without functions (its vm.module is
    never created); the npu target refuses it with the same message, not an empty module."""
    write(tmp_path, name, text)
    message = "outer module does not contain a vm.module op"
    stock = subprocess.run([str(STOCK_IREE_COMPILE), "--iree-hal-target-backends=llvm-cpu", name,
                            "-o", "stock.vmfb"], capture_output=True, text=True, cwd=tmp_path)
    assert stock.returncode == 1 and f"{name}:{location}: error: {message}" in stock.stderr
    result = run_cli("--iree-hal-target-backends=npu", name, "-o", "npu.vmfb", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, f"iree-compile: error: {name}:{location}: "
                                                     f"{message}\n")
    assert not (tmp_path / "npu.vmfb").exists()


def test_misspelled_target_names_the_registered_backends(small_conv_onnx, tmp_path):
    """The stock tool would read the .onnx file as MLIR text and print a line of binary."""
    result = run_cli("--iree-hal-target-backends=npuu", small_conv_onnx, "-o", tmp_path / "x.vmfb",
                     text=False)
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 1
    assert stderr.startswith("iree-compile: error: unknown target backend 'npuu' "
                             "(registered backends: npu, "), stderr
    assert ", llvm-cpu, " in stderr and stderr.count("\n") == 1
    result = run_cli("--iree-hal-target-backends=llvm-cpu", small_conv_onnx)
    assert (result.returncode, result.stderr) == (1, (
        f"iree-compile: error: {small_conv_onnx}: ONNX input is imported only for the npu "
        "target (--iree-hal-target-backends=npu); for other targets convert it with "
        "iree-import-onnx first\n"))
