"""The npu-sim trace (`iree-run-module --npu_sim_trace=FILE.json`) of a real model is a
Chrome/Perfetto trace in the trace-event format: `traceEvents` of complete events
(ph "X", pid, tid, ts and dur in microseconds of simulated time), the dispatch on its
own track and its instructions on one track per engine inside its time span, queue
operations on a queue track, every track named by thread_name metadata."""
import json
import subprocess
from pathlib import Path

import pytest

from executable_format.machine import DEFAULT_MACHINE

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ("dma_in", "dma_out", "mac", "vector")
# A conv whose im2col and relu epilogue use the vector engine: all four engines work.
MODEL = """func.func @main(%x: tensor<1x8x10x10xf32>, %w: tensor<8x8x3x3xf32>) -> tensor<1x8x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<1x8x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x8x10x10xf32>, tensor<8x8x3x3xf32>) outs(%init : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c : tensor<1x8x8x8xf32>) outs(%empty : tensor<1x8x8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x8x8x8xf32>
  return %y : tensor<1x8x8x8xf32>
}
"""


def run(*command) -> None:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("trace")
    (tmp / "model.mlir").write_text(MODEL)
    run(ROOT / "bin" / "iree-compile", "--iree-hal-target-backends=npu", tmp / "model.mlir",
        "-o", tmp / "model.vmfb", "--iree-npu-fallback=error")
    run(ROOT / "bin" / "iree-run-module", "--device=npu-sim", f"--module={tmp / 'model.vmfb'}",
        "--input=1x8x10x10xf32=1", "--input=8x8x3x3xf32=0.5", f"--npu_sim_trace={tmp / 't.json'}")
    return json.loads((tmp / "t.json").read_text())


def complete_events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def dispatch_events(trace: dict) -> list[dict]:
    return [e for e in complete_events(trace) if "macs" in e.get("args", {})]


def thread_names(trace: dict) -> dict:
    """(pid, tid) -> name from the thread_name metadata events."""
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def test_complete_events_have_the_trace_event_fields(trace):
    events = complete_events(trace)
    assert events
    for event in events:
        assert isinstance(event["name"], str) and "pid" in event and "tid" in event
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
        assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0


def test_dispatch_duration_is_simulated_time_in_microseconds(trace):
    [dispatch] = dispatch_events(trace)
    assert dispatch["dur"] == pytest.approx(dispatch["args"]["cycles"] * 1e6 / DEFAULT_MACHINE.clock_hz)


def test_instructions_lie_on_one_track_per_engine_inside_the_dispatch(trace):
    [dispatch] = dispatch_events(trace)
    queue = {key for key, name in thread_names(trace).items() if name == "queue"}
    instructions = [e for e in complete_events(trace)
                    if e is not dispatch and (e["pid"], e["tid"]) not in queue]
    tracks = {e["tid"] for e in instructions}
    assert len(tracks) == len(ENGINES) and dispatch["tid"] not in tracks
    end = dispatch["ts"] + dispatch["dur"]
    for event in instructions:
        assert dispatch["ts"] <= event["ts"] and event["ts"] + event["dur"] <= end + 1e-6
    for tid in tracks:   # one instruction at a time per engine
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in instructions if e["tid"] == tid)
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_every_track_is_named_by_thread_name_metadata(trace):
    names = thread_names(trace)
    assert {(e["pid"], e["tid"]) for e in complete_events(trace)} <= set(names)
    assert set(ENGINES) <= {name for name in names.values()}


def test_pid_and_tid_are_numbers(trace):
    assert all(isinstance(e["pid"], int) and isinstance(e["tid"], int)
               for e in trace["traceEvents"])


def test_queue_operations_have_a_track(trace):
    names = thread_names(trace)
    queue_tracks = {key for key, name in names.items() if "queue" in name}
    assert any((e["pid"], e["tid"]) in queue_tracks for e in complete_events(trace))
