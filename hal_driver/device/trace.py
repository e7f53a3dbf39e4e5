"""A Chrome trace (chrome://tracing, Perfetto) of the NPU dispatches a device ran.

Each dispatch is a complete event on the `npu` track placed on a timeline of
simulated time; engine events reported by the core (if any) are nested inside it.
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
        cycles = int(getattr(stats, "total_cycles", 0))
        with self._lock:
            start = self._now_cycles
            self.events.append({"name": name, "ph": "X", "pid": 0, "tid": "npu",
                                "ts": self._us(start), "dur": self._us(cycles),
                                "args": _stats_args(stats)})
            for event in getattr(stats, "trace", None) or []:
                self.events.append(_engine_event(event, start, self._us))
            self._now_cycles += cycles

    def write(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"traceEvents": self.events, "displayTimeUnit": "ns"}, f)


def _stats_args(stats) -> dict:
    fields = getattr(stats, "__dataclass_fields__", None) or vars(stats)
    return {name: getattr(stats, name) for name in fields
            if name != "trace" and isinstance(getattr(stats, name), (int, float, str, dict))}


def _engine_event(event, start_cycles: int, to_us) -> dict:
    """Places one core event ({name, engine, start, cycles} or similar) on the timeline."""
    event = dict(event) if isinstance(event, dict) else dict(vars(event))
    begin = int(event.pop("start", event.pop("start_cycle", 0)))
    cycles = int(event.pop("cycles", event.pop("duration", 0)))
    return {"name": str(event.pop("name", event.get("op", "op"))), "ph": "X", "pid": 0,
            "tid": str(event.pop("engine", "core")), "ts": to_us(start_cycles + begin),
            "dur": to_us(cycles), "args": {k: v for k, v in event.items()
                                           if isinstance(v, (int, float, str))}}
