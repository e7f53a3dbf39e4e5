"""Instruction records built directly with numpy (isa.INSTRUCTION_DTYPE) for the core
tests, plus numpy references for the dtypes the NPU computes in."""
import numpy as np

from executable_format import isa

NP_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i8": np.int8,
             "i32": np.int32}


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
    return np.asarray(values, dtype=np.float32).astype(NP_DTYPES[dtype])


def random_values(rng, dtype: str, shape) -> np.ndarray:
    """Random stored elements of `dtype`."""
    if dtype == "i8":
        return rng.integers(-128, 128, size=shape).astype(np.int8)
    if dtype == "i32":
        return rng.integers(-1000, 1000, size=shape).astype(np.int32)
    return from_f32(rng.standard_normal(shape).astype(np.float32), dtype)
