/* Validation: the pre-pass that checks every instruction up to END before anything runs,
 * against the encoding (opcode table of npu_isa.h), the static rules of
 * docs/npu-architecture.md (executable_format/verifier.py's, which
 * tests/native/test_verifier_differential.py compares) and the per-instruction work
 * bound; semaphore bookkeeping for the timeline. */
#ifndef NPU_VALIDATE_H_
#define NPU_VALIDATE_H_

#include "npu_exec.h"
#include "npu_instruction.h"

/* Opcode, dtype, flags, unused fields and the opcode's static rules; sets x->op. */
int check_encoding(exec_t* x, const instr_t* in);

/* The instruction's elements (MACs for MAC instructions) within the per-SRAM-byte bound. */
int check_work(exec_t* x, const instr_t* in);

/* A semaphore has one signalling engine; a wait follows at least `value` signals. Counts
 * signals into semaphore_t.count. */
int check_semaphore(exec_t* x, const instr_t* in);

/* Makes room for the signals counted by the pre-pass and rewinds the counts. */
int reserve_signals(exec_t* x);

#endif /* NPU_VALIDATE_H_ */
