/* Timeline and cost: the cycle model of executable_format/cost.py (instruction costs,
 * MACs, DRAM bytes) and the per-engine timeline with signal/wait/barrier, accounted into
 * npu_stats_t and the trace. */
#ifndef NPU_TIMELINE_H_
#define NPU_TIMELINE_H_

#include <stddef.h>
#include <stdint.h>

#include "npu_exec.h"
#include "npu_instruction.h"

typedef struct timeline_t {
  uint64_t free_at[NPU_ENGINE_COUNT];
} timeline_t;

uint64_t instruction_macs(const instr_t* in);

/* Advances the timeline over signal/wait/barrier; the pre-pass has checked the
 * semaphore rules and reserved room for every signal. */
void control_instruction(exec_t* x, timeline_t* t, const instr_t* in);

/* Puts an executed non-control instruction on its engine's timeline: cycles, MACs, DRAM
 * bytes, and its trace event while trace_capacity lasts. */
void account(exec_t* x, timeline_t* t, const instr_t* in, npu_trace_event_t* trace,
             size_t trace_capacity);

#endif /* NPU_TIMELINE_H_ */
