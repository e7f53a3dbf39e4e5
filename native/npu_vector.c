/* The vector unit's instructions: elementwise binary and unary ops over 3-D boxes
 * (with the exponential unit's exp and sigmoid), vcvt, vpool and vreduce. Rows stream
 * through f32 (or i32) chunks so that every inner loop is a tight, vectorizable loop;
 * f16/bf16 are computed in f32 and rounded to nearest even on store. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "npu_elements.h"
#include "npu_kernels.h"
#include "npu_ranges.h"

#define CHUNK 512

typedef struct box3_t {
  const char* name;
  uint32_t addr;
  const uint32_t* strides;   /* 3 element strides */
  int dtype;
} box3_t;

static int check_box3(exec_t* x, const box3_t* b, const uint32_t* counts) {
  unsigned elem = DTYPE_BYTES[b->dtype];
  return check_sram(x, b->name, b->addr, box_extent(counts, b->strides, 3, elem), elem);
}

static uint8_t* box3_row(exec_t* x, const box3_t* b, size_t i0, size_t i1) {
  return x->core->sram + b->addr +
         (i0 * b->strides[0] + i1 * b->strides[1]) * DTYPE_BYTES[b->dtype];
}

/* The row loops of the f32 ops. Without trapping math GCC vectorizes their compares
 * and selects (vmax, vhswish, the selects; not a max then a min: clamp_run); it changes
 * no value, only which FP exception flags may be raised, which nothing reads.
 * Contraction stays as the build sets it (a multiply-add of vscale and vhswish is one
 * fused operation, as LLVM's in stock's code). */
#define VECTOR_LOOPS __attribute__((optimize("no-trapping-math")))

VECTOR_LOOPS static void binary_f32(int op, unsigned flags, float* restrict d,
                                    const float* restrict l, const float* restrict r,
                                    size_t n) {
  switch (op) {
    /* d holds the addend: lhs·rhs + d rounded once, as LLVM contracts fmul + fadd */
    case OP_VFMA: for (size_t i = 0; i < n; i++) d[i] = fmaf(l[i], r[i], d[i]); break;
    /* d holds the other value: select(lhs > rhs, lhs, d), a NaN compare false */
    case OP_VSELGT:
      if (flags & FLAG_OR_EQUAL) {
        for (size_t i = 0; i < n; i++) d[i] = l[i] >= r[i] ? l[i] : d[i];
      } else {
        for (size_t i = 0; i < n; i++) d[i] = l[i] > r[i] ? l[i] : d[i];
      }
      break;
    /* d holds the other value: select(lhs != 0, rhs, d), a NaN lhs true */
    case OP_VSELECT: for (size_t i = 0; i < n; i++) d[i] = l[i] != 0.0f ? r[i] : d[i]; break;
    case OP_VCMP:
      for (size_t i = 0; i < n; i++) {
        unsigned outcome = l[i] < r[i] ? FLAG_CMP_LESS : l[i] == r[i] ? FLAG_CMP_EQUAL
                         : l[i] > r[i] ? FLAG_CMP_GREATER : FLAG_CMP_UNORDERED;
        d[i] = (flags & outcome) ? 1.0f : 0.0f;
      }
      break;
    case OP_VADD: for (size_t i = 0; i < n; i++) d[i] = l[i] + r[i]; break;
    case OP_VSUB: for (size_t i = 0; i < n; i++) d[i] = l[i] - r[i]; break;
    case OP_VMUL: for (size_t i = 0; i < n; i++) d[i] = l[i] * r[i]; break;
    case OP_VMAX: for (size_t i = 0; i < n; i++) d[i] = NPU_MAX(l[i], r[i]); break;
    case OP_VMIN: for (size_t i = 0; i < n; i++) d[i] = NPU_MIN(l[i], r[i]); break;
    default: for (size_t i = 0; i < n; i++) d[i] = l[i] / r[i]; break;
  }
}

