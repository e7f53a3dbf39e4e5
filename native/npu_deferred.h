/* Deferred DMA loads: how the simulator saves copying a dma.load into SRAM when the
 * bytes are only read, in place, by MAC instructions.
 *
 * A dma.load whose box is rows of contiguous bytes (one row, or rows a fixed stride
 * apart on each side) records "these SRAM rows hold these DRAM rows" instead of
 * copying. The copy lands (is made) before anything else can see the difference:
 * before an instruction reads or writes an overlapping SRAM range (check_sram), before
 * a dma.store writes over the source in DRAM, when the table is full, and at the end of
 * the run, so SRAM and DRAM always read as if every load had copied at once. A MAC
 * operand held whole by one deferred load, row for row, is read from its DRAM source
 * instead (check_sram_input): an LSTM step's matrix-vector product then reads its
 * 64 KB weight tiles once, as stock's CPU code does, not copied and read again, and a
 * classifier's weight tiles (rows of a wider matrix) are packed straight from DRAM. A
 * contiguous load that a later contiguous load overwrites whole is dropped unread.
 * Cycles do not change: the cycle model charges the DMA by its fields, not by how the
 * simulator moved the bytes. */
#ifndef NPU_DEFERRED_H_
#define NPU_DEFERRED_H_

#include <stdbool.h>
#include <stdint.h>

#include "npu_exec.h"

/* Defers `load`: deferred loads it covers whole (a contiguous load) are dropped, others
 * whose SRAM span it overlaps land first. */
void defer_load(exec_t* x, deferred_load_t load);

/* Lands every deferred load whose SRAM span overlaps [addr, addr + extent). */
void land_sram(exec_t* x, uint32_t addr, u128 extent);

/* Lands every deferred load whose DRAM span overlaps [p, p + bytes). */
void land_dram(exec_t* x, const uint8_t* p, u128 bytes);

/* Lands every deferred load (the end of a run). */
void land_all(exec_t* x);

/* Where `rows` rows of `row_bytes` bytes at SRAM addr, `stride` bytes apart, are read
 * from: the DRAM source of the deferred load that holds all of them, row for row, with
 * *dram_stride its DRAM bytes between them; else NULL. */
const uint8_t* deferred_source(const exec_t* x, uint32_t addr, size_t rows, size_t row_bytes,
                               size_t stride, size_t* dram_stride);

#endif /* NPU_DEFERRED_H_ */
