"""The npu dump directories: `--iree-npu-dump-asm`, `--iree-npu-dump-ir`,
`--iree-npu-dump-json`."""
import json
import os
import re

from compiler_target.dispatch_plan import DispatchPlan
from compiler_target.task_graph import DispatchSite


def file_stem(name: str) -> str:
    """A dispatch symbol as a file name (symbols may hold `$`, e.g. `main$async_dispatch_0`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def dump_asm(directory: str, plans: list[DispatchPlan]) -> None:
    """One `<dispatch>.s` per NPU executable."""
    os.makedirs(directory, exist_ok=True)
    for plan in plans:
        if plan.target == "npu":
            _write(directory, f"{file_stem(plan.name)}.s", plan.asm)


def dump_ir(directory: str, plans: list[DispatchPlan]) -> None:
    """One `<dispatch>.<nn>.<stage>.mlir` per code generation stage of each dispatch."""
    os.makedirs(directory, exist_ok=True)
    for plan in plans:
        for number, (stage, text) in enumerate(plan.ir_stages):
            _write(directory, f"{file_stem(plan.name)}.{number:02d}.{file_stem(stage)}.mlir", text)


def dump_json(directory: str, model_stem: str, plans_by_executable: dict[str, DispatchPlan],
              sites: list[DispatchSite]) -> str:
    """`<model>.npu.json`: one task per dispatch in execution order. Returns its path."""
    os.makedirs(directory, exist_ok=True)
    document = {
        "model": model_stem,
        "tasks": [_task(site, plans_by_executable[site.executable]) for site in sites],
    }
    path = os.path.join(directory, f"{model_stem}.npu.json")
    with open(path, "w") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    return path


def _task(site: DispatchSite, plan: DispatchPlan) -> dict:
    def buffers(kind: str) -> list[dict]:
        return [{"binding": use.binding, "buffer": use.buffer, "offset": use.offset,
                 "length": use.length}
                for use in site.uses if kind in use.access]

    return {
        "order": site.order,
        "dispatch": plan.index,
        "name": plan.name,
        "executable": site.executable,
        "target": plan.target,
        "reason": plan.reason,
        "summary": plan.summary,
        "estimated_cycles": plan.estimated_cycles,
        "roofline_cycles": plan.roofline_cycles,
        "mac_dtype": plan.mac_dtype,
        "engine_busy_cycles": plan.engine_busy_cycles,
        "macs": plan.macs,
        "source_location": plan.source_location,
        "inputs": buffers("read"),
        "outputs": buffers("write"),
        "depends_on": site.depends_on,
        "detail": plan.task,
    }


def _write(directory: str, name: str, text: str) -> None:
    with open(os.path.join(directory, name), "w") as f:
        f.write(text)