/* i32 arithmetic wraps; division truncates, x / 0 = 0 and INT32_MIN / -1 wraps. */
static void binary_i32(int op, unsigned flags, int32_t* restrict d, const int32_t* restrict l,
                       const int32_t* restrict r, size_t n) {
  switch (op) {
    case OP_VSELECT: for (size_t i = 0; i < n; i++) d[i] = l[i] != 0 ? r[i] : d[i]; break;
    case OP_VCMP:
      for (size_t i = 0; i < n; i++) {
        unsigned outcome = l[i] < r[i] ? FLAG_CMP_LESS : l[i] == r[i] ? FLAG_CMP_EQUAL
                                                                     : FLAG_CMP_GREATER;
        d[i] = (flags & outcome) ? 1 : 0;
      }
      break;
    case OP_VAND: for (size_t i = 0; i < n; i++) d[i] = l[i] & r[i]; break;
    case OP_VFMA: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] * (uint32_t)r[i] + (uint32_t)d[i]); break;
    case OP_VADD: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] + (uint32_t)r[i]); break;
    case OP_VSUB: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] - (uint32_t)r[i]); break;
    case OP_VMUL: for (size_t i = 0; i < n; i++) d[i] = (int32_t)((uint32_t)l[i] * (uint32_t)r[i]); break;
    case OP_VMAX: for (size_t i = 0; i < n; i++) d[i] = l[i] > r[i] ? l[i] : r[i]; break;
    case OP_VMIN: for (size_t i = 0; i < n; i++) d[i] = l[i] < r[i] ? l[i] : r[i]; break;
    default:
      for (size_t i = 0; i < n; i++) {
        d[i] = r[i] == 0 ? 0 : r[i] == -1 ? (int32_t)(0u - (uint32_t)l[i]) : l[i] / r[i];
      }
      break;
  }
}

int exec_binary(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + BINARY_N0;
  box3_t dst = {"dst", a[BINARY_DST], a + BINARY_DST_S0, in->dtype};
  box3_t lhs = {"lhs", a[BINARY_LHS], a + BINARY_LHS_S0, in->dtype};
  box3_t rhs = {"rhs", a[BINARY_RHS], a + BINARY_RHS_S0, in->dtype};
  CHECK(check_box3(x, &dst, counts));
  CHECK(check_box3(x, &lhs, counts));
  CHECK(check_box3(x, &rhs, counts));
  unsigned elem = DTYPE_BYTES[in->dtype];
  union { float f[CHUNK]; int32_t i[CHUNK]; } l, r, d;
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* dp = box3_row(x, &dst, i0, i1);
      const uint8_t* lp = box3_row(x, &lhs, i0, i1);
      const uint8_t* rp = box3_row(x, &rhs, i0, i1);
      for (size_t j = 0; j < counts[2]; j += CHUNK) {
        size_t len = counts[2] - j < CHUNK ? counts[2] - j : CHUNK;
        size_t dof = j * dst.strides[2] * elem, lof = j * lhs.strides[2] * elem,
               rof = j * rhs.strides[2] * elem;
        if (in->dtype == DT_I32) {
          load_i32(DT_I32, lp + lof, lhs.strides[2], len, l.i);
          load_i32(DT_I32, rp + rof, rhs.strides[2], len, r.i);
          if (in->opcode == OP_VFMA || in->opcode == OP_VSELECT)
            load_i32(DT_I32, dp + dof, dst.strides[2], len, d.i);
          binary_i32(in->opcode, in->flags, d.i, l.i, r.i, len);
          store_i32(dp + dof, dst.strides[2], len, d.i);
        } else {
          load_f32(in->dtype, lp + lof, lhs.strides[2], len, l.f);
          load_f32(in->dtype, rp + rof, rhs.strides[2], len, r.f);
          if (in->opcode == OP_VFMA || in->opcode == OP_VSELGT || in->opcode == OP_VSELECT)
            load_f32(in->dtype, dp + dof, dst.strides[2], len, d.f);
          binary_f32(in->opcode, in->flags, d.f, l.f, r.f, len);
          store_f32(in->dtype, dp + dof, dst.strides[2], len, d.f);
        }
        if (stopping_elements(len)) return NPU_STATUS_OK;
      }
    }
  }
  return NPU_STATUS_OK;
}

