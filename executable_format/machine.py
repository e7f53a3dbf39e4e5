"""The simulated NPU's machine parameters: the one source of truth.

The compiler tiles and estimates with these numbers, the npu-fb executable records the
configuration it was compiled for, the npu-sim device checks it, and the native core's
cycle model is created from it. Every parameter can be overridden by name
(compiler: `--iree-npu-machine-<name>=V`, runtime: `--npu_sim_machine_<name>=V`).
docs/npu-architecture.md explains each number.
"""
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class MachineConfig:
    clock_hz: int = 1_000_000_000          # 1 GHz
    # MAC array: mac_rows (reduction lanes) x mac_cols (output-channel lanes) at f16/bf16.
    mac_rows: int = 32
    mac_cols: int = 32
    f32_rate_divisor: int = 4              # f32 runs at 1/4 of the f16 rate: 256 MAC/cycle
    i8_rate_multiplier: int = 2            # i8 and u8 pack two per lane: 2048 MAC/cycle
    mac_latency_cycles: int = 32           # pipeline fill per MAC instruction
    # SRAM scratchpad.
    sram_bytes: int = 2 * 1024 * 1024
    sram_bytes_per_cycle: int = 128        # FILL rate
    # DRAM <-> SRAM DMA (one load engine, one store engine, each with this bandwidth).
    dram_bytes_per_cycle: int = 64         # 64 GB/s at 1 GHz per direction
    dma_burst_bytes: int = 64              # every contiguous run is rounded up to bursts
    dma_latency_cycles: int = 100
    # Vector unit.
    vector_bytes_per_cycle: int = 128      # 32 f32 lanes
    vector_latency_cycles: int = 8
    transcendental_factor: int = 4         # sigmoid/tanh/exp/sqrt/rsqrt cost 4x
    semaphores: int = 16                   # SIGNAL/WAIT counters

    @classmethod
    def parameter_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_overrides(cls, overrides: dict[str, str | int]) -> "MachineConfig":
        """The default machine with named parameters replaced; unknown names or
        non-positive values or values beyond 64 bits raise ValueError naming the parameter."""
        known = set(cls.parameter_names())
        values = {}
        for name, raw in overrides.items():
            key = name.replace("-", "_")
            if key not in known:
                raise ValueError(f"unknown NPU machine parameter '{name}' "
                                 f"(known: {', '.join(sorted(known))})")
            try:
                value = int(raw, 0) if isinstance(raw, str) else int(raw)
            except ValueError:
                raise ValueError(f"NPU machine parameter '{name}' needs an integer, got '{raw}'")
            if value <= 0:
                raise ValueError(f"NPU machine parameter '{name}' must be positive, got {value}")
            if value >= 1 << 64:
                raise ValueError(f"NPU machine parameter '{name}' {value} does not fit 64 bits")
            values[key] = value
        return replace(cls(), **values)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.parameter_names()}

    def mac_k_lanes(self, dtype: str) -> int:
        """Reduction elements the MAC array consumes per cycle per output column."""
        if dtype == "f32":
            return max(1, self.mac_rows // self.f32_rate_divisor)
        if dtype in ("i8", "u8"):
            return self.mac_rows * self.i8_rate_multiplier
        return self.mac_rows

    def peak_macs_per_cycle(self, dtype: str) -> int:
        return self.mac_k_lanes(dtype) * self.mac_cols


DEFAULT_MACHINE = MachineConfig()
