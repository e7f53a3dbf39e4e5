"""The NPU cycle model: per-instruction costs and the per-engine timeline.

This is the reference the native core (native/npu_core.c) implements identically
(tests compare the two), and the compiler's cycle estimates come from here.

Timeline: each engine executes its instructions in program order, one at a time.
An instruction starts when its engine is free; SIGNAL on engine E records the time E
reaches it; WAIT on engine E for value v stalls E until the v-th SIGNAL of that
semaphore (each semaphore has a single signalling engine, so signal times are ordered);
BARRIER aligns every engine to the latest; END ends the program at the latest engine time.
"""
from dataclasses import dataclass, field

from .isa import (DTYPE_BYTES, ELEMENTS_PER_SRAM_BYTE, ENGINE_NAMES, MACS_PER_SRAM_BYTE, Flag,
                  OPCODES, TRANSCENDENTAL, DType, Engine, operand_fields,
                  requant_src_dtype, unpack_pair)
from .machine import MachineConfig


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _dma_cycles(m: MachineConfig, elem: int, f: dict) -> int:
    """Each row of the innermost dimension (n3 elements, dram_s3 apart) moves the bursts
    its bytes span, at most one burst per element: a contiguous row is rounded up to
    whole bursts, a row of every other element moves twice its bytes, a row of elements
    a burst or more apart one burst per element."""
    span = (max(f["n3"] - 1, 0) * f["dram_s3"] + 1) * elem
    row_bursts = min(f["n3"], ceil_div(span, m.dma_burst_bytes))
    moved = f["n0"] * f["n1"] * f["n2"] * row_bursts * m.dma_burst_bytes
    return m.dma_latency_cycles + ceil_div(moved, m.dram_bytes_per_cycle)


def _k_lanes(m: MachineConfig, dtype: int) -> int:
    return m.mac_k_lanes(DType(dtype).name.lower())


def _vector_cycles(m: MachineConfig, elements: int, elem: int, factor: int = 1) -> int:
    return m.vector_latency_cycles + ceil_div(elements * elem, m.vector_bytes_per_cycle) * factor


def instruction_elements(opcode: int, a) -> int:
    """Elements a DMA, fill or vector instruction processes (vpool: window taps)."""
    info = OPCODES[opcode]
    f = operand_fields(opcode, a)
    if info.layout in ("dma", "fill"):
        return f["n0"] * f["n1"] * f["n2"] * f["n3"]
    if info.layout == "vpool":
        kh, kw = unpack_pair(f["kh_kw"])
        return f["c"] * f["ho"] * f["wo"] * kh * kw
    if info.layout == "vreduce":
        return f["outer"] * f["inner"]
    if info.engine == Engine.VECTOR:      # binary, unary and vcvt boxes
        return f["n0"] * f["n1"] * f["n2"]
    return 0


def conv2d_steps(m: MachineConfig, k_lanes: int, flags: int, groups: int, f_group: int,
                 pixels: int, k_group: int) -> int:
    """MAC steps of a conv2d (its cycles less the latency): per group, the output
    channels on the columns for each pixel, or with PIXEL_COLUMNS the pixels (row-major,
    rows packed) on the columns for each channel; each step consumes k_lanes of the
    group's c·kh·kw taps."""
    taps = ceil_div(k_group, k_lanes)
    if flags & Flag.PIXEL_COLUMNS:
        return groups * f_group * ceil_div(pixels, m.mac_cols) * taps
    return groups * pixels * ceil_div(f_group, m.mac_cols) * taps


