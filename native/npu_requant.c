/* vrequant: the vector unit's requantization of an i32 box through per-channel records
 * (docs/npu-architecture.md). Per element, with the record r of its channel:
 *   v = (f32)(src - r.zero)            i32 difference (wrapping), rounded to f32
 *   v = v * r.mul                      one f32 rounding
 *   v = fmaf(v, r.fma_mul, r.fma_add)  one rounding
 *   v = v / r.div                      one rounding
 *   q = clamp(round(v), r.lo, r.hi)    the flags' rounding (vround's), then
 *                                      maxnumf/minnumf (a NaN becomes lo)
 *   dst = table[q - r.lo]              the record's table of hi - lo + 1 dtype elements
 * The source is i32, or with flag SRC_I8/SRC_U8 bytes widened to i32, or with SRC_F32
 * f32 values v that the steps start from (no zero point: a quantize of a float tensor).
 * Each step is one IEEE f32 operation, so a chain of arith ops with these roundings (a
 * quantized epilogue up to its first rounding to an integer) gives the same bits; the
 * table holds the rest of the epilogue as a function of q. */
#include <math.h>
#include <string.h>

#include "npu_deferred.h"
#include "npu_elements.h"
#include "npu_kernels.h"
#include "npu_ranges.h"

typedef struct record_t {
  int32_t zero;
  float mul, fma_mul, fma_add, div, lo, hi;
  const uint8_t* table;
} record_t;

static float round_as(unsigned flags, float x) {
  if (flags & FLAG_ROUND_FLOOR) return floorf(x);
  if (flags & FLAG_ROUND_CEIL) return ceilf(x);
  if (flags & FLAG_ROUND_HALF_AWAY) return roundf(x);
  return nearbyintf(x);
}

static uint32_t word(const uint8_t* p, int i) {
  uint32_t v;
  memcpy(&v, p + 4 * i, 4);
  return v;
}

/* Decodes record `index` (its bytes are in SRAM: the params box was checked) and checks
 * its bounds and its table's range: data, so at run time only ("record N: ..."). */
static int read_record(exec_t* x, uint32_t params, uint64_t index, int dtype, record_t* r) {
  const uint8_t* p = x->core->sram + params + index * REQUANT_RECORD_BYTES;
  r->zero = (int32_t)word(p, 0);
  r->mul = bits_f32(word(p, 1)), r->fma_mul = bits_f32(word(p, 2));
  r->fma_add = bits_f32(word(p, 3)), r->div = bits_f32(word(p, 4));
  r->lo = bits_f32(word(p, 5)), r->hi = bits_f32(word(p, 6));
  uint32_t table = word(p, 7);
  if (!(r->lo == floorf(r->lo) && r->hi == floorf(r->hi) && isfinite(r->lo) &&
        isfinite(r->hi) && r->lo <= r->hi && r->hi - r->lo < REQUANT_TABLE_MAX)) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "record %llu: bounds [%g, %g] are not integers lo <= hi with at most %d "
                "values", (unsigned long long)index, r->lo, r->hi, REQUANT_TABLE_MAX);
  }
  unsigned elem = DTYPE_BYTES[dtype];
  uint64_t end = table + ((uint64_t)(r->hi - r->lo) + 1) * elem;
  if (end > x->core->config.sram_bytes || table % elem) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "record %llu: table [0x%x, 0x%llx) is not %u-byte aligned within SRAM (%llu "
                "bytes)", (unsigned long long)index, table, (unsigned long long)end, elem,
                (unsigned long long)x->core->config.sram_bytes);
  }
  land_sram(x, table, end - table);
  r->table = x->core->sram + table;
  return NPU_STATUS_OK;
}

/* An integer source element less the record's zero: i32 wrapping, then rounded to f32. */
static inline float less_zero(int32_t s, int32_t zero) {
  return (float)(int32_t)((uint32_t)s - (uint32_t)zero);
}

/* The source element at p as the f32 the record's steps start from: an integer less
 * the record's zero (less_zero), or an f32 source as it is. */
