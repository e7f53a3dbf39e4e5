/* Guarded calls of untrusted host code: see fault_guard.h. */
#define _GNU_SOURCE
#include "fault_guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

static const int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP};
#define FAULT_SIGNAL_COUNT (int)(sizeof(kFaultSignals) / sizeof(kFaultSignals[0]))
/* The jump value of a body that returned (siglongjmp cannot pass FG_COMPLETED, 0). */
#define RETURNED 100
/* A stack for the handler when the fault is a stack overflow. */
#define ALT_STACK_SIZE (64 * 1024)

/* The guard of the calling thread. Touched before `active` is set, so the handler's
 * access never allocates thread-local storage. */
typedef struct guard_state {
  sigjmp_buf env;
  volatile sig_atomic_t active;
  volatile int signal;
  volatile uintptr_t address;
} guard_state;
static __thread guard_state g_guard;

static struct sigaction g_previous[FAULT_SIGNAL_COUNT];
static int g_stop_signal;
static pthread_once_t g_install_once = PTHREAD_ONCE_INIT;
static int g_install_failed;
static pthread_key_t g_alt_stack_key;

/* Outside a guarded call a fault goes where it went before the guard existed. */
static void pass_on(int index, int sig, siginfo_t* info, void* context) {
  const struct sigaction* p = &g_previous[index];
  if (p->sa_flags & SA_SIGINFO) {
    if (p->sa_sigaction) p->sa_sigaction(sig, info, context);
  } else if (p->sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);
    raise(sig);  /* pending until this handler returns; a synchronous fault repeats */
  } else if (p->sa_handler != SIG_IGN) {
    p->sa_handler(sig);
  }
}

static void on_signal(int sig, siginfo_t* info, void* context) {
  guard_state* g = &g_guard;
  if (sig == g_stop_signal) {
    if (g->active) siglongjmp(g->env, FG_DEADLINE);
    return;  /* a timer that fired as its call finished */
  }
  if (g->active) {
    g->signal = sig;
    g->address = (uintptr_t)info->si_addr;
    siglongjmp(g->env, FG_FAULTED);
  }
  for (int i = 0; i < FAULT_SIGNAL_COUNT; ++i) {
    if (kFaultSignals[i] == sig) pass_on(i, sig, info, context);
  }
}

static void free_alt_stack(void* stack) {
  stack_t off = {.ss_flags = SS_DISABLE};
  sigaltstack(&off, NULL);
  free(stack);
}

static void install_handlers(void) {
  struct sigaction ours = {0};
  ours.sa_sigaction = on_signal;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  g_stop_signal = SIGRTMIN + 4;
  if (pthread_key_create(&g_alt_stack_key, free_alt_stack) != 0 ||
      sigaction(g_stop_signal, &ours, NULL) != 0) {
    g_install_failed = 1;
    return;
  }
  for (int i = 0; i < FAULT_SIGNAL_COUNT; ++i) {
    if (sigaction(kFaultSignals[i], &ours, &g_previous[i]) != 0) g_install_failed = 1;
  }
}

/* The handler needs a stack of its own when the fault is a stack overflow. */
static int ensure_alt_stack(void) {
  stack_t current;
  if (sigaltstack(NULL, &current) != 0) return -1;
  if (!(current.ss_flags & SS_DISABLE)) return 0;
  void* stack = malloc(ALT_STACK_SIZE);
  stack_t ours = {.ss_sp = stack, .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
  if (!stack || sigaltstack(&ours, NULL) != 0) {
    free(stack);
    return -1;
  }
  pthread_setspecific(g_alt_stack_key, stack);
  return 0;
}

static int start_timer(uint64_t timeout_ns, timer_t* timer) {
  struct sigevent event = {0};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = g_stop_signal;
  event.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_MONOTONIC, &event, timer) != 0) return -1;
  struct itimerspec when = {0};
  when.it_value.tv_sec = (time_t)(timeout_ns / 1000000000u);
  when.it_value.tv_nsec = (long)(timeout_ns % 1000000000u);
  if (timer_settime(*timer, 0, &when, NULL) != 0) {
    timer_delete(*timer);
    return -1;
  }
  return 0;
}

int fg_run(fg_body body, void* arg, uint64_t timeout_ns, fg_outcome* outcome) {
  pthread_once(&g_install_once, install_handlers);
  if (g_install_failed || ensure_alt_stack() != 0) return FG_SETUP_FAILED;
  guard_state* g = &g_guard;
  g->active = 0;
  g->signal = 0;
  g->address = 0;
  timer_t timer;
  if (timeout_ns && start_timer(timeout_ns, &timer) != 0) return FG_SETUP_FAILED;
  int result = sigsetjmp(g->env, 1);
  if (result == 0) {
    g->active = 1;
    body(arg);
    /* Leave by the jump even when the body returns: code that broke the calling
     * convention (callee-saved registers, the stack pointer) cannot reach us. */
    siglongjmp(g->env, RETURNED);
  }
  g->active = 0;
  if (result == RETURNED) result = FG_COMPLETED;
  if (timeout_ns) timer_delete(timer);
  outcome->signal = g->signal;
  outcome->address = g->address;
  return result;
}

