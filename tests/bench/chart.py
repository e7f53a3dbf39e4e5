"""The bench's pictures, drawn with matplotlib (Agg backend: files only, no display).

roofline_chart: every NPU dispatch as a point, its useful MACs per DRAM byte it moved
  (arithmetic intensity) against the useful MACs per cycle it attained, under the
  machine's compute roofs (the MAC peak of each element type present) and its DMA-in
  bandwidth roof, log-log. Points are coloured by element type, hollow when the
  dispatch's true roofline is under the utilization target's minimum size.
timeline_chart: one npu-sim call from its Chrome trace: the busy fraction of each
  engine (dma_in, mac, vector, dma_out) over the call's simulated time, with the NPU
  dispatches as alternating bands on top.
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402

from executable_format.machine import MachineConfig  # noqa: E402
from hal_driver.device.trace import TID  # noqa: E402

ENGINES = ("dma_in", "mac", "vector", "dma_out")
TIME_BINS = 600
COLORS = {"f32": "tab:blue", "f16": "tab:orange", "bf16": "tab:green", "i8": "tab:red"}


def roofline_chart(rows: list[dict], machine: MachineConfig, path: Path,
                   min_roofline_cycles: int) -> None:
    """`rows`: dispatch rows (measure.dispatch_rows: dtype, useful_macs, dram_bytes,
    npu_cycles, roofline_cycles) of NPU dispatches."""
    rows = [r for r in rows if r["npu_cycles"] and r["dram_bytes"] and r["useful_macs"]]
    figure, axes = plt.subplots(figsize=(9, 6))
    intensity = np.array([r["useful_macs"] / r["dram_bytes"] for r in rows] or [1.0])
    x = np.geomspace(min(intensity.min(), 1.0) / 2, max(intensity.max(), 100.0) * 2, 200)
    bandwidth_roof = x * machine.dram_bytes_per_cycle
    for dtype in sorted({r["dtype"] for r in rows}):
        peak = machine.peak_macs_per_cycle(dtype)
        axes.plot(x, np.minimum(bandwidth_roof, peak), color=COLORS.get(dtype, "grey"),
                  linewidth=1, label=f"{dtype} roof: {peak} MACs/cycle, "
                                     f"{machine.dram_bytes_per_cycle} B/cycle")
        for big in (True, False):
            chosen = [r for r in rows if r["dtype"] == dtype
                      and (r["roofline_cycles"] >= min_roofline_cycles) == big]
            if chosen:
                axes.scatter([r["useful_macs"] / r["dram_bytes"] for r in chosen],
                             [r["useful_macs"] / r["npu_cycles"] for r in chosen],
                             s=18, color=COLORS.get(dtype, "grey"),
                             facecolors=None if big else "none",
                             label=f"{dtype} dispatches" + (
                                 "" if big else f" (roofline < {min_roofline_cycles} cycles)"))
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("arithmetic intensity (useful MACs per DRAM byte moved)")
    axes.set_ylabel("attained useful MACs per cycle")
    axes.set_title(f"NPU dispatches against the roofline ({len(rows)} dispatches)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def timeline_chart(events: list[dict], path: Path, title: str) -> None:
    """`events`: the traceEvents of one npu-sim call (hal_driver/device/trace.py)."""
    spans = [e for e in events if e.get("ph") == "X"]
    dispatches = [e for e in spans if e["tid"] == TID["npu"]]
    end = max((e["ts"] + e["dur"] for e in dispatches), default=0.0)
    figure, axes = plt.subplots(figsize=(11, 3.2))
    if end > 0:
        edges = np.linspace(0.0, end, TIME_BINS + 1)
        busy = np.zeros((len(ENGINES), TIME_BINS))
        row_of = {TID[engine]: row for row, engine in enumerate(ENGINES)}
        for event in spans:
            if event["tid"] in row_of:
                _add_busy(busy[row_of[event["tid"]]], edges, event["ts"], event["dur"])
        width = end / TIME_BINS
        axes.imshow(np.clip(busy / width, 0, 1), aspect="auto", cmap="Greens", vmin=0, vmax=1,
                    extent=(0, end, len(ENGINES) - 0.5, -0.5), interpolation="nearest")
        for k, event in enumerate(dispatches):
            axes.axvspan(event["ts"], event["ts"] + event["dur"], ymin=0.97, ymax=1.0,
                         color="tab:blue" if k % 2 else "tab:purple", linewidth=0)
    axes.set_yticks(range(len(ENGINES)), ENGINES)
    axes.set_xlabel("simulated time (us); top band: NPU dispatches")
    axes.set_title(f"{title}: engine busy fraction ({len(dispatches)} NPU dispatches)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _add_busy(row: np.ndarray, edges: np.ndarray, start: float, duration: float) -> None:
    """Adds the part of [start, start + duration) that falls into each time bin."""
    stop = start + duration
    first = max(int(np.searchsorted(edges, start, side="right")) - 1, 0)
    last = min(int(np.searchsorted(edges, stop, side="left")), len(row))
    for b in range(first, last):
        row[b] += max(0.0, min(stop, edges[b + 1]) - max(start, edges[b]))