/* The exponential unit's functions: each multiply and add rounded as written (no
 * contraction beyond the explicit fmaf), inlined into the row loops below (GCC inlines
 * only between functions of the same options). */
#define EXP_UNIT __attribute__((optimize("fp-contract=off", "no-trapping-math")))

EXP_UNIT static inline float exp_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* The exponential unit: range reduction to x = n·ln2 + r (n = floor(x·log2e + 1/2) in
 * [-127, 127], r by two fused steps), a degree-7 polynomial for e^r - 1 in fused
 * multiply-adds, and 2^n from its exponent bits: the algorithm and constants of MLIR's
 * polynomial approximation, which IREE's CPU code generator emits for math.exp, step for
 * step, so that npu-sim's exp has the bits of stock llvm-cpu's. Returns e^r (before the
 * scaling) and sets *scale = 2^n; exp(x) = e^r · 2^n. */
EXP_UNIT static inline float exp_parts(float x, float* scale) {
  float c = NPU_MIN(NPU_MAX(x, -87.8f), 88.8f);
  float k = floorf(fmaf(c, exp_bits(0x3FB8AA3Bu), 0.5f));
  k = NPU_MIN(NPU_MAX(k, -127.0f), 127.0f);
  float r = fmaf(exp_bits(0xBF318000u), k, c);
  r = fmaf(exp_bits(0x395E8083u), k, r);
  float p = fmaf(r, exp_bits(0x39506967u), exp_bits(0x3AB743CEu));
  p = fmaf(p, r, exp_bits(0x3C088908u));
  p = fmaf(p, r, exp_bits(0x3D2AA9C1u));
  p = fmaf(p, r, exp_bits(0x3E2AAAAAu));
  p = fmaf(p, r, 0.5f);
  float r2 = r * r;
  *scale = exp_bits((uint32_t)((int32_t)k + 127) << 23);
  return fmaf(p, r2, r) + 1.0f;
}

EXP_UNIT static inline float npu_exp(float x) {
  float scale, e = exp_parts(x, &scale);
  return e * scale;
}

/* 1 / (1 + exp(-x)): the scaling and the + 1 fuse into one multiply-add, as LLVM
 * contracts them in stock's code. */
EXP_UNIT static inline float npu_sigmoid(float x) {
  float scale, e = exp_parts(-x, &scale);
  return 1.0f / fmaf(e, scale, 1.0f);
}

/* Whole rows of vexp and vsigmoid, the functions above inlined and vectorized: every
 * step is an exact IEEE operation (compares and blends for the clamps, a rounding for
 * floorf), so each lane has the bits of the scalar code; a call per element cost about
 * ten times as much. no-trapping-math (EXP_UNIT) lets GCC vectorize floorf and the
 * nested clamps; it changes no value, only which FP exception flags may be raised. */
EXP_UNIT static void exp_run(float* restrict v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = npu_exp(v[i]);
}

EXP_UNIT static void sigmoid_run(float* restrict v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = npu_sigmoid(v[i]);
}

/* The tanh unit: MLIR's polynomial approximation of tanh, which IREE's CPU code
 * generator emits for f32 math.tanh, step for step, so that npu-sim's tanh has the bits
 * of stock llvm-cpu's: x clamped to ±7.99881172 (tanh is then 1 in f32), |x| < 4e-4
 * returned as is, otherwise p(x) / q(x) with an odd numerator x·P(x²) of degree 13 and
 * an even denominator Q(x²) of degree 6, both in fused multiply-adds, one division.
 * NaN passes through (quieted, payload kept); ±inf give ±1. */
