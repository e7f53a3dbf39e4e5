"""Differential tests: every sample compiled for npu and run on npu-sim, compiled for
stock llvm-cpu and run on the stock runtime (local-task); the two outputs compared with
each other and with onnx's reference evaluator (tolerances in samples.TOLERANCES), and
where each dispatch ran checked against the sample's spec at compile time (dispatch
report, task graph json) and at run time (device statistics, NPU dispatch trace)."""
import re

import numpy as np
import pytest

from tests.e2e.samples import SAMPLES, tolerance

REPORT_LINE = re.compile(r"^Dispatch #(\d+) (\S+): .* -> (npu \(.*\)|host: .+)$")
SUMMARY_LINE = re.compile(r"^Compiled (\d+) dispatch(?:es)? \((\d+) npu, (\d+) host\) in [\d.]+ s$")


def assert_close(actual: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, \
        f"{what}: {actual.shape} {actual.dtype} vs {expected.shape} {expected.dtype}"
    tol = tolerance(expected.dtype)
    error = np.abs(actual.astype(np.float64) - expected)
    bound = tol["atol"] + tol["rtol"] * np.abs(expected.astype(np.float64))
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert np.all(error <= bound), (
        f"{what}: element {worst} is {actual[worst]!r}, expected {expected[worst]!r} "
        f"(max abs error {error.max():.3g}, tolerance {tol})")


SAMPLE_NAMES = list(SAMPLES)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_npu_sim_matches_onnx_reference(generated, npu_run, name):
    assert_close(npu_run(name).output, np.load(generated(name).expected),
                 "npu-sim vs onnx reference")


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_stock_cpu_matches_onnx_reference(generated, cpu_run, name):
    assert_close(cpu_run(name), np.load(generated(name).expected),
                 "stock llvm-cpu vs onnx reference")


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_npu_sim_matches_stock_cpu(npu_run, cpu_run, name):
    assert_close(npu_run(name).output, cpu_run(name), "npu-sim vs stock llvm-cpu")


def expected_target(sample, dispatch_name: str) -> tuple[str, str]:
    """('host', reason part) if the sample's spec keeps the dispatch on the host, else
    ('npu', '')."""
    for part, reason in sample.host.items():
        if part in dispatch_name:
            return "host", reason
    return "npu", ""


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_dispatch_report_places_dispatches(generated, npu_build, name):
    sample = generated(name).sample
    *lines, summary = npu_build(name).report
    parsed = [REPORT_LINE.match(line) for line in lines]
    assert all(parsed), f"unexpected report lines: {lines}"
    hosts = 0
    for index, match in enumerate(parsed):
        assert int(match[1]) == index
        target, reason = expected_target(sample, match[2])
        assert match[3].startswith(target), match[0]
        assert reason in match[3], match[0]
        hosts += target == "host"
    assert hosts == len(sample.host), f"host dispatches of the spec not in the report: {lines}"
    counts = SUMMARY_LINE.match(summary)
    assert counts, summary
    assert [int(c) for c in counts.groups()] == [len(lines), len(lines) - hosts, hosts]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_task_graph_agrees_with_report(generated, npu_build, name):
    sample, b = generated(name).sample, npu_build(name)
    report = {m[2]: m[3].split()[0].rstrip(":")
              for m in map(REPORT_LINE.match, b.report[:-1])}
    for task in b.tasks:
        assert report[task["name"]] == task["target"]
        target, reason = expected_target(sample, task["name"])
        assert task["target"] == target
        assert (reason in task["reason"]) if target == "host" else task["reason"] == ""
        assert task["estimated_cycles"] > 0 if target == "npu" else task["estimated_cycles"] == 0
        # the true roofline bounds any program from below
        assert 0 < task["roofline_cycles"] <= task["estimated_cycles"] if target == "npu" \
            else task["roofline_cycles"] == 0
        # engines overlap: none is busier than the program is long, all are busier
        busy = task["engine_busy_cycles"].values()
        assert (max(busy) <= task["estimated_cycles"] <= sum(busy)) if target == "npu" \
            else task["engine_busy_cycles"] == {}
    assert [t["order"] for t in b.tasks] == list(range(len(b.tasks)))


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_dispatches_ran_where_compiled(npu_build, npu_run, name):
    """One call runs each task once: npu tasks on the NPU core (in the trace, in
    execution order), host tasks on the host."""
    b, r = npu_build(name), npu_run(name)
    npu_tasks = [t["name"] for t in b.tasks if t["target"] == "npu"]
    assert r.npu_dispatches == len(npu_tasks)
    assert r.host_dispatches == len(b.tasks) - len(npu_tasks)
    assert r.npu_trace == npu_tasks


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_simulated_cycles_are_the_compiler_estimates(npu_build, npu_run, name):
    assert npu_run(name).npu_cycles == sum(t["estimated_cycles"] for t in npu_build(name).tasks)


def test_deduplicated_dispatches_run_on_the_npu_through_binding_views(npu_build, npu_run):
    """residual_blocks: IREE compiles the blocks' identical dispatches once each and
    passes every call's binding offsets as push constants (before binding views, such
    dispatches stayed on the host); all 9 calls of the 3 executables (a copy
    and the two convolutions of a block) run on the NPU."""
    build, run = npu_build("residual_blocks"), npu_run("residual_blocks")
    assert len(build.tasks) == 9 and {t["target"] for t in build.tasks} == {"npu"}
    assert len({t["executable"] for t in build.tasks}) == 3
    assert run.npu_dispatches == 9 and run.host_dispatches == 0
