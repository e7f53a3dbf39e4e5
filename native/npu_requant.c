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

/* The record's steps over q[0..n) (the header's, from v to the clamped q), each step a
 * loop of its own that the compiler vectorizes: one IEEE f32 operation per element and
 * step, as the chain of arith ops, so the same bits at any vector width. */
static void requantize_run(const record_t* r, unsigned flags, float* restrict q, size_t n) {
  const float mul = r->mul, fma_mul = r->fma_mul, fma_add = r->fma_add, div = r->div;
  const float lo = r->lo, hi = r->hi;
  for (size_t i = 0; i < n; i++) q[i] = fmaf(q[i] * mul, fma_mul, fma_add) / div;
  if (flags & FLAG_ROUND_FLOOR) {
    for (size_t i = 0; i < n; i++) q[i] = floorf(q[i]);
  } else if (flags & FLAG_ROUND_CEIL) {
    for (size_t i = 0; i < n; i++) q[i] = ceilf(q[i]);
  } else if (flags & FLAG_ROUND_HALF_AWAY) {
    for (size_t i = 0; i < n; i++) q[i] = roundf(q[i]);
  } else {
    for (size_t i = 0; i < n; i++) q[i] = nearbyintf(q[i]);
  }
  for (size_t i = 0; i < n; i++) q[i] = clamped(q[i], lo, hi);
}

#define ROW_RUN 256   /* elements a row loop requantizes at a time */

/* One row of n elements under a single record (the params' innermost stride is 0: a
 * record per row, channel or tensor), the source kind and the element size fixed for
 * the loop: the common case, without the general loop's per-element record check and
 * variable-size copy; runs of ROW_RUN elements loaded, requantized (requantize_run)
 * and looked up. */
#define REQUANT_ROW(NAME, SRC_T, LOAD, DST_T)                                            \
  static void NAME(const record_t* r, unsigned flags, const uint8_t* s, uint64_t s_step,  \
                   uint8_t* d, uint64_t d_step, uint64_t n) {                             \
    const record_t rec = *r;  /* in registers: the stores below could alias *r */         \
    const DST_T* table = (const DST_T*)(const void*)rec.table;                            \
    float q[ROW_RUN];                                                                     \
    uint32_t index[ROW_RUN];                                                              \
    DST_T out[ROW_RUN];                                                                   \
    for (uint64_t start = 0; start < n; start += ROW_RUN) {                               \
      size_t len = n - start < ROW_RUN ? (size_t)(n - start) : ROW_RUN;                   \
      const uint8_t* run = s + start * s_step;                                            \
      if (s_step == sizeof(SRC_T)) {  /* dense: loads the compiler vectorizes */          \
        for (size_t i = 0; i < len; i++) {                                                \
          SRC_T raw;                                                                      \
          memcpy(&raw, run + i * sizeof(SRC_T), sizeof raw);                              \
          q[i] = LOAD;                                                                    \
        }                                                                                 \
      } else {                                                                            \
        for (size_t i = 0; i < len; i++) {                                                \
          SRC_T raw;                                                                      \
          memcpy(&raw, run + i * s_step, sizeof raw);                                     \
          q[i] = LOAD;                                                                    \
        }                                                                                 \
      }                                                                                   \
      requantize_run(&rec, flags, q, len);                                                \
      for (size_t i = 0; i < len; i++) index[i] = (uint32_t)(q[i] - rec.lo);              \
      for (size_t i = 0; i < len; i++) out[i] = table[index[i]];                          \
      if (d_step == sizeof(DST_T)) {                                                      \
        memcpy(d + start * d_step, out, len * sizeof(DST_T));                             \
      } else {                                                                            \
        for (size_t i = 0; i < len; i++) {                                                \
          memcpy(d + (start + i) * d_step, &out[i], sizeof(DST_T));                       \
        }                                                                                 \
      }                                                                                   \
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
  /* Records that vary along the row alone (par_s0 = par_s1 = 0: a matmul tile with the
   * channel along its columns), the same for every row: decoded and checked once. */
  record_t* columns = NULL;
  if (par_s[2] != 0 && par_s[0] == 0 && par_s[1] == 0 && counts[2] > 0) {
    columns = scratch(x, SCRATCH_A, (u128)counts[2] * sizeof(record_t));
    if (!columns) return out_of_memory(x, (u128)counts[2] * sizeof(record_t));
    for (uint64_t i2 = 0; i2 < counts[2]; i2++) {
      CHECK(read_record(x, a[VREQUANT_PARAMS], i2 * par_s[2], in->dtype, &columns[i2]));
    }
  }
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
        const record_t* record = &r;
        if (columns != NULL) {
          record = &columns[i2];
        } else if (row + i2 * par_s[2] != current) {
          current = row + i2 * par_s[2];
          CHECK(read_record(x, a[VREQUANT_PARAMS], current, in->dtype, &r));
        }
        float q = source_value(record, in->flags, s + i2 * src_s[2] * src_elem);
        requantize_run(record, in->flags, &q, 1);
        memcpy(d + i2 * dst_s[2] * elem, record->table + (size_t)(q - record->lo) * elem,
               elem);
      }
      if (stopping_elements(counts[2])) return NPU_STATUS_OK;
    }
  }
  return NPU_STATUS_OK;
}
