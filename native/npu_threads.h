/* Worker threads: the pool that splits a large MAC instruction into units of disjoint
 * output elements, claimed in order by the caller and the pool's threads. */
#ifndef NPU_THREADS_H_
#define NPU_THREADS_H_

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_stop.h"

/* A core's pool of threads (NPU_SIM_THREADS, default the online CPUs, less the
 * caller), started with its first run and kept until the core is destroyed. A large
 * instruction is split into units, each computing a disjoint set of output elements;
 * the caller and the pool's threads claim units in order from a shared counter until
 * none are left, so a worker whose CPU is busy elsewhere just claims fewer. Which worker
 * computes a unit does not change its bits.
 *
 * A thread that finished a unit spins for the next job for POOL_SPIN_NS before it
 * sleeps: the instructions of a run, and the runs of one call, follow each other within
 * microseconds, and waking a sleeping thread costs tens of them (a 1x32x512 LSTM
 * product takes about 3). The caller never waits for a thread to wake: it claims the
 * units itself and waits only for threads that joined. */
#define MAX_THREADS 64
/* An instruction gets one worker per this many MACs. */
#define MACS_PER_WORKER ((uint64_t)1 << 19)
#define POOL_SPIN_NS ((uint64_t)50000)

typedef void (*unit_fn)(const void* job, size_t unit, size_t worker);

typedef struct work_t work_t;
typedef struct pool_t pool_t;

typedef struct pool_thread_t {
  pool_t* pool;
  size_t worker;
} pool_thread_t;

struct pool_t {
  pthread_mutex_t lock;      /* with wake: the sleep of threads that stopped spinning */
  pthread_cond_t wake;       /* a new job was posted, or stop */
  _Atomic(work_t*) work;     /* the job threads may join; NULL once the caller is done */
  atomic_uint_fast64_t generation;   /* jobs posted */
  atomic_size_t active;      /* threads in the current job */
  atomic_size_t sleepers;    /* threads asleep on wake */
  atomic_bool stop;
  size_t count;              /* threads running */
  pid_t owner;               /* the process whose threads they are (pool_owned) */
  pthread_t threads[MAX_THREADS];
  pool_thread_t args[MAX_THREADS];
};

/* Starts up to threads - 1 threads (workers 1, 2, ...); stops at the first that cannot
 * be created. */
void pool_start(pool_t* p, size_t threads);
void pool_stop(pool_t* p);

/* Whether the pool's threads run in this process. A forked child (Python's
 * multiprocessing, the compiler's planning workers) inherits the pool's memory but
 * not its threads, and its lock and condition variable in whatever state they were:
 * the child must neither use nor stop it (joining threads it does not have, destroying
 * a condition variable other threads were waiting on, waits forever). */
bool pool_owned(const pool_t* p);

/* Wakes the sleeping threads after a job was posted. */
void pool_wake(pool_t* p);

/* Spins until no thread is in the job just withdrawn. */
void pool_wait_idle(pool_t* p);

/* NPU_SIM_THREADS when it is a positive number, else the online CPUs; at most
 * MAX_THREADS. */
size_t thread_count(void);

/* Workers for `macs` of work over `units` units (the pool may be NULL: one). */
size_t worker_count(const pool_t* p, uint64_t macs, size_t units);

/* One job: units of fn. claim_units and run_units are inline so that a kernel's unit
 * function is called directly in its own file (a depthwise conv2d has thousands of
 * units of a fraction of a microsecond each). */
struct work_t {
  unit_fn fn;
  const void* job;
  size_t units;
  size_t workers;            /* workers 0 (the caller) .. workers - 1 take part */
  atomic_size_t next;        /* the next unit to claim */
  control_t* control;        /* the run's (the caller's t_control) */
};

/* Claims one unit at a time: a worker preempted mid-unit holds up the others for at
 * most that unit. A stopping run leaves the remaining units undone. */
static inline void claim_units(work_t* w, size_t worker) {
  for (size_t u; !stopping(0) && (u = atomic_fetch_add(&w->next, 1)) < w->units;) {
    w->fn(w->job, u, worker);
  }
}

/* Runs fn(job, u, worker) for every u < units on up to `workers` workers (at most the
 * pool's threads + 1; worker 0 is the caller). The caller claims units too and, once
 * none are left, waits only for the threads that joined: a thread not scheduled by then
 * (its CPU busy) does not hold it up. */
static inline void run_units(pool_t* p, unit_fn fn, const void* job, size_t units,
                              size_t workers) {
  work_t work = {fn, job, units, workers, 0, t_control};
  if (workers == 1) {
    claim_units(&work, 0);
    return;
  }
  atomic_store(&p->work, &work);
  atomic_fetch_add(&p->generation, 1);
  if (atomic_load(&p->sleepers)) pool_wake(p);
  claim_units(&work, 0);
  atomic_store(&p->work, NULL);    /* a thread that joins from now on finds no job */
  pool_wait_idle(p);
}

#endif /* NPU_THREADS_H_ */
