"""Tiling of Matmul, every contraction (matmul, batch matmul, matvec, 1x1 convolutions
in any layout): output blocks of M x N, K split into chunks the MAC accumulates
(ACCUMULATE), batch indices one at a time.

Each role (batch, M, N, K) may span several dims (a 1x1 convolution in NCHW has
M = rows x cols). The dims of a role are first canonicalized: unit dims dropped,
neighbours merged where every tensor indexing the role has them contiguous. A block of
a role is then a `Split`: the dims before `dim` one index at a time, `dim` in chunks,
the dims after it whole; so a block is one dense run of the role's flattened index, and
its SRAM tile is dense whatever the DRAM strides (the DMA boxes carry them).

Operand tiles are dense in SRAM: A as [m][k], or [k][m] with TRANSPOSE_A when A's
innermost M dim is the contiguous one; B as [k][n], or [n][k] with TRANSPOSE_B. The loop
order (M blocks outer or N blocks outer) and the block sizes come from an estimate of
the engines' busy time, the DMA transfers costed as the instructions the emitter writes,
over the candidates that fit SRAM with double buffering; operand blocks that stay the
same between consecutive tiles are not reloaded. A per-column bias add at the start of
the epilogue becomes the MAC BIAS flag (a small bias along one dim loaded whole before
the first tile, tile.Resident); with f32 operands a longer per-column affine
chain (a bias, then an imported BatchNormalization) is folded instead: its scale into
each B tile as it is loaded, its offset into the BIAS operand (affine_fold). Where the
channel is M (a pointwise convolution in NCHW, computed as out^T = b^T a^T), the chain
is folded per row: its scale into each A tile, and each accumulator tile starts at its
offset (a vcopy; the MAC's bias is per column), which the MAC accumulates onto. The
rest runs on the vector engine. The last tile may be cut into shrinking pieces, so that
the pipeline drains with a short epilogue and store (ramp_pieces): each cut is emitted
and scheduled, and the fastest program kept.
"""
import functools
import itertools
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from executable_format.isa import Flag
from executable_format.machine import MachineConfig

from .affine_fold import AffineFold
from .epilogue import (LEAVES, EpilogueInputs, EpiloguePlan, OutputStage, accumulator,
                       fold_affine, fold_bias, temp_count, used_inputs)
from .lower import Lowered, NotLowerable, extra_outputs
from .ops import reachable
from .requant import column_bias
from .npu_ir import Buffer, Instr, busy_cycles, dtype_bytes, mac_flags, mac_operands_supported
from .tile import (RAMP_DEPTHS, SRAM_ALIGN, Dim, Pipeline, Resident, Slots, Sram, Streamed,
                   TiledProgram, aligned, block_candidates, ceil_div, dense_sram_strides,
                   dma_instrs, fitting, mixed_broadcast, prod, ramp_down_pieces,
                   split_candidates, worth_resident)
from .tiler import Candidate, fastest
from .vector import Operand, binary, unary

ROLES = ("batch", "m", "n", "k")
ACC_SLOTS = 3   # accumulator tiles: the MAC fills the third while the epilogue of the
                # first waits for its inputs (the first one's for the setup's table)
TENSOR_ROLES = {"a": ("batch", "m", "k"), "b": ("batch", "k", "n"), "out": ("batch", "m", "n")}
RAMP_GROWTH = 1.0       # the least MAC / other engine ratio of a tile worth a ramp


def tensor_roles(name: str) -> tuple[str, ...]:
    """The roles of a tensor's dims, in order (epilogue inputs are indexed like out)."""
    return TENSOR_ROLES.get(name, TENSOR_ROLES["out"])


# ----------------------------------------------------------------------- the layout

@dataclass
class Layout:
    """The contraction's dims per role (outermost first) after canonicalization, and
    every tensor as a DRAM view over its roles' dims."""
    extents: dict[str, tuple[int, ...]]
    tensors: dict[str, Buffer]

    def count(self, role: str) -> int:
        return prod(self.extents[role])


def canonical_layout(lowered: Lowered) -> Layout:
    op = lowered.op
    counts = dict(zip(ROLES, op.dims))
    positions = {}
    for name in lowered.tensors:
        start, positions[name] = 0, {}
        for role in tensor_roles(name):
            positions[name][role] = range(start, start + counts[role])
            start += counts[role]
    extents, strides = {}, {name: {} for name in lowered.tensors}
    for role in ROLES:
        dims: list[tuple[int, dict[str, int]]] = []
        users = [name for name in lowered.tensors if role in tensor_roles(name)]
        for i in range(counts[role]):
            extent = lowered.tensors[users[0]].shape[positions[users[0]][role][i]]
            along = {name: lowered.tensors[name].strides[positions[name][role][i]]
                     for name in users}
            if extent == 1:
                continue
            if dims and all(dims[-1][1][name] == along[name] * extent for name in users):
                dims[-1] = (dims[-1][0] * extent, along)
            else:
                dims.append((extent, along))
        dims = dims or [(1, {name: 0 for name in users})]
        extents[role] = tuple(extent for extent, _ in dims)
        for name in users:
            strides[name][role] = [along[name] for _, along in dims]
    tensors = {}
    for name, buffer in lowered.tensors.items():
        shape = [n for role in tensor_roles(name) for n in extents[role]]
        view_strides = [s for role in tensor_roles(name) for s in strides[name][role]]
        tensors[name] = Buffer(buffer.name, buffer.dtype, tuple(shape), "dram",
                               binding=buffer.binding, offset=buffer.offset,
                               strides=tuple(view_strides), view_of=buffer.view_of or buffer)
    return Layout(extents, tensors)


# ------------------------------------------------------------------------ the blocks

