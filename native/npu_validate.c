/* The pre-pass's checks (npu_validate.h). */
#include "npu_validate.h"

#include <stdlib.h>

/* Product of counts; UINT64_MAX when it overflows. */
static uint64_t product(const uint64_t* values, int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (__builtin_mul_overflow(p, values[i], &p)) return UINT64_MAX;
  }
  return p;
}

static int check_work_limit(exec_t* x, const char* what, uint64_t work,
                            uint64_t per_sram_byte) {
  uint64_t limit = per_sram_byte * x->core->config.sram_bytes;
  if (work > limit) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "%s %s exceed the per-instruction limit %s (%llu per SRAM byte)",
                work == UINT64_MAX ? "more than 2^64" : num(work).s, what, num(limit).s,
                (unsigned long long)per_sram_byte);
  }
  return NPU_STATUS_OK;
}

int check_work(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  uint64_t v[6];
  switch (in->opcode) {
    case OP_DMA_LOAD: case OP_DMA_STORE:
      for (int i = 0; i < 4; i++) v[i] = a[DMA_N0 + i];
      return check_work_limit(x, "elements", product(v, 4), ELEMENTS_PER_SRAM_BYTE);
    case OP_FILL:
      for (int i = 0; i < 4; i++) v[i] = a[FILL_N0 + i];
      return check_work_limit(x, "elements", product(v, 4), ELEMENTS_PER_SRAM_BYTE);
    case OP_MATMUL:
      v[0] = a[MATMUL_M], v[1] = a[MATMUL_N], v[2] = a[MATMUL_K];
      return check_work_limit(x, "MACs", product(v, 3), MACS_PER_SRAM_BYTE);
    case OP_CONV2D:
    case OP_DWCONV2D: {
      conv_args_t p = conv_args(in);
      v[0] = p.ho, v[1] = p.wo, v[2] = p.f, v[3] = p.c / p.groups, v[4] = p.kh, v[5] = p.kw;
      return check_work_limit(x, "MACs", product(v, 6), MACS_PER_SRAM_BYTE);
    }
    case OP_VPOOL:
      v[0] = a[VPOOL_C], v[1] = a[VPOOL_HO], v[2] = a[VPOOL_WO];
      v[3] = lo16(a[VPOOL_KH_KW]), v[4] = hi16(a[VPOOL_KH_KW]);
      return check_work_limit(x, "elements", product(v, 5), ELEMENTS_PER_SRAM_BYTE);
    case OP_VREDUCE:
      v[0] = a[VREDUCE_OUTER], v[1] = a[VREDUCE_INNER];
      return check_work_limit(x, "elements", product(v, 2), ELEMENTS_PER_SRAM_BYTE);
    default: {    /* the 3-D boxes of the binary, unary, vcvt and vrequant vector ops */
      if (x->op->engine != ENGINE_VECTOR) return NPU_STATUS_OK;
      int n0 = vector_n0_field(x->op->layout);
      for (int i = 0; i < 3; i++) v[i] = a[n0 + i];
      return check_work_limit(x, "elements", product(v, 3), ELEMENTS_PER_SRAM_BYTE);
    }
  }
}

/* ---- static rules (docs/npu-architecture.md "Static rules", as the verifier) ---- */

/* Field names, for messages. */
static const char* field_name(int opcode, int index) {
  return LAYOUT_FIELDS[OPS[opcode].layout][index];
}

/* a[first .. first+count) are counts: each at least 1. */
static int check_counts(exec_t* x, const instr_t* in, int first, int count) {
  for (int i = first; i < first + count; i++) {
    if (in->a[i] == 0) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "%s must be at least 1",
                  field_name(in->opcode, i));
    }
  }
  return NPU_STATUS_OK;
}

static int check_fill(exec_t* x, const instr_t* in) {
  unsigned bits = DTYPE_BYTES[in->dtype] * 8;
  if (in->flags & FLAG_PUSH_CONSTANT) {
    if (bits != 32) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "a push constant fills 32-bit elements, not %s",
                  DTYPE_NAMES[in->dtype]);
    }
    if (in->a[FILL_VALUE] >= x->constant_count) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "fills push constant %u (%zu constants)",
                  in->a[FILL_VALUE], x->constant_count);
    }
  } else if (bits < 32 && (in->a[FILL_VALUE] >> bits)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "value 0x%x does not fit %s",
                in->a[FILL_VALUE], DTYPE_NAMES[in->dtype]);
  }
  return check_counts(x, in, FILL_N0, 4);
}

