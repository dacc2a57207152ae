/* A persistent thread pool for the CPU fast paths.
 *
 * Workers are created once (per executable) and sleep on a condition variable
 * between jobs, after a short spin so that back-to-back kernels of one run do
 * not pay a futex wake-up each. The calling thread takes part in every job, so
 * a pool of T threads starts T-1 workers. Chunks are claimed through an atomic
 * counter, which balances the load when a core is busy with something else. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Polls before sleeping; ~tens of microseconds, long enough to bridge the gap
 * between consecutive steps of one run, short enough not to burn a core. */
#define SPIN_ITERATIONS 4000

typedef void (*range_fn)(void* ctx, int64_t begin, int64_t end);

struct rlx_cpu_pool {
  int n_threads; /* including the caller */
  int n_workers; /* started successfully */
  pthread_t* workers;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  pthread_cond_t done;
  /* Guards against two callers entering one pool at once: the second runs
   * inline instead of corrupting the first job. */
  atomic_flag busy;
  atomic_uint_fast64_t generation; /* bumped per job; workers wait for a change */
  atomic_int shutdown;
  /* The current job. */
  range_fn fn;
  void* ctx;
  int64_t n, n_chunks;
  atomic_int_fast64_t next_chunk;
  atomic_int active; /* workers still inside the current job */
};

/* Set while a thread runs pool work, so a nested parallel_for runs inline
 * instead of waiting on the workers it is itself occupying. */
static _Thread_local int tls_in_pool;

static void run_chunks(rlx_cpu_pool* p) {
  for (;;) {
    int64_t c = atomic_fetch_add_explicit(&p->next_chunk, 1, memory_order_relaxed);
    if (c >= p->n_chunks) break;
    /* Balanced split: every chunk gets n/n_chunks elements (>= grain), the
     * first n % n_chunks one more. */
    int64_t q = p->n / p->n_chunks, r = p->n % p->n_chunks;
    int64_t begin = c * q + (c < r ? c : r);
    int64_t end = begin + q + (c < r ? 1 : 0);
    p->fn(p->ctx, begin, end);
  }
}

static int wait_for_job(rlx_cpu_pool* p, uint64_t seen) {
  for (int i = 0; i < SPIN_ITERATIONS; i++) {
    if (atomic_load_explicit(&p->generation, memory_order_acquire) != seen) return 1;
    if (atomic_load_explicit(&p->shutdown, memory_order_relaxed)) return 0;
    CPU_RELAX();
  }
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->generation) == seen && !atomic_load(&p->shutdown))
    pthread_cond_wait(&p->wake, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return !atomic_load(&p->shutdown);
}

static void* worker_main(void* arg) {
  rlx_cpu_pool* p = arg;
  uint64_t seen = 0;
  tls_in_pool = 1;
  while (wait_for_job(p, seen)) {
    seen = atomic_load_explicit(&p->generation, memory_order_acquire);
    run_chunks(p);
    if (atomic_fetch_sub_explicit(&p->active, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) return 1;
  return n > 256 ? 256 : (int)n;
}

rlx_status rlx_cpu_pool_create(int threads, rlx_cpu_pool** out) {
  *out = NULL;
  rlx_cpu_pool* p = calloc(1, sizeof *p);
  if (!p) return RLX_RESOURCE_EXHAUSTED;
  p->n_threads = threads > 0 ? threads : online_cores();
  if (p->n_threads > 256) p->n_threads = 256;
  atomic_flag_clear(&p->busy);
  atomic_init(&p->generation, 0);
  atomic_init(&p->shutdown, 0);
  atomic_init(&p->next_chunk, 0);
  atomic_init(&p->active, 0);
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return RLX_RESOURCE_EXHAUSTED;
  }
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  if (p->n_threads > 1) {
    p->workers = calloc((size_t)(p->n_threads - 1), sizeof *p->workers);
    if (!p->workers) {
      rlx_cpu_pool_destroy(p);
      return RLX_RESOURCE_EXHAUSTED;
    }
    for (int i = 0; i < p->n_threads - 1; i++) {
      if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) break;
      p->n_workers++;
    }
  }
  /* A thread that failed to start just makes the pool smaller. */
  p->n_threads = p->n_workers + 1;
  *out = p;
  return RLX_OK;
}

void rlx_cpu_pool_destroy(rlx_cpu_pool* p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->shutdown, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
  free(p->workers);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int rlx_cpu_pool_threads(const rlx_cpu_pool* p) { return p ? p->n_threads : 1; }

static void wait_for_workers(rlx_cpu_pool* p) {
  for (int i = 0; i < SPIN_ITERATIONS; i++) {
    if (atomic_load_explicit(&p->active, memory_order_acquire) == 0) return;
    CPU_RELAX();
  }
  pthread_mutex_lock(&p->mu);
  while (atomic_load_explicit(&p->active, memory_order_acquire) != 0)
    pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

void rlx_cpu_parallel_for(rlx_cpu_pool* p, int64_t n, int64_t grain,
                          void (*fn)(void* ctx, int64_t begin, int64_t end), void* ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int threads = rlx_cpu_pool_threads(p);
  if (threads <= 1 || n < 2 * grain || tls_in_pool) {
    fn(ctx, 0, n);
    return;
  }
  if (atomic_flag_test_and_set_explicit(&p->busy, memory_order_acquire)) {
    fn(ctx, 0, n); /* another caller holds the pool */
    return;
  }
  int64_t n_chunks = n / grain;
  if (n_chunks > threads) n_chunks = threads;
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->n_chunks = n_chunks;
  atomic_store_explicit(&p->next_chunk, 0, memory_order_relaxed);
  atomic_store_explicit(&p->active, p->n_workers, memory_order_relaxed);
  /* The release on generation publishes the job fields above. */
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);

  tls_in_pool = 1;
  run_chunks(p);
  tls_in_pool = 0;
  wait_for_workers(p);
  atomic_flag_clear_explicit(&p->busy, memory_order_release);
}
