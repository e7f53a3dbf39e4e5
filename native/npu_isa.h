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

#define ELEMENTS_PER_SRAM_BYTE 64
#define MACS_PER_SRAM_BYTE 2048
#define DTM(d) (1u << (d))

typedef struct op_info_t {
  const char* name;      /* NULL: not an opcode */
  uint8_t engine;
  uint8_t used_fields;   /* a[used_fields..14] must be zero */
  uint8_t dtypes;        /* DTM mask */
  uint16_t flags;        /* allowed flag bits */
} op_info_t;

static const op_info_t OPS[256] = {
  [OP_END] = {"end", ENGINE_CONTROL, 0,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_SIGNAL] = {"signal", ENGINE_CONTROL, 2,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_WAIT] = {"wait", ENGINE_CONTROL, 3,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_BARRIER] = {"barrier", ENGINE_CONTROL, 0,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_DMA_LOAD] = {"dma.load", ENGINE_DMA_IN, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_DMA_STORE] = {"dma.store", ENGINE_DMA_OUT, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_FILL] = {"fill", ENGINE_DMA_IN, 10,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x1},
  [OP_MATMUL] = {"matmul", ENGINE_MAC, 10,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_U8), 0x1f},
  [OP_CONV2D] = {"conv2d", ENGINE_MAC, 14,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_U8), 0x13},
  [OP_DWCONV2D] = {"dwconv2d", ENGINE_MAC, 12,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_U8), 0x13},
  [OP_VADD] = {"vadd", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VSUB] = {"vsub", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VMUL] = {"vmul", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VMAX] = {"vmax", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VMIN] = {"vmin", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VDIV] = {"vdiv", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VFMA] = {"vfma", ENGINE_VECTOR, 15,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VCOPY] = {"vcopy", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x0},
  [OP_VRELU] = {"vrelu", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I32), 0x0},
  [OP_VCLAMP] = {"vclamp", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VLEAKYRELU] = {"vleakyrelu", ENGINE_VECTOR, 12,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VSIGMOID] = {"vsigmoid", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VTANH] = {"vtanh", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VEXP] = {"vexp", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VSCALE] = {"vscale", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VCVT] = {"vcvt", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16) | DTM(DT_I8) | DTM(DT_I32) | DTM(DT_U8), 0x1},
  [OP_VSQRT] = {"vsqrt", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VRSQRT] = {"vrsqrt", ENGINE_VECTOR, 11,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x0},
  [OP_VROUND] = {"vround", ENGINE_VECTOR, 13,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x7},
  [OP_VPOOL] = {"vpool", ENGINE_VECTOR, 12,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x3},
  [OP_VREDUCE] = {"vreduce", ENGINE_VECTOR, 4,
      DTM(DT_F32) | DTM(DT_F16) | DTM(DT_BF16), 0x3},
};

static const unsigned DTYPE_BYTES[DT_COUNT] = {4, 2, 2, 1, 4, 1};
static const char* const DTYPE_NAMES[DT_COUNT] = {"f32", "f16", "bf16", "i8", "i32", "u8"};

#endif  /* NPU_ISA_H_ */
