/* Generated from executable_format/isa.py: do not edit.
 * Regenerate: python -m executable_format.c_header > native/npu_isa.h */
#ifndef NPU_ISA_H_
#define NPU_ISA_H_

#include <stdint.h>

enum {
  OP_END = 1,
  OP_SIGNAL = 2,
  OP_WAIT = 3,
  OP_BARRIER = 4,
  OP_DMA_LOAD = 16,
  OP_DMA_STORE = 17,
  OP_FILL = 18,
  OP_MATMUL = 32,
  OP_CONV2D = 33,
  OP_DWCONV2D = 34,
  OP_VADD = 48,
  OP_VSUB = 49,
  OP_VMUL = 50,
  OP_VMAX = 51,
  OP_VMIN = 52,
  OP_VDIV = 53,
  OP_VFMA = 54,
  OP_VCOPY = 64,
  OP_VRELU = 65,
  OP_VCLAMP = 66,
  OP_VLEAKYRELU = 67,
  OP_VSIGMOID = 68,
  OP_VTANH = 69,
  OP_VEXP = 70,
  OP_VSCALE = 71,
  OP_VCVT = 72,
  OP_VSQRT = 73,
  OP_VRSQRT = 74,
  OP_VROUND = 75,
  OP_VPOOL = 80,
  OP_VREDUCE = 81,
};

enum {
  DT_F32 = 0,
  DT_F16 = 1,
  DT_BF16 = 2,
  DT_I8 = 3,
  DT_I32 = 4,
  DT_U8 = 5,
  DT_COUNT = 6,
};

enum {
  ENGINE_DMA_IN = 0,
  ENGINE_DMA_OUT = 1,
  ENGINE_MAC = 2,
  ENGINE_VECTOR = 3,
  ENGINE_CONTROL = 4,
};

static const char* const ENGINE_NAMES[ENGINE_CONTROL + 1] = {
  "dma_in", "dma_out", "mac", "vector", "control"};

enum {
  FLAG_ACCUMULATE = 1,
  FLAG_BIAS = 2,
  FLAG_TRANSPOSE_A = 4,
  FLAG_TRANSPOSE_B = 8,
  FLAG_MIXED_SIGN = 16,
  FLAG_POOL_AVG = 1,
  FLAG_COUNT_INCLUDE_PAD = 2,
  FLAG_REDUCE_MAX = 1,
  FLAG_REDUCE_MEAN = 2,
  FLAG_ROUND_FLOOR = 1,
  FLAG_ROUND_CEIL = 2,
  FLAG_ROUND_HALF_AWAY = 4,
  FLAG_TRUNCATE = 1,
  FLAG_PUSH_CONSTANT = 1,
};

#define INSTRUCTION_BYTES 64
#define OPERAND_COUNT 15
#define CONST_POOL 0xFFFFFFFFu   /* binding index of the constant pool */
#define ELEMENTS_PER_SRAM_BYTE 64
#define MACS_PER_SRAM_BYTE 2048
#define DTM(d) (1u << (d))

enum {
  LAYOUT_NONE = 0,   /* end, barrier: no operands */
  LAYOUT_SIGNAL,
  LAYOUT_WAIT,
  LAYOUT_DMA,
  LAYOUT_FILL,
  LAYOUT_MATMUL,
  LAYOUT_CONV2D,
  LAYOUT_DWCONV2D,
  LAYOUT_BINARY,
  LAYOUT_UNARY,
  LAYOUT_VCVT,
  LAYOUT_VPOOL,
  LAYOUT_VREDUCE,
  LAYOUT_COUNT,
};

