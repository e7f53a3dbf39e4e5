"""The NPU instruction set: opcodes, operand fields, engines, dtypes and flags.

Every instruction is a fixed 64-byte little-endian record:

    byte 0      opcode   (u8)
    byte 1      dtype    (u8, DType)
    bytes 2-3   flags    (u16, per-opcode bits below)
    bytes 4-63  a[0..14] (15 x u32 operand fields, named per opcode in OPCODES)

A program is a sequence of such records ending with END. Instructions are issued in
program order to the engine their opcode belongs to; engines run concurrently and meet
only at SIGNAL/WAIT/BARRIER. DRAM operands name a binding (index into the export's
bindings, or CONST_POOL for the executable's constant pool) and a byte offset; SRAM
operands are byte addresses into the scratchpad. Strides and counts are in elements.
Packed pairs ("kh_kw") hold the first value in the low 16 bits, the second in the high
16 bits. f32 parameters (clamp bounds, alpha, scale) are stored as their IEEE bits.
docs/npu-architecture.md describes each instruction's semantics and cycle cost.
"""
import enum
from dataclasses import dataclass

import numpy as np

INSTRUCTION_BYTES = 64
OPERAND_COUNT = 15
CONST_POOL = 0xFFFFFFFF          # binding index meaning "the executable's constant pool"
# Work one instruction may do, per byte of the machine's SRAM (native/npu_core.c mirrors
# these): far above what any tile that fits in SRAM needs, so no program runs for long.
ELEMENTS_PER_SRAM_BYTE = 64
MACS_PER_SRAM_BYTE = 2048

INSTRUCTION_DTYPE = np.dtype([("opcode", "<u1"), ("dtype", "<u1"), ("flags", "<u2"),
                              ("a", "<u4", (OPERAND_COUNT,))])
assert INSTRUCTION_DTYPE.itemsize == INSTRUCTION_BYTES


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    I8 = 3
    I32 = 4
    U8 = 5      # unsigned bytes: quantized activations with a uint8 zero point
    I64 = 6     # loaded and converted to f32 only (vcvt's src_dtype): ONNX's ids and masks


DTYPE_NAMES = {DType.F32: "f32", DType.F16: "f16", DType.BF16: "bf16", DType.I8: "i8",
               DType.I32: "i32", DType.U8: "u8", DType.I64: "i64"}
DTYPES_BY_NAME = {name: dtype for dtype, name in DTYPE_NAMES.items()}
DTYPE_BYTES = {DType.F32: 4, DType.F16: 2, DType.BF16: 2, DType.I8: 1, DType.I32: 4,
               DType.U8: 1, DType.I64: 8}
# The MAC array accumulates floats in f32 and bytes (both operands i8, or both u8) in i32.
ACCUMULATOR = {DType.F32: DType.F32, DType.F16: DType.F32, DType.BF16: DType.F32,
               DType.I8: DType.I32, DType.U8: DType.I32}


class Engine(enum.IntEnum):
    DMA_IN = 0       # DRAM -> SRAM loads and SRAM fills
    DMA_OUT = 1      # SRAM -> DRAM stores
    MAC = 2          # matmul / convolution tiles
    VECTOR = 3       # elementwise, pooling, reductions, conversions
    CONTROL = 4      # SIGNAL / WAIT name their engine in a field; BARRIER, END


ENGINE_NAMES = {Engine.DMA_IN: "dma_in", Engine.DMA_OUT: "dma_out", Engine.MAC: "mac",
                Engine.VECTOR: "vector", Engine.CONTROL: "control"}


