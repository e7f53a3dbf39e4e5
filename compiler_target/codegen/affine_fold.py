"""The per-channel affine chain a convolution's or contraction's epilogue starts with (a
bias, then an imported BatchNormalization: epilogue.fold_affine's steps), folded into the
weights and the bias.

The chain is acc·A + B with per-channel A and B. The vector engine computes them over
the F channels once per dispatch, A from 1 and B from 0 through the chain's steps; the
weights are scaled by A (a convolution's once, a contraction's B tiles, or A tiles when
the channel is M, as they are loaded) and B is the bias the MAC adds (the im2col
matmul's bias column, dwconv2d's and matmul's BIAS operand, or the start of a
contraction's accumulator tiles). The operands are buffers at run time (IREE passes
weights and BatchNormalization parameters as bindings), so the fold runs on the NPU
rather than in the compiler; it changes the rounding by a few ulps. The per-channel
operands are a few hundred bytes each, near each other in the constant pool: those
whose gaps move in less time than a DMA latency are one load of the bytes they span.
"""
from executable_format.isa import f32_bits
from executable_format.machine import MachineConfig

from .epilogue import BINARY
from .npu_ir import Buffer, Instr
from .tile import Sram, fill_instrs, gathered_loads
from .vector import Operand, binary, unary


class AffineFold:
    """SRAM for the fold of `steps` over `f` channels (A, and each step's per-channel
    operand), and its instructions. `channel_dim`: the dim of the epilogue inputs (indexed
    like the output) that is the channel."""

    def __init__(self, sram: Sram, steps: list, tensors: dict[str, Buffer], f: int,
                 machine: MachineConfig, channel_dim: int = 1):
        self.steps, self.tensors, self.f, self.channel_dim = steps, tensors, f, channel_dim
        self.scale = sram.alloc("affine.scale", "f32", (f,))
        self.operands, self.loads = self._channel_operands(sram, machine)

    def instrs(self, bias: Operand, weights: Operand, k: int) -> list[Instr]:
        """A and B computed, B into `bias` (f elements at stride bias.strides[2]), and the
        weights scaled by A: `weights` is f32 rows of k elements at stride
        weights.strides[1]."""
        f, scale = self.f, self.scale
        return self.scale_and_bias(bias) + [
            binary("vmul", "f32", weights, weights, Operand(scale, (0, 1, 0)), (1, f, k),
                   "affine fold into the weights")]

    def scale_and_bias(self, bias: Operand) -> list[Instr]:
        """A computed into `self.scale`, B into `bias` (f elements at stride
        bias.strides[2])."""
        f, scale = self.f, self.scale
        instrs = fill_instrs(scale, 0, [(f, 1)], f32_bits(1.0), "affine scale")
        instrs += fill_instrs(bias.buffer, bias.elem_offset, [(f, bias.strides[2])],
                              f32_bits(0.0), "affine bias")
        a = Operand(scale, (0, 0, 1))
        box, note = (1, 1, f), "affine fold"
        instrs += self.loads
        for (op, _, acc_first), c in zip(self.steps, self.operands):
            first, second = (bias, c) if acc_first else (c, bias)
            instrs.append(binary(BINARY[op], "f32", bias, first, second, box, note))
            if op in ("mul", "div"):
                instrs.append(binary(BINARY[op], "f32", a, a, c, box, note))
            elif op == "sub" and not acc_first:
                instrs.append(unary("vscale", "f32", a, a, box, note, -1.0, 0.0))
        return instrs

    def _channel_operands(self, sram: Sram,
                          machine: MachineConfig) -> tuple[list[Operand], list[Instr]]:
        """Each step's per-channel operand in SRAM (the F values of an epilogue input, or
        a constant cell read with stride 0), and the instructions filling them; inputs
        near each other in one binding, as the constant pool holds them, are one load
        (tile.gathered_loads)."""
        inputs = sorted({node[1] for _, node, _ in self.steps if node[0] == "input"})
        tensors = [self.tensors[f"epilogue.{k}"] for k in inputs]
        strides = [t.strides[self.channel_dim] for t in tensors]
        placed, loads = gathered_loads(
            sram, [(t, (self.f - 1) * s + 1) for t, s in zip(tensors, strides)], machine,
            "affine", "affine operands " + ", ".join(map(str, inputs)))
        located = {k: Operand(buf, (0, 0, s), offset)
                   for k, s, (buf, offset) in zip(inputs, strides, placed)}
        operands = []
        for _, node, _ in self.steps:
            if node[0] == "const":
                cell = sram.alloc("affine.const", "f32", (1,))
                loads += fill_instrs(cell, 0, [(1, 1)], f32_bits(node[1]), f"constant {node[1]}")
                operands.append(Operand(cell, (0, 0, 0)))
            else:
                operands.append(located[node[1]])
        return operands, loads
