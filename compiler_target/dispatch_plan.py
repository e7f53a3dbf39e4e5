"""What NPU code generation decides for one dispatch: the contract between the
split-pipeline driver (pipeline.py) and the code generator (codegen/).

The driver hands each `hal.executable` found at the executable-sources phase to
`codegen.plan_dispatch`, which returns a DispatchPlan. For target "npu" the driver stubs
the executable's function, sets its workgroup count to `workgroup_count`, and after the
hal phase swaps the binary for `npu_fb` (format `npu-fb`). For target "host" the stock
llvm-cpu binary is kept and `reason` says why.
"""
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class DispatchPlan:
    index: int                       # position in the module, as in the report: "Dispatch #3"
    name: str                        # export symbol, e.g. "main_dispatch_3_conv_..."
    summary: str                     # op and shapes, e.g. "linalg.matmul M=128 N=128 K=64 f16"
    target: str                      # "npu" or "host"
    reason: str = ""                 # why host, e.g. "not supported on npu: dynamic shape"
    detail: str = ""                 # npu only, e.g. "tiles 64x64x64, 2 buffers, est. 41230 cycles"
    npu_fb: bytes | None = None      # npu only: the verified npu-fb executable
    workgroup_count: tuple[int, int, int] = (1, 1, 1)
    ir_stages: Sequence[tuple[str, str]] = field(default_factory=list)  # (stage, NPU IR text); codegen prints them on first read
    estimated_cycles: int = 0
    roofline_cycles: float = 0.0     # npu only: the true roofline (executable_format.cost)
    mac_dtype: str = ""              # npu only: the element type of its MAC peak
    engine_busy_cycles: dict = field(default_factory=dict)  # npu only: per engine
    macs: int = 0                    # multiply-accumulates of the dispatch's contractions
    task: dict = field(default_factory=dict)  # inputs/outputs/bindings for model.npu.json
    source_location: str = ""
    # Set while the lowering half of the plan waits to run (codegen.PendingCompile): the
    # driver completes every plan (codegen.complete_plans) before it reads one.
    pending: object | None = None

    @property
    def asm(self) -> str:
        """npu only: the disassembly with a header naming the dispatch (the emit stage)."""
        return dict(self.ir_stages).get("emit", "")

    def report_line(self) -> str:
        head = f"Dispatch #{self.index} {self.name}: {self.summary}"
        if self.target == "npu":
            return f"{head} -> npu ({self.detail})"
        return f"{head} -> host: {self.reason}"