EXP_UNIT static inline float npu_tanh(float x) {
  float c = NPU_MIN(NPU_MAX(x, exp_bits(0xC0FFF644u)), exp_bits(0x40FFF644u));
  float c2 = c * c;
  float p = fmaf(c2, exp_bits(0xA59F25C0u), exp_bits(0x2A61337Eu));   /* -2.76e-16, 2.00e-13 */
  p = fmaf(c2, p, exp_bits(0xAEBD37FFu));                               /* -8.60e-11 */
  p = fmaf(c2, p, exp_bits(0x335C0041u));                               /* 5.12e-8 */
  p = fmaf(c2, p, exp_bits(0x3779434Au));                               /* 1.49e-5 */
  p = fmaf(c2, p, exp_bits(0x3A270DEDu));                               /* 6.37e-4 */
  p = fmaf(c2, p, exp_bits(0x3BA059DCu));                               /* 4.89352456e-3 */
  p = c * p;
  float q = fmaf(c2, exp_bits(0x35A0D3D8u), exp_bits(0x38F895D6u));   /* 1.20e-6, 1.19e-4 */
  q = fmaf(c2, q, exp_bits(0x3B14AA05u));                               /* 2.27e-3 */
  q = fmaf(c2, q, exp_bits(0x3BA059DDu));                               /* 4.89352519e-3 */
  return fabsf(x) < 4.0e-4f ? c : p / q;
}

/* Whole rows of vtanh, vectorized as exp_run is (every step an exact IEEE operation). */
EXP_UNIT static void tanh_run(float* restrict v, size_t n) {
  for (size_t i = 0; i < n; i++) v[i] = npu_tanh(v[i]);
}

/* vround's rounding (isa.Flag.ROUND_*): to nearest with ties to even by default. */
static float round_by(unsigned flags, float x) {
  if (flags & FLAG_ROUND_FLOOR) return floorf(x);
  if (flags & FLAG_ROUND_CEIL) return ceilf(x);
  if (flags & FLAG_ROUND_HALF_AWAY) return roundf(x);
  return nearbyintf(x);
}

/* x rounded to `dtype` (f16, bf16) and back: a vector op's intermediate value stored in
 * its dtype. */
