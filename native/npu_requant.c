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

/* The source element at p as the f32 the record's steps start from: an integer less
 * the record's zero (i32 wrapping, then rounded to f32), or an f32 source as it is. */
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
  return (float)(int32_t)((uint32_t)s - (uint32_t)r->zero);
}

static float requantize(const record_t* r, unsigned flags, float v) {
  v = v * r->mul;
  v = fmaf(v, r->fma_mul, r->fma_add);
  v = v / r->div;
  return fminf(fmaxf(round_as(flags, v), r->lo), r->hi);   /* maxnumf: NaN gives lo */
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
  for (uint64_t i0 = 0; i0 < counts[0]; i0++) {
    for (uint64_t i1 = 0; i1 < counts[1]; i1++) {
      uint8_t* d = sram + a[VREQUANT_DST] + (i0 * dst_s[0] + i1 * dst_s[1]) * elem;
      const uint8_t* s = sram + a[VREQUANT_SRC] + (i0 * src_s[0] + i1 * src_s[1]) * src_elem;
      uint64_t row = i0 * par_s[0] + i1 * par_s[1];
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
