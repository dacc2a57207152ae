/* CPU backend: the arena is host memory; each step runs a fast path when one
 * applies (unless options.reference) and the reference kernel otherwise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "backends/common/common.h"
#include "backends/cpu/cpu.h"
#include "ir/dtype.h"
#include "runtime/trace.h"

struct rlx_backend_exec {
  void* arena_base; /* as allocated; arena is this address rounded up to 64 */
  uint8_t* arena;
  uint64_t arena_bytes;
  int reference;
  int debug_nans;
  rlx_cpu_fast fast;
  const rlx_step_list* steps; /* the compiled list (repack.c's plan is for it) */
};

static int cpu_probe(char* reason, size_t cap) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(reason, cap, "%ld cores%s", cores, rlx_cpu_blas_available() ? ", OpenBLAS" : "");
  return 1;
}

static int cpu_supports(const rlx_graph* g, int32_t ni) { return 1; }

static void cpu_destroy(rlx_backend_exec* be) {
  if (!be) return;
  rlx_cpu_pool_destroy(be->fast.pool);
  free(be->fast.packed);
  free(be->fast.pack_tmp);
  free(be->arena_base);
  free(be);
}

static rlx_status cpu_create(const rlx_step_list* steps, uint64_t arena_bytes,
                             const rlx_compile_options* opt, rlx_error* err,
                             rlx_backend_exec** out) {
  rlx_backend_exec* be = calloc(1, sizeof *be);
  RLX_CHECK_ALLOC(err, be);
  if (arena_bytes > SIZE_MAX - 64) {
    free(be);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "arena of %llu bytes does not fit in memory",
                    (unsigned long long)arena_bytes);
  }
  /* Zeroed so that reading a never-written tensor is deterministic. calloc,
   * not memset: a large block comes zeroed from the kernel page by page as
   * it is first touched, so creating an executable (or a clone) does not
   * fault in the whole arena up front. Over-allocated to align to 64. */
  size_t n = (size_t)(arena_bytes ? arena_bytes : 64);
  be->arena_base = calloc(1, n + 64);
  if (!be->arena_base) {
    free(be);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "cannot allocate a %llu-byte arena",
                    (unsigned long long)arena_bytes);
  }
  be->arena = (uint8_t*)(((uintptr_t)be->arena_base + 63) & ~(uintptr_t)63);
  be->arena_bytes = arena_bytes;
  be->reference = opt && opt->reference;
  be->debug_nans = opt && opt->debug_nans;
  if (!be->reference) {
    rlx_status s = rlx_cpu_pool_create(opt ? opt->threads : 0, &be->fast.pool);
    if (s) {
      cpu_destroy(be);
      return rlx_fail(err, s, "cannot start CPU worker threads");
    }
    int want_blas = opt ? opt->use_blas : -1;
    if (want_blas == 1 && !rlx_cpu_blas_available()) {
      cpu_destroy(be);
      return rlx_fail(err, RLX_UNAVAILABLE, "use_blas=1 but OpenBLAS (libopenblas.so.0) is not installed");
    }
    /* Auto: our own GEMM (measured on par with OpenBLAS, see bench/); BLAS on request. */
    be->fast.use_blas = want_blas == 1;
    be->steps = steps;
    if (rlx_cpu_repack_available()) {
      rlx_status s2 = rlx_cpu_repack_plan(steps, &be->fast.packed, &be->fast.n_packed);
      uint64_t tmp = rlx_cpu_repack_tmp_bytes(be->fast.packed, be->fast.n_packed);
      if (s2 == RLX_OK && tmp && !(be->fast.pack_tmp = malloc((size_t)tmp))) s2 = RLX_RESOURCE_EXHAUSTED;
      if (s2 != RLX_OK) {
        cpu_destroy(be);
        return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
      }
    }
  }
  *out = be;
  return RLX_OK;
}

static rlx_status check_range(const rlx_backend_exec* be, uint64_t off, uint64_t bytes,
                              rlx_error* err) {
  if (off > be->arena_bytes || bytes > be->arena_bytes - off)
    return rlx_fail(err, RLX_INTERNAL, "arena access [%llu, +%llu) outside %llu bytes",
                    (unsigned long long)off, (unsigned long long)bytes,
                    (unsigned long long)be->arena_bytes);
  return RLX_OK;
}

/* Interleaved W (repack.c) that bytes [offset, offset + bytes) overlap go
 * back to the plain layout before anything outside the steps sees them. */
