"""A Chrome trace (chrome://tracing, ui.perfetto.dev) of what an npu-sim device ran.

Everything lies on one timeline of simulated time (1 us = clock_hz / 1e6 cycles) in
process 0 ("npu-sim"), on numbered tracks named by thread_name metadata: the queue
operations (alloca, execute, copy, ...) spanning the work they did, the NPU dispatches
one after another, and inside each dispatch the core's instructions on one track per
engine (dma_in, dma_out, mac, vector).
"""
import json
import threading

PID = 0
TRACKS = ("queue", "npu", "dma_in", "dma_out", "mac", "vector")
TID = {name: tid for tid, name in enumerate(TRACKS)}


class DeviceTrace:
    def __init__(self, clock_hz: int):
        self.clock_hz = clock_hz
        self.events: list[dict] = []
        self._now_cycles = 0
        self._lock = threading.Lock()

    def _us(self, cycles: int) -> float:
        return cycles * 1e6 / self.clock_hz

    def _complete(self, track: str, name: str, start: int, cycles: int, args: dict) -> dict:
        return {"name": name, "ph": "X", "pid": PID, "tid": TID[track], "ts": self._us(start),
                "dur": self._us(cycles), "args": args}

    def traced(self, name: str, operation):
        """`operation` wrapped to record a queue-track event over the time it simulated."""
        def run():
            start = self._now_cycles
            try:
                operation()
            finally:
                with self._lock:
                    self.events.append(self._complete("queue", name, start,
                                                      self._now_cycles - start, {}))
        return run

    def add_dispatch(self, name: str, stats) -> None:
        """Appends one dispatch (npu_core.DispatchStats with `events`)."""
        with self._lock:
            start = self._now_cycles
            self.events.append(self._complete("npu", name, start, stats.total_cycles, {
                "cycles": stats.total_cycles, "macs": stats.macs,
                "useful_macs": stats.useful_macs, "roofline_cycles": stats.roofline_cycles,
                "roofline_bound": stats.roofline_bound,
                "dram_read_bytes": stats.dram_read_bytes,
                "dram_write_bytes": stats.dram_write_bytes,
                "sram_peak_bytes": stats.sram_peak_bytes}))
            for engine, begin, end, opcode, index in stats.events:
                self.events.append(self._complete(engine, opcode, start + begin, end - begin,
                                                  {"instruction": index, "dispatch": name}))
            self._now_cycles += stats.total_cycles

    def write(self, path: str) -> None:
        metadata = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0,
                     "args": {"name": "npu-sim"}}]
        metadata += [{"name": "thread_name", "ph": "M", "pid": PID, "tid": tid,
                      "args": {"name": name}} for name, tid in TID.items()]
        with self._lock:
            events = metadata + self.events
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)