static float source_value(const record_t* r, unsigned flags, const uint8_t* p) {
  int32_t s;
  if (flags & FLAG_SRC_F32) {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  if (flags & FLAG_SRC_I8) {
    s = (int8_t)*p;
  } else if (flags & FLAG_SRC_U8) {
    s = *p;
  } else {
    memcpy(&s, p, 4);
  }
  return less_zero(s, r->zero);
}

/* fmaxf(v, lo) then fminf(v, hi) as comparisons, which the compiler keeps inline (the
 * libm calls cost more than the rest of an element): a NaN gives lo, as maxnumf; a zero
 * of either sign indexes the same table entry. */
static inline float clamped(float v, float lo, float hi) {
  v = v > lo ? v : lo;
  return v < hi ? v : hi;
}

static inline float requantize(const record_t* r, unsigned flags, float v) {
  v = v * r->mul;
  v = fmaf(v, r->fma_mul, r->fma_add);
  v = v / r->div;
  return clamped(round_as(flags, v), r->lo, r->hi);
}

/* One row of n elements under a single record (the params' innermost stride is 0: a
 * record per row, channel or tensor), the source kind and the element size fixed for
 * the loop: the common case, without the general loop's per-element record check and
 * variable-size copy. */
#define REQUANT_ROW(NAME, SRC_T, LOAD, DST_T)                                            \
  static void NAME(const record_t* r, unsigned flags, const uint8_t* s, uint64_t s_step,  \
                   uint8_t* d, uint64_t d_step, uint64_t n) {                             \
    const record_t rec = *r;  /* in registers: the stores below could alias *r */         \
    const DST_T* table = (const DST_T*)(const void*)rec.table;                            \
    for (uint64_t i = 0; i < n; i++) {                                                    \
      SRC_T raw;                                                                          \
      memcpy(&raw, s + i * s_step, sizeof raw);                                           \
      float q = requantize(&rec, flags, LOAD);                                            \
      DST_T out = table[(size_t)(q - rec.lo)];                                            \
      memcpy(d + i * d_step, &out, sizeof out);                                           \
    }                                                                                     \
  }
#define FROM_INT(x) less_zero((int32_t)(x), rec.zero)
#define REQUANT_ROWS(DST_T, SUFFIX)                                                       \
  REQUANT_ROW(row_i32_##SUFFIX, int32_t, FROM_INT(raw), DST_T)                            \
  REQUANT_ROW(row_i8_##SUFFIX, int8_t, FROM_INT(raw), DST_T)                              \
  REQUANT_ROW(row_u8_##SUFFIX, uint8_t, FROM_INT(raw), DST_T)                             \
  REQUANT_ROW(row_f32_##SUFFIX, float, raw, DST_T)
REQUANT_ROWS(uint8_t, 1)
REQUANT_ROWS(uint16_t, 2)
REQUANT_ROWS(uint32_t, 4)

typedef void (*requant_row_fn)(const record_t*, unsigned, const uint8_t*, uint64_t, uint8_t*,
                               uint64_t, uint64_t);

/* The row loop for the instruction's source kind and element size (NULL: none). */
static requant_row_fn row_loop(unsigned flags, unsigned elem) {
  static const requant_row_fn loops[4][3] = {
      {row_i32_1, row_i32_2, row_i32_4}, {row_i8_1, row_i8_2, row_i8_4},
      {row_u8_1, row_u8_2, row_u8_4}, {row_f32_1, row_f32_2, row_f32_4}};
  int kind = flags & FLAG_SRC_F32 ? 3 : flags & FLAG_SRC_I8 ? 1 : flags & FLAG_SRC_U8 ? 2 : 0;
  int size = elem == 1 ? 0 : elem == 2 ? 1 : elem == 4 ? 2 : -1;
  return size < 0 ? NULL : loops[kind][size];
}

int exec_vrequant(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  const uint32_t* counts = a + VREQUANT_N0;
  const uint32_t* dst_s = a + VREQUANT_DST_S0;
  const uint32_t* src_s = a + VREQUANT_SRC_S0;
  const uint32_t* par_s = a + VREQUANT_PAR_S0;
  unsigned elem = DTYPE_BYTES[in->dtype];
  unsigned src_elem = requant_src_bytes(in->flags);
  CHECK(check_sram(x, "dst", a[VREQUANT_DST], box_extent(counts, dst_s, 3, elem), elem));
  CHECK(check_sram(x, "src", a[VREQUANT_SRC],
                   box_extent(counts, src_s, 3, src_elem), src_elem));
  CHECK(check_sram(x, "params", a[VREQUANT_PARAMS],
                   box_extent(counts, par_s, 3, REQUANT_RECORD_BYTES), 4));
  uint8_t* sram = x->core->sram;
  record_t r = {0};
  uint64_t current = UINT64_MAX;
  requant_row_fn loop = par_s[2] == 0 ? row_loop(in->flags, elem) : NULL;
  for (uint64_t i0 = 0; i0 < counts[0]; i0++) {
    for (uint64_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* d = sram + a[VREQUANT_DST] + (i0 * dst_s[0] + i1 * dst_s[1]) * elem;
      const uint8_t* s = sram + a[VREQUANT_SRC] + (i0 * src_s[0] + i1 * src_s[1]) * src_elem;
      uint64_t row = i0 * par_s[0] + i1 * par_s[1];
      if (loop != NULL && counts[2] > 0) {
        if (row != current) {
          CHECK(read_record(x, a[VREQUANT_PARAMS], row, in->dtype, &r));
          current = row;
        }
        loop(&r, in->flags, s, (uint64_t)src_s[2] * src_elem, d, (uint64_t)dst_s[2] * elem,
             counts[2]);
        if (stopping_elements(counts[2])) return NPU_STATUS_OK;
        continue;
      }
      for (uint64_t i2 = 0; i2 < counts[2]; i2++) {
        uint64_t index = row + i2 * par_s[2];
        if (index != current) {
          CHECK(read_record(x, a[VREQUANT_PARAMS], index, in->dtype, &r));
          current = index;
        }
        float v = source_value(&r, in->flags, s + i2 * src_s[2] * src_elem);
        float q = requantize(&r, in->flags, v);
        memcpy(d + i2 * dst_s[2] * elem, r.table + (size_t)(q - r.lo) * elem, elem);
      }
      if (stopping_elements(counts[2])) return NPU_STATUS_OK;
    }
  }
  return NPU_STATUS_OK;
}
