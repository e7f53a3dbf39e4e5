/* How a run stops early: its deadline, npu_core_cancel and SIGINT (npu_stop.h). */
#define _GNU_SOURCE /* sigaction, clock_gettime */
#include "npu_stop.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

__thread control_t* t_control __attribute__((tls_model("initial-exec")));
__thread uint64_t t_work __attribute__((tls_model("initial-exec")));

static atomic_uint_fast64_t g_sigints;   /* SIGINTs seen by on_sigint */

uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool poll_stop(control_t* c) {
  int why = NPU_STATUS_OK;
  if (atomic_load_explicit(c->cancels, memory_order_relaxed) != c->cancels_at_start ||
      (c->watch_sigint &&
       atomic_load_explicit(&g_sigints, memory_order_relaxed) != c->sigints_at_start)) {
    why = NPU_STATUS_CANCELLED;
  } else if (c->deadline_ns != UINT64_MAX && now_ns() >= c->deadline_ns) {
    why = NPU_STATUS_DEADLINE_EXCEEDED;
  }
  if (why == NPU_STATUS_OK) return false;
  int expected = NPU_STATUS_OK;
  atomic_compare_exchange_strong(&c->stop, &expected, why);
  return true;
}

/* SIGINT: the first run that watches it installs the core's handler, which stays: it
 * counts the signal and calls the handler it replaced (Python's, which raises
 * KeyboardInterrupt in the main thread), so outside runs it changes nothing. Each
 * watching run checks that it is still installed (one sigaction query: whoever sets
 * another handler, e.g. Python's signal.signal, replaces it, and the next watching run
 * installs it again over the new one). g_sigint_previous is written only while the
 * handler is not installed. */
static pthread_mutex_t g_sigint_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_sigint_previous;

static void on_sigint(int sig, siginfo_t* info, void* context) {
  atomic_fetch_add_explicit(&g_sigints, 1, memory_order_relaxed);
  const struct sigaction* p = &g_sigint_previous;
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction) p->sa_sigaction(sig, info, context);
  } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
    p->sa_handler(sig);
  }
}

bool sigint_watch(uint64_t* sigints) {
  bool watched = false;
  struct sigaction current;
  pthread_mutex_lock(&g_sigint_lock);
  *sigints = atomic_load(&g_sigints);
  if (sigaction(SIGINT, NULL, &current) == 0) {
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigint) {
      watched = true;
    } else if ((current.sa_flags & SA_SIGINFO) ||
               (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN)) {
      struct sigaction ours = current;         /* its mask and flags (SA_ONSTACK...) */
      ours.sa_flags |= SA_SIGINFO;
      ours.sa_sigaction = on_sigint;
      g_sigint_previous = current;
      watched = sigaction(SIGINT, &ours, NULL) == 0;
    }
  }
  pthread_mutex_unlock(&g_sigint_lock);
  return watched;
}