enum {  /* signal */
  SIGNAL_ENGINE = 0,
  SIGNAL_SEM = 1,
};
enum {  /* wait */
  WAIT_ENGINE = 0,
  WAIT_SEM = 1,
  WAIT_VALUE = 2,
};
enum {  /* dma */
  DMA_BINDING = 0,
  DMA_DRAM_OFFSET = 1,
  DMA_SRAM_ADDR = 2,
  DMA_N0 = 3,
  DMA_N1 = 4,
  DMA_N2 = 5,
  DMA_N3 = 6,
  DMA_DRAM_S0 = 7,
  DMA_DRAM_S1 = 8,
  DMA_DRAM_S2 = 9,
  DMA_DRAM_S3 = 10,
  DMA_SRAM_S0 = 11,
  DMA_SRAM_S1 = 12,
  DMA_SRAM_S2 = 13,
  DMA_SRAM_S3 = 14,
};
enum {  /* fill */
  FILL_SRAM_ADDR = 0,
  FILL_N0 = 1,
  FILL_N1 = 2,
  FILL_N2 = 3,
  FILL_N3 = 4,
  FILL_S0 = 5,
  FILL_S1 = 6,
  FILL_S2 = 7,
  FILL_S3 = 8,
  FILL_VALUE = 9,
};
enum {  /* matmul */
  MATMUL_A = 0,
  MATMUL_B = 1,
  MATMUL_OUT = 2,
  MATMUL_M = 3,
  MATMUL_N = 4,
  MATMUL_K = 5,
  MATMUL_LDA = 6,
  MATMUL_LDB = 7,
  MATMUL_LDO = 8,
  MATMUL_BIAS = 9,
};
enum {  /* conv2d */
  CONV2D_IN = 0,
  CONV2D_W = 1,
  CONV2D_OUT = 2,
  CONV2D_C = 3,
  CONV2D_HI = 4,
  CONV2D_WI = 5,
  CONV2D_F = 6,
  CONV2D_HO = 7,
  CONV2D_WO = 8,
  CONV2D_KH_KW = 9,
  CONV2D_SH_SW = 10,
  CONV2D_DH_DW = 11,
  CONV2D_GROUPS = 12,
  CONV2D_BIAS = 13,
};
enum {  /* dwconv2d */
  DWCONV2D_IN = 0,
  DWCONV2D_W = 1,
  DWCONV2D_OUT = 2,
  DWCONV2D_C = 3,
  DWCONV2D_HI = 4,
  DWCONV2D_WI = 5,
  DWCONV2D_HO = 6,
  DWCONV2D_WO = 7,
  DWCONV2D_KH_KW = 8,
  DWCONV2D_SH_SW = 9,
  DWCONV2D_DH_DW = 10,
  DWCONV2D_BIAS = 11,
};
enum {  /* binary */
  BINARY_DST = 0,
  BINARY_LHS = 1,
  BINARY_RHS = 2,
  BINARY_N0 = 3,
  BINARY_N1 = 4,
  BINARY_N2 = 5,
  BINARY_DST_S0 = 6,
  BINARY_DST_S1 = 7,
  BINARY_DST_S2 = 8,
  BINARY_LHS_S0 = 9,
  BINARY_LHS_S1 = 10,
  BINARY_LHS_S2 = 11,
  BINARY_RHS_S0 = 12,
  BINARY_RHS_S1 = 13,
  BINARY_RHS_S2 = 14,
};
enum {  /* unary */
  UNARY_DST = 0,
  UNARY_SRC = 1,
  UNARY_N0 = 2,
  UNARY_N1 = 3,
  UNARY_N2 = 4,
  UNARY_DST_S0 = 5,
  UNARY_DST_S1 = 6,
  UNARY_DST_S2 = 7,
  UNARY_SRC_S0 = 8,
  UNARY_SRC_S1 = 9,
  UNARY_SRC_S2 = 10,
  UNARY_P0 = 11,
  UNARY_P1 = 12,
};
enum {  /* vcvt */
  VCVT_DST = 0,
  VCVT_SRC = 1,
  VCVT_N0 = 2,
  VCVT_N1 = 3,
  VCVT_N2 = 4,
  VCVT_DST_S0 = 5,
  VCVT_DST_S1 = 6,
  VCVT_DST_S2 = 7,
  VCVT_SRC_S0 = 8,
  VCVT_SRC_S1 = 9,
  VCVT_SRC_S2 = 10,
  VCVT_SCALE = 11,
  VCVT_SRC_DTYPE = 12,
};
enum {  /* vpool */
  VPOOL_DST = 0,
  VPOOL_SRC = 1,
  VPOOL_C = 2,
  VPOOL_HI = 3,
  VPOOL_WI = 4,
  VPOOL_HO = 5,
  VPOOL_WO = 6,
  VPOOL_KH_KW = 7,
  VPOOL_SH_SW = 8,
  VPOOL_DH_DW = 9,
  VPOOL_PT_PL = 10,
  VPOOL_VH_VW = 11,
};
enum {  /* vreduce */
  VREDUCE_DST = 0,
  VREDUCE_SRC = 1,
  VREDUCE_OUTER = 2,
  VREDUCE_INNER = 3,
};

