/* One NPU instruction: the 64-byte record decoded (instr_t, decode), its operand fields
 * named by the generated indices of npu_isa.h (a[MATMUL_LDA], a + DMA_N0), and helpers
 * that read them: packed pairs (lo16, hi16), the vector ops' 3-D box counts
 * (vector_n0_field) and the operands of conv2d and dwconv2d (conv_args). */
#ifndef NPU_INSTRUCTION_H_
#define NPU_INSTRUCTION_H_

#include <stdbool.h>
#include <stdint.h>

#include "npu_core.h"
#include "npu_isa.h"

_Static_assert(INSTRUCTION_BYTES == NPU_INSTRUCTION_BYTES, "npu_core.h agrees with isa.py");
_Static_assert(CONST_POOL == NPU_CONST_POOL_BINDING, "npu_core.h agrees with isa.py");
_Static_assert(ENGINE_CONTROL == NPU_ENGINE_COUNT, "the engines with a timeline precede control");

/* One instruction record; a[] holds the operand fields, named by the opcode's layout
 * (a[MATMUL_LDA], a[DMA_N0]: npu_isa.h). */
typedef struct instr_t {
  uint8_t opcode;
  uint8_t dtype;
  uint16_t flags;
  uint32_t a[OPERAND_COUNT];
} instr_t;

/* Byte integers: the MAC array's integer operand dtypes (i8, u8). */
static inline bool is_byte_int(int dtype) { return dtype == DT_I8 || dtype == DT_U8; }

static inline instr_t decode(const uint8_t* p) {
  instr_t in;
  in.opcode = p[0];
  in.dtype = p[1];
  in.flags = (uint16_t)(p[2] | (p[3] << 8));
  for (int i = 0; i < OPERAND_COUNT; i++) {
    const uint8_t* q = p + 4 + 4 * i;
    in.a[i] = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) |
              ((uint32_t)q[3] << 24);
  }
  return in;
}

/* Counts and strides read as arrays (a + DMA_N0: n0..n3) are consecutive fields. */
_Static_assert(DMA_N3 == DMA_N0 + 3 && DMA_DRAM_S3 == DMA_DRAM_S0 + 3 &&
               DMA_SRAM_S3 == DMA_SRAM_S0 + 3 && FILL_N3 == FILL_N0 + 3 &&
               FILL_S3 == FILL_S0 + 3, "4-D boxes");
_Static_assert(BINARY_N2 == BINARY_N0 + 2 && BINARY_DST_S2 == BINARY_DST_S0 + 2 &&
               BINARY_LHS_S2 == BINARY_LHS_S0 + 2 && BINARY_RHS_S2 == BINARY_RHS_S0 + 2 &&
               UNARY_N2 == UNARY_N0 + 2 && UNARY_DST_S2 == UNARY_DST_S0 + 2 &&
               UNARY_SRC_S2 == UNARY_SRC_S0 + 2 && VCVT_N2 == VCVT_N0 + 2 &&
               VCVT_DST_S2 == VCVT_DST_S0 + 2 && VCVT_SRC_S2 == VCVT_SRC_S0 + 2, "3-D boxes");

static inline uint32_t lo16(uint32_t v) { return v & 0xFFFFu; }
static inline uint32_t hi16(uint32_t v) { return v >> 16; }

/* The field n0 of a binary, unary, vcvt or vrequant vector op: its 3-D box's counts n0, n1, n2. */
static inline int vector_n0_field(int layout) {
  _Static_assert(UNARY_N0 == VCVT_N0 && UNARY_N0 == VREQUANT_N0,
                 "unary, vcvt and vrequant boxes share their fields");
  return layout == LAYOUT_BINARY ? BINARY_N0 : UNARY_N0;
}

/* Bytes of a vrequant's source elements: i8/u8 with flag SRC_I8/SRC_U8, else 4 (i32, or
 * f32 with SRC_F32). */
static inline unsigned requant_src_bytes(uint32_t flags) {
  return (flags & (FLAG_SRC_I8 | FLAG_SRC_U8)) ? 1 : 4;
}

/* A conv2d or dwconv2d's operands and shape. A dwconv2d is the conv2d with
 * f = groups = c: it computes the same sums in the same order, so the same bits. */
typedef struct conv_args_t {
  uint32_t in, w, out, bias;
  uint32_t c, hi, wi, f, ho, wo, kh, kw, sh, sw, dh, dw, groups;
} conv_args_t;

static inline conv_args_t conv_args(const instr_t* in) {
  const uint32_t* a = in->a;
  if (in->opcode == OP_DWCONV2D) {
    return (conv_args_t){
        .in = a[DWCONV2D_IN], .w = a[DWCONV2D_W], .out = a[DWCONV2D_OUT],
        .bias = a[DWCONV2D_BIAS], .c = a[DWCONV2D_C], .hi = a[DWCONV2D_HI],
        .wi = a[DWCONV2D_WI], .f = a[DWCONV2D_C], .ho = a[DWCONV2D_HO], .wo = a[DWCONV2D_WO],
        .kh = lo16(a[DWCONV2D_KH_KW]), .kw = hi16(a[DWCONV2D_KH_KW]),
        .sh = lo16(a[DWCONV2D_SH_SW]), .sw = hi16(a[DWCONV2D_SH_SW]),
        .dh = lo16(a[DWCONV2D_DH_DW]), .dw = hi16(a[DWCONV2D_DH_DW]), .groups = a[DWCONV2D_C]};
  }
  return (conv_args_t){
      .in = a[CONV2D_IN], .w = a[CONV2D_W], .out = a[CONV2D_OUT], .bias = a[CONV2D_BIAS],
      .c = a[CONV2D_C], .hi = a[CONV2D_HI], .wi = a[CONV2D_WI], .f = a[CONV2D_F],
      .ho = a[CONV2D_HO], .wo = a[CONV2D_WO],
      .kh = lo16(a[CONV2D_KH_KW]), .kw = hi16(a[CONV2D_KH_KW]),
      .sh = lo16(a[CONV2D_SH_SW]), .sw = hi16(a[CONV2D_SH_SW]),
      .dh = lo16(a[CONV2D_DH_DW]), .dw = hi16(a[CONV2D_DH_DW]), .groups = a[CONV2D_GROUPS]};
}

#endif /* NPU_INSTRUCTION_H_ */
