"""Device statistics: dispatch counts (in total and per export) and simulated NPU time,
summed over DispatchStats."""
import threading
from dataclasses import dataclass, field


@dataclass
class DeviceStatistics:
    dispatches: int = 0
    npu_dispatches: int = 0
    host_dispatches: int = 0
    npu_cycles: int = 0
    stall_cycles: int = 0
    dram_bytes: int = 0
    macs: int = 0                   # executed by the MAC array, padding included
    useful_macs: int = 0            # the dispatches' math (their true rooflines)
    roofline_cycles: float = 0.0    # sum of the NPU dispatches' true roofline cycles
    sram_peak_bytes: int = 0
    host_to_device_bytes: int = 0   # copied in by the Python API (numpy arguments)
    device_to_host_bytes: int = 0   # copied out by the Python API (results read on the host)
    engine_busy_cycles: dict[str, int] = field(default_factory=dict)
    dispatch_counts: dict[str, int] = field(default_factory=dict)   # export name -> runs

    def copy(self) -> "DeviceStatistics":
        """A snapshot (twice per call of a module function: fields copied as they are,
        without the dataclass __init__, and the two dicts copied)."""
        copy = object.__new__(DeviceStatistics)
        copy.__dict__.update(self.__dict__)
        copy.engine_busy_cycles = dict(self.engine_busy_cycles)
        copy.dispatch_counts = dict(self.dispatch_counts)
        return copy

    def minus(self, earlier: "DeviceStatistics") -> "DeviceStatistics":
        """The statistics accumulated since `earlier` (a snapshot); peaks are kept.
        (Plain dict work: this runs twice per call of a module function.)"""
        mine, theirs = vars(self), vars(earlier)
        counters = {name: mine[name] - theirs[name] for name in mine if name not in _NOT_COUNTERS}
        busy = {name: cycles - earlier.engine_busy_cycles.get(name, 0)
                for name, cycles in self.engine_busy_cycles.items()}
        counts = {name: count - earlier.dispatch_counts.get(name, 0)
                  for name, count in self.dispatch_counts.items()
                  if count != earlier.dispatch_counts.get(name, 0)}
        return DeviceStatistics(**counters, sram_peak_bytes=self.sram_peak_bytes,
                                engine_busy_cycles=busy, dispatch_counts=counts)


_NOT_COUNTERS = ("engine_busy_cycles", "sram_peak_bytes", "dispatch_counts")


class StatisticsRecorder:
    """Thread-safe accumulation of dispatch statistics for one device."""

    def __init__(self):
        self._totals = DeviceStatistics()
        self._lock = threading.Lock()

    def snapshot(self) -> DeviceStatistics:
        with self._lock:
            return self._totals.copy()

    def record_host_dispatch(self, export_name: str) -> None:
        with self._lock:
            t = self._totals
            t.dispatches += 1
            t.host_dispatches += 1
            t.dispatch_counts[export_name] = t.dispatch_counts.get(export_name, 0) + 1

    def record_host_transfer(self, to_device: int = 0, to_host: int = 0) -> None:
        """Bytes the Python API copied between numpy and device memory."""
        with self._lock:
            self._totals.host_to_device_bytes += to_device
            self._totals.device_to_host_bytes += to_host

    def record_npu_dispatch(self, export_name: str, stats) -> None:
        """Adds one DispatchStats (hal_driver/device/npu_core.py) of export `export_name`."""
        stall_cycles = sum(stats.stall_cycles.values())
        with self._lock:
            t = self._totals
            t.dispatches += 1
            counts = t.dispatch_counts
            counts[export_name] = counts.get(export_name, 0) + 1
            t.npu_dispatches += 1
            t.npu_cycles += stats.total_cycles
            t.stall_cycles += stall_cycles
            t.dram_bytes += stats.dram_read_bytes + stats.dram_write_bytes
            t.macs += stats.macs
            t.useful_macs += stats.useful_macs
            t.roofline_cycles += stats.roofline_cycles
            if stats.sram_peak_bytes > t.sram_peak_bytes:
                t.sram_peak_bytes = stats.sram_peak_bytes
            busy = t.engine_busy_cycles
            for engine, cycles in stats.busy_cycles.items():
                busy[engine] = busy.get(engine, 0) + cycles
