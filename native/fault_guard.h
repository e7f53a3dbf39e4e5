/* Runs untrusted host code (a loaded executable library's query and workgroup
 * functions) so that a fault or an endless loop in it fails the call instead of the
 * process.
 *
 * A guarded call runs on the calling thread. If it raises SIGSEGV, SIGBUS, SIGILL,
 * SIGFPE or SIGTRAP, the guard's handler jumps back out of it (siglongjmp) and the
 * call reports the signal and the faulting address. With a deadline, a per-thread
 * timer sends FG_STOP_SIGNAL to the thread when it passes and the call reports
 * FG_DEADLINE. The handlers are installed by the first guarded call and stay; outside
 * a guarded call they hand the signal to the handler they replaced (or restore the
 * default action, so a fault elsewhere still kills the process as before). Each
 * guarded call checks that they are still installed and installs them again if
 * someone replaced them.
 *
 * What a jump out of the library leaves behind: whatever the library wrote before it
 * stopped. The library's own state may be corrupt; callers report the failure and
 * may keep the library (IREE's executables keep no state between workgroups).
 */
#ifndef NPU_FAULT_GUARD_H_
#define NPU_FAULT_GUARD_H_

#include <stdint.h>

typedef void (*fg_body)(void* arg);

enum {
  FG_COMPLETED = 0,  /* body returned */
  FG_FAULTED = 1,    /* body raised a fault signal */
  FG_DEADLINE = 2,   /* body was stopped at the deadline */
  FG_SETUP_FAILED = 3,  /* the guard could not be set up (no timer, no handler) */
};

typedef struct fg_outcome {
  int signal;          /* FG_FAULTED: the signal */
  uintptr_t address;   /* FG_FAULTED: the faulting address (si_addr) */
} fg_outcome;

/* Runs body(arg) under the guard with a wall-clock deadline of |timeout_ns|
 * (0: none). Not reentrant on one thread. */
int fg_run(fg_body body, void* arg, uint64_t timeout_ns, fg_outcome* outcome);

#endif  /* NPU_FAULT_GUARD_H_ */
