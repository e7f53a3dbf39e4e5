"""Stage 3, schedule: engine assignment and explicit synchronisation.

Input: the tiled program in a valid sequential order, each instruction naming the SRAM
buffers it reads and writes. Every instruction runs on its opcode's engine (dma_in for
loads and fills, mac, vector, dma_out for stores), in program order per engine. For
every pair of conflicting accesses (read-after-write, write-after-read,
write-after-write) to one SRAM buffer, or to overlapping DRAM bytes of one binding, from
two different engines, the later instruction's engine waits for a signal the earlier
one's engine gives right after it. One semaphore per (signalling engine, waiting engine)
pair counts those signals, so a wait names the count that covers the instruction it
needs. Waits already implied by earlier waits (tracked with a vector clock per engine)
are dropped.

Because tiles alternate between two SRAM buffers per operand, the only waits between
tile i+1's loads and tile i's compute are on the buffer of tile i-1: the loads of the
next tile run while the MAC computes this one, and stores drain behind it.
"""
from executable_format.isa import Engine
from executable_format.machine import MachineConfig

from .lower import NotLowerable
from .npu_ir import Buffer, Instr, dtype_bytes

COMPUTE_ENGINES = (Engine.DMA_IN, Engine.DMA_OUT, Engine.MAC, Engine.VECTOR)


def _dram_extent(instr: Instr) -> tuple[int, int]:
    f = instr.fields
    elem = dtype_bytes(instr.dtype)
    span = 1 + sum((f[f"n{i}"] - 1) * f[f"dram_s{i}"] for i in range(4))
    return f["dram_offset"], f["dram_offset"] + span * elem


class _DramAccesses:
    """Byte ranges of DRAM bindings that are both loaded and stored (in-place ops)."""

    def __init__(self, instrs: list[Instr]):
        loaded = {i.fields["binding"] for i in instrs if i.op == "dma.load"}
        stored = {i.fields["binding"] for i in instrs if i.op == "dma.store"}
        self.shared = loaded & stored
        self.history: dict[int, list[tuple[int, int, int, bool]]] = {}

    def conflicts(self, index: int, instr: Instr) -> list[int]:
        if instr.op not in ("dma.load", "dma.store") or instr.fields["binding"] not in self.shared:
            return []
        lo, hi = _dram_extent(instr)
        writes = instr.op == "dma.store"
        past = self.history.setdefault(instr.fields["binding"], [])
        found = [j for j, a, b, w in past if (w or writes) and a < hi and lo < b]
        past.append((index, lo, hi, writes))
        return found


def dependencies(instrs: list[Instr]) -> list[dict[Engine, int]]:
    """Per instruction: for each other engine, the latest earlier instruction on it that
    this one must wait for."""
    last_writer: dict[int, int] = {}
    last_readers: dict[int, dict[Engine, int]] = {}
    dram = _DramAccesses(instrs)
    deps = []
    for index, instr in enumerate(instrs):
        engine = instr.engine
        found = list(dram.conflicts(index, instr))
        for buffer in _sram(instr.reads):
            if id(buffer) in last_writer:
                found.append(last_writer[id(buffer)])
        for buffer in _sram(instr.writes):
            if id(buffer) in last_writer:
                found.append(last_writer[id(buffer)])
            found.extend(last_readers.get(id(buffer), {}).values())
        need: dict[Engine, int] = {}
        for j in found:
            other = instrs[j].engine
            if other != engine and j > need.get(other, -1):
                need[other] = j
        deps.append(need)
        for buffer in _sram(instr.reads):
            last_readers.setdefault(id(buffer), {})[engine] = index
        for buffer in _sram(instr.writes):
            last_writer[id(buffer)] = index
            last_readers[id(buffer)] = {}
    return deps


def _sram(buffers: tuple[Buffer, ...]):
    return (b for b in buffers if b.scope == "sram")


def schedule(instrs: list[Instr], machine: MachineConfig) -> list[Instr]:
    """The program with SIGNAL/WAIT inserted (END not included)."""
    deps = dependencies(instrs)
    # Vector clock: for each engine, the latest instruction index of every engine known
    # to have completed before that engine's next instruction starts.
    known = {e: {f: -1 for f in COMPUTE_ENGINES} for e in COMPUTE_ENGINES}
    snapshot: list[dict[Engine, int]] = []
    waits: list[list[tuple[Engine, int]]] = []
    signal_after: list[set[Engine]] = [set() for _ in instrs]
    for index, instr in enumerate(instrs):
        engine = instr.engine
        mine = known[engine]
        todo = []
        for other, j in sorted(deps[index].items()):
            if mine[other] >= j:
                continue
            todo.append((other, j))
            signal_after[j].add(engine)
            for e, k in snapshot[j].items():
                mine[e] = max(mine[e], k)
        waits.append(todo)
        mine[engine] = index
        snapshot.append(dict(mine))
    return _with_sync(instrs, waits, signal_after, machine)


def _with_sync(instrs, waits, signal_after, machine: MachineConfig) -> list[Instr]:
    semaphores: dict[tuple[Engine, Engine], int] = {}
    counts: dict[int, int] = {}
    signal_number: dict[tuple[int, Engine], int] = {}
    out: list[Instr] = []
    for index, instr in enumerate(instrs):
        engine = instr.engine
        for other, j in waits[index]:
            sem = semaphores[(other, engine)]
            out.append(Instr("wait", fields={"engine": int(engine), "sem": sem,
                                             "value": signal_number[(j, engine)]}))
        out.append(instr)
        for target in sorted(signal_after[index]):
            pair = (engine, target)
            if pair not in semaphores:
                if len(semaphores) == machine.semaphores:
                    raise NotLowerable(f"needs more than {machine.semaphores} semaphores")
                semaphores[pair] = len(semaphores)
            sem = semaphores[pair]
            counts[sem] = counts.get(sem, 0) + 1
            signal_number[(index, target)] = counts[sem]
            out.append(Instr("signal", fields={"engine": int(engine), "sem": sem}))
    return out