static float in_dtype(int dtype, float x) {
  if (dtype == DT_F16) return f16_to_f32(f32_to_f16(x));
  if (dtype == DT_BF16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

/* The clamp of vclamp and vround, a function of its own compiled without
 * VECTOR_LOOPS (and not inlined into one, which would give it the caller's options):
 * GCC 12 leaves a NaN-propagating max then min scalar under no-trapping-math and
 * vectorizes it with the file's flags (vclamp was 27% of depthwise_separable's call in
 * perf). */
__attribute__((noinline)) static void clamp_run(float* restrict v, size_t n, float lo,
                                                float hi) {
  for (size_t i = 0; i < n; i++) {
    float t = NPU_MAX(v[i], lo);
    v[i] = NPU_MIN(t, hi);
  }
}

VECTOR_LOOPS static void unary_f32(int op, int dtype, unsigned flags, float p0, float p1,
                                   float* restrict v, size_t n) {
  switch (op) {
    case OP_VRELU: for (size_t i = 0; i < n; i++) v[i] = NPU_MAX(v[i], 0.0f); break;
    case OP_VCLAMP: clamp_run(v, n, p0, p1); break;
    case OP_VLEAKYRELU: for (size_t i = 0; i < n; i++) v[i] = v[i] < 0 ? p0 * v[i] : v[i]; break;
    case OP_VSIGMOID: sigmoid_run(v, n); break;
    case OP_VTANH: tanh_run(v, n); break;
    case OP_VEXP: exp_run(v, n); break;
    case OP_VSQRT: for (size_t i = 0; i < n; i++) v[i] = sqrtf(v[i]); break;
    /* two f32 roundings, the square root then the division: 1 / sqrt(x) in f32 */
    case OP_VRSQRT: for (size_t i = 0; i < n; i++) v[i] = 1.0f / sqrtf(v[i]); break;
    /* the C library's erff: within an ulp of erf, as IREE's CPU approximation is */
    case OP_VERF: for (size_t i = 0; i < n; i++) v[i] = erff(v[i]); break;
    case OP_VLOG: for (size_t i = 0; i < n; i++) v[i] = logf(v[i]); break;
    case OP_VLOG1P: for (size_t i = 0; i < n; i++) v[i] = log1pf(v[i]); break;
    /* the C library's sinf, cosf: within an ulp for every argument (IREE's CPU code uses
     * a polynomial after its own range reduction) */
    case OP_VSIN: for (size_t i = 0; i < n; i++) v[i] = sinf(v[i]); break;
    case OP_VCOS: for (size_t i = 0; i < n; i++) v[i] = cosf(v[i]); break;
    /* f16 arithmetic of a mixed-precision body computed in f32: the f32 result rounded
     * to f16 (nearest even), as LLVM's promotion of an f16 op rounds each result */
    case OP_VNARROW: for (size_t i = 0; i < n; i++) v[i] = in_dtype(DT_F16, v[i]); break;
    /* rounded as the flags say (default: to nearest, ties to even); then vclamp's */
    case OP_VROUND:
      for (size_t i = 0; i < n; i++) v[i] = round_by(flags, v[i]);
      clamp_run(v, n, p0, p1);
      break;
    /* vscale's x·p0 + p1 stored in the dtype, vclamp's [0, 1], then vmul's product:
     * the bits of those three instructions */
    case OP_VHSWISH:
      if (dtype == DT_F32) {
        for (size_t i = 0; i < n; i++) {
          float t = NPU_MAX(v[i] * p0 + p1, 0.0f);
          v[i] = v[i] * NPU_MIN(t, 1.0f);
        }
        break;
      }
      for (size_t i = 0; i < n; i++) {
        float t = in_dtype(dtype, v[i] * p0 + p1);
        t = NPU_MAX(t, 0.0f);
        v[i] = v[i] * NPU_MIN(t, 1.0f);
      }
      break;
    default: for (size_t i = 0; i < n; i++) v[i] = v[i] * p0 + p1; break;   /* vscale */
  }
}

int exec_unary(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + UNARY_N0;
  box3_t dst = {"dst", a[UNARY_DST], a + UNARY_DST_S0, in->dtype};
  box3_t src = {"src", a[UNARY_SRC], a + UNARY_SRC_S0, in->dtype};
  CHECK(check_box3(x, &dst, counts));
  CHECK(check_box3(x, &src, counts));
  unsigned elem = DTYPE_BYTES[in->dtype];
  float p0 = bits_f32(a[UNARY_P0]), p1 = bits_f32(a[UNARY_P1]);
  union { float f[CHUNK]; int32_t i[CHUNK]; } v;
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* dp = box3_row(x, &dst, i0, i1);
      const uint8_t* sp = box3_row(x, &src, i0, i1);
      if (in->opcode == OP_VCOPY) {
        if (!copy_run_polled(dp, dst.strides[2], sp, src.strides[2], counts[2], elem)) {
          return NPU_STATUS_OK;
        }
        continue;
      }
      for (size_t j = 0; j < counts[2]; j += CHUNK) {
        size_t len = counts[2] - j < CHUNK ? counts[2] - j : CHUNK;
        uint8_t* d = dp + j * dst.strides[2] * elem;
        const uint8_t* s = sp + j * src.strides[2] * elem;
        if (in->dtype == DT_I32) {   /* vrelu */
          load_i32(DT_I32, s, src.strides[2], len, v.i);
          for (size_t i = 0; i < len; i++) v.i[i] = v.i[i] > 0 ? v.i[i] : 0;
          store_i32(d, dst.strides[2], len, v.i);
        } else {
          load_f32(in->dtype, s, src.strides[2], len, v.f);
          unary_f32(in->opcode, in->dtype, in->flags, p0, p1, v.f, len);
          store_f32(in->dtype, d, dst.strides[2], len, v.f);
        }
        if (stopping_elements(len)) return NPU_STATUS_OK;
      }
    }
  }
  return NPU_STATUS_OK;
}

/* cvt_load's loop from an integer dtype: the dense one (the common case) vectorizes. */
#define CVT_LOAD_INTEGER(T)                                                               \
  {                                                                                       \
    const T* s = (const T*)base;                                                          \
    if (stride == 1) {                                                                    \
      for (size_t i = 0; i < n; i++) out[i] = s[i] * scale;                               \
    } else {                                                                              \
      for (size_t i = 0; i < n; i++) out[i] = s[i * stride] * scale;                      \
    }                                                                                     \
    break;                                                                                \
  }

