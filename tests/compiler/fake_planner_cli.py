"""`python -m tests.compiler.fake_planner_cli PLANNER [iree-compile args...]`: the npu CLI
with a test planner (host | npu | alternating) in place of the code generator."""
import sys

from compiler_target import cli, pipeline
from tests.compiler.planners import PLANNERS

if __name__ == "__main__":
    pipeline.plan_dispatch = PLANNERS[sys.argv[1]]
    pipeline.build_machine = dict
    sys.exit(cli.main(sys.argv[2:]))
