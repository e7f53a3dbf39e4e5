/* Deferred DMA loads (npu_deferred.h). */
#include "npu_deferred.h"

#include <string.h>

static bool overlaps(u128 a, u128 a_len, u128 b, u128 b_len) {
  return a < b + b_len && b < a + a_len;
}

static void land(exec_t* x, size_t i) {
  deferred_load_t* d = &x->deferred[i];
  memcpy(x->core->sram + d->addr, d->src, d->bytes);
  x->deferred[i] = x->deferred[--x->deferred_count];
}

static void drop(exec_t* x, size_t i) {
  x->deferred[i] = x->deferred[--x->deferred_count];
}

void land_sram(exec_t* x, uint32_t addr, u128 extent) {
  for (size_t i = x->deferred_count; i-- > 0;) {
    if (overlaps(x->deferred[i].addr, x->deferred[i].bytes, addr, extent)) land(x, i);
  }
}

void land_dram(exec_t* x, const uint8_t* p, u128 bytes) {
  for (size_t i = x->deferred_count; i-- > 0;) {
    const deferred_load_t* d = &x->deferred[i];
    if (overlaps((uintptr_t)d->src, d->bytes, (uintptr_t)p, bytes)) land(x, i);
  }
}

void land_all(exec_t* x) {
  while (x->deferred_count) land(x, x->deferred_count - 1);
}

void defer_load(exec_t* x, uint32_t addr, const uint8_t* src, size_t bytes) {
  for (size_t i = x->deferred_count; i-- > 0;) {
    const deferred_load_t* d = &x->deferred[i];
    if (d->addr >= addr && (u128)d->addr + d->bytes <= (u128)addr + bytes) {
      drop(x, i);
    } else if (overlaps(d->addr, d->bytes, addr, bytes)) {
      land(x, i);
    }
  }
  if (x->deferred_count == DEFERRED_LOADS) land(x, 0);
  x->deferred[x->deferred_count++] = (deferred_load_t){addr, bytes, src};
}

const uint8_t* deferred_source(const exec_t* x, uint32_t addr, u128 extent) {
  for (size_t i = 0; i < x->deferred_count; i++) {
    const deferred_load_t* d = &x->deferred[i];
    if (addr >= d->addr && (u128)addr + extent <= (u128)d->addr + d->bytes) {
      return d->src + (addr - d->addr);
    }
  }
  return NULL;
}
