"""The `npu` target's split pipeline, in one process:

  import (MLIR or ONNX)
  → stock compiler to the end of input; rewrite zero-point-shifted 8-bit contractions
  → stock compiler to the end of global optimization; keep broadcast epilogues apart
  → stock compiler to executable-sources
  → plan each dispatch (compiler_target.codegen) and stub the NPU ones
  → stock compiler to hal
  → put npu-fb binaries in, select `npu*` devices
  → stock compiler to the end → vmfb

Dispatches the code generator does not take keep the stock llvm-cpu binary (host fallback).
"""
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler._mlir_libs._mlir import globals as _mlir_globals

from compiler_target import dispatch_report, dumps
from compiler_target.constant_globals import inline_constant_globals
from compiler_target.depth_stacked_convs import rewrite_3d_convolutions
from compiler_target.epilogue_barriers import separate_unfusable_epilogues
from compiler_target.dispatch_plan import DispatchPlan
from compiler_target.errors import CompileError, writing
from compiler_target.instance_norms import rewrite_dynamic_instance_norms
from compiler_target.executable_sources import executables, stub_for_npu, symbol_name
from compiler_target.hal_binaries import install_npu_binaries, select_npu_device
from compiler_target.options import SURROGATE_TARGET_FLAGS, CompileOptions
from compiler_target.probe_constants import PROBE_EXTENTS, probe_constants
from compiler_target.stock_compiler import (
    StockCompiler, ir_text, phase_index, set_process_global_flags, split_session_flags, vmfb_bytes)
from compiler_target.task_graph import dispatch_sites
from compiler_target.weight_fixed_dims import rewrite_weight_fixed_dims
from compiler_target.zero_point_contractions import rewrite_zero_point_contractions

SPLIT_PHASE = "executable-sources"  # where the code generator sees each dispatch
SWAP_PHASE = "hal"                  # where binaries and device queries are rewritten
# Rewrites of the whole program before dispatches form, each where its phase ends.
IR_REWRITES = (("start", rewrite_dynamic_instance_norms),
               ("start", rewrite_weight_fixed_dims),
               ("input", rewrite_zero_point_contractions),
               ("input", rewrite_3d_convolutions),
               ("global-optimization", inline_constant_globals),
               ("global-optimization", separate_unfusable_epilogues))


def plan_dispatch(index: int, executable, machine, probes=()) -> DispatchPlan:
    """The code generator's decision for one `hal.executable` (tests substitute this);
    its lowering may be left pending, for _plan_all to run with the others'."""
    from compiler_target import codegen
    return codegen.plan_dispatch(index, executable, machine, probes, deferred=True)


def build_machine(overrides: dict[str, str]):
    """The NPU machine configuration with `--iree-npu-machine-*` overrides applied."""
    from executable_format.machine import MachineConfig
    try:
        return MachineConfig.from_overrides(overrides)
    except (KeyError, TypeError, ValueError) as e:
        raise CompileError(f"invalid --iree-npu-machine-* flag: {e}") from None


@dataclass
class Source:
    """What to compile: a file (MLIR text/bytecode or .onnx) or MLIR text."""
    path: str | None = None
    text: str | None = None

    @property
    def stem(self) -> str:
        return os.path.splitext(os.path.basename(self.path))[0] if self.path else "module"


def compile_source(source: Source, options: CompileOptions) -> bytes:
    """Compiles to options.compile_to; returns the vmfb, or the IR text for an earlier phase."""
    started = time.monotonic()
    start, end = phase_index(options.compile_from), phase_index(options.compile_to)
    if start > phase_index(SPLIT_PHASE):
        raise CompileError(f"--compile-from={options.compile_from} is past {SPLIT_PHASE}, "
                           "where npu code generation runs")
    compiler = _open_compiler(options.stock_flags)
    module = _load(compiler, source)
    with _generic_op_views():
        if end <= phase_index(SPLIT_PHASE):
            return ir_text(compiler.run(module, options.compile_from, options.compile_to))
        if start < phase_index(SPLIT_PHASE):
            module = _run_to_split_phase(compiler, source, module, options.compile_from)

        machine = build_machine(options.npu.machine)
        plans = _plan_all(module, machine, options.npu.fallback, options.npu.codegen_jobs,
                          tile_stages=bool(options.npu.dump_ir))
        _write_dumps(module, plans, source, options)
        npu_fb_by_export = _stub_npu_executables(module, plans)

        to_swap = options.compile_to if end < phase_index(SWAP_PHASE) else SWAP_PHASE
        invocation = compiler.run(module, SPLIT_PHASE, to_swap)
        if end >= phase_index(SWAP_PHASE):
            install_npu_binaries(module, npu_fb_by_export)
            select_npu_device(module)
        if end > phase_index(SWAP_PHASE):
            invocation = compiler.run(module, SWAP_PHASE, options.compile_to)
        if options.compile_to == "end":
            _check_program_is_not_empty(module)
            output = vmfb_bytes(invocation)
        else:
            output = ir_text(invocation)

    if options.npu.dispatch_report:
        with writing("dispatch report", options.npu.dispatch_report):
            dispatch_report.write_report(options.npu.dispatch_report, dispatch_report.report_lines(
                list(plans.values()), time.monotonic() - started))
    return output