class Flag(enum.IntFlag):
    NONE = 0
    # MATMUL / CONV2D / DWCONV2D
    ACCUMULATE = 1       # out += product (else out = product [+ bias])
    BIAS = 2             # initialise out with bias[n] (acc dtype) from bias_addr
    TRANSPOSE_A = 4      # MATMUL: A stored [K][M]
    TRANSPOSE_B = 8      # MATMUL: B stored [N][K]
    MIXED_SIGN = 16      # i8/u8: B (the weights) has the other signedness (u8 x i8, i8 x u8)
    NARROW_SUM = 32      # f16/bf16: each product and each running sum rounded to the dtype
    PIXEL_COLUMNS = 64   # CONV2D: the columns take output pixels of one channel (cost only)
    HALF_B = 128         # f32: B (the weights) is f16, widened exactly (fp16-stored weights)
    # VPOOL
    POOL_AVG = 1         # else max
    COUNT_INCLUDE_PAD = 2
    # VREDUCE
    REDUCE_MAX = 1       # else sum
    REDUCE_MEAN = 2
    # VROUND: the rounding (default: to nearest, ties to even); at most one
    ROUND_FLOOR = 1      # math.floor
    ROUND_CEIL = 2       # math.ceil
    ROUND_HALF_AWAY = 4  # math.round: to nearest, ties away from zero
    # VREQUANT: its source's dtype (default i32); at most one
    SRC_I8 = 8
    SRC_U8 = 16
    SRC_F32 = 32         # v = src: no zero point subtracted (the record's zero is not read)
    # VCVT
    TRUNCATE = 1         # to an integer: toward zero (arith.fptosi), else half to even
    # FILL
    PUSH_CONSTANT = 1    # the value is push constant number `value` (32-bit dtypes)
    # VSELGT
    OR_EQUAL = 1         # lhs >= rhs picks lhs (else lhs > rhs)
    # VCMP: the outcomes of comparing lhs with rhs that give 1 (the others give 0); the
    # sixteen subsets are arith.cmpf's sixteen predicates
    CMP_LESS = 1
    CMP_EQUAL = 2
    CMP_GREATER = 4
    CMP_UNORDERED = 8    # either operand NaN


@dataclass(frozen=True)
class OpcodeInfo:
    code: int
    name: str
    engine: Engine
    fields: tuple[str, ...]          # names of a[0..len-1]; the rest must be zero
    dtypes: tuple[DType, ...]        # dtypes the opcode accepts
    layout: str | None = None        # the FIELD_LAYOUTS entry `fields` is (None: no fields)


_FLOAT = (DType.F32, DType.F16, DType.BF16)
_ALL = _FLOAT + (DType.I8, DType.I32, DType.U8)     # every dtype an op computes in


# Operand layouts: the field lists of the opcodes, by name. Opcodes of one layout share its
# field list (every binary vector op the "binary" one); native/npu_isa.h names each field
# index after its layout (DMA_N0, BINARY_LHS_S0, CONV2D_KH_KW, ...).
FIELD_LAYOUTS = {
    "signal": ("engine", "sem"),
    "wait": ("engine", "sem", "value"),
    "dma": ("binding", "dram_offset", "sram_addr",
            "n0", "n1", "n2", "n3",
            "dram_s0", "dram_s1", "dram_s2", "dram_s3",
            "sram_s0", "sram_s1", "sram_s2", "sram_s3"),
    "fill": ("sram_addr", "n0", "n1", "n2", "n3", "s0", "s1", "s2", "s3", "value"),
    "matmul": ("a", "b", "out", "m", "n", "k", "lda", "ldb", "ldo", "bias"),
    "conv2d": ("in", "w", "out", "c", "hi", "wi", "f", "ho", "wo",
               "kh_kw", "sh_sw", "dh_dw", "groups", "bias"),
    # Depthwise: one kh x kw filter per channel; columns take pixels, k lanes the taps.
    "dwconv2d": ("in", "w", "out", "c", "hi", "wi", "ho", "wo",
                 "kh_kw", "sh_sw", "dh_dw", "bias"),
    "binary": ("dst", "lhs", "rhs", "n0", "n1", "n2",
               "dst_s0", "dst_s1", "dst_s2", "lhs_s0", "lhs_s1", "lhs_s2",
               "rhs_s0", "rhs_s1", "rhs_s2"),
    "unary": ("dst", "src", "n0", "n1", "n2",
              "dst_s0", "dst_s1", "dst_s2", "src_s0", "src_s1", "src_s2", "p0", "p1"),
    "vcvt": ("dst", "src", "n0", "n1", "n2",
             "dst_s0", "dst_s1", "dst_s2", "src_s0", "src_s1", "src_s2", "scale", "src_dtype"),
    # Requantization: src i32, a per-channel record (REQUANT_RECORD) at params + the
    # record index i0*par_s0 + i1*par_s1 + i2*par_s2 (records of REQUANT_RECORD_BYTES).
    "vrequant": ("dst", "src", "n0", "n1", "n2",
                 "dst_s0", "dst_s1", "dst_s2", "src_s0", "src_s1", "src_s2",
                 "params", "par_s0", "par_s1", "par_s2"),
    "vpool": ("dst", "src", "c", "hi", "wi", "ho", "wo",
              "kh_kw", "sh_sw", "dh_dw", "pt_pl", "vh_vw"),
    "vreduce": ("dst", "src", "outer", "inner"),
}


