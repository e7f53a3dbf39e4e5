"""Building NpuOps over numpy data in chosen memory layouts, compiling them and running
the npu-fb program on the native NPU core."""
import numpy as np

from compiler_target.codegen.backend import BindingInfo, compile_op
from compiler_target.codegen.ops import TensorRef
from executable_format.machine import MachineConfig
from executable_format.reader import read_executable
from hal_driver.device.npu_core import NpuCore

MACHINE = MachineConfig()
_CORE = {}


class Bindings:
    """HAL bindings under construction: each tensor placed at an offset of its own
    binding (or of a shared one), in a memory order given as a permutation."""

    def __init__(self):
        self.arrays: list[np.ndarray] = []      # uint8 per binding
        self.read_only: list[bool] = []

    def add(self, array: np.ndarray, order=None, offset_elems: int = 0, read_only=True,
            binding: int | None = None) -> TensorRef:
        """Stores `array` (logical dims) with dims laid out outermost-first as `order`."""
        order = tuple(range(array.ndim)) if order is None else tuple(order)
        stored = np.ascontiguousarray(np.transpose(array, order))
        strides_stored = [s // array.itemsize for s in stored.strides]
        strides = [0] * array.ndim
        for position, dim in enumerate(order):
            strides[dim] = strides_stored[position]
        payload = np.concatenate([np.zeros(offset_elems, array.dtype), stored.reshape(-1)])
        raw = payload.view(np.uint8)
        if binding is None:
            binding = len(self.arrays)
            self.arrays.append(raw.copy())
            self.read_only.append(read_only)
        else:
            start = len(self.arrays[binding])
            start += -start % 64
            offset_elems += start // array.itemsize
            grown = np.zeros(start + raw.size, np.uint8)
            grown[:len(self.arrays[binding])] = self.arrays[binding]
            grown[start:] = raw
            self.arrays[binding] = grown
        return TensorRef(_dtype_name(array.dtype), tuple(array.shape), tuple(strides),
                         binding=binding, offset=offset_elems * array.itemsize)

    def add_bf16(self, array: np.ndarray) -> tuple[TensorRef, np.ndarray]:
        """`array` truncated to bf16, stored as bf16 bits; (ref, the truncated values)."""
        bits = (np.ascontiguousarray(array, np.float32).view(np.uint32) >> 16).astype(np.uint16)
        ref = self.add(bits.view(np.float16))
        values = (bits.astype(np.uint32) << 16).view(np.float32)
        return TensorRef("bf16", ref.shape, ref.strides, ref.binding, ref.offset), values

    def add_broadcast(self, array: np.ndarray, shape, order=None) -> TensorRef:
        """`array` (dims of size 1 where it broadcasts) seen with the full `shape`."""
        ref = self.add(array, order)
        strides = tuple(0 if n == 1 and full != 1 else s
                        for n, full, s in zip(array.shape, shape, ref.strides))
        return TensorRef(ref.dtype, tuple(shape), strides, binding=ref.binding, offset=ref.offset)

    def output(self, shape, dtype=np.float32, order=None) -> TensorRef:
        return self.add(np.zeros(shape, dtype), order=order, read_only=False)

    def infos(self) -> list[BindingInfo]:
        return [BindingInfo(ro, a.size) for ro, a in zip(self.read_only, self.arrays)]

    def read(self, ref: TensorRef) -> np.ndarray:
        dtype = NUMPY[ref.dtype]
        flat = self.arrays[ref.binding][ref.offset:].view(dtype)
        return np.lib.stride_tricks.as_strided(
            flat, shape=ref.shape, strides=[s * flat.itemsize for s in ref.strides]).copy()


NUMPY = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i32": np.int32}


def _dtype_name(dtype) -> str:
    return {np.dtype(v): k for k, v in NUMPY.items()}[np.dtype(dtype)]


def core(machine=MACHINE) -> NpuCore:
    if machine not in _CORE:
        _CORE[machine] = NpuCore(machine)
    return _CORE[machine]


def compile_and_run(op, bindings: Bindings, name="dispatch_0", machine=MACHINE):
    """(CompiledOp, DispatchStats) after running the compiled program on the NPU core."""
    compiled = compile_op(op, name=name, bindings=bindings.infos(), machine=machine,
                          source_location="test.mlir:1:1")
    exe = read_executable(compiled.npu_fb)
    export = exe.export(name)
    stats = core(machine).execute(export.program.instructions, bindings=bindings.arrays,
                                  const_pool=exe.constants)
    return compiled, stats