/* vcvt: v = x * scale (scale 0 means 1) in double; floats round to f32 (exactly the
 * f32 product for float sources) then to the destination; integers round half to
 * even (toward zero with FLAG_TRUNCATE) and saturate (NaN becomes 0). An i64 source
 * (to f32 only, unscaled) rounds to f32 once. */
static void cvt_load(int dtype, const uint8_t* base, size_t stride, size_t n,
                     double scale, double* restrict out) {
  switch (dtype) {
    case DT_I8: CVT_LOAD_INTEGER(int8_t)
    case DT_U8: CVT_LOAD_INTEGER(uint8_t)
    case DT_I32: CVT_LOAD_INTEGER(int32_t)
    case DT_I64: {      /* to f32 only, unscaled (validated): one rounding, as sitofp */
      const int64_t* s = (const int64_t*)base;
      for (size_t i = 0; i < n; i++) out[i] = (float)s[i * stride];
      break;
    }
    default: {
      float f[CHUNK];
      load_f32(dtype, base, stride, n, f);
      for (size_t i = 0; i < n; i++) out[i] = (double)f[i] * scale;
      break;
    }
  }
}

/* v rounded (toward zero with `truncate`, else half to even; NaN to 0) and saturated to
 * [lo, hi], as comparisons and selects the compiler vectorizes. */
static inline double cvt_integer(double v, bool truncate, double lo, double hi) {
  v = v != v ? 0.0 : truncate ? trunc(v) : rint(v);
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

/* The loops of cvt_store to an integer dtype, one per rounding, each dense or strided:
 * the dense ones (the common case) vectorize. */
#define CVT_STORE_INTEGER_LOOP(T, LO, HI, TRUNCATE)                                       \
  if (stride == 1) {                                                                      \
    for (size_t i = 0; i < n; i++) d[i] = (T)cvt_integer(in[i], TRUNCATE, LO, HI);         \
  } else {                                                                                \
    for (size_t i = 0; i < n; i++) d[i * stride] = (T)cvt_integer(in[i], TRUNCATE, LO, HI); \
  }
#define CVT_STORE_INTEGER(T, LO, HI)                                                      \
  {                                                                                       \
    T* d = (T*)base;                                                                      \
    if (truncate) {                                                                       \
      CVT_STORE_INTEGER_LOOP(T, LO, HI, true)                                             \
    } else {                                                                              \
      CVT_STORE_INTEGER_LOOP(T, LO, HI, false)                                            \
    }                                                                                     \
    break;                                                                                \
  }

static void cvt_store(int dtype, uint8_t* base, size_t stride, size_t n,
                      const double* restrict in, bool truncate) {
  switch (dtype) {
    case DT_I8: CVT_STORE_INTEGER(int8_t, -128.0, 127.0)
    case DT_U8: CVT_STORE_INTEGER(uint8_t, 0.0, 255.0)
    case DT_I32: CVT_STORE_INTEGER(int32_t, -2147483648.0, 2147483647.0)
    default: {
      float f[CHUNK];
      for (size_t i = 0; i < n; i++) f[i] = (float)in[i];
      store_f32(dtype, base, stride, n, f);
      break;
    }
  }
}

int exec_vcvt(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + VCVT_N0;
  box3_t dst = {"dst", a[VCVT_DST], a + VCVT_DST_S0, in->dtype};
  box3_t src = {"src", a[VCVT_SRC], a + VCVT_SRC_S0, (int)a[VCVT_SRC_DTYPE]};
  CHECK(check_box3(x, &dst, counts));
  CHECK(check_box3(x, &src, counts));
  double scale = a[VCVT_SCALE] ? (double)bits_f32(a[VCVT_SCALE]) : 1.0;
  unsigned delem = DTYPE_BYTES[dst.dtype], selem = DTYPE_BYTES[src.dtype];
  double v[CHUNK];
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* dp = box3_row(x, &dst, i0, i1);
      const uint8_t* sp = box3_row(x, &src, i0, i1);
      for (size_t j = 0; j < counts[2]; j += CHUNK) {
        size_t len = counts[2] - j < CHUNK ? counts[2] - j : CHUNK;
        cvt_load(src.dtype, sp + j * src.strides[2] * selem, src.strides[2], len, scale, v);
        cvt_store(dst.dtype, dp + j * dst.strides[2] * delem, dst.strides[2], len, v,
                  in->flags & FLAG_TRUNCATE);
        if (stopping_elements(len)) return NPU_STATUS_OK;
      }
    }
  }
  return NPU_STATUS_OK;
}