def _op(code, name, engine, layout, dtypes):
    return OpcodeInfo(code, name, engine, FIELD_LAYOUTS[layout] if layout else (), dtypes, layout)


def _binary(code, name):
    return _op(code, name, Engine.VECTOR, "binary", _FLOAT + (DType.I32,))


def _unary(code, name, dtypes=_FLOAT):
    return _op(code, name, Engine.VECTOR, "unary", dtypes)


OPCODE_LIST = (
    _op(1, "end", Engine.CONTROL, None, _ALL),
    _op(2, "signal", Engine.CONTROL, "signal", _ALL),
    _op(3, "wait", Engine.CONTROL, "wait", _ALL),
    _op(4, "barrier", Engine.CONTROL, None, _ALL),
    _op(16, "dma.load", Engine.DMA_IN, "dma", _ALL + (DType.I64,)),
    _op(17, "dma.store", Engine.DMA_OUT, "dma", _ALL),
    _op(18, "fill", Engine.DMA_IN, "fill", _ALL),
    _op(32, "matmul", Engine.MAC, "matmul", _FLOAT + (DType.I8, DType.U8)),
    _op(33, "conv2d", Engine.MAC, "conv2d", _FLOAT + (DType.I8, DType.U8)),
    _op(34, "dwconv2d", Engine.MAC, "dwconv2d", _FLOAT + (DType.I8, DType.U8)),
    _binary(48, "vadd"),
    _binary(49, "vsub"),
    _binary(50, "vmul"),
    _binary(51, "vmax"),
    _binary(52, "vmin"),
    _binary(53, "vdiv"),
    # dst = lhs·rhs + dst: floats rounded once, i32 wrapping
    _op(54, "vfma", Engine.VECTOR, "binary", _FLOAT + (DType.I32,)),
    # dst = lhs > rhs ? lhs : dst, >= with flag or_equal (ordered compares: NaN keeps dst)
    _op(55, "vselgt", Engine.VECTOR, "binary", _FLOAT),
    # dst = lhs != 0 ? rhs : dst (arith.select on a condition held as 0 or 1)
    _op(56, "vselect", Engine.VECTOR, "binary", _FLOAT + (DType.I32,)),
    # dst = 1 if lhs compares with rhs as a flag says (less, equal, greater, unordered), else 0
    _op(57, "vcmp", Engine.VECTOR, "binary", _FLOAT + (DType.I32,)),
    # dst = lhs & rhs, bitwise (an i1 truncation's low bit, arith.andi)
    _op(58, "vand", Engine.VECTOR, "binary", (DType.I32,)),
    _unary(64, "vcopy", _ALL),
    _unary(65, "vrelu", _FLOAT + (DType.I32,)),
    _unary(66, "vclamp"),             # p0 = min, p1 = max (f32 bits)
    _unary(67, "vleakyrelu"),         # p0 = alpha
    _unary(68, "vsigmoid"),
    _unary(69, "vtanh"),
    _unary(70, "vexp"),
    _unary(71, "vscale"),             # dst = src * p0 + p1
    _op(72, "vcvt", Engine.VECTOR, "vcvt", _ALL),
    _unary(73, "vsqrt"),
    _unary(74, "vrsqrt"),             # dst = 1 / sqrt(src), both rounded in f32
    _unary(75, "vround"),             # dst = clamp(src rounded (flags; half to even), p0, p1)
    _unary(76, "vhswish"),            # dst = src * clamp(src * p0 + p1, 0, 1): hard swish
    _unary(78, "verf"),               # dst = erf(src): the error function (exact GELU)
    _unary(79, "vlog"),               # dst = ln(src) (log-softmax)
    _unary(82, "vlog1p"),             # dst = ln(1 + src) (softplus, mish)
    _unary(84, "vsin"),               # dst = sin(src) (DFT matrices, positional encodings)
    _unary(85, "vcos"),               # dst = cos(src)
    # dst = src rounded to the nearest f16, held in f32: an f16 op of a mixed-precision body
    _unary(83, "vnarrow", (DType.F32,)),
    # dst = table[clamp(round((f32(src - zero)·mul) fma (fma_mul, fma_add) / div), lo, hi) - lo]
    _op(77, "vrequant", Engine.VECTOR, "vrequant", _ALL),
    _op(80, "vpool", Engine.VECTOR, "vpool", _FLOAT),
    _op(81, "vreduce", Engine.VECTOR, "vreduce", _FLOAT),
)