static int check_mac_flags(exec_t* x, const instr_t* in, uint32_t bias) {
  if ((in->flags & FLAG_MIXED_SIGN) && !is_byte_int(in->dtype)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flag MIXED_SIGN needs i8 or u8 operands");
  }
  if ((in->flags & FLAG_HALF_B) && in->dtype != DT_F32) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flag HALF_B needs an f32 instruction");
  }
  if ((in->flags & FLAG_NARROW_SUM) && in->dtype != DT_F16 && in->dtype != DT_BF16) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flag NARROW_SUM needs f16 or bf16 operands");
  }
  if ((in->flags & FLAG_ACCUMULATE) && (in->flags & FLAG_BIAS)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags ACCUMULATE and BIAS are exclusive");
  }
  if (!(in->flags & FLAG_BIAS) && bias) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "bias field is %u without the BIAS flag", bias);
  }
  return NPU_STATUS_OK;
}

static int check_matmul(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  CHECK(check_mac_flags(x, in, a[MATMUL_BIAS]));
  CHECK(check_counts(x, in, MATMUL_M, 3));
  uint32_t m = a[MATMUL_M], n = a[MATMUL_N], k = a[MATMUL_K];
  uint32_t lda = a[MATMUL_LDA], ldb = a[MATMUL_LDB], ldo = a[MATMUL_LDO];
  uint32_t a_row = (in->flags & FLAG_TRANSPOSE_A) ? m : k;
  uint32_t b_row = (in->flags & FLAG_TRANSPOSE_B) ? k : n;
  if (lda < a_row || ldb < b_row || ldo < n) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "leading dimensions lda %u, ldb %u, ldo %u are below the stored rows %u, %u, %u",
                lda, ldb, ldo, a_row, b_row, n);
  }
  return NPU_STATUS_OK;
}

/* Kernel, stride and dilation pairs at least 1; windows inside the hi x wi tile. */
static int check_windows(exec_t* x, uint32_t hi, uint32_t wi, uint32_t ho, uint32_t wo,
                         uint32_t kernel, uint32_t stride, uint32_t dilation) {
  uint32_t kh = lo16(kernel), kw = hi16(kernel), sh = lo16(stride), sw = hi16(stride);
  uint32_t dh = lo16(dilation), dw = hi16(dilation);
  if (!kh || !kw || !sh || !sw || !dh || !dw) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "kernel %ux%u, stride %ux%u and dilation %ux%u must be at least 1", kh, kw, sh,
                sw, dh, dw);
  }
  uint64_t rows = (uint64_t)(ho - 1) * sh + (uint64_t)(kh - 1) * dh + 1;
  uint64_t cols = (uint64_t)(wo - 1) * sw + (uint64_t)(kw - 1) * dw + 1;
  if (rows > hi || cols > wi) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "windows span %llux%llu input elements but the tile is %ux%u",
                (unsigned long long)rows, (unsigned long long)cols, hi, wi);
  }
  return NPU_STATUS_OK;
}

static int check_conv2d(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  CHECK(check_mac_flags(x, in, a[CONV2D_BIAS]));
  CHECK(check_counts(x, in, CONV2D_C, 6));     /* c, hi, wi, f, ho, wo */
  uint32_t c = a[CONV2D_C], f = a[CONV2D_F], groups = a[CONV2D_GROUPS];
  if (groups == 0 || c % groups || f % groups) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "groups %u must divide c %u and f %u", groups,
                c, f);
  }
  return check_windows(x, a[CONV2D_HI], a[CONV2D_WI], a[CONV2D_HO], a[CONV2D_WO],
                       a[CONV2D_KH_KW], a[CONV2D_SH_SW], a[CONV2D_DH_DW]);
}

static int check_dwconv2d(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  CHECK(check_mac_flags(x, in, a[DWCONV2D_BIAS]));
  CHECK(check_counts(x, in, DWCONV2D_C, 5));   /* c, hi, wi, ho, wo */
  return check_windows(x, a[DWCONV2D_HI], a[DWCONV2D_WI], a[DWCONV2D_HO], a[DWCONV2D_WO],
                       a[DWCONV2D_KH_KW], a[DWCONV2D_SH_SW], a[DWCONV2D_DH_DW]);
}

static int check_vpool(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  if ((in->flags & FLAG_COUNT_INCLUDE_PAD) && !(in->flags & FLAG_POOL_AVG)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flag COUNT_INCLUDE_PAD needs POOL_AVG");
  }
  CHECK(check_counts(x, in, VPOOL_C, 5));      /* c, hi, wi, ho, wo */
  uint32_t hi = a[VPOOL_HI], wi = a[VPOOL_WI];
  CHECK(check_windows(x, hi, wi, a[VPOOL_HO], a[VPOOL_WO], a[VPOOL_KH_KW], a[VPOOL_SH_SW],
                      a[VPOOL_DH_DW]));
  uint32_t pt = lo16(a[VPOOL_PT_PL]), pl = hi16(a[VPOOL_PT_PL]);
  uint32_t vh = lo16(a[VPOOL_VH_VW]), vw = hi16(a[VPOOL_VH_VW]);
  if (pt + vh > hi || pl + vw > wi) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "valid region rows [%u, %u) cols [%u, %u) exceeds the %ux%u tile", pt, pt + vh,
                pl, pl + vw, hi, wi);
  }
  return NPU_STATUS_OK;
}