/* Window taps k in [0, taps) with pad_begin <= o*stride + k*dilation < pad_begin + valid. */
static uint32_t valid_taps(size_t o, uint32_t stride, uint32_t taps, uint32_t dilation,
                           uint32_t pad_begin, uint32_t valid) {
  uint32_t count = 0;
  for (uint32_t k = 0; k < taps; k++) {
    size_t pos = o * stride + (size_t)k * dilation;
    count += pos >= pad_begin && pos < (size_t)pad_begin + valid;
  }
  return count;
}

/* One window tap of a row of pooled outputs: acc[xo] takes r[xo * sw] (summed, or its
 * max), in loops GCC vectorizes: strides 1 and 2 (most pools) as loops of their own, the
 * stride a constant there, and the max of two temporaries: GCC 12 leaves
 * NPU_MAX(acc[xo], r[xo * 2]), which names each operand twice, scalar (a compare and
 * branch per element: 65% of small_cnn's 2x2 pools in perf). Each output still takes its
 * taps one by one in window order, so the result is the same at any vector width. */
#define POOL_TAP_LOOP(STRIDE)                                                          \
  do {                                                                                 \
    if (avg) {                                                                         \
      for (size_t xo = 0; xo < wo; xo++) acc[xo] += r[xo * (STRIDE)];                  \
    } else {                                                                           \
      for (size_t xo = 0; xo < wo; xo++) {                                             \
        float a = acc[xo], v = r[xo * (STRIDE)];                                       \
        acc[xo] = NPU_MAX(a, v);                                                       \
      }                                                                                \
    }                                                                                  \
  } while (0)

static void pool_tap(bool avg, float* restrict acc, const float* restrict r, size_t wo,
                     size_t sw) {
  if (sw == 1) {
    POOL_TAP_LOOP(1);
  } else if (sw == 2) {
    POOL_TAP_LOOP(2);
  } else {
    POOL_TAP_LOOP(sw);
  }
}

