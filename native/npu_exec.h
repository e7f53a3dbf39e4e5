/* The core's state (npu_core_t: machine, SRAM, scratch buffers, semaphores) and one
 * execution's context (exec_t), which every part of the core works on; failures with
 * their messages (fail, CHECK) and the scratch buffers. */
#ifndef NPU_EXEC_H_
#define NPU_EXEC_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_core.h"
#include "npu_isa.h"
#include "npu_threads.h"

typedef unsigned __int128 u128;

/* SCRATCH_PACK: the MAC kernels' packed blocks of B, one per worker (npu_mac.c). */
enum { SCRATCH_A, SCRATCH_B, SCRATCH_C, SCRATCH_PACK, SCRATCH_COUNT };

typedef struct semaphore_t {
  uint64_t* times;        /* time of the i-th signal */
  size_t count;
  size_t capacity;
  int engine;             /* the signalling engine, -1 before the first signal */
} semaphore_t;

struct npu_core_t {
  npu_machine_config_t config;
  uint8_t* sram;
  void* scratch[SCRATCH_COUNT];
  size_t scratch_bytes[SCRATCH_COUNT];
  semaphore_t* semaphores;
  size_t threads;         /* most workers one instruction runs on */
  pool_t* pool;           /* the threads beside the caller (core_pool), or NULL */
  atomic_uint_fast64_t cancels;   /* npu_core_cancel calls */
};

/* A dma.load whose copy is deferred (npu_deferred.h): `rows` rows of `row_bytes` bytes,
 * row r at SRAM addr + r * sram_stride, holding DRAM src + r * dram_stride (sram_stride
 * >= row_bytes: the rows do not overlap; one row when the box is contiguous). */
typedef struct deferred_load_t {
  uint32_t addr;
  size_t rows, row_bytes, sram_stride, dram_stride;
  const uint8_t* src;
} deferred_load_t;

#define DEFERRED_LOADS 8

typedef struct exec_t {
  npu_core_t* core;
  const npu_binding_t* bindings;
  size_t binding_count;
  const uint8_t* const_pool;
  size_t const_pool_bytes;
  npu_stats_t* stats;
  char* error;
  size_t error_capacity;
  size_t index;
  const op_info_t* op;    /* NULL while the opcode is unknown */
  pool_t* pool;           /* NULL: every instruction runs on the caller */
  const uint32_t* constants;     /* the dispatch's push constants (fill push_constant) */
  size_t constant_count;
  deferred_load_t deferred[DEFERRED_LOADS];   /* their SRAM spans pairwise disjoint */
  size_t deferred_count;
} exec_t;

/* Writes "instruction <index> (<opcode>): <message>" to the run's error; returns status. */
int fail(exec_t* x, int status, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct num_t { char s[48]; } num_t;

/* Decimal text of a 128-bit value (range ends can exceed 64 bits). */
num_t num(u128 v);

/* 64-byte aligned memory for at least `bytes` bytes (at least 64). */
void* aligned_bytes(size_t bytes);

/* Scratch buffer `slot` of the core (SCRATCH_*) with at least `bytes` bytes, kept
 * between runs; NULL when it cannot be allocated (out_of_memory says so). */
void* scratch(exec_t* x, int slot, u128 bytes);
int out_of_memory(exec_t* x, u128 bytes);

#define CHECK(expr)                          \
  do {                                       \
    int status_ = (expr);                    \
    if (status_ != NPU_STATUS_OK) return status_; \
  } while (0)

#endif /* NPU_EXEC_H_ */
