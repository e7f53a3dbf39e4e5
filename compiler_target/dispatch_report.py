"""`--iree-npu-dispatch-report[=FILE]`: one line per dispatch, then the compile time."""
import sys

from compiler_target.dispatch_plan import DispatchPlan


def report_lines(plans: list[DispatchPlan], seconds: float) -> list[str]:
    on_npu = sum(1 for plan in plans if plan.target == "npu")
    noun = "dispatch" if len(plans) == 1 else "dispatches"
    summary = (f"Compiled {len(plans)} {noun} ({on_npu} npu, {len(plans) - on_npu} host) "
               f"in {seconds:.2f} s")
    return [plan.report_line() for plan in plans] + [summary]


def write_report(destination: str, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if destination == "-":
        sys.stderr.write(text)
        sys.stderr.flush()
    else:
        with open(destination, "w") as f:
            f.write(text)
