/* The simulated NPU core's entry points (npu_core.h): creating a core, and running a
 * program. See docs/npu-architecture.md.
 *
 * Execution is one pass in program order: validate the instruction (every SRAM and
 * DRAM box against its bounds, once per instruction), compute it, then advance the
 * cycle model exactly as executable_format/cost.py does. A pre-pass checks every record
 * up to END against the encoding and the static rules of docs/npu-architecture.md (the
 * verifier's), so a malformed program runs nothing. Beyond the documented rules the core
 * rejects a MAC output overlapping its inputs and bounds each instruction's work by the
 * SRAM size (ELEMENTS_PER_SRAM_BYTE, MACS_PER_SRAM_BYTE), so it never runs for long.
 *
 * The parts, by concern:
 *   npu_isa.h          the instruction set, generated from executable_format/isa.py
 *   npu_instruction.h  an instruction record and its fields by name
 *   npu_exec.h/.c      the core's state and a run's context, errors, scratch buffers
 *   npu_validate.h/.c  the pre-pass: encoding, static rules, work bound, semaphores
 *   npu_ranges.h/.c    operand ranges in SRAM and DRAM, checked before each instruction
 *   npu_deferred.h/.c  contiguous dma.loads whose copy waits until something reads it
 *   npu_kernels.h      the instructions' computation: npu_dma.c, npu_mac.c (with the
 *                      GEMM kernel), npu_vector.c, npu_requant.c (vrequant);
 *                      npu_elements.h their element access
 *   npu_threads.h/.c   the worker pool that splits large MAC instructions
 *   npu_stop.h/.c      deadline, cancellation and SIGINT
 *   npu_timeline.h/.c  the cycle model and the engines' timeline
 */
#include "npu_core.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_deferred.h"
#include "npu_exec.h"
#include "npu_instruction.h"
#include "npu_isa.h"
#include "npu_kernels.h"
#include "npu_stop.h"
#include "npu_threads.h"
#include "npu_timeline.h"
#include "npu_validate.h"

npu_core_t* npu_core_create(const npu_machine_config_t* config) {
  const uint64_t* fields = (const uint64_t*)config;
  for (size_t i = 0; i < sizeof(*config) / sizeof(uint64_t); i++) {
    if (fields[i] == 0) return NULL;
  }
  if (config->sram_bytes > ((uint64_t)1 << 32) || config->semaphores > (1u << 16)) return NULL;
  npu_core_t* core = calloc(1, sizeof(*core));
  if (!core) return NULL;
  core->config = *config;
  core->threads = thread_count();
  core->sram = aligned_bytes(config->sram_bytes);
  core->semaphores = calloc(config->semaphores, sizeof(semaphore_t));
  if (!core->sram || !core->semaphores) {
    npu_core_destroy(core);
    return NULL;
  }
  memset(core->sram, 0, config->sram_bytes);
  return core;
}

void npu_core_cancel(npu_core_t* core) {
  atomic_fetch_add(&core->cancels, 1);
}

void npu_core_destroy(npu_core_t* core) {
  if (!core) return;
  if (core->pool && pool_owned(core->pool)) {   /* a forked child's is left alone */
    pool_stop(core->pool);
    free(core->pool);
  }
  free(core->sram);
  for (int i = 0; i < SCRATCH_COUNT; i++) free(core->scratch[i]);
  if (core->semaphores) {
    for (uint64_t i = 0; i < core->config.semaphores; i++) free(core->semaphores[i].times);
  }
  free(core->semaphores);
  free(core);
}

/* The core's worker pool, started with its first run (in a forked child, its first
 * run there: the parent's pool is not the child's, pool_owned); NULL when the core runs
 * on the caller alone (one thread, or none could be created). */
static pool_t* core_pool(npu_core_t* core) {
  if (core->pool && !pool_owned(core->pool)) core->pool = NULL;   /* the parent's memory */
  if (core->threads > 1 && !core->pool) {
    core->pool = malloc(sizeof(pool_t));
    if (!core->pool) return NULL;
    pool_start(core->pool, core->threads);
  }
  return core->pool && core->pool->count ? core->pool : NULL;
}

static int execute_instruction(exec_t* x, const instr_t* in) {
  if (x->op->layout == LAYOUT_UNARY) return exec_unary(x, in);
  switch (in->opcode) {
    case OP_DMA_LOAD: return exec_dma(x, in, false);
    case OP_DMA_STORE: return exec_dma(x, in, true);
    case OP_FILL: return exec_fill(x, in);
    case OP_MATMUL: return exec_matmul(x, in);
    case OP_CONV2D: case OP_DWCONV2D: return exec_conv2d(x, in);
    case OP_VCVT: return exec_vcvt(x, in);
    case OP_VREQUANT: return exec_vrequant(x, in);
    case OP_VPOOL: return exec_vpool(x, in);
    case OP_VREDUCE: return exec_vreduce(x, in);
    default: return exec_binary(x, in);
  }
}