OPCODES = {info.code: info for info in OPCODE_LIST}
OPCODES_BY_NAME = {info.name: info for info in OPCODE_LIST}
TRANSCENDENTAL = frozenset({"vsigmoid", "vtanh", "vexp", "vsqrt", "vrsqrt", "verf", "vlog",
                            "vlog1p", "vsin", "vcos"})


BYTE_INTS = (DType.I8, DType.U8)
HALF_FLOATS = (DType.F16, DType.BF16)


ROUNDING_FLAGS = Flag.ROUND_FLOOR | Flag.ROUND_CEIL | Flag.ROUND_HALF_AWAY
REQUANT_SOURCES = {Flag.SRC_I8: DType.I8, Flag.SRC_U8: DType.U8, Flag.SRC_F32: DType.F32}


def requant_src_dtype(flags: int) -> DType:
    """The dtype of a vrequant's source: its SRC flag's, else i32."""
    return next((d for f, d in REQUANT_SOURCES.items() if flags & f), DType.I32)


def mac_b_dtype(dtype: DType, flags: int) -> DType:
    """The dtype of a MAC instruction's B operand (matmul) or weights (conv2d, dwconv2d):
    the instruction's, with MIXED_SIGN the other byte integer, with HALF_B f16."""
    if flags & Flag.MIXED_SIGN:
        return DType.U8 if dtype == DType.I8 else DType.I8
    if flags & Flag.HALF_B:
        return DType.F16
    return dtype


def pack_pair(low: int, high: int) -> int:
    return (low & 0xFFFF) | ((high & 0xFFFF) << 16)


def unpack_pair(value: int) -> tuple[int, int]:
    return value & 0xFFFF, value >> 16


def f32_bits(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32))


def bits_f32(bits: int) -> float:
    return float(np.array(bits, dtype=np.uint32).view(np.float32))


