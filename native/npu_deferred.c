/* Deferred DMA loads (npu_deferred.h). */
#include "npu_deferred.h"

#include <string.h>

static bool overlaps(u128 a, u128 a_len, u128 b, u128 b_len) {
  return a < b + b_len && b < a + a_len;
}

/* Bytes from a load's first row to the end of its last, in SRAM and in DRAM. */
static u128 sram_span(const deferred_load_t* d) {
  return (u128)(d->rows - 1) * d->sram_stride + d->row_bytes;
}

static u128 dram_span(const deferred_load_t* d) {
  return (u128)(d->rows - 1) * d->dram_stride + d->row_bytes;
}

static void land(exec_t* x, size_t i) {
  deferred_load_t* d = &x->deferred[i];
  for (size_t r = 0; r < d->rows; r++) {
    memcpy(x->core->sram + d->addr + r * d->sram_stride, d->src + r * d->dram_stride,
           d->row_bytes);
  }
  x->deferred[i] = x->deferred[--x->deferred_count];
}

static void drop(exec_t* x, size_t i) {
  x->deferred[i] = x->deferred[--x->deferred_count];
}

void land_sram(exec_t* x, uint32_t addr, u128 extent) {
  for (size_t i = x->deferred_count; i-- > 0;) {
    const deferred_load_t* d = &x->deferred[i];
    if (overlaps(d->addr, sram_span(d), addr, extent)) land(x, i);
  }
}

void land_dram(exec_t* x, const uint8_t* p, u128 bytes) {
  for (size_t i = x->deferred_count; i-- > 0;) {
    const deferred_load_t* d = &x->deferred[i];
    if (overlaps((uintptr_t)d->src, dram_span(d), (uintptr_t)p, bytes)) land(x, i);
  }
}

void land_all(exec_t* x) {
  while (x->deferred_count) land(x, x->deferred_count - 1);
}

void defer_load(exec_t* x, deferred_load_t load) {
  u128 span = sram_span(&load);
  bool contiguous = load.rows == 1 || load.sram_stride == load.row_bytes;   /* in SRAM */
  for (size_t i = x->deferred_count; i-- > 0;) {
    const deferred_load_t* d = &x->deferred[i];
    if (contiguous && d->addr >= load.addr &&
        (u128)d->addr + sram_span(d) <= (u128)load.addr + span) {
      drop(x, i);
    } else if (overlaps(d->addr, sram_span(d), load.addr, span)) {
      land(x, i);
    }
  }
  if (x->deferred_count == DEFERRED_LOADS) land(x, 0);
  x->deferred[x->deferred_count++] = load;
}

const uint8_t* deferred_source(const exec_t* x, uint32_t addr, size_t rows, size_t row_bytes,
                               size_t stride, size_t* dram_stride) {
  for (size_t i = 0; i < x->deferred_count; i++) {
    const deferred_load_t* d = &x->deferred[i];
    if (addr < d->addr) continue;
    size_t offset = addr - d->addr;
    if (d->rows == 1) {              /* one run: any layout inside it */
      if ((u128)offset + (u128)(rows - 1) * stride + row_bytes <= d->row_bytes) {
        *dram_stride = stride;
        return d->src + offset;
      }
      continue;
    }
    size_t row = offset / d->sram_stride, column = offset % d->sram_stride;
    if (column + row_bytes <= d->row_bytes && (rows == 1 || stride == d->sram_stride) &&
        (u128)row + rows <= d->rows) {
      *dram_stride = rows == 1 ? stride : d->dram_stride;
      return d->src + row * d->dram_stride + column;
    }
  }
  return NULL;
}
