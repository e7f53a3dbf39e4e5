"""The dispatches of a module in program order (functions and initializers in module
order, dispatches in order within them), with the buffers they read and write
and which earlier dispatches they depend on, read from the stream IR at the
executable-sources phase (`stream.cmd.dispatch` inside `stream.cmd.execute`)."""
from dataclasses import dataclass, field

from iree.compiler import ir

_ACCESS = {1: "read", 2: "write", 3: "readwrite"}


@dataclass
class BufferUse:
    binding: int
    buffer: str       # e.g. "external0": a stream resource, followed through execute regions
    access: str       # read | write | readwrite
    offset: int | None  # bytes; None when not a constant
    length: int | None

    def overlaps(self, other: "BufferUse") -> bool:
        if self.buffer != other.buffer:
            return False
        if None in (self.offset, self.length, other.offset, other.length):
            return True
        return self.offset < other.offset + other.length and other.offset < self.offset + self.length


@dataclass
class DispatchSite:
    order: int          # position in program order
    executable: str     # hal.executable symbol
    export: str         # entry point symbol
    uses: list[BufferUse]
    depends_on: list[int] = field(default_factory=list)  # orders of earlier sites


def dispatch_sites(module) -> list[DispatchSite]:
    buffers = _BufferNames()
    sites: list[DispatchSite] = []

    def visit(op):
        if op.name == "stream.cmd.dispatch":
            sites.append(_site(len(sites), op, buffers))
        return ir.WalkResult.ADVANCE

    for op in module.regions[0].blocks[0].operations:
        if op.operation.name in ("util.func", "util.initializer"):
            op.operation.walk(visit)
    _link_dependencies(sites)
    return sites


def _site(order: int, op, buffers: "_BufferNames") -> DispatchSite:
    entry = op.attributes["entry_points"][0].value
    segments = list(op.attributes["operandSegmentSizes"])
    first = segments[0] + segments[1]
    count = segments[2]
    operands = list(op.operands)
    resources = operands[first:first + count]
    offsets = operands[first + 2 * count:first + 3 * count]
    lengths = operands[first + 3 * count:first + 4 * count]
    accesses = [a.value for a in op.attributes["resource_accesses"]]
    uses = [BufferUse(i, buffers.name(resources[i]), _ACCESS.get(accesses[i], "readwrite"),
                      _constant(offsets[i]), _constant(lengths[i]))
            for i in range(count)]
    return DispatchSite(order, entry[0], entry[-1], uses)


def _link_dependencies(sites: list[DispatchSite]) -> None:
    """For each buffer range it uses, a site depends on the latest earlier site whose
    access conflicts with it (read after write, write after read, write after write)."""
    for site in sites:
        for use in site.uses:
            for earlier in reversed(sites[:site.order]):
                if any(_conflict(use, prior) for prior in earlier.uses):
                    if earlier.order not in site.depends_on:
                        site.depends_on.append(earlier.order)
                    break
        site.depends_on.sort()


def _conflict(use: BufferUse, prior: BufferUse) -> bool:
    return use.overlaps(prior) and "write" in (use.access + prior.access)


def _constant(value) -> int | None:
    if isinstance(value, ir.OpResult) and value.owner.name == "arith.constant":
        return value.owner.attributes["value"].value
    return None


class _BufferNames:
    """Names a stream resource after its root value: execute-region block arguments and
    awaited timepoint results are followed back to the value they stand for."""

    def __init__(self):
        self._names: dict = {}

    def name(self, value) -> str:
        root = _root(value)
        if root not in self._names:
            kind = str(root.type).removeprefix("!stream.resource<").removesuffix(">")
            same_kind = sum(1 for n in self._names.values() if n.startswith(kind))
            self._names[root] = f"{kind}{same_kind}"
        return self._names[root]


def _root(value):
    while True:
        if isinstance(value, ir.BlockArgument):
            parent = value.owner.owner
            if parent.name != "stream.cmd.execute":
                return value
            value = parent.operands[value.arg_number]  # operands: resources, sizes, await
        else:
            owner = value.owner
            if owner.name != "stream.timepoint.await":
                return value
            value = owner.operands[value.result_number]  # resources, sizes, timepoint
