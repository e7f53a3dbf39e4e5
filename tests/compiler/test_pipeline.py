"""The split pipeline in process, with test planners in place of the code generator."""
import io
import zipfile

import numpy as np
import onnx
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import numpy_helper

from compiler_target import api, hal_binaries, pipeline
from compiler_target.errors import CompileError
from compiler_target.options import parse
from executable_format.reader import read_executable
from tests.compiler import models, planners
from tests.compiler.conftest import dump_module


def members(vmfb: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(vmfb)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


CHAIN_EXPORTS = ["main_dispatch_0_matmul_64x64x32_f32", "main_dispatch_1_matmul_64x64x64_f32",
                 "main_dispatch_2_reduction_64x64_f32"]


def test_host_plans_keep_llvm_cpu_binaries_and_select_npu_devices(planner, tmp_path):
    """The stock linker puts the host fallbacks in one llvm-cpu library."""
    planner("host")
    output = tmp_path / "chain.vmfb"
    assert api.compile_str(models.CHAIN_MLIR, output_file=str(output)) is None
    names = sorted(members(output.read_bytes()))
    assert names == ["module.fb", "source_linked_embedded_elf_x86_64.so"]
    dump = dump_module(output)
    assert "`npu*`" in dump and "`local*`" not in dump
    assert "`embedded-elf-x86_64`" in dump and "`npu-fb`" not in dump


def test_npu_plans_put_their_bytes_in_npu_fb_binaries(planner, tmp_path):
    """The stock linker puts the NPU stubs (vmvx) in one executable, whose binary becomes
    the plans' npu-fb executables linked into one, with an export per dispatch."""
    planner("alternating")
    vmfb = api.compile_str(models.CHAIN_MLIR)
    contents = members(vmfb)
    assert sorted(contents) == ["main_dispatch_1_embedded_elf_x86_64.so", "module.fb",
                                "source_linked_vmvx_npu_fb.fb"]
    linked = contents["source_linked_vmvx_npu_fb.fb"]
    assert linked == hal_binaries.link_npu_fb([planners.npu_fb_bytes(0, CHAIN_EXPORTS[0]),
                                               planners.npu_fb_bytes(2, CHAIN_EXPORTS[2])])
    assert [e.name for e in read_executable(linked).exports] == CHAIN_EXPORTS[0::2]
    assert contents["main_dispatch_1_embedded_elf_x86_64.so"].startswith(b"\x7fELF")
    (tmp_path / "m.vmfb").write_bytes(vmfb)
    dump = dump_module(tmp_path / "m.vmfb")
    for string in ("`hal.device.id`", "`npu*`", "`npu-fb`", "`embedded-elf-x86_64`"):
        assert string in dump


def test_hal_phase_has_npu_formats_grid_and_device_query(planner):
    planner("alternating")
    hal = api.compile_str(models.CHAIN_MLIR, extra_args=["--compile-to=hal"]).decode()
    assert 'key("hal.device.id" :: "npu*")' in hal
    assert 'key("hal.executable.format" :: "npu-fb")' in hal
    assert "target(@source_linked_vmvx::@npu_fb)" in hal
    assert f"function(@source_linked_vmvx::@npu_fb::@{CHAIN_EXPORTS[2]})" in hal
    assert "target(@main_dispatch_1::@embedded_elf_x86_64)" in hal
    assert 'hal.executable.binary public @npu_fb <format = "npu-fb"' in hal
    assert "workgroups([%c2, %c3, %c1])" in hal  # dispatch 0's grid from its plan
    assert "available formats: [npu-fb]" in hal


def test_one_npu_dispatch_keeps_its_plans_npu_fb(planner):
    """Nothing to link: the executable keeps its name and the plan's bytes as they are."""
    planner("npu")
    contents = members(api.compile_str(models.ADD_MLIR))
    assert contents["add_dispatch_0_npu_fb.fb"] == planners.npu_fb_bytes(
        0, "add_dispatch_0_elementwise_16_f32")


def test_compile_to_executable_sources_is_the_stock_ir(planner):
    planner("npu")
    text = api.compile_str(models.ADD_MLIR, extra_args=["--compile-to=executable-sources"])
    assert b"hal.executable private @add_dispatch_0" in text
    assert b"npu-fb" not in text and b"@npu_fb" not in text


def test_seed_conv_reaches_codegen_as_a_convolution_generic(planner, seed_onnx, monkeypatch):
    """The contract fact codegen relies on: at executable-sources the 3.13 compiler hands
    over the seed conv as a linalg.generic with conv indexing maps, bias fused after it."""
    planner("host")
    seen = []

    def recording_plan(index, executable, machine, probes=()):
        seen.append(str(executable))
        return planners.host_plan(index, executable, machine)

    monkeypatch.setattr(pipeline, "plan_dispatch", recording_plan)
    vmfb = api.compile_file(str(seed_onnx))
    assert len(seen) == 1
    text = seen[0]
    assert "@SingleConv$async_dispatch_0_conv_8x498x498x3x3x3_f32" in text
    assert "affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d1 + d4, d2 + d5)>" in text
    assert 'iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]' in text
    assert "tensor<3x500x500xf32>" in text and "tensor<8x498x498xf32>" in text
    assert sorted(members(vmfb)) == ["SingleConv_async_dispatch_0_embedded_elf_x86_64.so",
                                     "module.fb"]


def test_machine_flags_reach_the_planner(planner):
    machines = planner("host")
    api.compile_str(models.ADD_MLIR, extra_args=["--iree-npu-machine-sram-bytes=65536",
                                                 "--iree-npu-machine-clock_mhz=800"])
    assert machines == [{"sram_bytes": "65536", "clock_mhz": "800"}]


def test_fallback_error_names_the_dispatch_and_reason(planner):
    planner("alternating")
    with pytest.raises(CompileError, match=r"dispatch #1 main_dispatch_1_matmul_64x64x64_f32 "
                                           r"cannot run on npu: not supported on npu: test planner"):
        api.compile_str(models.CHAIN_MLIR, extra_args=["--iree-npu-fallback=error"])


def test_report_lines_and_compile_time(planner, tmp_path):
    planner("alternating")
    report = tmp_path / "report.txt"
    api.compile_str(models.CHAIN_MLIR, extra_args=[f"--iree-npu-dispatch-report={report}"])
    lines = report.read_text().splitlines()
    assert lines[0] == "Dispatch #0 main_dispatch_0_matmul_64x64x32_f32: test op -> npu (test tiles)"
    assert lines[1] == ("Dispatch #1 main_dispatch_1_matmul_64x64x64_f32: test op -> host: "
                        "not supported on npu: test planner")
    assert lines[3].startswith("Compiled 3 dispatches (2 npu, 1 host) in ")
    assert len(lines) == 4


def test_onnx_file_input(planner, small_conv_onnx):
    planner("npu")
    contents = members(api.compile_file(str(small_conv_onnx)))
    assert contents["SingleConv_async_dispatch_0_npu_fb.fb"] == planners.npu_fb_bytes(
        0, "SingleConv$async_dispatch_0_conv_8x14x14x3x3x3_f32")


def test_options_split_npu_and_stock_flags():
    options = parse(["--iree-hal-target-backends=npu", "in.mlir", "-o", "out.vmfb",
                     "--compile-to", "hal", "--iree-opt-level=O2", "--iree-npu-dispatch-report",
                     "--iree-npu-machine-mac-rows=16"])
    assert (options.input_path, options.output_path, options.compile_to) == ("in.mlir", "out.vmfb", "hal")
    assert options.stock_flags == ["--iree-opt-level=O2"]
    assert options.npu.dispatch_report == "-"
    assert options.npu.machine == {"mac_rows": "16"}
    with pytest.raises(CompileError, match="cannot be combined"):
        parse(["--iree-hal-target-backends=npu,llvm-cpu"])


def test_package_exports_the_api_and_other_targets_go_to_the_stock_compiler():
    import compiler_target
    vmfb = compiler_target.compile_str(models.ADD_MLIR, target_backends=["llvm-cpu"],
                                       extra_args=["--iree-llvmcpu-target-cpu=generic"])
    assert sorted(members(vmfb)) == ["add_dispatch_0_embedded_elf_x86_64.so", "module.fb"]


def test_host_fallback_vmfb_runs_on_npu_sim(planner, small_conv_onnx):
    """End to end with the project's runtime: the npu* device runs the llvm-cpu fallback."""
    runtime = pytest.importorskip("hal_driver.runtime")
    planner("host")
    module = runtime.load_vm_flatbuffer(api.compile_file(str(small_conv_onnx)))
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    weight, bias = (numpy_helper.to_array(t) for t in onnx.load(small_conv_onnx).graph.initializer)
    expected = np.einsum("cijkl,ockl->oij", sliding_window_view(x[0], (3, 3), axis=(1, 2)),
                         weight) + bias[:, None, None]
    np.testing.assert_allclose(np.asarray(module.SingleConv(x))[0], expected, rtol=1e-5, atol=1e-5)