# Flag bits each opcode accepts, by their assembly name; every other bit must be zero.
OPCODE_FLAGS = {
    "matmul": {"accumulate": Flag.ACCUMULATE, "bias": Flag.BIAS,
               "transpose_a": Flag.TRANSPOSE_A, "transpose_b": Flag.TRANSPOSE_B,
               "mixed_sign": Flag.MIXED_SIGN, "narrow_sum": Flag.NARROW_SUM,
               "half_b": Flag.HALF_B},
    "conv2d": {"accumulate": Flag.ACCUMULATE, "bias": Flag.BIAS, "mixed_sign": Flag.MIXED_SIGN,
               "narrow_sum": Flag.NARROW_SUM, "pixel_columns": Flag.PIXEL_COLUMNS,
               "half_b": Flag.HALF_B},
    "dwconv2d": {"accumulate": Flag.ACCUMULATE, "bias": Flag.BIAS,
                 "mixed_sign": Flag.MIXED_SIGN, "narrow_sum": Flag.NARROW_SUM,
                 "half_b": Flag.HALF_B},
    "vpool": {"avg": Flag.POOL_AVG, "count_include_pad": Flag.COUNT_INCLUDE_PAD},
    "vreduce": {"max": Flag.REDUCE_MAX, "mean": Flag.REDUCE_MEAN},
    "vcvt": {"truncate": Flag.TRUNCATE},
    "vround": {"floor": Flag.ROUND_FLOOR, "ceil": Flag.ROUND_CEIL,
               "half_away": Flag.ROUND_HALF_AWAY},
    "vrequant": {"floor": Flag.ROUND_FLOOR, "ceil": Flag.ROUND_CEIL,
                 "half_away": Flag.ROUND_HALF_AWAY, "src_i8": Flag.SRC_I8,
                 "src_u8": Flag.SRC_U8, "src_f32": Flag.SRC_F32},
    "fill": {"push_constant": Flag.PUSH_CONSTANT},
    "vselgt": {"or_equal": Flag.OR_EQUAL},
    "vcmp": {"lt": Flag.CMP_LESS, "eq": Flag.CMP_EQUAL, "gt": Flag.CMP_GREATER,
             "unordered": Flag.CMP_UNORDERED},
}

# Fields in an opcode's list that it does not read (the unary vector ops share one field
# list; only vclamp, vleakyrelu, vscale, vround and vhswish read p0/p1). They must be zero.
UNUSED_FIELDS = {
    "vcopy": ("p0", "p1"), "vrelu": ("p0", "p1"), "vsigmoid": ("p0", "p1"),
    "vtanh": ("p0", "p1"), "vexp": ("p0", "p1"), "vsqrt": ("p0", "p1"), "vrsqrt": ("p0", "p1"),
    "verf": ("p0", "p1"), "vlog": ("p0", "p1"), "vlog1p": ("p0", "p1"),
    "vsin": ("p0", "p1"), "vcos": ("p0", "p1"),
    "vnarrow": ("p0", "p1"), "vleakyrelu": ("p1",),
}

PAIR_FIELDS = frozenset({"kh_kw", "sh_sw", "dh_dw", "pt_pl", "vh_vw"})   # pack_pair(low, high)
F32_FIELDS = frozenset({"p0", "p1", "scale"})                            # IEEE f32 bits
# Fields holding SRAM byte addresses.
SRAM_ADDRESS_FIELDS = frozenset({"sram_addr", "dst", "src", "lhs", "rhs", "a", "b", "out",
                                 "in", "w", "bias", "params"})

# vrequant's per-channel record: 8 little-endian 32-bit words (i32 zero, f32 mul, fma_mul,
# fma_add, div, lo, hi, u32 table: the SRAM byte address of hi - lo + 1 dtype elements).
REQUANT_RECORD = ("zero", "mul", "fma_mul", "fma_add", "div", "lo", "hi", "table")
REQUANT_RECORD_BYTES = 4 * len(REQUANT_RECORD)
REQUANT_TABLE_MAX = 256           # entries of one table: hi - lo + 1 at most


def operand_fields(opcode: int, a) -> dict[str, int]:
    """An instruction's operand fields by name (its layout, OPCODES[opcode].fields)."""
    return dict(zip(OPCODES[opcode].fields, a))


def used_fields(name: str) -> tuple[str, ...]:
    """The fields of opcode `name` it reads, in record order."""
    unused = UNUSED_FIELDS.get(name, ())
    return tuple(f for f in OPCODES_BY_NAME[name].fields if f not in unused)