class Split(NamedTuple):
    """Blocks of a role: dims before `dim` one index at a time, `dim` in chunks of
    `chunk`, the dims after it whole."""
    dim: int
    chunk: int

    def size(self, extents) -> int:
        return self.chunk * prod(extents[self.dim + 1:])

    def count(self, extents) -> int:
        return prod(extents[:self.dim]) * ceil_div(extents[self.dim], self.chunk)

    def first_counts(self, extents) -> tuple[int, ...]:
        """The counts of the first (biggest) block."""
        inner = tuple(extents[self.dim + 1:])
        return (1,) * self.dim + (min(self.chunk, extents[self.dim]),) + inner

    def blocks(self, extents) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(starts, counts) of every block, in order."""
        inner = tuple(extents[self.dim + 1:])
        result = []
        for outer in itertools.product(*(range(n) for n in extents[:self.dim])):
            for start in range(0, extents[self.dim], self.chunk):
                count = min(self.chunk, extents[self.dim] - start)
                result.append((outer + (start,) + (0,) * len(inner),
                               (1,) * self.dim + (count,) + inner))
        return result


def split_of_size(extents, size: int) -> Split:
    """The biggest block of at most `size` elements (at least one) that is a Split."""
    inner = 1
    for dim in range(len(extents) - 1, -1, -1):
        if size < inner * extents[dim] or dim == 0:
            return Split(dim, max(1, min(extents[dim], size // inner)))
        inner *= extents[dim]
    raise AssertionError("unreachable")


def m_block_sizes(total: int) -> list[int]:
    """The M block sizes to try: split_candidates (total / k for k <= 64, and 1..8), and
    every power of two from 8 below total, so that a long M (230,400 pixels) whose heavy
    epilogue fits no block of total / 64 in SRAM still gets blocks of thousands of rows,
    not of 8 (CSRNet: 28,800 tiles, 20x stock's compile time)."""
    return sorted(set(split_candidates(total)) |
                  {1 << i for i in range(3, total.bit_length()) if 1 << i < total})


def splits(extents, sizes) -> list[Split]:
    """The Splits for the wanted block sizes, smallest block first."""
    found = {split_of_size(extents, size) for size in sizes}
    return sorted(found, key=lambda s: s.size(extents))


def flat_stride(strides, counts) -> int | None:
    """The stride of a block's dims seen as one flattened dim, or None if they do not
    flatten (0 when the block does not vary along them)."""
    live = [(s, c) for s, c in zip(strides, counts) if c > 1]
    if all(s == 0 for s, _ in live):
        return 0
    if any(s == 0 for s, _ in live):
        return None
    for (outer, _), (inner, count) in zip(live, live[1:]):
        if outer != inner * count:
            return None
    return live[-1][0]


class ContractionTiling(NamedTuple):
    m: Split
    n: Split
    k: Split
    m_outer: bool        # loop over M blocks outside N blocks (A stays resident)


# ------------------------------------------------------------------------ the tiler

class ContractionTiler:
    """The tiler (tiler.Tiler) of matmul dispatches: the tilings of the contraction as
    IREE formed it and of its transpose (out^T = b^T a^T, M and N swapped), the cheaper
    estimate wins. The MAC array pads N to its columns and not M, so a 1x1 convolution
    in NCHW with 48 output channels (N) over 2704 pixels (M) keeps 0.75 of the columns
    busy one way and all of them the other."""

    def __init__(self, lowered: Lowered, machine: MachineConfig):
        self.machine = machine
        self.orientations: list[tuple[bool, OrientedTiler]] = []    # (swapped, tiler)
        refusal = None
        for swapped, form in ((False, lowered), (True, transposed(lowered))):
            if form is None:
                continue
            try:
                self.orientations.append((swapped, OrientedTiler(form, machine)))
            except NotLowerable as error:   # operand dtypes the MAC takes in one order only
                refusal = refusal or error
        if not self.orientations:
            raise refusal

    def candidates(self) -> list[Candidate]:
        candidates, refusal = [], None
        for index, (_, orientation) in enumerate(self.orientations):
            try:
                candidates += orientation.candidates(index)
            except NotLowerable as error:
                refusal = refusal or error
        if not candidates:
            raise refusal
        return candidates

    def estimate(self, tiling) -> int:
        index, t = tiling
        return self.orientations[index][1].estimate(t)

    def emit(self, tiling) -> TiledProgram:
        """The program of `tiling` (orientation, tiling) with the ramp down
        (OrientedTiler.ramps) whose scheduled program takes the fewest cycles (the
        estimate does not see a ramp's pieces waiting on each other); of a tiling
        (orientation, tiling, pieces), with that ramp. The program's `tiling` is the
        latter."""
        index, t, *ramp = tiling
        swapped, orientation = self.orientations[index]
        programs = []
        for pieces in ramp or orientation.ramps(t):
            programs.append(orientation.emit(t, pieces))
            programs[-1].tiling = (index, t, pieces)
        program = fastest(programs, self.machine)
        if swapped:
            program.tiles += ", M and N swapped: out^T = b^T a^T"
        return program


def transposed(lowered: Lowered) -> Lowered | None:
    """The contraction out^T = b^T a^T: M and N swapped, a and b exchanged, every tensor a
    view with its dims reordered (no data moves); None when an epilogue input is not
    indexed like the output."""
    op = lowered.op
    nb, nm, nn, nk = op.dims
    batch = list(range(nb))
    out_order = batch + [nb + nm + i for i in range(nn)] + [nb + i for i in range(nm)]
    orders = {"a": batch + [nb + nm + i for i in range(nk)] + [nb + i for i in range(nm)],
              "b": batch + [nb + nk + i for i in range(nn)] + [nb + i for i in range(nk)]}
    rank = len(out_order)
    outputs = [op.out] + [ref for ref, _ in op.extra_outputs]
    if any(len(ref.shape) != rank for ref in op.epilogue_inputs + outputs):
        return None

    def view(ref, order):
        return replace(ref, shape=tuple(ref.shape[i] for i in order),
                       strides=tuple(ref.strides[i] for i in order))

    swapped = replace(op, a=view(op.b, orders["b"]), b=view(op.a, orders["a"]),
                      out=view(op.out, out_order),
                      epilogue_inputs=[view(ref, out_order) for ref in op.epilogue_inputs],
                      extra_outputs=[(view(ref, out_order), node)
                                     for ref, node in op.extra_outputs],
                      dims=(nb, nn, nm, nk))
    sources = {"a": ("b", orders["b"]), "b": ("a", orders["a"])}
    tensors = {}
    for role in lowered.tensors:
        source, order = sources.get(role, (role, out_order))
        buffer = lowered.tensors[source]
        tensors[role] = replace(view(buffer, order), view_of=buffer.view_of or buffer)
    return replace(lowered, op=swapped, tensors=tensors)


def _select(condition, if_true, if_false):
    """`if_true` where `condition` holds, else `if_false`: numbers, or numpy arrays
    (OrientedTiler.grid_bounds) elementwise; numbers stay Python numbers, so that an
    estimate does not pay numpy's per-call cost."""
    if isinstance(condition, np.ndarray):
        return np.where(condition, if_true, if_false)
    return if_true if condition else if_false


def _maximum(*values):
    """The largest of `values`: numbers, or numpy arrays elementwise (as _select)."""
    if any(isinstance(v, np.ndarray) for v in values):
        return functools.reduce(np.maximum, values)
    return max(values)


class OrientedTiler:
    """The tilings of one orientation of the contraction."""

    def __init__(self, lowered: Lowered, machine: MachineConfig):
        op = lowered.op
        dtype = op.a.dtype
        if not mac_operands_supported(dtype, op.b.dtype):
            raise NotLowerable(f"matmul operand dtypes {dtype}/{op.b.dtype} not supported")
        self.mac_flags = mac_flags(dtype, op.b.dtype, op.narrow_sum)
        acc_dtype = accumulator(dtype)
        nb, nm, nn, _ = op.dims
        n_dims = set(range(nb + nm, nb + nm + nn))
        # A sum in f16 adds its bias after the products, each rounded: no BIAS flag. Nor
        # does an epilogue storing several results: the folds renumber its nodes.
        bias_index, expr = (None, op.epilogue) if op.narrow_sum or op.extra_outputs else \
            fold_bias(op.epilogue, op.epilogue_inputs, n_dims, acc_dtype)
        self.layout = canonical_layout(lowered)
        self.affine = []        # epilogue.fold_affine's steps, folded per channel
        self.affine_role = None  # the role of the channel: "n" (columns) or "m" (rows)
        if dtype == op.b.dtype == "f32" and not op.extra_outputs:
            for role, role_dims, channel_dim in (("n", nn, nb + nm), ("m", nm, nb)):
                if role_dims != 1 or len(self.layout.extents[role]) != 1:
                    continue
                steps, folded = fold_affine(op.epilogue, op.epilogue_inputs, channel_dim)
                # Per row, the offset is a vector pass before the MAC (the BIAS operand
                # is per column): worth it from two steps, when a pass is saved.
                if len(steps) > 1 or steps and bias_index is None and role == "n":
                    self.affine, self.affine_role = steps, role
                    expr, bias_index = folded, None
                    break
        # The per-pixel terms of an int8 epilogue's zero-point correction, where the
        # pixels are the MAC's columns: the BIAS operand, computed per tile from them.
        self.column_bias = None
        if acc_dtype == "i32" and bias_index is None and not op.extra_outputs:
            first = len(self.layout.extents["batch"]) + len(self.layout.extents["m"])
            columns = set(range(first, first + len(self.layout.extents["n"])))
            folded = column_bias(expr, self.layout.tensors, columns)
            # Its inputs are read as one dense run per tile: they vary along every N dim.
            if folded is not None and all(
                    self.layout.tensors[f"epilogue.{k}"].strides[d] != 0
                    for k in used_inputs(folded[0]) for d in columns
                    if self.layout.tensors[f"epilogue.{k}"].shape[d] > 1):
                self.column_bias, expr = folded
        used = used_inputs(expr)
        self.expr, self.bias_index, self.used = expr, bias_index, used
        self.epilogue_count = len(op.epilogue_inputs)
        self.constants = lowered.constants
        self.m, self.dtype = machine, dtype
        self.e, self.acc_e = dtype_bytes(self.dtype), dtype_bytes(acc_dtype)
        self.acc_dtype = acc_dtype
        names = [f"epilogue.{k}" for k in used + ([bias_index] if bias_index is not None else [])]
        self.streamed = [self.layout.tensors[name] for name in names]
        self.expand = {k: dims for k in used
                       if (dims := self._mixed_broadcast(self.layout.tensors[f"epilogue.{k}"]))}
        self.op = op
        self.outputs = ["out"] + [f"out.{k}" for k in range(1, len(op.extra_outputs) + 1)]
        out = self.layout.tensors["out"]
        self.cast_e = dtype_bytes(out.dtype) if out.dtype != acc_dtype else 0
        # per element of the tile, the two slots of each extra output's value tile in
        # the accumulator's dtype, and of its tile converted to another float dtype
        self.extra_e = sum(self.acc_e + (dtype_bytes(ref.dtype) if ref.dtype != acc_dtype else 0)
                           for ref, _ in op.extra_outputs)
        self.temps = temp_count(expr)
        self.consts = sum(1 for node in expr if node[0] == "const")
        self.vector_ops = sum(2 if expr[i][0] == "abs" else 1 for i in reachable(expr)
                              if expr[i][0] not in LEAVES) + (1 if self.cast_e else 0)
        self.batch = self.layout.count("batch")
        a, b = self.layout.tensors["a"], self.layout.tensors["b"]
        nb, nm = len(self.layout.extents["batch"]), len(self.layout.extents["m"])
        nk = len(self.layout.extents["k"])
        self.a_transposed = abs(a.strides[nb + nm - 1]) < abs(a.strides[-1])
        self.b_transposed = abs(b.strides[nb + nk - 1]) < abs(b.strides[-1])
        self._costs: dict = {}
        self._splits: dict = {}
        self._probe: ContractionEmitter | None = None    # costs the epilogue (vector_cycles)

    def extents(self, role: str):
        return self.layout.extents[role]

    def _mixed_broadcast(self, tensor) -> frozenset:
        """tile.mixed_broadcast over the M dims and the N dims (a conv's addend that
        varies along H, not W: the M tile is a flattened run of H x W)."""
        nb, nm = len(self.extents("batch")), len(self.extents("m"))
        return mixed_broadcast(tensor, (range(nb, nb + nm), range(nb + nm, len(tensor.strides))))

    def sizes(self, t: ContractionTiling) -> tuple[int, int, int]:
        return self._split("m", t.m)[0], self._split("n", t.n)[0], self._split("k", t.k)[0]

    def counts(self, t: ContractionTiling) -> tuple[int, int, int]:
        return self._split("m", t.m)[1], self._split("n", t.n)[1], self._split("k", t.k)[1]

    def _split(self, role: str, split: Split) -> tuple[int, int]:
        """The block size and block count of `split` along `role`, cached (the search
        asks for them of every candidate)."""
        key = (role, split)
        found = self._splits.get(key)
        if found is None:
            extents = self.extents(role)
            found = self._splits[key] = (split.size(extents), split.count(extents))
        return found

    def slots(self, t: ContractionTiling) -> tuple[int, int]:
        """SRAM slots of A and of B: one for an operand loaded once, two to double-buffer;
        the operand of the outer loop, resident while the inner blocks pass when K has
        at most two blocks, gets two sets of its K blocks, so the next outer block loads
        while the MAC finishes this one."""
        nm, nn, nk = self.counts(t)
        a_single = self.batch == 1 and nm * nk == 1
        b_single = self.batch == 1 and nn * nk == 1
        resident = 2 * nk if nk <= 2 else 2
        return (1 if a_single else resident if t.m_outer else 2), \
            (1 if b_single else 2 if t.m_outer else resident)

    def footprint(self, t: ContractionTiling) -> int:
        """The SRAM the emitter allocates (slots are 64-byte aligned)."""
        mt, nt, kt = self.sizes(t)
        a_slots, b_slots = self.slots(t)
        out = mt * nt
        total = a_slots * aligned(mt * kt * self.e) + b_slots * aligned(kt * nt * self.e)
        total += (ACC_SLOTS + self.temps) * aligned(out * self.acc_e) + \
            2 * aligned(out * self.cast_e) + 2 * aligned(out * self.extra_e)
        counts = self.first_counts(t)
        for tensor in self.streamed:
            expanded = self._mixed_broadcast(tensor)
            live = prod(c for d, (c, s) in enumerate(zip(counts, tensor.strides))
                        if s or d in expanded)
            total += 2 * aligned(live * dtype_bytes(tensor.dtype))
            if tensor.dtype != self.acc_dtype:
                total += 2 * aligned(live * self.acc_e)
        if self.affine:     # A, B and each step's operand over all channels
            total += (2 + len(self.affine)) * aligned(self.layout.count(self.affine_role) * 4)
        if self.column_bias:    # its inputs (and their conversions), temporaries, results
            total += (4 * len(used_inputs(self.column_bias)) + temp_count(self.column_bias) +
                      2) * aligned(nt * 4)
        return total + (self.consts + 1) * SRAM_ALIGN

    def first_counts(self, t: ContractionTiling) -> list[int]:
        """The out-indexed counts (batch, M, N dims) of the first tile."""
        batch = [1] * len(self.extents("batch"))
        return batch + list(t.m.first_counts(self.extents("m"))) + \
            list(t.n.first_counts(self.extents("n")))

    def mac_cycles(self, mt: int, nt: int, kt: int) -> int:
        m = self.m
        return m.mac_latency_cycles + mt * ceil_div(nt, m.mac_cols) * \
            ceil_div(kt, m.mac_k_lanes(self.dtype))

    def vector_cycles(self, m: Split, n: Split) -> int:
        """The epilogue's vector cycles on the first M x N block: an integer
        accumulator's epilogue costed as the emitter writes it (one vrequant where it
        requantizes, and what runs after its table), a float one as a pass over the
        tile per node."""
        if self.acc_dtype != "i32":
            return self.float_epilogue_cycles(m.size(self.extents("m")) *
                                              n.size(self.extents("n")))
        key = ("vector", m, n)
        if key not in self._costs:
            if self._probe is None:     # the epilogue planned once, for the whole output
                whole = {role: split_of_size(self.extents(role), self.layout.count(role))
                         for role in ("m", "n")}
                k = split_of_size(self.extents("k"), self.m.mac_k_lanes(self.dtype))
                self._probe = ContractionEmitter(
                    self, ContractionTiling(whole["m"], whole["n"], k, True), Sram(None))
            batch = (0,) * len(self.extents("batch"))
            acc = Buffer("acc", self.acc_dtype, (m.size(self.extents("m")) *
                                                 n.size(self.extents("n")),), "sram")
            first = {role: (0, ((0,) * len(self.extents(role)),
                                split.first_counts(self.extents(role))))
                     for role, split in (("m", m), ("n", n))}
            _, back = self._probe.epilogue(batch, first["m"], first["n"], acc, "")
            self._costs[key] = busy_cycles(self.m, [i for i in back
                                                    if i.engine_name == "vector"])
        return self._costs[key]

    def float_epilogue_cycles(self, elements):
        """The vector cycles of a float accumulator's epilogue on a tile of `elements`:
        a pass over it per node (numbers, or numpy arrays of them)."""
        return self.vector_ops * (self.m.vector_latency_cycles + ceil_div(
            elements * self.acc_e, self.m.vector_bytes_per_cycle))

    def first_block(self, name: str, roles: dict[str, Split]) -> list[tuple[int, int]]:
        """(count, stride) of the dims tensor `name` varies along in its first block
        (its dims of the roles in `roles`; batch index 0)."""
        tensor = self.layout.tensors[name]
        counts = [c for role in tensor_roles(name) for c in (
            roles[role].first_counts(self.extents(role)) if role in roles
            else (1,) * len(self.extents(role)))]
        return [(c, s) for c, s in zip(counts, tensor.strides) if s]

    def transfer(self, op: str, name: str, roles: dict[str, Split]) -> int:
        """Busy cycles of the DMA instructions moving the first block of tensor `name`,
        cached."""
        key = (op, name, tuple(roles.items()))
        if key not in self._costs:
            tensor = self.layout.tensors[name]
            live = self.first_block(name, roles)
            dense = dense_sram_strides([c for c, _ in live])
            probe = Buffer("probe", tensor.dtype, (prod(c for c, _ in live),), "sram")
            dims = [Dim(c, s, d) for (c, s), d in zip(live, dense)]
            self._costs[key] = busy_cycles(self.m, dma_instrs(op, tensor, 0, probe, 0, dims, ""))
        return self._costs[key]

    def estimate(self, t: ContractionTiling) -> int:
        return self._pipelined(t.m_outer, self._block_costs(t.m, t.n, t.k))

    def grid_bounds(self, m_splits: list[Split], n_splits: list[Split],
                    k_splits: list[Split]) -> np.ndarray:
        """The cycles `estimate` cannot fall below of every tiling of the splits, indexed
        [n split, k split, loop order (M outer first), m split]: the block costs with
        each transfer at its floor (one DMA latency and the block's bytes at the DRAM
        bandwidth: a transfer moves whole bursts, at least its bytes) and the epilogue
        of an integer accumulator (costed from its instructions) at 0. One array
        expression over the grid: the search bounds every candidate."""
        grids = {"n": (0, n_splits), "k": (1, k_splits), "m": (3, m_splits)}

        def along(role: str, values: list[int]) -> np.ndarray:
            axis, splits = grids[role]
            shape = [1, 1, 1, 1]
            shape[axis] = len(splits)
            return np.array(values, dtype=np.int64).reshape(shape)

        def floor(name: str, first: str, second: str) -> np.ndarray:
            size = along(first, self._live(name, first, grids[first][1])) * \
                along(second, self._live(name, second, grids[second][1])) * \
                dtype_bytes(self.layout.tensors[name].dtype)
            return self.m.dma_latency_cycles + ceil_div(size, self.m.dram_bytes_per_cycle)

        (mt, nm), (nt, nn), (kt, nk) = (
            (along(role, [self._split(role, s)[0] for s in grids[role][1]]),
             along(role, [self._split(role, s)[1] for s in grids[role][1]]))
            for role in ("m", "n", "k"))
        vector = 0 if self.acc_dtype == "i32" else self.float_epilogue_cycles(mt * nt)
        m_outer = np.array([True, False]).reshape(1, 1, 2, 1)
        return self._pipelined(m_outer, ((nm, nn, nk), (
            floor("a", "m", "k"), floor("b", "k", "n"),
            sum(floor(name, "m", "n") for name in self.outputs),
            sum(floor(tensor.name, "m", "n") for tensor in self.streamed),
            self.mac_cycles(mt, nt, kt), vector + self.row_bias_cycles(mt * nt),
            self.scale_cycles(kt * (mt if self.affine_role == "m" else nt)))))

    def _live(self, name: str, role: str, splits: list[Split]) -> list[int]:
        """For each of `splits` of `role`, the elements of tensor `name`'s first block
        along the role's dims it varies along (first_block's)."""
        roles = tensor_roles(name)
        start = sum(len(self.extents(r)) for r in roles[:roles.index(role)])
        strides = self.layout.tensors[name].strides[start:]
        extents = self.extents(role)
        return [prod(c for c, s in zip(split.first_counts(extents), strides) if s)
                for split in splits]

    def _pipelined(self, m_outer, block_costs):
        """The tiles through the engines' pipeline, from one tile's costs (numbers, or
        numpy arrays of them over a grid of tilings, `m_outer` too)."""
        (nm, nn, nk), (load_a, load_b, store, epilogue_loads, mac, vector, scale) = block_costs
        tiles, a_loads, b_loads = self.loads(m_outer, nm, nn, nk)
        dma_in = a_loads * load_a + b_loads * load_b + tiles * epilogue_loads
        scaled = a_loads if self.affine_role == "m" else b_loads
        busiest = _maximum(tiles * nk * mac, dma_in, tiles * store,
                           tiles * vector + scaled * scale)
        return busiest + load_a + load_b + scale + epilogue_loads + mac + vector + store

    def loads(self, m_outer, nm, nn, nk):
        """The tiles, and the loads of A and of B blocks: the operand of the outer loop
        is loaded once per outer block when K has at most two blocks (slots)."""
        tiles = self.batch * nm * nn
        resident, each = nk <= 2, tiles * nk
        a_loads = _select(m_outer, _select(resident, self.batch * nm * nk, each), each)
        b_loads = _select(m_outer, each, _select(resident, self.batch * nn * nk, each))
        return tiles, a_loads, b_loads

    def inner_role(self, t: ContractionTiling) -> str:
        return "n" if t.m_outer else "m"

    def ramps(self, t: ContractionTiling) -> list[list[Split]]:
        """The ways to cut the last tile worth trying (ramp_pieces), [] (no cut) first."""
        return [pieces for depth in RAMP_DEPTHS
                if (pieces := self.ramp_pieces(t, depth)) is not None]

    def ramp_pieces(self, t: ContractionTiling, depth: int) -> list[Split] | None:
        """The ramp down: the last tile (the last block of the inner loop's role in the
        last outer block) cut along its split dim into `depth` + 1 pieces, shrinking by
        the ratio of a tile's MAC cycles to its busiest other engine's, so that each
        piece's epilogue and store fit in the next one's MAC and the pipeline drains
        with a short epilogue and store. N pieces are whole MAC columns. [] at depth 0;
        None when the MAC does not outrun the other engines by RAMP_GROWTH, when the
        block is too short or N is split along an outer dim."""
        if not depth:
            return []
        role = self.inner_role(t)
        split, extents = getattr(t, role), self.extents(role)
        step = 1
        if role == "n":
            if split.dim != len(extents) - 1:
                return None
            step = self.m.mac_cols
        (_, _, nk), (load_a, load_b, store, epilogue_loads, mac, vector, _) = \
            self._block_costs(t.m, t.n, t.k)
        inner_load, outer_load = (load_b, load_a) if role == "n" else (load_a, load_b)
        loads = nk * (inner_load + (outer_load if nk > 2 else 0)) + epilogue_loads
        growth = nk * mac / max(vector, store, loads)
        if growth < RAMP_GROWTH:
            return None
        whole = extents[split.dim]
        last = whole - (ceil_div(whole, split.chunk) - 1) * split.chunk
        pieces = ramp_down_pieces(last, depth, growth, step)
        return None if pieces is None else [Split(split.dim, piece) for piece in pieces]

    def _block_costs(self, m: Split, n: Split, k: Split):
        """The block counts of M, N and K, and the busy cycles of one tile's transfers,
        MAC, epilogue and B scaling: what both loop orders share, cached."""
        key = ("block", m, n, k)
        if key not in self._costs:
            t = ContractionTiling(m, n, k, True)
            mt, nt, kt = self.sizes(t)
            self._costs[key] = self.counts(t), (
                self.transfer("dma.load", "a", {"m": m, "k": k}),
                self.transfer("dma.load", "b", {"k": k, "n": n}),
                sum(self.transfer("dma.store", name, {"m": m, "n": n}) for name in self.outputs),
                sum(self.transfer("dma.load", tensor.name, {"m": m, "n": n})
                    for tensor in self.streamed),
                self.mac_cycles(mt, nt, kt),
                self.vector_cycles(m, n) + self.row_bias_cycles(mt * nt),
                self.scale_cycles(kt * (mt if self.affine_role == "m" else nt)))
        return self._costs[key]

    def scale_cycles(self, elements: int) -> int:
        """The vector cycles of scaling an operand tile (B per column, A per row) by the
        folded affine chain's A (0 when there is none)."""
        m = self.m
        return m.vector_latency_cycles + ceil_div(elements * 4, m.vector_bytes_per_cycle) \
            if self.affine else 0

    def row_bias_cycles(self, elements: int) -> int:
        """The vector cycles of starting an accumulator tile at the folded per-row
        offset (0 unless the chain is folded per row)."""
        return self.scale_cycles(elements) if self.affine_role == "m" else 0

    def candidates(self, orientation: int) -> list[Candidate]:
        """The tilings that fit SRAM, each as (`orientation`, ContractionTiling)."""
        m = self.m
        m_splits = splits(self.extents("m"), m_block_sizes(self.layout.count("m")))
        n_splits = splits(self.extents("n"), block_candidates(self.layout.count("n"), m.mac_cols))
        k_splits = splits(self.extents("k"), block_candidates(self.layout.count("k"),
                                                              m.mac_k_lanes(self.dtype)))
        bounds = self.grid_bounds(m_splits, n_splits, k_splits).tolist()
        m_sizes = [self._split("m", s)[0] for s in m_splits]
        candidates = []
        for n_split, n_bounds in zip(n_splits, bounds):
            for k_split, k_bounds in zip(k_splits, n_bounds):
                nk_size = self._split("n", n_split)[0] * self._split("k", k_split)[0]
                for m_outer, order_bounds in zip((True, False), k_bounds):
                    fit = fitting(m_splits, lambda s: self.footprint(
                        ContractionTiling(s, n_split, k_split, m_outer)) <= m.sram_bytes)
                    candidates += [Candidate((orientation, ContractionTiling(
                                                 s, n_split, k_split, m_outer)),
                                             m_sizes[i] * nk_size, order_bounds[i])
                                   for i, s in enumerate(fit)]
        if not candidates:
            raise NotLowerable("does not fit SRAM even tiled: matmul "
                               f"{self.layout.count('m')}x{self.layout.count('n')}x"
                               f"{self.layout.count('k')}")
        return candidates

    def emit(self, t: ContractionTiling, pieces: list[Split]) -> TiledProgram:
        """The program of tiling `t`, its last tile cut into `pieces` ([]: not cut)."""
        return ContractionEmitter(self, t, pieces=pieces).run()


# ----------------------------------------------------------------------- the emitter

class ContractionEmitter:
    def __init__(self, tiler: OrientedTiler, t: ContractionTiling, sram: Sram | None = None,
                 pieces: list[Split] = ()):
        self.p, self.t, self.pieces = tiler, t, list(pieces)
        self.tensors = tiler.layout.tensors
        mt, nt, kt = tiler.sizes(t)
        sram = sram or Sram(tiler.m.sram_bytes)
        self.sram = sram
        a_slots, b_slots = tiler.slots(t)
        self.a_slots = Slots(sram, "a", tiler.dtype, (mt * kt,), a_slots)
        self.b_slots = Slots(sram, "b", tiler.dtype, (kt * nt,), b_slots)
        self.outs = Slots(sram, "acc", tiler.acc_dtype, (mt * nt,), ACC_SLOTS)
        counts = tiler.first_counts(t)
        bias = self.tensors[f"epilogue.{tiler.bias_index}"] if tiler.bias_index is not None \
            else None
        # A small bias along one dim is loaded whole before the first tile (each tile's
        # columns are a run of it), instead of paying a DMA latency per tile.
        self.bias = self.resident_bias = None
        if bias is not None and sum(1 for s in bias.strides if s) == 1 and \
                worth_resident(bias, tiler.m):
            self.resident_bias = Resident(sram, bias, "bias whole", tiler.acc_dtype)
        elif bias is not None:
            self.bias = Streamed(sram, bias, counts, compute_dtype=tiler.acc_dtype)
        self.affine = self.folded_bias = None
        if tiler.affine:
            role = tiler.affine_role
            channel_dim = len(tiler.extents("batch")) + (len(tiler.extents("m"))
                                                         if role == "n" else 0)
            channels = tiler.layout.count(role)
            self.affine = AffineFold(sram, tiler.affine, self.tensors, channels, tiler.m,
                                     channel_dim)
            self.folded_bias = sram.alloc("affine.bias", "f32", (channels,))
        self.column_plan = None
        if tiler.column_bias:
            inputs = used_inputs(tiler.column_bias)
            self.column_streams = {k: Streamed(sram, self.tensors[f"epilogue.{k}"], counts,
                                               compute_dtype="i32") for k in inputs}
            self.column_plan = EpiloguePlan(tiler.column_bias, sram, "i32", nt, name="colbias",
                                            input_dtypes=["i32"] * (1 + max(inputs)))
            self.column_slots = Slots(sram, "colbias", "i32", (nt,))
        self.epi = EpilogueInputs(sram, self.tensors, tiler.used, tiler.epilogue_count,
                                  counts, tiler.acc_dtype, tiler.m, tiler.expand)
        self.output = OutputStage(sram, tiler.expr, tiler.acc_dtype, self.tensors["out"],
                                  mt * nt, tiler.m, input_dtypes=self.epi.dtypes,
                                  tensors=self.tensors, constants=tiler.constants,
                                  tile_counts=counts,
                                  extra_outputs=extra_outputs(tiler.op, self.tensors))
        self.epi.keep_only(self.output.tile_inputs)

    def run(self) -> TiledProgram:
        p, t = self.p, self.t
        m_blocks = list(enumerate(t.m.blocks(p.extents("m"))))
        n_blocks = list(enumerate(t.n.blocks(p.extents("n"))))
        pairs = [(mb, nb) for mb in m_blocks for nb in n_blocks] if t.m_outer else \
            [(mb, nb) for nb in n_blocks for mb in m_blocks]
        setup = self.output.setup + self.epi.setup
        if self.resident_bias is not None:
            setup = setup + self.resident_bias.loads
        if self.column_plan is not None:
            setup = setup + self.column_plan.setup
        if self.affine is not None:
            setup = setup + self.affine.scale_and_bias(Operand(self.folded_bias, (0, 0, 1)))
        pipeline = Pipeline(setup)
        batches = list(itertools.product(*(range(n) for n in p.extents("batch"))))
        for batch in batches:
            last = batch == batches[-1]
            for m_block, n_block in self._ramped(pairs, len(m_blocks) + len(n_blocks)) \
                    if last else pairs:
                pipeline.add(*self._tile(batch, m_block, n_block))
        mt, nt, kt = p.sizes(t)
        order = "M-outer" if t.m_outer else "N-outer"
        pieces = self.pieces
        ramp = f", last {p.inner_role(t).upper()} block in " + \
            "+".join(str(piece.size(p.extents(p.inner_role(t)))) for piece in pieces) \
            if pieces else ""
        return TiledProgram(pipeline.finish(), self.sram.buffers,
                            f"tiles {mt}x{nt}x{kt} (MxNxK, {order}{ramp})", 2)

    def _ramped(self, pairs, fresh: int):
        """`pairs` with the last tile cut into the ramp's pieces (OrientedTiler.ramps);
        the pieces' block indices start at `fresh`, so that no SRAM slot takes one for
        a block it holds."""
        pieces = self.pieces
        if not pieces:
            return pairs
        inner = 1 if self.p.inner_role(self.t) == "n" else 0
        _, (starts, counts) = pairs[-1][inner]
        ramped, offset = list(pairs[:-1]), 0
        for i, piece in enumerate(pieces):
            dim = piece.dim
            block = (fresh + i, (starts[:dim] + (starts[dim] + offset,) + starts[dim + 1:],
                                 counts[:dim] + (piece.chunk,) + counts[dim + 1:]))
            offset += piece.chunk
            pair = list(pairs[-1])
            pair[inner] = block
            ramped.append(tuple(pair))
        return ramped

    def _tile(self, batch, m_block, n_block) -> tuple[list[Instr], list[Instr]]:
        p = self.p
        (mi, (m_starts, m_counts)), (ni, (n_starts, n_counts)) = m_block, n_block
        mt, nt = prod(m_counts), prod(n_counts)
        starts = list(batch) + list(m_starts) + list(n_starts)
        counts = [1] * len(batch) + list(m_counts) + list(n_counts)
        note = f"b{','.join(map(str, batch))} m{mi}:{mt} n{ni}:{nt}"
        out, _ = self.outs.acquire(None)
        front: list[Instr] = []
        bias_reads, flags, bias_addr = (), Flag.NONE, 0
        if self.bias is not None:
            buf, _, loads = self.bias.load(starts, counts, note)
            front += loads
            bias_reads, flags, bias_addr = (buf,), Flag.BIAS, buf.addr
        elif self.resident_bias is not None:
            buf, _, offset = self.resident_bias.at(starts)
            bias_reads, flags = (buf,), Flag.BIAS
            bias_addr = buf.addr + offset * dtype_bytes(buf.dtype)
        elif self.column_plan is not None:
            bias_buf, loads = self._column_bias(starts, counts, nt, note)
            front += loads
            bias_reads, flags, bias_addr = (bias_buf,), Flag.BIAS, bias_buf.addr
        elif self.folded_bias is not None and p.affine_role == "n":
            bias_reads, flags = (self.folded_bias,), Flag.BIAS
            bias_addr = self.folded_bias.addr + n_starts[0] * 4
        elif self.folded_bias is not None:     # per row: the MAC accumulates onto it
            offset = Operand(self.folded_bias, (0, 1, 0), m_starts[0])
            front.append(unary("vcopy", "f32", Operand(out, (0, nt, 1)), offset, (1, mt, nt),
                               note + " row offset (affine fold)"))
            bias_reads, flags = (out,), Flag.ACCUMULATE
        k_blocks = self.t.k.blocks(p.extents("k"))
        for ki, (k_starts, k_counts) in enumerate(k_blocks):
            kt = prod(k_counts)
            # The outer loop's operand first: its next block has a free slot (slots()),
            # while the inner one's waits for the MAC to release its slot.
            def load_a():
                return self._load_a(front, batch, (mi, m_starts, m_counts),
                                    (ki, k_starts, k_counts), note)

            def load_b():
                return self._load_b(front, batch, (ki, k_starts, k_counts),
                                    (ni, n_starts, n_counts), note)
            if self.t.m_outer:
                a_buf, b_buf = load_a(), load_b()
            else:
                b_buf, a_buf = load_b(), load_a()
            kflags = (Flag.ACCUMULATE if ki else flags) | \
                (Flag.TRANSPOSE_A if p.a_transposed else 0) | \
                (Flag.TRANSPOSE_B if p.b_transposed else 0) | p.mac_flags
            fields = {"a": a_buf.addr, "b": b_buf.addr, "out": out.addr, "m": mt, "n": nt,
                      "k": kt, "lda": mt if p.a_transposed else kt,
                      "ldb": kt if p.b_transposed else nt, "ldo": nt,
                      "bias": 0 if ki else bias_addr}
            reads = (a_buf, b_buf) + ((out,) if ki else bias_reads)
            front.append(Instr("matmul", p.dtype, fields, int(kflags), reads=reads,
                               writes=(out,), note=note + f" k{ki}:{kt}"))
        loads, back = self.epilogue(batch, m_block, n_block, out, note)
        return front, loads + back

    def _column_bias(self, starts, counts, nt: int, note: str) -> tuple[Buffer, list[Instr]]:
        """The tile's BIAS operand: the correction's per-column terms (OrientedTiler.
        column_bias) over its nt columns, from their inputs' loads (dense over N)."""
        instrs: list[Instr] = []
        operands: list[Operand | None] = [None] * (1 + max(self.column_streams))
        n_dims = len(self.p.extents("n"))
        for k, stream in self.column_streams.items():
            buf, strides, loads = stream.load(starts, counts, note)
            instrs += loads
            operands[k] = Operand(buf, (0, 0, flat_stride(strides[-n_dims:], counts[-n_dims:])))
        bias, _ = self.column_slots.acquire(None)
        instrs += self.column_plan.emit((1, 1, nt), Operand(bias, (0, 0, 1)), operands, None,
                                        note + " column bias")
        return bias, instrs

    def epilogue(self, batch, m_block, n_block, out: Buffer, note: str):
        """(the epilogue inputs' loads, the epilogue and store) of the tile's accumulator
        `out`."""
        (_, (m_starts, m_counts)), (_, (n_starts, n_counts)) = m_block, n_block
        mt, nt = prod(m_counts), prod(n_counts)
        starts = list(batch) + list(m_starts) + list(n_starts)
        counts = [1] * len(batch) + list(m_counts) + list(n_counts)
        nb, nm = len(batch), len(m_counts)

        def box_strides(k, strides):
            m_stride = flat_stride(strides[nb:nb + nm], m_counts)
            n_stride = flat_stride(strides[nb + nm:], n_counts)
            if m_stride is None or n_stride is None:
                raise NotLowerable(f"epilogue input {k} is broadcast along part of a tile's "
                                   "M or N dims")
            return 0, m_stride, n_stride

        loads, inputs = self.epi.load(starts, counts, note, box_strides)
        sram_strides = [0] * nb + [s * nt for s in dense_sram_strides(m_counts)] + \
            dense_sram_strides(n_counts)
        return loads, self.output.emit((1, mt, nt), Operand(out, (0, nt, 1)), inputs, starts,
                                       counts, sram_strides, note)

    def _load_a(self, front, batch, m_block, k_block, note):
        buf, fresh = self._load(front, "a", self.a_slots, batch, m_block, k_block,
                                self.p.a_transposed, note + f" A k{k_block[0]}")
        if self.p.affine_role == "m" and fresh:
            front.append(self._scaled(buf, m_block, k_block, not self.p.a_transposed,
                                      note + " A scaled (affine fold)"))
        return buf

    def _load_b(self, front, batch, k_block, n_block, note):
        buf, fresh = self._load(front, "b", self.b_slots, batch, k_block, n_block,
                                self.p.b_transposed, note + f" B k{k_block[0]}")
        if self.p.affine_role == "n" and fresh:
            front.append(self._scaled(buf, n_block, k_block, self.p.b_transposed,
                                      note + " B scaled (affine fold)"))
        return buf

    def _scaled(self, buf: Buffer, channel_block, k_block, channels_outer: bool,
                note: str) -> Instr:
        """An operand tile multiplied by the folded chain's per-channel A: the tile is
        [channel][k] when `channels_outer`, else [k][channel]."""
        kt, c0, ct = prod(k_block[2]), channel_block[1][0], prod(channel_block[2])
        tile = (1, ct, kt) if channels_outer else (1, kt, ct)
        scale = Operand(self.affine.scale, (0, 1, 0) if channels_outer else (0, 0, 1), c0)
        operand = Operand(buf, (0, tile[2], 1))
        return binary("vmul", "f32", operand, operand, scale, tile, note)

    def _load(self, front, name, slots, batch, first, second, transposed, note):
        """Loads the block (first role block x second role block) of operand `name` (a:
        M x K, b: K x N) into a dense SRAM tile, [first][second] or, transposed,
        [second][first]; (the tile, whether it was loaded rather than kept)."""
        tensor = self.tensors[name]
        nb = len(batch)
        varies = tuple(i if tensor.strides[d] else 0 for d, i in enumerate(batch))
        buf, fresh = slots.acquire((varies, first[0], second[0]))
        if fresh:
            (_, f_starts, f_counts), (_, s_starts, s_counts) = first, second
            f_size, s_size = prod(f_counts), prod(s_counts)
            if transposed:
                f_sram = dense_sram_strides(f_counts)
                s_sram = [s * f_size for s in dense_sram_strides(s_counts)]
            else:
                f_sram = [s * s_size for s in dense_sram_strides(f_counts)]
                s_sram = dense_sram_strides(s_counts)
            starts = list(batch) + list(f_starts) + list(s_starts)
            counts = list(f_counts) + list(s_counts)
            origin = sum(i * s for i, s in zip(starts, tensor.strides))
            dims = [Dim(c, s, d) for c, s, d in zip(counts, tensor.strides[nb:], f_sram + s_sram)]
            front += dma_instrs("dma.load", tensor, origin, buf, 0, dims, note)
        return buf, fresh