/* Work charged to stopping() per instruction, besides what its loops report: a program
 * of many small instructions still reads the clock every STOP_CHECK_WORK /
 * INSTRUCTION_WORK instructions. */
#define INSTRUCTION_WORK ((uint64_t)4096)

/* The failure of a run stopped by its control, at instruction x->index: "stopped at
 * instruction 12 (conv2d) after 100.2 ms" (the deadline's caller names the deadline),
 * "cancelled: ..." or "interrupted by SIGINT: ...". */
static int stopped(exec_t* x, const control_t* c, int why) {
  double ms = (double)(now_ns() - c->start_ns) / 1e6;
  const char* reason = why == NPU_STATUS_DEADLINE_EXCEEDED ? ""
                       : atomic_load(c->cancels) != c->cancels_at_start ? "cancelled: "
                                                                        : "interrupted by SIGINT: ";
  snprintf(x->error, x->error_capacity, "%sstopped at instruction %zu (%s) after %.1f ms",
           reason, x->index, x->op ? x->op->name : "?", ms);
  return why;
}

int npu_core_execute(npu_core_t* core, const uint8_t* program, size_t program_bytes,
                     const npu_binding_t* bindings, size_t binding_count,
                     const uint8_t* const_pool, size_t const_pool_bytes,
                     const uint32_t* constants, size_t constant_count,
                     const npu_run_limits_t* limits, npu_stats_t* stats,
                     npu_trace_event_t* trace, size_t trace_capacity, char* error,
                     size_t error_capacity) {
  control_t control = {.start_ns = now_ns(), .deadline_ns = UINT64_MAX,
                       .cancels = &core->cancels,
                       .cancels_at_start = atomic_load(&core->cancels)};
  atomic_init(&control.stop, NPU_STATUS_OK);
  if (limits && limits->timeout_ns) {
    control.timeout_ns = limits->timeout_ns;
    if (__builtin_add_overflow(control.start_ns, limits->timeout_ns, &control.deadline_ns)) {
      control.deadline_ns = UINT64_MAX;      /* beyond the clock's range: none */
    }
  }
  memset(stats, 0, sizeof(*stats));
  if (error && error_capacity) error[0] = 0;
  exec_t x = {core, bindings, binding_count, const_pool, const_pool_bytes, stats,
              error, error_capacity, 0, NULL, NULL, constants, constant_count};
  if (program_bytes == 0 || program_bytes % NPU_INSTRUCTION_BYTES) {
    snprintf(error, error_capacity, "program size %zu is not a positive multiple of %d bytes",
             program_bytes, NPU_INSTRUCTION_BYTES);
    return NPU_STATUS_INVALID_ARGUMENT;
  }
  size_t count = program_bytes / NPU_INSTRUCTION_BYTES;
  size_t end = count;
  for (uint64_t s = 0; s < core->config.semaphores; s++) {
    core->semaphores[s].count = 0;
    core->semaphores[s].engine = -1;
  }
  for (size_t i = 0; i < count && end == count; i++) {
    instr_t in = decode(program + i * NPU_INSTRUCTION_BYTES);
    x.index = i;
    x.op = NULL;
    CHECK(check_encoding(&x, &in));
    CHECK(check_work(&x, &in));
    if (in.opcode == OP_SIGNAL || in.opcode == OP_WAIT) CHECK(check_semaphore(&x, &in));
    if (in.opcode == OP_END) end = i;
  }
  if (end == count) {
    snprintf(error, error_capacity, "program has no end instruction");
    return NPU_STATUS_INVALID_ARGUMENT;
  }
  x.op = NULL;
  CHECK(reserve_signals(&x));
  x.pool = core_pool(core);
  timeline_t t = {{0}};
  int status = NPU_STATUS_OK;
  if (limits && limits->stop_on_sigint) {
    control.watch_sigint = sigint_watch(&control.sigints_at_start);
  }
  t_control = &control;
  t_work = 0;
  for (size_t i = 0; i < end && status == NPU_STATUS_OK; i++) {
    instr_t in = decode(program + i * NPU_INSTRUCTION_BYTES);
    x.index = i;
    x.op = &OPS[in.opcode];
    if (stopping(INSTRUCTION_WORK)) {
      status = stopped(&x, &control, atomic_load(&control.stop));
      break;
    }
    if (x.op->engine == ENGINE_CONTROL) {
      control_instruction(&x, &t, &in);
    } else {
      status = execute_instruction(&x, &in);
      int why = atomic_load(&control.stop);
      if (status == NPU_STATUS_OK && why != NPU_STATUS_OK) status = stopped(&x, &control, why);
      if (status == NPU_STATUS_OK) account(&x, &t, &in, trace, trace_capacity);
    }
    if (status == NPU_STATUS_OK) stats->instructions++;
  }
  t_control = NULL;
  land_all(&x);
  for (int e = 0; e < NPU_ENGINE_COUNT; e++) {
    if (t.free_at[e] > stats->total_cycles) stats->total_cycles = t.free_at[e];
  }
  return status;
}