/* ---- structural validation (pre-pass) ------------------------------------ */

int check_semaphore(exec_t* x, const instr_t* in) {
  _Static_assert(SIGNAL_ENGINE == WAIT_ENGINE && SIGNAL_SEM == WAIT_SEM, "one layout");
  uint32_t engine = in->a[SIGNAL_ENGINE], sem = in->a[SIGNAL_SEM];
  semaphore_t* s = &x->core->semaphores[sem];
  if (in->opcode == OP_SIGNAL) {
    if (s->engine >= 0 && s->engine != (int)engine) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                  "semaphore %u is signalled from engine %d and engine %u", sem, s->engine,
                  engine);
    }
    s->engine = (int)engine;
    s->count++;
  } else if (in->a[WAIT_VALUE] > s->count) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "waits for signal %u of semaphore %u but only %zu precede it", in->a[WAIT_VALUE],
                sem, s->count);
  }
  return NPU_STATUS_OK;
}

int reserve_signals(exec_t* x) {
  npu_core_t* core = x->core;
  for (uint64_t i = 0; i < core->config.semaphores; i++) {
    semaphore_t* s = &core->semaphores[i];
    if (s->count > s->capacity) {
      uint64_t* times = realloc(s->times, s->count * sizeof(uint64_t));
      if (!times) return out_of_memory(x, s->count * sizeof(uint64_t));
      s->times = times;
      s->capacity = s->count;
    }
    s->count = 0;
  }
  return NPU_STATUS_OK;
}

int check_encoding(exec_t* x, const instr_t* in) {
  const op_info_t* op = &OPS[in->opcode];
  if (!op->name) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid opcode %u", in->opcode);
  }
  x->op = op;
  if (in->dtype >= DT_COUNT || !(op->dtypes & DTM(in->dtype))) {
    if (in->dtype >= DT_COUNT) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid dtype %u", in->dtype);
    }
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "dtype %s is not allowed",
                DTYPE_NAMES[in->dtype]);
  }
  if (in->flags & ~op->flags) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid flags 0x%x", in->flags);
  }
  for (int i = op->used_fields; i < OPERAND_COUNT; i++) {
    if (in->a[i] != 0) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "unused field a[%d] must be zero, got %u",
                  i, in->a[i]);
    }
  }
  switch (in->opcode) {
    case OP_SIGNAL:
    case OP_WAIT:
      if (in->a[SIGNAL_ENGINE] >= NPU_ENGINE_COUNT) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid engine %u", in->a[SIGNAL_ENGINE]);
      }
      if (in->a[SIGNAL_SEM] >= x->core->config.semaphores) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "semaphore %u out of range (%llu semaphores)",
                    in->a[SIGNAL_SEM], (unsigned long long)x->core->config.semaphores);
      }
      return NPU_STATUS_OK;
    case OP_DMA_LOAD:
    case OP_DMA_STORE:
      return check_counts(x, in, DMA_N0, 4);
    case OP_FILL:
      return check_fill(x, in);
    case OP_MATMUL:
      return check_matmul(x, in);
    case OP_CONV2D:
      return check_conv2d(x, in);
    case OP_DWCONV2D:
      return check_dwconv2d(x, in);
    case OP_VPOOL:
      return check_vpool(x, in);
    case OP_VREDUCE:
      if ((in->flags & FLAG_REDUCE_MAX) && (in->flags & FLAG_REDUCE_MEAN)) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags REDUCE_MAX and REDUCE_MEAN are exclusive");
      }
      return check_counts(x, in, VREDUCE_OUTER, 2);
    case OP_VROUND:
    case OP_VREQUANT: {
      unsigned rounding = FLAG_ROUND_FLOOR | FLAG_ROUND_CEIL | FLAG_ROUND_HALF_AWAY;
      if (__builtin_popcount(in->flags & rounding) > 1) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags FLOOR, CEIL and HALF_AWAY are exclusive");
      }
      if (__builtin_popcount(in->flags & ~rounding) > 1) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "flags SRC_I8, SRC_U8 and SRC_F32 are exclusive");
      }
      return check_counts(x, in, vector_n0_field(x->op->layout), 3);
    }
    case OP_VCVT:
      if (in->a[VCVT_SRC_DTYPE] >= DT_COUNT) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT, "invalid src_dtype %u", in->a[VCVT_SRC_DTYPE]);
      }
      if (in->a[VCVT_SRC_DTYPE] == DT_I64 &&
          (in->dtype != DT_F32 || in->flags || (in->a[VCVT_SCALE] && in->a[VCVT_SCALE] != 0x3f800000u))) {
        return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                    "src_dtype i64 converts to f32 only, unscaled, without flags");
      }
      return check_counts(x, in, VCVT_N0, 3);
    default:      /* binary and unary vector ops: their boxes' counts */
      if (x->op->engine != ENGINE_VECTOR) return NPU_STATUS_OK;
      return check_counts(x, in, vector_n0_field(x->op->layout), 3);
  }
}
