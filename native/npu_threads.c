/* The worker pool (npu_threads.h). */
#define _GNU_SOURCE /* sysconf(_SC_NPROCESSORS_ONLN) */
#include "npu_threads.h"

#include <stdlib.h>
#include <unistd.h>

static void* pool_thread(void* arg) {
  const pool_thread_t* self = arg;
  pool_t* p = self->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    work_t* w = p->work;
    if (!w || self->worker >= w->workers) continue;
    p->active++;
    pthread_mutex_unlock(&p->lock);
    t_control = w->control;
    t_work = 0;
    claim_units(w, self->worker);
    t_control = NULL;
    pthread_mutex_lock(&p->lock);
    if (--p->active == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

void pool_start(pool_t* p, size_t threads) {
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->work = NULL;
  p->generation = 0;
  p->active = 0;
  p->stop = false;
  p->count = 0;
  for (size_t i = 0; i + 1 < threads; i++) {
    p->args[i] = (pool_thread_t){p, i + 1};
    if (pthread_create(&p->threads[i], NULL, pool_thread, &p->args[i]) != 0) break;
    p->count++;
  }
}

void pool_stop(pool_t* p) {
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (size_t i = 0; i < p->count; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
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
