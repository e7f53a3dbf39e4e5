/* The worker pool (npu_threads.h). */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#include "npu_threads.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

/* A pause for a spinning thread (the other hyperthread of its core runs meanwhile). */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Waits for a job newer than `seen`: spins for POOL_SPIN_NS, then sleeps on wake.
 * Returns the generation seen, or `seen` when the pool stops. */
static uint64_t next_generation(pool_t* p, uint64_t seen) {
  uint64_t until = now_ns() + POOL_SPIN_NS;
  for (unsigned spins = 1;; spins++) {
    uint64_t g = atomic_load(&p->generation);
    if (g != seen || atomic_load(&p->stop)) return g;
    cpu_relax();
    if (spins % 256 == 0 && now_ns() > until) break;
  }
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add(&p->sleepers, 1);
  uint64_t g;
  while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop)) {
    pthread_cond_wait(&p->wake, &p->lock);
  }
  atomic_fetch_sub(&p->sleepers, 1);
  pthread_mutex_unlock(&p->lock);
  return g;
}

/* A thread joins a job by counting itself active before it reads the job: the caller
 * withdraws the job before it waits for active to drop to 0, so a thread either sees
 * the job while the caller waits for it, or sees none. */
static void* pool_thread(void* arg) {
  const pool_thread_t* self = arg;
  pool_t* p = self->pool;
  uint64_t seen = 0;
  for (;;) {
    seen = next_generation(p, seen);
    if (atomic_load(&p->stop)) break;
    atomic_fetch_add(&p->active, 1);
    work_t* w = atomic_load(&p->work);
    if (w && self->worker < w->workers) {
      t_control = w->control;
      t_work = 0;
      claim_units(w, self->worker);
      t_control = NULL;
    }
    atomic_fetch_sub(&p->active, 1);
  }
  return NULL;
}

void pool_start(pool_t* p, size_t threads) {
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  atomic_init(&p->work, NULL);
  atomic_init(&p->generation, 0);
  atomic_init(&p->active, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->stop, false);
  p->count = 0;
  p->owner = getpid();
  for (size_t i = 0; i + 1 < threads; i++) {
    p->args[i] = (pool_thread_t){p, i + 1};
    if (pthread_create(&p->threads[i], NULL, pool_thread, &p->args[i]) != 0) break;
    p->count++;
  }
}

void pool_stop(pool_t* p) {
  pthread_mutex_lock(&p->lock);
  atomic_store(&p->stop, true);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (size_t i = 0; i < p->count; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
}

bool pool_owned(const pool_t* p) {
  return p->owner == getpid();
}

void pool_wake(pool_t* p) {
  pthread_mutex_lock(&p->lock);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

void pool_wait_idle(pool_t* p) {
  for (unsigned spins = 1; atomic_load(&p->active); spins++) {
    cpu_relax();
    if (spins % 1024 == 0) sched_yield();
  }
}

size_t thread_count(void) {
  const char* env = getenv("NPU_SIM_THREADS");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > MAX_THREADS ? MAX_THREADS : (size_t)n;
}

size_t worker_count(const pool_t* p, uint64_t macs, size_t units) {
  uint64_t workers = macs / MACS_PER_WORKER;
  size_t most = p ? p->count + 1 : 1;
  if (workers > most) workers = most;
  if (workers > units) workers = units;
  return workers ? (size_t)workers : 1;
}
