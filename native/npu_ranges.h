/* Operand ranges, checked once per instruction before it runs: SRAM boxes against
 * sram_bytes and their alignment, DRAM boxes against their binding or the constant pool,
 * MAC outputs disjoint from their inputs (executable_format/ranges.py's ranges). */
#ifndef NPU_RANGES_H_
#define NPU_RANGES_H_

#include <stdbool.h>
#include <stdint.h>

#include "npu_exec.h"

/* Byte extent of a box: (1 + sum (n_i - 1) * s_i) * elem (counts are at least 1). */
u128 box_extent(const uint32_t* counts, const uint32_t* strides, int dims, unsigned elem);

/* [addr, addr + extent) within SRAM, addr a multiple of align; raises the SRAM peak.
 * check_sram_bounds checks just that (a dma.load's destination, npu_dma.c); check_sram
 * also lands the deferred loads the range overlaps (npu_deferred.h), so the instruction
 * sees SRAM as if they had copied. */
int check_sram_bounds(exec_t* x, const char* operand, uint32_t addr, u128 extent,
                      unsigned align);
int check_sram(exec_t* x, const char* operand, uint32_t addr, u128 extent, unsigned align);

/* check_sram for an input the instruction only reads, as `rows` rows of `row_bytes`
 * bytes `stride` bytes apart (exactly those bytes, within [addr, addr + extent)): sets
 * *at to the DRAM source of a deferred load that holds the rows and *at_stride to its
 * bytes between them, else to the rows in SRAM and `stride`. */
int check_sram_input(exec_t* x, const char* operand, uint32_t addr, u128 extent,
                     unsigned align, size_t rows, size_t row_bytes, size_t stride,
                     const uint8_t** at, size_t* at_stride);

/* Disjointness of two SRAM byte ranges (an absent bias, extent 0, overlaps nothing). */
int check_disjoint(exec_t* x, const char* out_name, uint32_t out, u128 out_extent,
                   const char* in_name, uint32_t in, u128 in_extent);

/* Resolves a DRAM box: binding, alignment, [offset, offset + extent) within it. */
int check_dram(exec_t* x, uint32_t binding, uint32_t offset, u128 extent, unsigned elem,
               bool store, uint8_t** out);

#endif /* NPU_RANGES_H_ */
