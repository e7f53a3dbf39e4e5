"""Device statistics: dispatch counts and simulated NPU time, summed over DispatchStats."""
import threading
from dataclasses import dataclass, field, fields, replace


@dataclass
class DeviceStatistics:
    dispatches: int = 0
    npu_dispatches: int = 0
    host_dispatches: int = 0
    npu_cycles: int = 0
    stall_cycles: int = 0
    dram_bytes: int = 0
    macs: int = 0
    sram_peak_bytes: int = 0
    engine_busy_cycles: dict[str, int] = field(default_factory=dict)

    def minus(self, earlier: "DeviceStatistics") -> "DeviceStatistics":
        """The statistics accumulated since `earlier` (a snapshot); peaks are kept."""
        delta = replace(self, engine_busy_cycles={
            name: cycles - earlier.engine_busy_cycles.get(name, 0)
            for name, cycles in self.engine_busy_cycles.items()})
        for f in fields(self):
            if f.name not in ("engine_busy_cycles", "sram_peak_bytes"):
                setattr(delta, f.name, getattr(self, f.name) - getattr(earlier, f.name))
        return delta


class StatisticsRecorder:
    """Thread-safe accumulation of dispatch statistics for one device."""

    def __init__(self):
        self._totals = DeviceStatistics()
        self._lock = threading.Lock()

    def snapshot(self) -> DeviceStatistics:
        with self._lock:
            return replace(self._totals, engine_busy_cycles=dict(self._totals.engine_busy_cycles))

    def record_host_dispatch(self) -> None:
        with self._lock:
            self._totals.dispatches += 1
            self._totals.host_dispatches += 1

    def record_npu_dispatch(self, stats) -> None:
        """Adds one DispatchStats (hal_driver/device/npu_core.py)."""
        with self._lock:
            t = self._totals
            t.dispatches += 1
            t.npu_dispatches += 1
            t.npu_cycles += stats.total_cycles
            t.stall_cycles += sum(stats.stall_cycles.values())
            t.dram_bytes += stats.dram_read_bytes + stats.dram_write_bytes
            t.macs += stats.macs
            t.sram_peak_bytes = max(t.sram_peak_bytes, stats.sram_peak_bytes)
            for engine, cycles in stats.busy_cycles.items():
                t.engine_busy_cycles[engine] = t.engine_busy_cycles.get(engine, 0) + cycles