int exec_vpool(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  int dt = in->dtype;
  unsigned elem = DTYPE_BYTES[dt];
  uint32_t c = a[VPOOL_C], hi = a[VPOOL_HI], wi = a[VPOOL_WI];
  uint32_t ho = a[VPOOL_HO], wo = a[VPOOL_WO];
  uint32_t kh = lo16(a[VPOOL_KH_KW]), kw = hi16(a[VPOOL_KH_KW]);
  uint32_t sh = lo16(a[VPOOL_SH_SW]), sw = hi16(a[VPOOL_SH_SW]);
  uint32_t dh = lo16(a[VPOOL_DH_DW]), dw = hi16(a[VPOOL_DH_DW]);
  uint32_t pt = lo16(a[VPOOL_PT_PL]), pl = hi16(a[VPOOL_PT_PL]);
  uint32_t vh = lo16(a[VPOOL_VH_VW]), vw = hi16(a[VPOOL_VH_VW]);
  uint32_t src_addr = a[VPOOL_SRC], dst_addr = a[VPOOL_DST];
  bool avg = in->flags & FLAG_POOL_AVG, include_pad = in->flags & FLAG_COUNT_INCLUDE_PAD;
  CHECK(check_sram(x, "src", src_addr, (u128)c * hi * wi * elem, elem));
  CHECK(check_sram(x, "dst", dst_addr, (u128)c * ho * wo * elem, elem));

  size_t plane = (size_t)hi * wi;
  float* sp = scratch(x, SCRATCH_A, (u128)plane * 4);
  float* acc = scratch(x, SCRATCH_B, (u128)wo * 4);
  float* col_count = scratch(x, SCRATCH_C, (u128)wo * 4);
  if (!sp || !acc || !col_count) return out_of_memory(x, (u128)plane * 4);
  for (size_t xo = 0; xo < wo; xo++) {
    col_count[xo] = include_pad ? (float)kw : (float)valid_taps(xo, sw, kw, dw, pl, vw);
  }
  uint8_t* sram = x->core->sram;
  for (size_t ch = 0; ch < c; ch++) {
    load_f32(dt, sram + src_addr + ch * plane * elem, 1, plane, sp);
    for (size_t y = 0; y < ho; y++) {
      float init = avg ? 0.0f : -INFINITY;
      for (size_t xo = 0; xo < wo; xo++) acc[xo] = init;
      for (size_t ky = 0; ky < kh; ky++) {
        const float* row = sp + (y * sh + ky * dh) * wi;
        for (size_t kx = 0; kx < kw; kx++) pool_tap(avg, acc, row + kx * dw, wo, sw);
      }
      if (avg) {
        float rows = include_pad ? (float)kh : (float)valid_taps(y, sh, kh, dh, pt, vh);
        for (size_t xo = 0; xo < wo; xo++) {
          float count = rows * col_count[xo];
          acc[xo] = count > 0 ? acc[xo] / count : 0.0f;
        }
      }
      store_f32(dt, sram + dst_addr + (ch * ho + y) * wo * elem, 1, wo, acc);
      if (stopping_elements((size_t)wo * kh * kw)) return NPU_STATUS_OK;
    }
  }
  return NPU_STATUS_OK;
}

#define REDUCE_LANES 16

int exec_vreduce(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  int dt = in->dtype;
  unsigned elem = DTYPE_BYTES[dt];
  uint32_t outer = a[VREDUCE_OUTER], inner = a[VREDUCE_INNER];
  uint32_t src_addr = a[VREDUCE_SRC], dst_addr = a[VREDUCE_DST];
  bool max = in->flags & FLAG_REDUCE_MAX, mean = in->flags & FLAG_REDUCE_MEAN;
  CHECK(check_sram(x, "src", src_addr, (u128)outer * inner * elem, elem));
  CHECK(check_sram(x, "dst", dst_addr, (u128)outer * elem, elem));
  uint8_t* sram = x->core->sram;
  float v[CHUNK];
  for (size_t o = 0; o < outer; o++) {
    const uint8_t* row = sram + src_addr + o * inner * elem;
    float lanes[REDUCE_LANES];
    for (int l = 0; l < REDUCE_LANES; l++) lanes[l] = max ? -INFINITY : 0.0f;
    for (size_t j = 0; j < inner; j += CHUNK) {
      size_t len = inner - j < CHUNK ? inner - j : CHUNK;
      load_f32(dt, row + j * elem, 1, len, v);
      size_t padded = (len + REDUCE_LANES - 1) / REDUCE_LANES * REDUCE_LANES;
      for (size_t i = len; i < padded; i++) v[i] = max ? -INFINITY : 0.0f;
      for (size_t i = 0; i < padded; i += REDUCE_LANES) {
        for (int l = 0; l < REDUCE_LANES; l++) {
          lanes[l] = max ? NPU_MAX(lanes[l], v[i + l]) : lanes[l] + v[i + l];
        }
      }
    }
    float result = lanes[0];
    for (int l = 1; l < REDUCE_LANES; l++) {
      result = max ? NPU_MAX(result, lanes[l]) : result + lanes[l];
    }
    if (mean) result /= (float)inner;
    store_f32(dt, sram + dst_addr + o * elem, 1, 1, &result);
    if (stopping_elements(inner)) return NPU_STATUS_OK;
  }
  return NPU_STATUS_OK;
}
