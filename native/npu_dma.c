/* The DMA engines' instructions: dma.load and dma.store (strided 4-D boxes between DRAM
 * and SRAM) and fill (an SRAM box set to a value). */
#include "npu_deferred.h"
#include "npu_elements.h"
#include "npu_kernels.h"
#include "npu_ranges.h"

/* The dims of a 4-D box, innermost first, that are one run of elements on both sides
 * (each stride the product of the counts inside it; a dimension of count 1 has any
 * stride): their count in *dense and the run's length in *run. */
static void dense_run(const uint32_t* counts, const uint32_t* dram_s, const uint32_t* sram_s,
                      int* dense, uint64_t* run) {
  *run = 1;
  int d = 3;
  for (; d >= 0; d--) {
    if (counts[d] != 1 && (dram_s[d] != *run || sram_s[d] != *run)) break;
    *run *= counts[d];
  }
  *dense = 3 - d;
}

/* A dma.load as rows of contiguous bytes (npu_deferred.h), if it is one: a run of
 * dense dims, then at most one dim of count above 1 whose rows do not overlap in
 * SRAM. */
static bool load_rows(const uint32_t* counts, const uint32_t* dram_s, const uint32_t* sram_s,
                      unsigned elem, deferred_load_t* load) {
  int dense;
  uint64_t run;
  dense_run(counts, dram_s, sram_s, &dense, &run);
  load->rows = 1, load->sram_stride = load->dram_stride = 0;
  for (int d = 3 - dense; d >= 0; d--) {
    if (counts[d] == 1) continue;
    if (load->rows != 1 || sram_s[d] < run) return false;
    load->rows = counts[d];
    load->sram_stride = (size_t)sram_s[d] * elem, load->dram_stride = (size_t)dram_s[d] * elem;
  }
  load->row_bytes = (size_t)run * elem;
  return true;
}

int exec_dma(exec_t* x, const instr_t* in, bool store) {
  const uint32_t* a = in->a;
  unsigned elem = DTYPE_BYTES[in->dtype];
  const uint32_t* counts = a + DMA_N0;          /* n0..n3 */
  const uint32_t* dram_s = a + DMA_DRAM_S0;     /* dram_s0..dram_s3 */
  const uint32_t* sram_s = a + DMA_SRAM_S0;     /* sram_s0..sram_s3 */
  uint8_t* dram = NULL;
  u128 dram_ext = box_extent(counts, dram_s, 4, elem);
  u128 sram_ext = box_extent(counts, sram_s, 4, elem);
  CHECK(check_dram(x, a[DMA_BINDING], a[DMA_DRAM_OFFSET], dram_ext, elem, store, &dram));
  if (store) {
    CHECK(check_sram(x, "sram", a[DMA_SRAM_ADDR], sram_ext, elem));
    land_dram(x, dram, dram_ext);
  } else {
    CHECK(check_sram_bounds(x, "sram", a[DMA_SRAM_ADDR], sram_ext, elem));
    deferred_load_t load = {.addr = a[DMA_SRAM_ADDR], .src = dram};
    if (load_rows(counts, dram_s, sram_s, elem, &load)) {
      defer_load(x, load);
      return NPU_STATUS_OK;
    }
    land_sram(x, a[DMA_SRAM_ADDR], sram_ext);
  }
  uint8_t* sram = x->core->sram + a[DMA_SRAM_ADDR];
  uint8_t* dst = store ? dram : sram;
  const uint8_t* src = store ? sram : dram;
  const uint32_t* ds = store ? dram_s : sram_s;
  const uint32_t* ss = store ? sram_s : dram_s;
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      for (size_t i2 = 0; i2 < counts[2]; i2++) {
        size_t d = (i0 * ds[0] + i1 * ds[1] + i2 * ds[2]) * elem;
        size_t s = (i0 * ss[0] + i1 * ss[1] + i2 * ss[2]) * elem;
        if (!copy_run_polled(dst + d, ds[3], src + s, ss[3], counts[3], elem)) {
          return NPU_STATUS_OK;     /* stopping: the caller reports why */
        }
      }
    }
  }
  return NPU_STATUS_OK;
}

static void fill_run(uint8_t* dst, size_t stride, size_t n, unsigned elem, uint32_t value) {
  switch (elem) {
    case 1:
      for (size_t i = 0; i < n; i++) dst[i * stride] = (uint8_t)value;
      break;
    case 2: {
      uint16_t* d = (uint16_t*)dst;
      for (size_t i = 0; i < n; i++) d[i * stride] = (uint16_t)value;
      break;
    }
    default: {
      uint32_t* d = (uint32_t*)dst;
      for (size_t i = 0; i < n; i++) d[i * stride] = value;
      break;
    }
  }
}

int exec_fill(exec_t* x, const instr_t* in) {
  const uint32_t* a = in->a;
  unsigned elem = DTYPE_BYTES[in->dtype];
  const uint32_t* counts = a + FILL_N0;     /* n0..n3 */
  const uint32_t* s = a + FILL_S0;          /* s0..s3 */
  CHECK(check_sram(x, "sram", a[FILL_SRAM_ADDR], box_extent(counts, s, 4, elem), elem));
  uint8_t* base = x->core->sram + a[FILL_SRAM_ADDR];
  uint32_t value = a[FILL_VALUE];
  if (in->flags & FLAG_PUSH_CONSTANT) value = x->constants[value];
  for (size_t i0 = 0; i0 < counts[0]; i0++) {
    for (size_t i1 = 0; i1 < counts[1]; i1++) {
      for (size_t i2 = 0; i2 < counts[2]; i2++) {
        size_t d = (i0 * s[0] + i1 * s[1] + i2 * s[2]) * elem;
        for (size_t i = 0; i < counts[3]; i += RUN_PIECE) {
          size_t len = counts[3] - i < RUN_PIECE ? counts[3] - i : RUN_PIECE;
          fill_run(base + d + i * s[3] * elem, s[3], len, elem, value);
          if (stopping_elements(len)) return NPU_STATUS_OK;
        }
      }
    }
  }
  return NPU_STATUS_OK;
}