/* Field names by layout and index, for messages. */
static const char* const LAYOUT_FIELDS[LAYOUT_COUNT][OPERAND_COUNT] = {
  [LAYOUT_SIGNAL] = {
      "engine", "sem",
  },
  [LAYOUT_WAIT] = {
      "engine", "sem", "value",
  },
  [LAYOUT_DMA] = {
      "binding", "dram_offset", "sram_addr", "n0", "n1", "n2", "n3", "dram_s0",
      "dram_s1", "dram_s2", "dram_s3", "sram_s0", "sram_s1", "sram_s2", "sram_s3",
  },
  [LAYOUT_FILL] = {
      "sram_addr", "n0", "n1", "n2", "n3", "s0", "s1", "s2", "s3", "value",
  },
  [LAYOUT_MATMUL] = {
      "a", "b", "out", "m", "n", "k", "lda", "ldb", "ldo", "bias",
  },
  [LAYOUT_CONV2D] = {
      "in", "w", "out", "c", "hi", "wi", "f", "ho", "wo", "kh_kw", "sh_sw", "dh_dw",
      "groups", "bias",
  },
  [LAYOUT_DWCONV2D] = {
      "in", "w", "out", "c", "hi", "wi", "ho", "wo", "kh_kw", "sh_sw", "dh_dw", "bias",
  },
  [LAYOUT_BINARY] = {
      "dst", "lhs", "rhs", "n0", "n1", "n2", "dst_s0", "dst_s1", "dst_s2", "lhs_s0",
      "lhs_s1", "lhs_s2", "rhs_s0", "rhs_s1", "rhs_s2",
  },
  [LAYOUT_UNARY] = {
      "dst", "src", "n0", "n1", "n2", "dst_s0", "dst_s1", "dst_s2", "src_s0", "src_s1",
      "src_s2", "p0", "p1",
  },
  [LAYOUT_VCVT] = {
      "dst", "src", "n0", "n1", "n2", "dst_s0", "dst_s1", "dst_s2", "src_s0", "src_s1",
      "src_s2", "scale", "src_dtype",
  },
  [LAYOUT_VPOOL] = {
      "dst", "src", "c", "hi", "wi", "ho", "wo", "kh_kw", "sh_sw", "dh_dw", "pt_pl",
      "vh_vw",
  },
  [LAYOUT_VREDUCE] = {
      "dst", "src", "outer", "inner",
  },
};

typedef struct op_info_t {
  const char* name;      /* NULL: not an opcode */
  uint8_t engine;
  uint8_t used_fields;   /* a[used_fields..14] must be zero */
  uint8_t dtypes;        /* DTM mask */
  uint16_t flags;        /* allowed flag bits */
  uint8_t layout;        /* LAYOUT_*: the names of a[] */
  uint8_t transcendental;  /* 1: vector cost times transcendental_factor */
} op_info_t;

static const op_info_t OPS[256] = {
  [OP_END] = {"end", ENGINE_CONTROL, 0,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_NONE, 0},
  [OP_SIGNAL] = {"signal", ENGINE_CONTROL, 2,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_SIGNAL, 0},
  [OP_WAIT] = {"wait", ENGINE_CONTROL, 3,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_WAIT, 0},
  [OP_BARRIER] = {"barrier", ENGINE_CONTROL, 0,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_NONE, 0},
  [OP_DMA_LOAD] = {"dma.load", ENGINE_DMA_IN, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_DMA, 0},
  [OP_DMA_STORE] = {"dma.store", ENGINE_DMA_OUT, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_DMA, 0},
  [OP_FILL] = {"fill", ENGINE_DMA_IN, 10,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x1, LAYOUT_FILL, 0},
  [OP_MATMUL] = {"matmul", ENGINE_MAC, 10,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_U8), 0x1f, LAYOUT_MATMUL, 0},
  [OP_CONV2D] = {"conv2d", ENGINE_MAC, 14,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_U8), 0x13, LAYOUT_CONV2D, 0},
  [OP_DWCONV2D] = {"dwconv2d", ENGINE_MAC, 12,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_U8), 0x13, LAYOUT_DWCONV2D, 0},
  [OP_VADD] = {"vadd", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_BINARY, 0},
  [OP_VSUB] = {"vsub", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_BINARY, 0},
  [OP_VMUL] = {"vmul", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_BINARY, 0},
  [OP_VMAX] = {"vmax", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_BINARY, 0},
  [OP_VMIN] = {"vmin", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_BINARY, 0},
  [OP_VDIV] = {"vdiv", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_BINARY, 0},
  [OP_VFMA] = {"vfma", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_BINARY, 0},
  [OP_VCOPY] = {"vcopy", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0, LAYOUT_UNARY, 0},
  [OP_VRELU] = {"vrelu", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0, LAYOUT_UNARY, 0},
  [OP_VCLAMP] = {"vclamp", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 0},
  [OP_VLEAKYRELU] = {"vleakyrelu", ENGINE_VECTOR, 12,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 0},
  [OP_VSIGMOID] = {"vsigmoid", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 1},
  [OP_VTANH] = {"vtanh", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 1},
  [OP_VEXP] = {"vexp", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 1},
  [OP_VSCALE] = {"vscale", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 0},
  [OP_VCVT] = {"vcvt", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x1, LAYOUT_VCVT, 0},
  [OP_VSQRT] = {"vsqrt", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 1},
  [OP_VRSQRT] = {"vrsqrt", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0, LAYOUT_UNARY, 1},
  [OP_VROUND] = {"vround", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x7, LAYOUT_UNARY, 0},
  [OP_VPOOL] = {"vpool", ENGINE_VECTOR, 12,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x3, LAYOUT_VPOOL, 0},
  [OP_VREDUCE] = {"vreduce", ENGINE_VECTOR, 4,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x3, LAYOUT_VREDUCE, 0},
};

static const unsigned DTYPE_BYTES[DT_COUNT] = {4, 2, 2, 1, 4, 1};
static const char* const DTYPE_NAMES[DT_COUNT] = {"f32", "f16", "bf16", "i8", "i32", "u8"};

#endif  /* NPU_ISA_H_ */
