"""A Chrome trace (chrome://tracing, Perfetto) of the NPU dispatches a device ran.

Dispatches follow each other on a timeline of simulated time (1 us = clock_hz / 1e6
cycles): each is a complete event on the `npu` track, and the core's instruction
events (when traced) are placed on one track per engine inside it.
"""
import json
import threading


class DispatchTrace:
    def __init__(self, clock_hz: int):
        self.clock_hz = clock_hz
        self.events: list[dict] = []
        self._now_cycles = 0
        self._lock = threading.Lock()

    def _us(self, cycles: int) -> float:
        return cycles * 1e6 / self.clock_hz

    def add_dispatch(self, name: str, stats) -> None:
        """Appends one dispatch (npu_core.DispatchStats with `events`)."""
        with self._lock:
            start = self._now_cycles
            self.events.append({
                "name": name, "ph": "X", "pid": 0, "tid": "npu", "ts": self._us(start),
                "dur": self._us(stats.total_cycles),
                "args": {"cycles": stats.total_cycles, "macs": stats.macs,
                         "dram_read_bytes": stats.dram_read_bytes,
                         "dram_write_bytes": stats.dram_write_bytes,
                         "sram_peak_bytes": stats.sram_peak_bytes}})
            for engine, begin, end, opcode, index in stats.events:
                self.events.append({
                    "name": opcode, "ph": "X", "pid": 0, "tid": engine,
                    "ts": self._us(start + begin), "dur": self._us(end - begin),
                    "args": {"instruction": index, "dispatch": name}})
            self._now_cycles += stats.total_cycles

    def write(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"traceEvents": self.events, "displayTimeUnit": "ns"}, f)
