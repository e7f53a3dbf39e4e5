/* Deadline, cancellation and SIGINT: how a run of the core stops early. Kernels call
 * stopping(work) in every loop that can run long; npu_core_execute sets the run up
 * (control_t, t_control) and reports why it stopped. */
#ifndef NPU_STOP_H_
#define NPU_STOP_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_core.h"
#include "npu_isa.h"

/* A run stops early when its deadline passes, when npu_core_cancel is called or, if
 * asked, on SIGINT. Every loop that can run long reports the work it did to
 * stopping(work): a relaxed load of the run's stop flag and, once this thread has done
 * STOP_CHECK_WORK units since it last looked (a few hundred microseconds of MACs, tens
 * of microseconds to milliseconds of elements), a clock read and a look at the cancel
 * and SIGINT counts. The first thread that sees a reason stores it in the flag; every
 * thread then leaves its loops and the run fails with that status. Work units are those
 * of the verifier's program bound: a MAC is 1, an element ELEMENT_WORK
 * (MACS_PER_SRAM_BYTE / ELEMENTS_PER_SRAM_BYTE: one instruction at either
 * per-instruction cap is the same work). */
#define STOP_CHECK_WORK ((uint64_t)1 << 20)
#define ELEMENT_WORK ((uint64_t)(MACS_PER_SRAM_BYTE / ELEMENTS_PER_SRAM_BYTE))
/* Element loops over one long row work in pieces of this many elements. */
#define RUN_PIECE ((size_t)1 << 15)

typedef struct control_t {
  uint64_t start_ns;
  uint64_t timeout_ns;                    /* 0: no deadline */
  uint64_t deadline_ns;                   /* UINT64_MAX: none */
  const atomic_uint_fast64_t* cancels;   /* the core's cancel count ... */
  uint64_t cancels_at_start;             /* ... when the run started */
  bool watch_sigint;
  uint64_t sigints_at_start;
  atomic_int stop;                        /* NPU_STATUS_OK, or why the run stops */
} control_t;

/* The run this thread works for (NULL: none, nothing stops) and its work since it last
 * read the clock. Initial-exec: a few bytes of the static TLS surplus glibc keeps for
 * dlopen'ed libraries, without a __tls_get_addr call per access. */
extern __thread control_t* t_control __attribute__((tls_model("initial-exec")));
extern __thread uint64_t t_work __attribute__((tls_model("initial-exec")));

uint64_t now_ns(void);   /* CLOCK_MONOTONIC */

/* The full look: cancel count, SIGINT count, clock; true (and the run's stop flag set)
 * when the run stops. */
bool poll_stop(control_t* c);

/* True when the run this thread works for is stopping; `work` is what the thread did
 * since its last call. */
static inline bool stopping(uint64_t work) {
  control_t* c = t_control;
  if (!c) return false;
  if (atomic_load_explicit(&c->stop, memory_order_relaxed) != NPU_STATUS_OK) return true;
  t_work += work;
  if (t_work < STOP_CHECK_WORK) return false;
  t_work = 0;
  return poll_stop(c);
}

static inline bool stopping_elements(size_t elements) {
  return stopping(ELEMENT_WORK * elements);
}

/* Starts watching SIGINT for a run: the SIGINT count now, and whether the handler is
 * installed (not when SIGINT is ignored or has its default action). */
bool sigint_watch(uint64_t* sigints);

#endif /* NPU_STOP_H_ */
