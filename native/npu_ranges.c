/* Operand range checks (npu_ranges.h). */
#include "npu_ranges.h"

#include "npu_deferred.h"

u128 box_extent(const uint32_t* counts, const uint32_t* strides, int dims,
                unsigned elem) {
  u128 span = 1;
  for (int d = 0; d < dims; d++) span += (u128)(counts[d] - 1) * strides[d];
  return span * elem;
}

int check_sram_bounds(exec_t* x, const char* operand, uint32_t addr, u128 extent,
                      unsigned align) {
  if (addr % align) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "%s SRAM address %u is not aligned to %u bytes", operand, addr, align);
  }
  if (extent == 0) return NPU_STATUS_OK;      /* an absent operand (bias without BIAS) */
  u128 end = (u128)addr + extent;
  if (end > x->core->config.sram_bytes) {
    return fail(x, NPU_STATUS_OUT_OF_RANGE, "%s SRAM range [%u, %s) exceeds sram_bytes %llu",
                operand, addr, num(end).s, (unsigned long long)x->core->config.sram_bytes);
  }
  if (end > x->stats->sram_peak_bytes) x->stats->sram_peak_bytes = (uint64_t)end;
  return NPU_STATUS_OK;
}

int check_sram(exec_t* x, const char* operand, uint32_t addr, u128 extent,
               unsigned align) {
  CHECK(check_sram_bounds(x, operand, addr, extent, align));
  land_sram(x, addr, extent);
  return NPU_STATUS_OK;
}

int check_sram_input(exec_t* x, const char* operand, uint32_t addr, u128 extent,
                     unsigned align, size_t rows, size_t row_bytes, size_t stride,
                     const uint8_t** at, size_t* at_stride) {
  CHECK(check_sram_bounds(x, operand, addr, extent, align));
  *at = extent ? deferred_source(x, addr, rows, row_bytes, stride, at_stride) : NULL;
  if (!*at) {
    land_sram(x, addr, extent);
    *at = x->core->sram + addr;
    *at_stride = stride;
  }
  return NPU_STATUS_OK;
}

int check_disjoint(exec_t* x, const char* out_name, uint32_t out, u128 out_extent,
                   const char* in_name, uint32_t in, u128 in_extent) {
  if (out_extent == 0 || in_extent == 0) return NPU_STATUS_OK;
  if ((u128)out < in + in_extent && (u128)in < out + out_extent) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "%s SRAM range [%u, %s) overlaps %s SRAM range [%u, %s)", out_name, out,
                num(out + out_extent).s, in_name, in, num(in + in_extent).s);
  }
  return NPU_STATUS_OK;
}

int check_dram(exec_t* x, uint32_t binding, uint32_t offset, u128 extent,
               unsigned elem, bool store, uint8_t** out) {
  uint8_t* base;
  size_t length;
  if (binding == NPU_CONST_POOL_BINDING) {
    if (store) {
      return fail(x, NPU_STATUS_INVALID_ARGUMENT, "the constant pool is read-only");
    }
    base = (uint8_t*)x->const_pool;
    length = x->const_pool_bytes;
  } else if (binding >= x->binding_count) {
    return fail(x, NPU_STATUS_OUT_OF_RANGE, "binding %u out of range (%zu bindings)",
                binding, x->binding_count);
  } else {
    base = x->bindings[binding].data;
    length = x->bindings[binding].length;
  }
  if (offset % elem) {
    return fail(x, NPU_STATUS_INVALID_ARGUMENT,
                "DRAM offset %u is not aligned to %u bytes", offset, elem);
  }
  if ((u128)offset + extent > length) {
    if (binding == NPU_CONST_POOL_BINDING) {
      return fail(x, NPU_STATUS_OUT_OF_RANGE,
                  "DRAM range [%u, %s) exceeds the constant pool length %zu", offset,
                  num((u128)offset + extent).s, length);
    }
    return fail(x, NPU_STATUS_OUT_OF_RANGE, "DRAM range [%u, %s) exceeds binding %u length %zu",
                offset, num((u128)offset + extent).s, binding, length);
  }
  *out = base + offset;
  return NPU_STATUS_OK;
}
