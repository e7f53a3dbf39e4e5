/* Deferred DMA loads: how the simulator saves copying a contiguous dma.load into SRAM
 * when the bytes are only read, in place, by MAC instructions.
 *
 * A contiguous dma.load records "SRAM [addr, addr + bytes) holds DRAM [src, src +
 * bytes)" instead of copying. The copy lands (is made) before anything else can see the
 * difference: before an instruction reads or writes an overlapping SRAM range
 * (check_sram), before a dma.store writes over the source in DRAM, when the table is
 * full, and at the end of the run, so SRAM and DRAM always read as if every load had
 * copied at once. A MAC operand held whole by one deferred load is read from its DRAM
 * source instead (sram_input): an LSTM step's matrix-vector product then reads its
 * 64 KB weight tiles once, as stock's CPU code does, not copied and read again. A load
 * that a later load overwrites whole is dropped unread. Cycles do not change: the cycle
 * model charges the DMA by its fields, not by how the simulator moved the bytes. */
#ifndef NPU_DEFERRED_H_
#define NPU_DEFERRED_H_

#include <stdbool.h>
#include <stdint.h>

#include "npu_exec.h"

/* Defers a dma.load of `bytes` contiguous bytes from src into SRAM at addr: loads it
 * covers whole are dropped, others it overlaps land first. */
void defer_load(exec_t* x, uint32_t addr, const uint8_t* src, size_t bytes);

/* Lands every deferred load overlapping SRAM [addr, addr + extent). */
void land_sram(exec_t* x, uint32_t addr, u128 extent);

/* Lands every deferred load whose DRAM source overlaps [p, p + bytes). */
void land_dram(exec_t* x, const uint8_t* p, u128 bytes);

/* Lands every deferred load (the end of a run). */
void land_all(exec_t* x);

/* Where SRAM [addr, addr + extent) is read from: the DRAM source of the deferred load
 * that holds all of it, else NULL. */
const uint8_t* deferred_source(const exec_t* x, uint32_t addr, u128 extent);

#endif /* NPU_DEFERRED_H_ */
