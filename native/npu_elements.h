/* Elements: f16/bf16 <-> f32 conversions (round to nearest even), NaN-propagating
 * max/min, and strided rows of SRAM or DRAM elements loaded into and stored from f32 or
 * i32 chunks, or copied. Inline: the DMA, MAC and vector kernels' inner loops use them. */
#ifndef NPU_ELEMENTS_H_
#define NPU_ELEMENTS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "npu_isa.h"
#include "npu_stop.h"

/* ---- float conversions (round to nearest even) -------------------------- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  float magnitude;
  if (exp == 0) {
    magnitude = (float)mant * 0x1p-24f;                       /* zero, subnormal */
  } else if (exp == 31) {
    magnitude = bits_f32(0x7F800000u | (mant << 13));        /* inf, nan */
  } else {
    magnitude = bits_f32(((exp + 112u) << 23) | (mant << 13));
  }
  return bits_f32(f32_bits(magnitude) | sign);
}

static inline uint16_t f32_to_f16(float value) {
  uint32_t f = f32_bits(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  f &= 0x7FFFFFFFu;
  uint32_t h;
  if (f > 0x7F800000u) {
    h = 0x7E00u | ((f >> 13) & 0x3FFu);                     /* nan stays nan */
  } else if (f >= 0x477FF000u) {
    h = 0x7C00u;                                             /* rounds to inf */
  } else if (f < 0x38800000u) {
    /* subnormal or zero: let the FPU round the magnitude onto the 2^-24 grid */
    h = f32_bits(bits_f32(f) + 0.5f) - f32_bits(0.5f);
  } else {
    uint32_t odd = (f >> 13) & 1u;
    h = (f + 0xC8000FFFu + odd) >> 13;                       /* rebias: -112 << 23 */
  }
  return (uint16_t)(h | sign);
}

static inline float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

static inline uint16_t f32_to_bf16(float value) {
  uint32_t f = f32_bits(value);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((f >> 16) | 0x40u);
  return (uint16_t)((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

/* NaN-propagating max/min (numpy maximum/minimum): x if it is NaN, else the larger
 * (smaller), y when they are unordered. Written as two selects, which GCC vectorizes
 * (compares and blends) also when nested, as in the exponential unit's clamps. */
#define NPU_MAX(x, y) (__builtin_isnan(x) ? (x) : (x) >= (y) ? (x) : (y))
#define NPU_MIN(x, y) (__builtin_isnan(x) ? (x) : (x) <= (y) ? (x) : (y))

/* ---- strided row loads/stores between SRAM/DRAM and f32/i32 chunks ------ */

static inline void load_f32(int dtype, const uint8_t* base, size_t stride, size_t n,
                            float* restrict out) {
  if (dtype == DT_F32) {
    if (stride == 1) {
      memcpy(out, base, n * 4);
    } else if (stride == 0) {      /* a broadcast operand: one value (a per-row bias) */
      float v;
      memcpy(&v, base, 4);
      for (size_t i = 0; i < n; i++) out[i] = v;
    } else {
      const float* src = (const float*)base;
      for (size_t i = 0; i < n; i++) out[i] = src[i * stride];
    }
  } else {
    const uint16_t* src = (const uint16_t*)base;
    if (dtype == DT_F16) {
      for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(src[i * stride]);
    } else {
      for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(src[i * stride]);
    }
  }
}

static inline void store_f32(int dtype, uint8_t* base, size_t stride, size_t n,
                             const float* restrict in) {
  if (dtype == DT_F32) {
    if (stride == 1) {
      memmove(base, in, n * 4);
    } else {
      float* dst = (float*)base;
      for (size_t i = 0; i < n; i++) dst[i * stride] = in[i];
    }
  } else {
    uint16_t* dst = (uint16_t*)base;
    if (dtype == DT_F16) {
      for (size_t i = 0; i < n; i++) dst[i * stride] = f32_to_f16(in[i]);
    } else {
      for (size_t i = 0; i < n; i++) dst[i * stride] = f32_to_bf16(in[i]);
    }
  }
}

/* i8, u8 or i32 elements to i32. */
static inline void load_i32(int dtype, const uint8_t* base, size_t stride, size_t n,
                            int32_t* restrict out) {
  if (dtype == DT_I32) {
    const int32_t* src = (const int32_t*)base;
    if (stride == 1) {
      memcpy(out, src, n * 4);
    } else if (stride == 0) {
      for (size_t i = 0; i < n; i++) out[i] = src[0];
    } else {
      for (size_t i = 0; i < n; i++) out[i] = src[i * stride];
    }
  } else if (dtype == DT_U8) {
    for (size_t i = 0; i < n; i++) out[i] = base[i * stride];
  } else {
    const int8_t* src = (const int8_t*)base;
    for (size_t i = 0; i < n; i++) out[i] = src[i * stride];
  }
}

static inline void store_i32(uint8_t* base, size_t stride, size_t n, const int32_t* restrict in) {
  int32_t* dst = (int32_t*)base;
  for (size_t i = 0; i < n; i++) dst[i * stride] = in[i];
}

/* Element copy of n elements with element strides (bytes may be unaligned: DRAM). */
static inline void copy_run(uint8_t* dst, size_t dst_stride, const uint8_t* src,
                            size_t src_stride, size_t n, unsigned elem) {
  if (dst_stride == 1 && src_stride == 1) {
    memmove(dst, src, n * elem);
    return;
  }
  size_t ds = dst_stride * elem, ss = src_stride * elem;
  switch (elem) {
    case 1:
      for (size_t i = 0; i < n; i++) dst[i * ds] = src[i * ss];
      break;
    case 2:
      for (size_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 2);
      break;
    default:
      for (size_t i = 0; i < n; i++) memcpy(dst + i * ds, src + i * ss, 4);
      break;
  }
}

/* copy_run over a long row in pieces of RUN_PIECE elements, polling stopping() after
 * each; false when the run stops. A contiguous run on both sides is one memmove (a
 * piecewise copy would change the result of overlapping ranges; it is at most the SRAM
 * size). */
static inline bool copy_run_polled(uint8_t* dst, size_t dst_stride, const uint8_t* src,
                                   size_t src_stride, size_t n, unsigned elem) {
  if (dst_stride == 1 && src_stride == 1) {
    copy_run(dst, 1, src, 1, n, elem);
    return !stopping_elements(n);
  }
  for (size_t i = 0; i < n; i += RUN_PIECE) {
    size_t len = n - i < RUN_PIECE ? n - i : RUN_PIECE;
    copy_run(dst + i * dst_stride * elem, dst_stride, src + i * src_stride * elem, src_stride,
             len, elem);
    if (stopping_elements(len)) return false;
  }
  return true;
}

#endif /* NPU_ELEMENTS_H_ */
