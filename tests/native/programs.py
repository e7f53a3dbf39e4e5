"""Instruction records built directly with numpy (isa.INSTRUCTION_DTYPE) for the core
tests, plus numpy references for the dtypes the NPU computes in."""
import numpy as np

from executable_format import isa

NP_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i8": np.int8,
             "i32": np.int32, "u8": np.uint8}


def instr(name: str, dtype: str = "f32", flags: int = 0, **fields) -> np.ndarray:
    """One instruction record; `fields` by the names in isa.OPCODES (pairs as tuples,
    floats as f32 bits)."""
    info = isa.OPCODES_BY_NAME[name]
    record = np.zeros((), dtype=isa.INSTRUCTION_DTYPE)
    record["opcode"] = info.code
    record["dtype"] = isa.DType[dtype.upper()]
    record["flags"] = flags
    for key, value in fields.items():
        if isinstance(value, tuple):
            value = isa.pack_pair(*value)
        elif isinstance(value, float):
            value = isa.f32_bits(value)
        record["a"][info.fields.index(key)] = value
    return record


def program(*records, end: bool = True) -> bytes:
    records = list(records) + ([instr("end")] if end else [])
    return np.array(records, dtype=isa.INSTRUCTION_DTYPE).tobytes()


def decode(data: bytes):
    """(opcode, dtype, flags, a) tuples for cost.simulate_timeline."""
    records = np.frombuffer(data, dtype=isa.INSTRUCTION_DTYPE)
    return [(int(r["opcode"]), int(r["dtype"]), int(r["flags"]), [int(v) for v in r["a"]])
            for r in records]


def bf16_round(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to nearest even bf16, as uint16 bits."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """Stored elements of `dtype` as f32 (bf16 stored as uint16 bits)."""
    if dtype == "bf16":
        return bf16_to_f32(values)
    return np.asarray(values).astype(np.float32)


def from_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """f32 values stored as `dtype`, rounded to nearest even."""
    if dtype == "bf16":
        return bf16_round(values)
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32).astype(NP_DTYPES[dtype])


def random_values(rng, dtype: str, shape) -> np.ndarray:
    """Random stored elements of `dtype`."""
    if dtype == "i8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if dtype == "u8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    if dtype == "i32":
        return rng.integers(-1000, 1000, size=shape).astype(np.int32)
    return from_f32(rng.standard_normal(shape).astype(np.float32), dtype)


def dma(name: str, binding: int, dram_offset: int, sram_addr: int, counts, dram_strides,
        sram_strides, dtype: str = "f32") -> np.ndarray:
    fields = {"binding": binding, "dram_offset": dram_offset, "sram_addr": sram_addr}
    for i in range(4):
        fields[f"n{i}"] = counts[i]
        fields[f"dram_s{i}"] = dram_strides[i]
        fields[f"sram_s{i}"] = sram_strides[i]
    return instr(name, dtype, **fields)


class SramImage:
    """SRAM contents built up from arrays at 64-byte aligned addresses."""

    def __init__(self):
        self.data = bytearray()

    def put(self, array: np.ndarray) -> int:
        addr = self.reserve(array.nbytes)
        self.data[addr:addr + array.nbytes] = np.ascontiguousarray(array).tobytes()
        return addr

    def reserve(self, nbytes: int) -> int:
        addr = -(-len(self.data) // 64) * 64
        self.data.extend(b"\0" * (addr + max(nbytes, 1) - len(self.data)))
        return addr


class Result:
    """The SRAM image after a run, readable by address."""

    def __init__(self, data: np.ndarray, stats):
        self.data = data
        self.stats = stats

    def view(self, addr: int, dtype, shape) -> np.ndarray:
        dtype = np.dtype(NP_DTYPES.get(dtype, dtype))
        count = int(np.prod(shape))
        return self.data[addr:addr + count * dtype.itemsize].view(dtype).reshape(shape)


def run_on_sram(core, image: SramImage, *records, const_pool: bytes = b"") -> Result:
    """Loads `image` into SRAM at 0, runs `records`, stores SRAM back: the new image."""
    size = -(-len(image.data) // 64) * 64
    source = np.zeros(size, np.uint8)
    source[:len(image.data)] = np.frombuffer(bytes(image.data), np.uint8)
    result = np.zeros(size, np.uint8)
    whole = ((1, 1, 1, size), (0, 0, 0, 1), (0, 0, 0, 1))
    prog = program(dma("dma.load", 0, 0, 0, *whole, dtype="i8"), *records,
                   dma("dma.store", 1, 0, 0, *whole, dtype="i8"))
    stats = core.execute(prog, [source, result], const_pool=const_pool)
    return Result(result, stats)