def instruction_cycles(m: MachineConfig, opcode: int, dtype: int, a, flags: int) -> int:
    """Cycles the instruction occupies its engine (0 for control instructions)."""
    name = OPCODES[opcode].name
    f = operand_fields(opcode, a)
    elem = DTYPE_BYTES[DType(dtype)]
    if name in ("dma.load", "dma.store"):
        return _dma_cycles(m, elem, f)
    if name == "fill":
        return 1 + ceil_div(instruction_elements(opcode, a) * elem, m.sram_bytes_per_cycle)
    if name == "matmul":
        return m.mac_latency_cycles + f["m"] * ceil_div(f["n"], m.mac_cols) * ceil_div(
            f["k"], _k_lanes(m, dtype))
    if name == "conv2d":
        groups = f["groups"]
        kh, kw = unpack_pair(f["kh_kw"])
        k_group = (f["c"] // groups) * kh * kw
        return m.mac_latency_cycles + conv2d_steps(
            m, _k_lanes(m, dtype), flags, groups, f["f"] // groups, f["ho"] * f["wo"], k_group)
    if name == "dwconv2d":
        # Per channel, its ho*wo output pixels (row-major, rows packed back to back) in
        # groups of mac_cols columns, each group stepping through the kh*kw taps in
        # k_lanes chunks.
        kh, kw = unpack_pair(f["kh_kw"])
        return m.mac_latency_cycles + f["c"] * ceil_div(f["ho"] * f["wo"], m.mac_cols) * \
            ceil_div(kh * kw, _k_lanes(m, dtype))
    if name == "vcvt":
        elem = max(elem, DTYPE_BYTES[DType(f["src_dtype"])])
    if name == "vrequant":              # the larger element size, as vcvt
        elem = max(elem, DTYPE_BYTES[requant_src_dtype(flags)])
    if OPCODES[opcode].engine == Engine.VECTOR:
        factor = m.transcendental_factor if name in TRANSCENDENTAL else 1
        return _vector_cycles(m, instruction_elements(opcode, a), elem, factor)
    return 0


def instruction_macs(opcode: int, a) -> int:
    name = OPCODES[opcode].name
    if name not in ("matmul", "conv2d", "dwconv2d"):
        return 0
    f = operand_fields(opcode, a)
    if name == "matmul":
        return f["m"] * f["n"] * f["k"]
    kh, kw = unpack_pair(f["kh_kw"])
    if name == "conv2d":
        return f["ho"] * f["wo"] * f["f"] * (f["c"] // f["groups"]) * kh * kw
    return f["c"] * f["ho"] * f["wo"] * kh * kw


# Work, the simulator's (host) effort an instruction costs, not simulated cycles: its MACs,
# or its elements (window taps for vpool) times ELEMENT_WORK, the ratio of the two
# per-instruction caps (isa.MACS_PER_SRAM_BYTE / isa.ELEMENTS_PER_SRAM_BYTE), so an
# instruction at either cap is the same work. The native core polls its deadline in the
# same units.
ELEMENT_WORK = MACS_PER_SRAM_BYTE // ELEMENTS_PER_SRAM_BYTE
# A program does at most this much work per byte of the machine's SRAM: 16 instructions
# at the per-instruction cap (6.9e10 at 2 MiB). The largest dispatch our compiler emits
# for the real models of tests/real_models (f32 and int8) does 1.2e9, 57 times less
# (docs/npu-architecture.md "Static rules").
PROGRAM_WORK_PER_SRAM_BYTE = 16 * MACS_PER_SRAM_BYTE


def instruction_work(opcode: int, a) -> int:
    """The instruction's work: its MACs, else ELEMENT_WORK per element (0 for control)."""
    macs = instruction_macs(opcode, a)
    return macs if macs else ELEMENT_WORK * instruction_elements(opcode, a)


def program_work_limit(m: MachineConfig) -> int:
    """The most work one program may do (the verifier refuses more)."""
    return PROGRAM_WORK_PER_SRAM_BYTE * m.sram_bytes


@dataclass
class TimelineStats:
    total_cycles: int = 0
    busy_cycles: dict = field(default_factory=lambda: {ENGINE_NAMES[e]: 0 for e in Engine if e != Engine.CONTROL})
    stall_cycles: dict = field(default_factory=lambda: {ENGINE_NAMES[e]: 0 for e in Engine if e != Engine.CONTROL})
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    macs: int = 0
    # (engine name, start, end, opcode name, instruction index) per executed instruction
    events: list = field(default_factory=list)


def simulate_timeline(m: MachineConfig, instructions, record_events: bool = False) -> TimelineStats:
    """Runs the cycle model over an iterable of (opcode, dtype, flags, a) records."""
    stats = TimelineStats()
    engines = [Engine.DMA_IN, Engine.DMA_OUT, Engine.MAC, Engine.VECTOR]
    free_at = {e: 0 for e in engines}
    signals: dict[int, list[int]] = {}
    for index, (opcode, dtype, flags, a) in enumerate(instructions):
        info = OPCODES[opcode]
        if info.name == "end":
            break
        if info.name == "signal":
            f = operand_fields(opcode, a)
            signals.setdefault(f["sem"], []).append(free_at[Engine(f["engine"])])
        elif info.name == "wait":
            f = operand_fields(opcode, a)
            engine, value = Engine(f["engine"]), f["value"]
            if value > 0:
                ready = signals[f["sem"]][value - 1]
                if ready > free_at[engine]:
                    stats.stall_cycles[ENGINE_NAMES[engine]] += ready - free_at[engine]
                    free_at[engine] = ready
        elif info.name == "barrier":
            latest = max(free_at.values())
            for e in engines:
                stats.stall_cycles[ENGINE_NAMES[e]] += latest - free_at[e]
                free_at[e] = latest
        else:
            cycles = instruction_cycles(m, opcode, dtype, a, flags)
            start = free_at[info.engine]
            free_at[info.engine] = start + cycles
            stats.busy_cycles[ENGINE_NAMES[info.engine]] += cycles
            stats.macs += instruction_macs(opcode, a)
            if info.name in ("dma.load", "dma.store"):
                moved = instruction_elements(opcode, a) * DTYPE_BYTES[DType(dtype)]
                if info.name == "dma.load":
                    stats.dram_read_bytes += moved
                else:
                    stats.dram_write_bytes += moved
            if record_events:
                stats.events.append((ENGINE_NAMES[info.engine], start, start + cycles,
                                     info.name, index))
    stats.total_cycles = max(free_at.values())
    return stats


@dataclass(frozen=True)
class Roofline:
    """The true roofline of a dispatch: what any program computing it must do, whatever
    its tiling. Its cycles are max(useful MACs / peak MACs per cycle of `mac_dtype`,
    compulsory bytes read / DMA-in bandwidth, compulsory bytes written / DMA-out
    bandwidth): useful MACs are the op's math (no padding), compulsory bytes count each
    byte of each input and output tensor once. The one definition the compiler's
    estimate, npu-sim's statistics, the bench and the docs use."""
    useful_macs: int
    mac_dtype: str           # peak rate of this element type (irrelevant without MACs)
    read_bytes: int
    write_bytes: int

    def mac_cycles(self, m: MachineConfig) -> float:
        return self.useful_macs / m.peak_macs_per_cycle(self.mac_dtype)

    def cycles(self, m: MachineConfig) -> float:
        return max(self.mac_cycles(m), self.read_bytes / m.dram_bytes_per_cycle,
                   self.write_bytes / m.dram_bytes_per_cycle)

    def bound(self, m: MachineConfig) -> str:
        """What bounds the dispatch: "MACs" (the peak) or "DRAM" (a DMA direction)."""
        mac_cycles = self.mac_cycles(m)
        return "MACs" if mac_cycles and mac_cycles >= self.cycles(m) else "DRAM"

    def fraction(self, m: MachineConfig, cycles: int) -> float:
        """How close `cycles` comes to the roofline (1.0: at it)."""
        return self.cycles(m) / cycles if cycles else 0.0