def _run_to_split_phase(compiler: StockCompiler, source: Source, module, compile_from: str):
    """Runs the stock compiler to SPLIT_PHASE, each of IR_REWRITES applied (in place)
    where its phase ends; returns the module. Constants inlined from globals can lead a
    stock pass to build IR that fails verification (IREE 3.13 folds a static shape into a
    quantize_affine's output and not into its input: a QDQ weight reshaped by a computed
    shape): when the stock compiler fails after that rewrite changed the module, the
    source is loaded again and compiled without it."""
    changed: dict = {}
    try:
        _run_rewrites(compiler, module, compile_from, IR_REWRITES, changed)
        return module
    except CompileError:
        if not changed.get(inline_constant_globals):
            raise
    module = _load(compiler, source)
    _run_rewrites(compiler, module, compile_from,
                  [(phase, rewrite) for phase, rewrite in IR_REWRITES
                   if rewrite is not inline_constant_globals], {})
    return module


def _run_rewrites(compiler: StockCompiler, module, compile_from: str, rewrites,
                  changed: dict) -> None:
    """The stock phases to SPLIT_PHASE with `rewrites` applied where their phases end;
    each rewrite's count of changes goes to `changed`."""
    for phase, rewrite in rewrites:
        if phase_index(compile_from) > phase_index(phase):
            continue
        if compile_from != phase:
            compiler.run(module, compile_from, phase)
        with module.context, ir.Location.unknown():
            changed[rewrite] = rewrite(module)
        compile_from = phase
    compiler.run(module, compile_from, SPLIT_PHASE)


@contextmanager
def _generic_op_views():
    """While the driver and the code generator read the IR, ops are seen as generic
    OpViews (name, attributes, operands, regions: all this package uses): the Python
    bindings otherwise import a dialect's Python module the first time one of its ops is
    viewed, and `iree.compiler.dialects.linalg` builds its OpDSL op definitions on import
    (0.1-0.3 s per compile). Dialect modules already imported keep their typed views."""
    dialect_modules = _mlir_globals.dialect_search_modules
    _mlir_globals.dialect_search_modules = []
    try:
        yield
    finally:
        _mlir_globals.dialect_search_modules = dialect_modules


def _open_compiler(stock_flags: list[str]) -> StockCompiler:
    session_flags, global_flags = split_session_flags(SURROGATE_TARGET_FLAGS + stock_flags)
    set_process_global_flags(global_flags, known_valid=SURROGATE_TARGET_FLAGS)
    return StockCompiler(session_flags)


def _load(compiler: StockCompiler, source: Source):
    if source.text is not None:
        return compiler.parse_text(source.text)
    if source.path.endswith(".onnx"):
        from compiler_target.onnx_import import import_onnx_file  # onnx: 0.1 s to import
        return import_onnx_file(source.path, compiler.context)
    return compiler.parse_file(source.path)


def _check_program_is_not_empty(module) -> None:
    """A program without functions (an empty file, only private functions) leaves nothing
    to convert to the VM: the stock compiler then has no vm.module and refuses to write a
    vmfb. The split pipeline keeps an empty vm.module; refuse the same way."""
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "vm.module" and any(
                inner.operation.name != "vm.module_terminator"
                for inner in op.regions[0].blocks[0].operations):
            return
    location = module.location
    raise CompileError(f"{location.filename}:{location.start_line}:{location.start_col}: "
                       "outer module does not contain a vm.module op")


def _plan_all(module, machine, fallback: str, jobs: int,
              tile_stages: bool) -> dict[str, DispatchPlan]:
    """One plan per hal.executable, keyed by executable symbol, in export order. The code
    generator runs with the session's context (and an unknown location) as default; the
    lowerings it leaves pending run together, on `jobs` processes (0: one per CPU),
    the plans' tile and schedule IR stages kept with `tile_stages` (an IR dump)."""
    plans = {}
    probes = {extent: probe_constants(module, extent) for extent in PROBE_EXTENTS}
    for index, executable in enumerate(executables(module)):
        with module.context, ir.Location.unknown():
            plans[symbol_name(executable)] = plan_dispatch(
                index, executable.operation, machine,
                probes={extent: constants.get(symbol_name(executable))
                        for extent, constants in probes.items()})
    if any(plan.pending is not None for plan in plans.values()):
        from compiler_target import codegen
        codegen.complete_plans(list(plans.values()), jobs, tile_stages)
    for index, plan in enumerate(plans.values()):
        if plan.target == "npu" and not plan.npu_fb:
            raise CompileError(f"dispatch #{index} {plan.name}: npu plan without npu-fb bytes")
        if plan.target != "npu" and fallback == "error":
            raise CompileError(f"dispatch #{index} {plan.name} cannot run on npu: {plan.reason} "
                               "(--iree-npu-fallback=error)")
    return plans


def _stub_npu_executables(module, plans: dict[str, DispatchPlan]) -> dict[str, bytes]:
    """Stubs the NPU executables; returns export symbol -> npu-fb, in dispatch order."""
    npu_fb_by_export = {}
    for executable in executables(module):
        plan = plans[symbol_name(executable)]
        if plan.target == "npu":
            for export in stub_for_npu(module, executable, plan.workgroup_count):
                npu_fb_by_export[export] = plan.npu_fb
    return npu_fb_by_export


def _write_dumps(module, plans: dict[str, DispatchPlan], source: Source,
                 options: CompileOptions) -> None:
    npu = options.npu
    if npu.dump_asm:
        with writing("asm dump", npu.dump_asm):
            dumps.dump_asm(npu.dump_asm, list(plans.values()))
    if npu.dump_ir:
        with writing("IR dump", npu.dump_ir):
            dumps.dump_ir(npu.dump_ir, list(plans.values()))
    if npu.dump_json:
        with writing("json dump", npu.dump_json):
            dumps.dump_json(npu.dump_json, source.stem, plans, dispatch_sites(module))