static rlx_status plain_range(rlx_backend_exec* be, uint64_t offset, uint64_t bytes,
                              rlx_error* err) {
  (void)err;
  rlx_cpu_repack_unpack_range(be->arena, be->fast.packed, be->fast.n_packed, offset,
                              offset + bytes, be->fast.pack_tmp);
  return RLX_OK;
}

static rlx_status cpu_upload(rlx_backend_exec* be, uint64_t offset, const void* src,
                             uint64_t bytes, rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  RLX_RETURN_IF_ERROR(plain_range(be, offset, bytes, err));
  if (bytes) memcpy(be->arena + offset, src, (size_t)bytes);
  return RLX_OK;
}

static rlx_status cpu_download(rlx_backend_exec* be, uint64_t offset, void* dst, uint64_t bytes,
                               rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  RLX_RETURN_IF_ERROR(plain_range(be, offset, bytes, err));
  if (bytes) memcpy(dst, be->arena + offset, (size_t)bytes);
  return RLX_OK;
}

static rlx_status cpu_copy(rlx_backend_exec* be, uint64_t dst, uint64_t src, uint64_t bytes,
                           rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, dst, bytes, err));
  RLX_RETURN_IF_ERROR(check_range(be, src, bytes, err));
  RLX_RETURN_IF_ERROR(plain_range(be, dst, bytes, err));
  RLX_RETURN_IF_ERROR(plain_range(be, src, bytes, err));
  if (bytes) memmove(be->arena + dst, be->arena + src, (size_t)bytes);
  return RLX_OK;
}

static rlx_status check_step_finite(const rlx_backend_exec* be, const rlx_step* s,
                                    const rlx_run_ctx* ctx, rlx_error* err) {
  for (int32_t k = 0; k < s->n_out; k++) {
    int64_t bad = rlx_view_first_non_finite(be->arena, &s->out[k]);
    if (bad >= 0) return rlx_fail_non_finite(err, ctx, s->node, k, bad);
  }
  return RLX_OK;
}

/* Runs step s: the fast path when one applies, else the reference; *used
 * says which ran (the trace names it). */
static rlx_status run_step(rlx_backend_exec* be, const rlx_step* s, const rlx_run_ctx* ctx,
                           const char** used, rlx_error* err) {
  for (int32_t k = 0; k < s->n_writes; k++)
    RLX_RETURN_IF_ERROR(check_range(be, s->writes[k].begin, s->writes[k].end - s->writes[k].begin, err));
  *used = "fast";
  if (be->reference || !rlx_cpu_fast_step(&be->fast, be->arena, s)) {
    *used = "reference";
    RLX_RETURN_IF_ERROR(rlx_ref_run_step(be->arena, s, ctx, err));
  }
  if (be->debug_nans) RLX_RETURN_IF_ERROR(check_step_finite(be, s, ctx, err));
  return RLX_OK;
}

/* Before running `steps`: each W of the plan interleaved, unless a step of
 * this list (another than the compiled one) touches it otherwise. */
static rlx_status prepare_packed(rlx_backend_exec* be, const rlx_step_list* steps,
                                 rlx_error* err) {
  for (int32_t i = 0; i < be->fast.n_packed; i++) {
    rlx_cpu_packed* r = &be->fast.packed[i];
    int pack = steps == be->steps || !rlx_cpu_repack_conflicts(r, steps);
    rlx_cpu_repack_set(be->arena, r, pack, be->fast.pack_tmp);
  }
  (void)err;
  return RLX_OK;
}

static rlx_status cpu_run(rlx_backend_exec* be, const rlx_step_list* steps,
                          const rlx_run_ctx* ctx, rlx_error* err) {
  const rlx_trace_run* tr = ctx ? ctx->trace : NULL;
  RLX_RETURN_IF_ERROR(prepare_packed(be, steps, err));
  for (int32_t i = 0; i < steps->n; i++) {
    const char* used;
    double t0 = tr ? rlx_trace_now_us() : 0;
    RLX_RETURN_IF_ERROR(run_step(be, &steps->steps[i], ctx, &used, err));
    if (tr) {
      char variant[48];
      snprintf(variant, sizeof variant, "%s %s", rlx_kernel_name(steps->steps[i].kernel), used);
      rlx_trace_step(tr, i, &steps->steps[i], variant, 0, t0, rlx_trace_now_us() - t0, "wall clock");
    }
  }
  return RLX_OK;
}

const rlx_backend rlx_backend_cpu = {
    .name = "cpu",
    .probe = cpu_probe,
    .supports = cpu_supports,
    .alignment = 64,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .run = cpu_run,
};
