/* The simulated NPU core: executes an npu-fb program (64-byte instruction records,
 * executable_format/isa.py) over bound DRAM buffers and the core's own SRAM, checking
 * every access before it happens, and accounts cycles per engine exactly like
 * executable_format/cost.py. Semantics: docs/npu-architecture.md.
 *
 * One core is not thread-safe: callers serialize npu_core_execute per core.
 */
#ifndef NPU_CORE_H_
#define NPU_CORE_H_

#include <stddef.h>
#include <stdint.h>

/* Status values are iree_status_code_t values. */
#define NPU_STATUS_OK 0
#define NPU_STATUS_CANCELLED 1
#define NPU_STATUS_INVALID_ARGUMENT 3
#define NPU_STATUS_DEADLINE_EXCEEDED 4
#define NPU_STATUS_RESOURCE_EXHAUSTED 8
#define NPU_STATUS_OUT_OF_RANGE 11

#define NPU_ENGINE_COUNT 4            /* dma_in, dma_out, mac, vector */
#define NPU_CONST_POOL_BINDING 0xFFFFFFFFu
#define NPU_INSTRUCTION_BYTES 64

/* executable_format/machine.py MachineConfig, field for field. */
typedef struct npu_machine_config_t {
  uint64_t clock_hz;
  uint64_t mac_rows;
  uint64_t mac_cols;
  uint64_t f32_rate_divisor;
  uint64_t i8_rate_multiplier;
  uint64_t mac_latency_cycles;
  uint64_t sram_bytes;
  uint64_t sram_bytes_per_cycle;
  uint64_t dram_bytes_per_cycle;
  uint64_t dma_burst_bytes;
  uint64_t dma_latency_cycles;
  uint64_t vector_bytes_per_cycle;
  uint64_t vector_latency_cycles;
  uint64_t transcendental_factor;
  uint64_t semaphores;
} npu_machine_config_t;

/* One bound DRAM buffer range. */
typedef struct npu_binding_t {
  uint8_t* data;
  size_t length;
} npu_binding_t;

typedef struct npu_stats_t {
  uint64_t total_cycles;
  uint64_t busy_cycles[NPU_ENGINE_COUNT];
  uint64_t stall_cycles[NPU_ENGINE_COUNT];
  uint64_t dram_read_bytes;
  uint64_t dram_write_bytes;
  uint64_t macs;
  uint64_t sram_peak_bytes;   /* highest SRAM byte address touched, exclusive */
  uint64_t instructions;      /* instructions executed before END */
  uint64_t trace_count;       /* events produced; only the first trace_capacity stored */
} npu_stats_t;

/* One executed non-control instruction on its engine's timeline. */
typedef struct npu_trace_event_t {
  uint64_t start;
  uint64_t end;
  uint32_t engine;
  uint32_t opcode;
  uint32_t index;
} npu_trace_event_t;

/* What may stop a run early. Long loops poll (a flag load per chunk of work, a clock
 * read every STOP_CHECK_WORK units of work per thread), so a run stops within
 * milliseconds of its deadline, a cancel or a SIGINT, worker threads included. */
typedef struct npu_run_limits_t {
  /* 0: no deadline. Else the run stops with NPU_STATUS_DEADLINE_EXCEEDED once this much
   * CLOCK_MONOTONIC time has passed since npu_core_execute was called. */
  uint64_t timeout_ns;
  /* Nonzero: while the run executes, a SIGINT stops it with NPU_STATUS_CANCELLED. The
   * first such run installs the core's SIGINT handler, which stays and calls the handler
   * it replaced, so the host (Python's KeyboardInterrupt) still sees every signal;
   * nothing is installed when SIGINT is ignored or has its default action. */
  uint32_t stop_on_sigint;
} npu_run_limits_t;

typedef struct npu_core_t npu_core_t;

/* Returns NULL if a parameter is zero or the SRAM cannot be allocated. The core splits
 * large MAC instructions over up to NPU_SIM_THREADS threads (environment variable, read
 * here; default the online CPUs); results do not depend on the count. */
npu_core_t* npu_core_create(const npu_machine_config_t* config);
void npu_core_destroy(npu_core_t* core);

/* Stops the core's running execute (or the next one to start polling) with
 * NPU_STATUS_CANCELLED; a run that starts after the call is not affected. Thread-safe
 * and lock-free: callable from any thread while npu_core_execute runs. */
void npu_core_cancel(npu_core_t* core);

/* Runs `program` (program_bytes / 64 instruction records, ending with END).
 * `constants` are the dispatch's push constants (read by `fill` with flag push_constant).
 * Returns NPU_STATUS_OK, or a failure status with a message in `error` naming the
 * instruction index, opcode and offending range. `stats` is always written (partial
 * on failure); `trace` may be NULL. `limits` may be NULL (no deadline, SIGINT not
 * watched); a run stopped by them returns NPU_STATUS_DEADLINE_EXCEEDED or
 * NPU_STATUS_CANCELLED with `error` naming the instruction it stopped at and the time it
 * ran (SRAM and bindings then hold partial results). */
int npu_core_execute(npu_core_t* core, const uint8_t* program, size_t program_bytes,
                     const npu_binding_t* bindings, size_t binding_count,
                     const uint8_t* const_pool, size_t const_pool_bytes,
                     const uint32_t* constants, size_t constant_count,
                     const npu_run_limits_t* limits, npu_stats_t* stats,
                     npu_trace_event_t* trace, size_t trace_capacity, char* error,
                     size_t error_capacity);

#endif /* NPU_CORE_H_ */
