/* WebGPU backend (Dawn's webgpu.h, loaded at run time).
 *
 * The arena is one storage buffer. When it fits maxStorageBufferBindingSize
 * every step binds all of it; otherwise each step binds a window of that
 * size placed (by its dynamic offset) over the bytes it touches, and a step
 * whose bytes are too far apart for one window has them staged: copied into
 * a staging buffer, run there, and its writes copied back. Every step's
 * record is written once per step list into a parameter buffer (bound with a
 * dynamic offset); only the per-run seed and the error word are rewritten,
 * and only when they change.
 *
 * A run is one command encoder and one compute pass for the whole schedule
 * (Dawn orders dependent dispatches of a pass), followed in the same
 * submission by copies of the outputs (and the run state) into a readback
 * buffer that is mapped once; downloads of those bytes are then served from
 * the host snapshot. Steps the GPU does not run (RLX_K_HOST, Sample, f64
 * arithmetic) split the schedule: the host downloads their byte ranges, runs
 * the CPU reference and uploads what they wrote. Feeds copy on the GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "backends/common/common.h"
#include "runtime/trace.h"
#include "backends/webgpu/wg_backend.h"
#include "backends/webgpu/wg_internal.h"

enum { MAX_MERGED = RLX_STEP_MAX_IN + RLX_STEP_MAX_OUT };

/* Bytes of a staged step: merged ranges and where each lies in staging. */
typedef struct staged_plan {
  int n;
  rlx_range r[MAX_MERGED];
  uint64_t at[MAX_MERGED];
  uint8_t written[MAX_MERGED];
} staged_plan;

typedef struct wg_program {
  rlx_step* steps; /* private copy: identifies the list for the extent cache */
  int32_t n;
  WGPUBuffer params;
  WGPUBindGroup bg, bg_staged;
  rlx_wg_dispatch* disp;
  uint8_t* on_host;
  uint32_t* window_at; /* per step: dynamic offset of its arena window */
  staged_plan** staged;  /* per step: NULL unless staged */
  rlx_step_list* host_lowered;
} wg_program;

/* Readback of the last run: the run state and the outputs' bytes. */
typedef struct snapshot {
  int n;
  rlx_range* r;
  uint8_t* valid;
  uint64_t* at; /* offset of range i in data */
  uint8_t* data;
  uint64_t cap;
  WGPUBuffer buf;
  uint64_t buf_size;
} snapshot;

/* RLX_WG_PROFILE=1: where the fixed cost of a run goes, as the mean time of
 * each part over the runs, printed to stderr when the executable goes. */
enum { PH_PREPARE, PH_ENCODE, PH_SUBMIT, PH_SCOPE, PH_WAIT, PH_COPY, PH_COUNT };
static const char* const phase_name[PH_COUNT] = {"prepare", "encode", "submit",
                                                 "error scope", "wait+map", "finish"};
typedef struct run_profile {
  int on;
  double t, us[PH_COUNT];
  uint64_t runs;
} run_profile;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Charges the time since the last mark to phase ph. */
static void mark(run_profile* p, int ph) {
  if (!p->on) return;
  double t = now_us();
  p->us[ph] += t - p->t;
  p->t = t;
}

static void print_profile(const run_profile* p) {
  if (!p->on || p->runs == 0) return;
  double total = 0;
  fprintf(stderr, "webgpu run profile (%llu runs, mean us):", (unsigned long long)p->runs);
  for (int k = 0; k < PH_COUNT; k++) {
    fprintf(stderr, " %s %.1f,", phase_name[k], p->us[k] / (double)p->runs);
    total += p->us[k];
  }
  fprintf(stderr, " total %.1f\n", total / (double)p->runs);
}

struct rlx_backend_exec {
  rlx_wg_context* c;
  uint64_t arena_bytes, arena_size, window;
  WGPUBuffer arena, run, staging, scratch, readback;
  uint64_t staging_size, scratch_size, readback_size;
  rlx_program_cache programs; /* wg_program* for the compiled list and active extents */
  rlx_host_mirror mirror;      /* host fallback's copy of the arena (and debug_nans checks) */
  int debug_nans;              /* one step per submission, outputs checked after each */
  snapshot snap;
  uint64_t seed;
  int seed_written, err_dirty;
  uint8_t* selected; /* per graph output, from select_outputs (NULL = all) */
  int32_t n_selected;
  rlx_wg_stats stats;
  run_profile prof;
  /* Tracing's timestamps (trace_timestamps): -1 not asked yet, 0 none. */
  int ts_state;
  WGPUQuerySet ts_set;
  WGPUBuffer ts_resolve, ts_read;
};

/* ------------------------------------------------------------ helpers */

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }

static rlx_status check_range(const rlx_backend_exec* be, uint64_t off, uint64_t bytes,
                              rlx_error* err) {
  if (off > be->arena_bytes || bytes > be->arena_bytes - off)
    return rlx_fail(err, RLX_INTERNAL, "webgpu: arena access [%llu, +%llu) outside %llu bytes",
                    (unsigned long long)off, (unsigned long long)bytes,
                    (unsigned long long)be->arena_bytes);
  return RLX_OK;
}

static void release_buffer(rlx_wg_context* c, WGPUBuffer* b) {
  if (!*b) return;
  c->f.wgpuBufferDestroy(*b);
  c->f.wgpuBufferRelease(*b);
  *b = NULL;
}

/* A buffer of at least `size` bytes in *b (grown by replacement). */
static rlx_status ensure_buffer(rlx_backend_exec* be, WGPUBuffer* b, uint64_t* have, uint64_t size,
                                WGPUFlags usage, const char* what, rlx_error* err) {
  if (*b && *have >= size) return RLX_OK;
  release_buffer(be->c, b);
  *have = 0;
  uint64_t want = align_up(size < 4096 ? 4096 : size, 256);
  RLX_RETURN_IF_ERROR(rlx_wg_buffer(be->c, want, usage, err, what, b));
  *have = want;
  return RLX_OK;
}

static WGPUCommandEncoder new_encoder(rlx_backend_exec* be) {
  return be->c->f.wgpuDeviceCreateCommandEncoder(be->c->device, NULL);
}

static void submit(rlx_backend_exec* be, WGPUCommandEncoder enc) {
  rlx_wg_context* c = be->c;
  WGPUCommandBuffer cb = c->f.wgpuCommandEncoderFinish(enc, NULL);
  c->f.wgpuCommandEncoderRelease(enc);
  if (cb) {
    c->f.wgpuQueueSubmit(c->queue, 1, &cb);
    c->f.wgpuCommandBufferRelease(cb);
  }
  be->stats.submits++;
}

static void snapshot_invalidate(rlx_backend_exec* be, uint64_t off, uint64_t bytes) {
  for (int i = 0; i < be->snap.n; i++)
    if (be->snap.r[i].begin < off + bytes && off < be->snap.r[i].end) be->snap.valid[i] = 0;
}

/* ------------------------------------------------------------ transfers */

/* Arena bytes [off, off + bytes) to host memory through a mapped buffer
 * (offset and size widened to the 4-byte copy granule). Caller holds lock. */
static rlx_status read_arena(rlx_backend_exec* be, uint64_t off, void* dst, uint64_t bytes,
                             rlx_error* err) {
  if (bytes == 0) return RLX_OK;
  rlx_wg_context* c = be->c;
  uint64_t lo = align_down(off, 4), hi = align_up(off + bytes, 4);
  if (hi > be->arena_size) return rlx_fail(err, RLX_INTERNAL, "webgpu: read past the arena");
  RLX_RETURN_IF_ERROR(ensure_buffer(be, &be->readback, &be->readback_size, hi - lo,
                                    WGPU_USAGE_MAP_READ | WGPU_USAGE_COPY_DST, "readback", err));
  uint8_t* tmp = malloc((size_t)(hi - lo));
  RLX_CHECK_ALLOC(err, tmp);
  rlx_wg_scope_push(c);
  WGPUCommandEncoder enc = new_encoder(be);
  c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->arena, lo, be->readback, 0, hi - lo);
  submit(be, enc);
  rlx_status s = rlx_wg_scope_pop(c, err, "download");
  if (s == RLX_OK) s = rlx_wg_map_read(c, be->readback, tmp, hi - lo, err);
  if (s == RLX_OK) memcpy(dst, tmp + (off - lo), (size_t)bytes);
  free(tmp);
  return s;
}

/* Host bytes into the arena. writeBuffer wants 4-byte offsets and sizes:
 * partial words at the ends are completed with the arena's current bytes. */
static rlx_status write_arena(rlx_backend_exec* be, uint64_t off, const void* src, uint64_t bytes,
                              rlx_error* err) {
  if (bytes == 0) return RLX_OK;
  rlx_wg_context* c = be->c;
  uint64_t lo = align_down(off, 4), hi = align_up(off + bytes, 4);
  if (hi > be->arena_size) return rlx_fail(err, RLX_INTERNAL, "webgpu: write past the arena");
  rlx_wg_scope_push(c);
  if (lo == off && hi == off + bytes) {
    c->f.wgpuQueueWriteBuffer(c->queue, be->arena, off, src, (size_t)bytes);
    return rlx_wg_scope_pop(c, err, "upload");
  }
  uint8_t* tmp = malloc((size_t)(hi - lo));
  if (!tmp) {
    rlx_wg_scope_pop(c, err, "upload");
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  rlx_status s = read_arena(be, lo, tmp, 4, err);
  if (s == RLX_OK) s = read_arena(be, hi - 4, tmp + (hi - 4 - lo), 4, err);
  if (s == RLX_OK) {
    memcpy(tmp + (off - lo), src, (size_t)bytes);
    c->f.wgpuQueueWriteBuffer(c->queue, be->arena, lo, tmp, (size_t)(hi - lo));
  }
  free(tmp);
  rlx_status s2 = rlx_wg_scope_pop(c, err, "upload");
  return s ? s : s2;
}

static rlx_status wg_upload(rlx_backend_exec* be, uint64_t offset, const void* src,
                            uint64_t bytes, rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  snapshot_invalidate(be, offset, bytes);
  pthread_mutex_lock(&be->c->lock);
  rlx_status s = write_arena(be, offset, src, bytes, err);
  pthread_mutex_unlock(&be->c->lock);
  return s;
}

/* Served from the last run's readback when it holds the bytes. */
static int from_snapshot(const rlx_backend_exec* be, uint64_t off, void* dst, uint64_t bytes) {
  const snapshot* sn = &be->snap;
  for (int i = 0; i < sn->n; i++) {
    if (!sn->valid[i] || off < sn->r[i].begin || off + bytes > sn->r[i].end) continue;
    memcpy(dst, sn->data + sn->at[i] + (off - sn->r[i].begin), (size_t)bytes);
    return 1;
  }
  return 0;
}

static rlx_status wg_download(rlx_backend_exec* be, uint64_t offset, void* dst, uint64_t bytes,
                              rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  if (bytes == 0 || from_snapshot(be, offset, dst, bytes)) return RLX_OK;
  be->stats.sync_downloads++;
  pthread_mutex_lock(&be->c->lock);
  rlx_status s = read_arena(be, offset, dst, bytes, err);
  pthread_mutex_unlock(&be->c->lock);
  return s;
}

/* Device-to-device (feeds): WebGPU copies only between different buffers,
 * so through the scratch buffer, both copies in one submission. */
static rlx_status wg_copy(rlx_backend_exec* be, uint64_t dst, uint64_t src, uint64_t bytes,
                          rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, dst, bytes, err));
  RLX_RETURN_IF_ERROR(check_range(be, src, bytes, err));
  if (bytes == 0 || dst == src) return RLX_OK;
  snapshot_invalidate(be, dst, bytes);
  rlx_wg_context* c = be->c;
  rlx_status s = RLX_OK;
  pthread_mutex_lock(&c->lock);
  if ((dst | src | bytes) % 4 != 0) { /* not copyable on the GPU: through the host */
    uint8_t* tmp = malloc((size_t)bytes);
    if (!tmp) s = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    if (s == RLX_OK) s = read_arena(be, src, tmp, bytes, err);
    if (s == RLX_OK) s = write_arena(be, dst, tmp, bytes, err);
    free(tmp);
  } else {
    s = ensure_buffer(be, &be->scratch, &be->scratch_size, bytes,
                      WGPU_USAGE_COPY_SRC | WGPU_USAGE_COPY_DST, "feed scratch", err);
    if (s == RLX_OK) {
      rlx_wg_scope_push(c);
      WGPUCommandEncoder enc = new_encoder(be);
      c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->arena, src, be->scratch, 0, bytes);
      c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->scratch, 0, be->arena, dst, bytes);
      submit(be, enc);
      s = rlx_wg_scope_pop(c, err, "feed copy");
    }
  }
  pthread_mutex_unlock(&c->lock);
  return s;
}

/* ------------------------------------------------------------ programs */

/* (program cache callback) */
static void program_free(void* be_, void* program) {
  rlx_backend_exec* be = be_;
  wg_program* pg = program;
  if (!pg) return;
  rlx_wg_context* c = be->c;
  if (pg->bg) c->f.wgpuBindGroupRelease(pg->bg);
  if (pg->bg_staged) c->f.wgpuBindGroupRelease(pg->bg_staged);
  release_buffer(c, &pg->params);
  if (pg->host_lowered)
    for (int32_t i = 0; i < pg->n; i++) rlx_step_list_free(&pg->host_lowered[i]);
  if (pg->staged)
    for (int32_t i = 0; i < pg->n; i++) free(pg->staged[i]);
  free(pg->staged);
  free(pg->host_lowered);
  free(pg->window_at);
  free(pg->disp);
  free(pg->on_host);
  free(pg->steps);
  free(pg);
}

static int overlaps(rlx_range a, rlx_range b) { return a.begin < b.end && b.begin < a.end; }

/* The step's ranges merged into disjoint intervals (widened to 4 bytes). */
static void merge_ranges(const rlx_step* s, staged_plan* sp) {
  sp->n = 0;
  rlx_range all[MAX_MERGED];
  uint8_t wr[MAX_MERGED];
  int n = 0;
  for (int32_t k = 0; k < s->n_reads; k++) { all[n] = s->reads[k]; wr[n++] = 0; }
  for (int32_t k = 0; k < s->n_writes; k++) { all[n] = s->writes[k]; wr[n++] = 1; }
  for (int i = 0; i < n; i++) {
    rlx_range r = {align_down(all[i].begin, 4), align_up(all[i].end, 4)};
    uint8_t w = wr[i];
    /* absorb every existing interval this one touches */
    for (int j = 0; j < sp->n;) {
      if (overlaps(r, sp->r[j]) || r.end == sp->r[j].begin || sp->r[j].end == r.begin) {
        if (sp->r[j].begin < r.begin) r.begin = sp->r[j].begin;
        if (sp->r[j].end > r.end) r.end = sp->r[j].end;
        w |= sp->written[j];
        sp->r[j] = sp->r[sp->n - 1];
        sp->written[j] = sp->written[sp->n - 1];
        sp->n--;
      } else {
        j++;
      }
    }
    sp->r[sp->n] = r;
    sp->written[sp->n++] = w;
  }
}

/* Copy of step s with its views moved into the staging buffer. */
static void staged_step(const rlx_step* s, const staged_plan* sp, rlx_step* out) {
  *out = *s;
  rlx_view* views[MAX_MERGED];
  int nv = 0;
  for (int32_t i = 0; i < s->n_in; i++) views[nv++] = &out->in[i];
  for (int32_t i = 0; i < s->n_out; i++) views[nv++] = &out->out[i];
  for (int v = 0; v < nv; v++) {
    if (views[v]->rank < 0) continue;
    rlx_range vr = rlx_view_range(views[v]);
    for (int k = 0; k < sp->n; k++)
      if (vr.begin >= sp->r[k].begin && vr.end <= sp->r[k].end) {
        views[v]->offset = views[v]->offset - sp->r[k].begin + sp->at[k];
        break;
      }
  }
}

/* Window placement of step i: all of the arena, a window over its bytes,
 * or (too far apart) a staged copy. Returns 1 if the GPU runs it. */
static int place_step(rlx_backend_exec* be, wg_program* pg, int32_t i, uint32_t* words,
                      rlx_status* status, rlx_error* err) {
  const rlx_step* s = &pg->steps[i];
  uint32_t max_groups = be->c->limits.maxComputeWorkgroupsPerDimension;
  if (max_groups == 0 || max_groups > 65535) max_groups = 65535;
  rlx_wg_dispatch* d = &pg->disp[i];
  if (be->window >= be->arena_size || s->kernel == RLX_K_HOST)
    return !rlx_wg_encode_step(s, i, 0, be->window, max_groups, words, d);
  uint64_t base = 0;
  if (rlx_step_window(s, be->arena_size, be->window, be->c->offset_align, &base)) {
    pg->window_at[i] = (uint32_t)base;
    return !rlx_wg_encode_step(s, i, base, be->window, max_groups, words, d);
  }
  staged_plan* sp = calloc(1, sizeof *sp);
  if (!sp) { *status = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory"); return 0; }
  merge_ranges(s, sp);
  uint64_t at = 0;
  for (int k = 0; k < sp->n; k++) {
    sp->at[k] = at;
    at = align_up(at + (sp->r[k].end - sp->r[k].begin), 256);
  }
  if (at > be->window) { /* does not fit even staged: host */
    free(sp);
    be->stats.window_host_steps++;
    return 0;
  }
  rlx_step moved;
  staged_step(s, sp, &moved);
  if (rlx_wg_encode_step(&moved, i, 0, be->window, max_groups, words, d)) { free(sp); return 0; }
  pg->staged[i] = sp;
  be->stats.staged_steps++;
  return 1;
}

static rlx_status make_bind_group(rlx_backend_exec* be, WGPUBuffer arena, uint64_t arena_window,
                                  WGPUBuffer params, WGPUBindGroup* out, rlx_error* err) {
  rlx_wg_context* c = be->c;
  WGPUBindGroupEntry e[3];
  memset(e, 0, sizeof e);
  e[0] = (WGPUBindGroupEntry){NULL, 0, arena, 0, arena_window, NULL, NULL};
  e[1] = (WGPUBindGroupEntry){NULL, 1, params, 0, RLX_WG_REC_WORDS * 4, NULL, NULL};
  e[2] = (WGPUBindGroupEntry){NULL, 2, be->run, 0, RLX_WG_RUN_WORDS * 4, NULL, NULL};
  WGPUBindGroupDescriptor d;
  memset(&d, 0, sizeof d);
  d.layout = c->bgl;
  d.entryCount = 3;
  d.entries = e;
  rlx_wg_scope_push(c);
  *out = c->f.wgpuDeviceCreateBindGroup(c->device, &d);
  RLX_RETURN_IF_ERROR(rlx_wg_scope_pop(c, err, "bind group"));
  return *out ? RLX_OK : rlx_fail(err, RLX_INTERNAL, "webgpu: cannot create a bind group");
}

/* Records of every step into one parameter buffer, written once. */
static rlx_status encode_program(rlx_backend_exec* be, wg_program* pg, rlx_error* err) {
  size_t n = (size_t)(pg->n > 0 ? pg->n : 1);
  uint32_t* words = calloc(n * RLX_WG_REC_WORDS, sizeof *words);
  RLX_CHECK_ALLOC(err, words);
  rlx_status s = RLX_OK;
  int any_staged = 0;
  for (int32_t i = 0; i < pg->n && s == RLX_OK; i++) {
    int gpu = place_step(be, pg, i, words + (size_t)i * RLX_WG_REC_WORDS, &s, err);
    pg->on_host[i] = (uint8_t)!gpu;
    if (!gpu) be->stats.host_steps++;
    if (gpu && pg->disp[i].kernel >= RLX_WG_ELTWISE_VEC) be->stats.fast_steps++;
    if (pg->staged[i]) any_staged = 1;
    /* a GPU step must have a pipeline now: compile errors surface at compile */
    if (gpu && s == RLX_OK && pg->disp[i].groups_x) {
      WGPUComputePipeline p;
      s = rlx_wg_pipeline(be->c, pg->disp[i].kernel, pg->disp[i].atomic, err, &p);
    }
  }
  if (s == RLX_OK)
    s = rlx_wg_buffer(be->c, n * RLX_WG_REC_WORDS * 4, WGPU_USAGE_STORAGE | WGPU_USAGE_COPY_DST,
                      err, "step records", &pg->params);
  if (s == RLX_OK) {
    rlx_wg_scope_push(be->c);
    be->c->f.wgpuQueueWriteBuffer(be->c->queue, pg->params, 0, words, n * RLX_WG_REC_WORDS * 4);
    s = rlx_wg_scope_pop(be->c, err, "writing step records");
  }
  free(words);
  if (s == RLX_OK) s = make_bind_group(be, be->arena, be->window, pg->params, &pg->bg, err);
  if (s == RLX_OK && any_staged) {
    s = ensure_buffer(be, &be->staging, &be->staging_size, be->window,
                      WGPU_USAGE_STORAGE | WGPU_USAGE_COPY_SRC | WGPU_USAGE_COPY_DST, "staging", err);
    if (s == RLX_OK) s = make_bind_group(be, be->staging, be->window, pg->params, &pg->bg_staged, err);
  }
  return s;
}

/* (program cache callback) */
static rlx_status program_build(void* be_, const rlx_step_list* list, rlx_error* err,
                                void** out) {
  rlx_backend_exec* be = be_;
  wg_program* pg = calloc(1, sizeof *pg);
  RLX_CHECK_ALLOC(err, pg);
  size_t n = (size_t)(list->n > 0 ? list->n : 1);
  pg->n = list->n;
  pg->steps = malloc(n * sizeof *pg->steps);
  pg->disp = calloc(n, sizeof *pg->disp);
  pg->on_host = calloc(n, 1);
  pg->window_at = calloc(n, sizeof *pg->window_at);
  pg->staged = calloc(n, sizeof *pg->staged);
  pg->host_lowered = calloc(n, sizeof *pg->host_lowered);
  if (!pg->steps || !pg->disp || !pg->on_host || !pg->window_at || !pg->staged || !pg->host_lowered) {
    program_free(be, pg);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (list->n > 0) memcpy(pg->steps, list->steps, (size_t)list->n * sizeof *pg->steps);
  pthread_mutex_lock(&be->c->lock);
  rlx_status s = encode_program(be, pg, err);
  pthread_mutex_unlock(&be->c->lock);
  if (s) {
    program_free(be, pg);
    return s;
  }
  be->stats.recordings++;
  *out = pg;
  return RLX_OK;
}

/* ------------------------------------------------------------ host fallback */

static rlx_status io_read(void* be, uint64_t off, void* dst, uint64_t bytes, rlx_error* err) {
  return read_arena(be, off, dst, bytes, err);
}

static rlx_status io_write(void* be, uint64_t off, const void* src, uint64_t bytes, rlx_error* err) {
  return write_arena(be, off, src, bytes, err);
}

static rlx_arena_io arena_io(rlx_backend_exec* be) {
  rlx_arena_io io = {be, io_read, io_write};
  return io;
}

/* ------------------------------------------------------------ run */

/* Ranges read back with the run: the run state, then the graph outputs
 * (those selected, when the executable says). */
static rlx_status plan_readback(rlx_backend_exec* be, const rlx_run_ctx* ctx, rlx_error* err) {
  snapshot* sn = &be->snap;
  int n_out = ctx && ctx->graph && ctx->plan ? ctx->graph->n_outputs : 0;
  rlx_range* r = realloc(sn->r, sizeof *r * (size_t)(n_out + 1));
  if (r) sn->r = r;
  uint8_t* v = realloc(sn->valid, (size_t)(n_out + 1));
  if (v) sn->valid = v;
  uint64_t* at = realloc(sn->at, sizeof *at * (size_t)(n_out + 1));
  if (at) sn->at = at;
  RLX_CHECK_ALLOC(err, r && v && at ? r : NULL);
  sn->n = 0;
  uint64_t total = align_up(RLX_WG_RUN_WORDS * 4, 16);
  for (int i = 0; i < n_out; i++) {
    if (be->selected && i < be->n_selected && !be->selected[i]) continue;
    rlx_tensor t = ctx->graph->outputs[i];
    uint64_t off = ctx->plan->offset[t], bytes = ctx->plan->bytes[t];
    if (bytes == 0 || off + bytes > be->arena_bytes) continue;
    rlx_range rr = {align_down(off, 4), align_up(off + bytes, 4)};
    int dup = 0;
    for (int k = 0; k < sn->n; k++)
      if (sn->r[k].begin == rr.begin && sn->r[k].end == rr.end) dup = 1;
    if (dup) continue;
    sn->r[sn->n] = rr;
    sn->at[sn->n] = total;
    sn->valid[sn->n++] = 0;
    total = align_up(total + (rr.end - rr.begin), 16);
  }
  if (total > sn->cap) {
    uint8_t* d = realloc(sn->data, (size_t)total);
    RLX_CHECK_ALLOC(err, d);
    sn->data = d;
    sn->cap = total;
  }
  return ensure_buffer(be, &sn->buf, &sn->buf_size, total, WGPU_USAGE_MAP_READ | WGPU_USAGE_COPY_DST,
                       "output readback", err);
}

static void dispatch_step(rlx_backend_exec* be, wg_program* pg, WGPUComputePassEncoder pass,
                          int32_t i, WGPUBindGroup bg, uint32_t window_at) {
  rlx_wg_context* c = be->c;
  const rlx_wg_dispatch* d = &pg->disp[i];
  WGPUComputePipeline p = c->pipes[d->kernel][d->atomic ? 1 : 0];
  uint32_t offsets[2] = {window_at, (uint32_t)i * RLX_WG_REC_WORDS * 4};
  c->f.wgpuComputePassEncoderSetPipeline(pass, p);
  c->f.wgpuComputePassEncoderSetBindGroup(pass, 0, bg, 2, offsets);
  c->f.wgpuComputePassEncoderDispatchWorkgroups(pass, d->groups_x, d->groups_y, 1);
  be->stats.dispatches++;
}

/* A staged step: its bytes into staging, the dispatch, its writes back. */
static void encode_staged(rlx_backend_exec* be, wg_program* pg, WGPUCommandEncoder enc, int32_t i) {
  rlx_wg_context* c = be->c;
  const staged_plan* sp = pg->staged[i];
  for (int k = 0; k < sp->n; k++)
    c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->arena, sp->r[k].begin, be->staging,
                                              sp->at[k], sp->r[k].end - sp->r[k].begin);
  WGPUComputePassEncoder pass = c->f.wgpuCommandEncoderBeginComputePass(enc, NULL);
  dispatch_step(be, pg, pass, i, pg->bg_staged, 0);
  c->f.wgpuComputePassEncoderEnd(pass);
  c->f.wgpuComputePassEncoderRelease(pass);
  for (int k = 0; k < sp->n; k++)
    if (sp->written[k])
      c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->staging, sp->at[k], be->arena,
                                                sp->r[k].begin, sp->r[k].end - sp->r[k].begin);
}

/* Encodes GPU steps [first, end) into enc: one compute pass, broken only
 * around staged steps. */
static void encode_segment(rlx_backend_exec* be, wg_program* pg, WGPUCommandEncoder enc,
                           int32_t first, int32_t end) {
  rlx_wg_context* c = be->c;
  WGPUComputePassEncoder pass = NULL;
  for (int32_t i = first; i < end; i++) {
    if (pg->disp[i].groups_x == 0) continue;
    if (pg->staged[i]) {
      if (pass) {
        c->f.wgpuComputePassEncoderEnd(pass);
        c->f.wgpuComputePassEncoderRelease(pass);
        pass = NULL;
      }
      encode_staged(be, pg, enc, i);
      continue;
    }
    if (!pass) {
      pass = c->f.wgpuCommandEncoderBeginComputePass(enc, NULL);
      be->stats.passes++;
    }
    dispatch_step(be, pg, pass, i, pg->bg, pg->window_at[i]);
  }
  if (pass) {
    c->f.wgpuComputePassEncoderEnd(pass);
    c->f.wgpuComputePassEncoderRelease(pass);
  }
}

static rlx_status check_run_error(const wg_program* pg, const uint32_t* run,
                                  const rlx_run_ctx* ctx, rlx_error* err) {
  if (run[WG_RUN_ERR] == 0) return RLX_OK;
  uint32_t step = run[WG_RUN_ERR_STEP];
  int64_t value = (int64_t)((uint64_t)run[WG_RUN_ERR_LO] | ((uint64_t)run[WG_RUN_ERR_HI] << 32));
  int32_t node = step < (uint32_t)pg->n ? pg->steps[step].node : -1;
  rlx_kernel kind = step < (uint32_t)pg->n ? pg->steps[step].kernel : RLX_K_COUNT;
  return rlx_fail_index(err, ctx, node, rlx_kernel_name(kind), value, run[WG_RUN_ERR_LEN]);
}

/* Seed and error word, written only when they change. */
static void write_run_state(rlx_backend_exec* be, const rlx_run_ctx* ctx) {
  uint64_t seed = ctx ? ctx->seed : 0;
  if (be->seed_written && seed == be->seed && !be->err_dirty) return;
  uint32_t w[RLX_WG_RUN_WORDS] = {(uint32_t)seed, (uint32_t)(seed >> 32), 0, 0, 0, 0, 0, 0};
  be->c->f.wgpuQueueWriteBuffer(be->c->queue, be->run, 0, w, sizeof w);
  be->seed = seed;
  be->seed_written = 1;
  be->err_dirty = 0;
}

/* Appends the readback copies to enc (run state + outputs). */
static void encode_readback(rlx_backend_exec* be, WGPUCommandEncoder enc) {
  rlx_wg_context* c = be->c;
  snapshot* sn = &be->snap;
  c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->run, 0, sn->buf, 0, RLX_WG_RUN_WORDS * 4);
  for (int k = 0; k < sn->n; k++)
    c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->arena, sn->r[k].begin, sn->buf, sn->at[k],
                                              sn->r[k].end - sn->r[k].begin);
}

/* ------------------------------------------------------------ tracing */

static void on_traced_work_done(uint32_t status, void* u1, void* u2) {
  (void)status; (void)u1; (void)u2;
}

/* Whether traced steps get timestamps: the adapter offers timestamp-query
 * and a probe encoder writing one passes Dawn's checks; then the query set
 * (two timestamps: before and after the step), its resolve buffer and a
 * readable copy are made once. Anything refused: host-clock times. Caller
 * holds c->lock. */
static int trace_timestamps(rlx_backend_exec* be) {
  rlx_wg_context* c = be->c;
  if (be->ts_state >= 0 || (be->ts_state = 0, !c->has_timestamps)) return be->ts_state;
  rlx_error ignored;
  rlx_wg_scope_push(c);
  WGPUQuerySetDescriptor d = {NULL, {"rlx trace", WGPU_STRLEN}, WGPU_QUERY_TYPE_TIMESTAMP, 2};
  be->ts_set = c->f.wgpuDeviceCreateQuerySet(c->device, &d);
  WGPUCommandEncoder enc = be->ts_set ? new_encoder(be) : NULL;
  WGPUCommandBuffer cb = NULL;
  if (enc) { /* Dawn validates an encoder's commands at Finish */
    c->f.wgpuCommandEncoderWriteTimestamp(enc, be->ts_set, 0);
    cb = c->f.wgpuCommandEncoderFinish(enc, NULL);
    c->f.wgpuCommandEncoderRelease(enc);
  }
  if (cb) c->f.wgpuCommandBufferRelease(cb);
  rlx_status s = rlx_wg_scope_pop(c, &ignored, "timestamp-query probe");
  if (s == RLX_OK && !cb) s = RLX_UNAVAILABLE;
  if (s == RLX_OK)
    s = rlx_wg_buffer(c, 16, WGPU_USAGE_QUERY_RESOLVE | WGPU_USAGE_COPY_SRC, &ignored, "trace resolve",
                      &be->ts_resolve);
  if (s == RLX_OK)
    s = rlx_wg_buffer(c, 16, WGPU_USAGE_MAP_READ | WGPU_USAGE_COPY_DST, &ignored, "trace readback",
                      &be->ts_read);
  be->ts_state = s == RLX_OK;
  return be->ts_state;
}

static void trace_stamp(rlx_backend_exec* be, WGPUCommandEncoder enc, uint32_t q) {
  be->c->f.wgpuCommandEncoderWriteTimestamp(enc, be->ts_set, q);
}

/* After the step's dispatch: both timestamps into the readable buffer. */
static void trace_resolve(rlx_backend_exec* be, WGPUCommandEncoder enc) {
  rlx_wg_context* c = be->c;
  trace_stamp(be, enc, 1);
  c->f.wgpuCommandEncoderResolveQuerySet(enc, be->ts_set, 0, 2, be->ts_resolve, 0);
  c->f.wgpuCommandEncoderCopyBufferToBuffer(enc, be->ts_resolve, 0, be->ts_read, 0, 16);
}

/* Tracing: waits for the submission of step i just made (one per step)
 * and reports it: its GPU time from the two timestamps, placed at the
 * submission's host time; without timestamps the host time from
 * submission to completion, which includes a submission's fixed cost. */
static rlx_status trace_submitted(rlx_backend_exec* be, const wg_program* pg, int32_t i,
                                  const rlx_trace_run* tr, double t0, rlx_error* err) {
  rlx_wg_context* c = be->c;
  if (be->ts_state == 1) {
    uint64_t ns[2] = {0, 0};
    RLX_RETURN_IF_ERROR(rlx_wg_map_read(c, be->ts_read, ns, sizeof ns, err));
    double dur = ns[1] >= ns[0] ? (double)(ns[1] - ns[0]) * 1e-3 : 0;
    rlx_trace_step(tr, i, &pg->steps[i], NULL, 0, t0, dur,
                   "timestamp queries around the step (one submission per step)");
    return RLX_OK;
  }
  WGPUCallbackInfo cb = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, (void*)on_traced_work_done, NULL, NULL};
  RLX_RETURN_IF_ERROR(rlx_wg_wait_gpu(c, c->f.wgpuQueueOnSubmittedWorkDone(c->queue, cb), err,
                                      "the traced step"));
  rlx_trace_step(tr, i, &pg->steps[i], NULL, 0, t0, rlx_trace_now_us() - t0,
                 "one submission per step, host clock (no timestamp-query)");
  return RLX_OK;
}

static rlx_status run_locked(rlx_backend_exec* be, wg_program* pg, const rlx_run_ctx* ctx,
                             rlx_error* err) {
  rlx_wg_context* c = be->c;
  run_profile* prof = &be->prof;
  const rlx_trace_run* tr = ctx ? ctx->trace : NULL;
  RLX_RETURN_IF_ERROR(plan_readback(be, ctx, err));
  rlx_wg_scope_push(c);
  write_run_state(be, ctx);
  mark(prof, PH_PREPARE);
  rlx_status s = RLX_OK;
  int readback_encoded = 0;
  rlx_arena_io io = arena_io(be);
  int32_t i = 0;
  while (i < pg->n && s == RLX_OK) {
    if (pg->on_host[i]) {
      double t0 = tr ? rlx_trace_now_us() : 0;
      s = rlx_host_run_step(&be->mirror, &io, &pg->steps[i], &pg->host_lowered[i], ctx, err);
      if (s == RLX_OK && tr)
        rlx_trace_step(tr, i, &pg->steps[i], "host", RLX_TRACE_TID_HOST, t0, rlx_trace_now_us() - t0,
                       "wall clock");
      if (s == RLX_OK && be->debug_nans)
        s = rlx_host_check_finite(&be->mirror, &io, &pg->steps[i], ctx, err);
      i++;
      continue;
    }
    int32_t end = i;
    int one_step = be->debug_nans || tr; /* tracing: one step per submission, waited for */
    while (end < pg->n && !pg->on_host[end] && !(one_step && end > i)) end++;
    WGPUCommandEncoder enc = new_encoder(be);
    int stamped = tr && trace_timestamps(be);
    if (stamped) trace_stamp(be, enc, 0);
    encode_segment(be, pg, enc, i, end);
    if (stamped) trace_resolve(be, enc);
    if (end == pg->n && !tr) { /* the last segment carries the readback: one submission */
      encode_readback(be, enc);
      readback_encoded = 1;
    }
    mark(prof, PH_ENCODE);
    double t0 = tr ? rlx_trace_now_us() : 0;
    submit(be, enc); /* before a host step, which reads what this wrote */
    if (tr) s = trace_submitted(be, pg, i, tr, t0, err);
    mark(prof, PH_SUBMIT);
    if (s == RLX_OK && be->debug_nans) /* one step per submission: check it before the arena moves on */
      s = rlx_host_check_finite(&be->mirror, &io, &pg->steps[i], ctx, err);
    i = end;
  }
  if (s == RLX_OK && !readback_encoded) { /* ended on a host step (or no steps) */
    WGPUCommandEncoder enc = new_encoder(be);
    encode_readback(be, enc);
    submit(be, enc);
  }
  rlx_status s2 = rlx_wg_scope_pop(c, err, "run");
  if (s == RLX_OK) s = s2;
  mark(prof, PH_SCOPE);
  if (s) return s;
  snapshot* sn = &be->snap;
  uint64_t total = sn->n ? sn->at[sn->n - 1] + (sn->r[sn->n - 1].end - sn->r[sn->n - 1].begin)
                         : RLX_WG_RUN_WORDS * 4;
  s = rlx_wg_map_read(c, sn->buf, sn->data, total, err);
  mark(prof, PH_WAIT);
  if (s) return s;
  be->stats.readbacks++;
  const uint32_t* run = (const uint32_t*)sn->data;
  if (run[WG_RUN_ERR]) {
    be->err_dirty = 1;
    return check_run_error(pg, run, ctx, err);
  }
  for (int k = 0; k < sn->n; k++) sn->valid[k] = 1;
  return RLX_OK;
}

static rlx_status wg_run(rlx_backend_exec* be, const rlx_step_list* steps, const rlx_run_ctx* ctx,
                         rlx_error* err) {
  if (be->prof.on) be->prof.t = now_us();
  void* cached;
  RLX_RETURN_IF_ERROR(rlx_program_cache_get(&be->programs, steps, err, &cached));
  wg_program* pg = cached;
  for (int k = 0; k < be->snap.n; k++) be->snap.valid[k] = 0;
  pthread_mutex_lock(&be->c->lock);
  rlx_status s = run_locked(be, pg, ctx, err);
  pthread_mutex_unlock(&be->c->lock);
  mark(&be->prof, PH_COPY);
  be->prof.runs++;
  be->stats.runs++;
  return s;
}

/* ------------------------------------------------------------ create / destroy */

static int wg_probe(char* reason, size_t cap) {
  rlx_wg_context* c = rlx_wg_context_get(reason, cap);
  if (!c) return 0;
  /* Features the kernels use; "off" when offered but forced to the fallback. */
  char sg[48] = "";
  if (c->has_subgroups && !c->use_subgroups) snprintf(sg, sizeof sg, ", subgroups off");
  if (c->use_subgroups)
    snprintf(sg, sizeof sg, ", subgroups (%u-%u wide)", c->subgroup_min, c->subgroup_max);
  snprintf(reason, cap, "%s (Dawn/Vulkan)%s%s; Dawn toggles: %s", c->adapter_name,
           c->has_f16 ? (c->use_f16 ? ", shader-f16" : ", shader-f16 off") : "", sg,
           c->toggles[0] ? c->toggles : "none");
  /* Dawn on lavapipe is emulated like Vulkan on lavapipe: "best" skips it. */
  return c->cpu_adapter ? RLX_PROBE_SOFTWARE : RLX_PROBE_HARDWARE;
}

static int wg_supports(const rlx_graph* g, int32_t ni) { return rlx_wg_supports_node(g, ni); }

static void wg_select_outputs(rlx_backend_exec* be, const uint8_t* selected, int32_t n) {
  free(be->selected);
  be->selected = NULL;
  be->n_selected = 0;
  if (!selected || n <= 0) return;
  be->selected = malloc((size_t)n);
  if (!be->selected) return; /* all outputs: correct, only slower */
  memcpy(be->selected, selected, (size_t)n);
  be->n_selected = n;
}

static void wg_destroy(rlx_backend_exec* be) {
  if (!be) return;
  print_profile(&be->prof);
  rlx_wg_context* c = be->c;
  if (c) {
    pthread_mutex_lock(&c->lock);
    rlx_program_cache_free(&be->programs);
    release_buffer(c, &be->ts_resolve);
    release_buffer(c, &be->ts_read);
    if (be->ts_set) {
      c->f.wgpuQuerySetDestroy(be->ts_set);
      c->f.wgpuQuerySetRelease(be->ts_set);
    }
    release_buffer(c, &be->snap.buf);
    release_buffer(c, &be->readback);
    release_buffer(c, &be->scratch);
    release_buffer(c, &be->staging);
    release_buffer(c, &be->run);
    release_buffer(c, &be->arena);
    pthread_mutex_unlock(&c->lock);
  }
  free(be->snap.r);
  free(be->snap.valid);
  free(be->snap.at);
  free(be->snap.data);
  rlx_host_mirror_free(&be->mirror);
  free(be->selected);
  free(be);
}

static rlx_status create_buffers(rlx_backend_exec* be, rlx_error* err) {
  rlx_wg_context* c = be->c;
  if (be->arena_size > c->limits.maxBufferSize)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED,
                    "webgpu: arena of %llu bytes exceeds the largest buffer on %s (%llu bytes)",
                    (unsigned long long)be->arena_bytes, c->adapter_name,
                    (unsigned long long)c->limits.maxBufferSize);
  RLX_RETURN_IF_ERROR(rlx_wg_buffer(c, be->arena_size,
                                    WGPU_USAGE_STORAGE | WGPU_USAGE_COPY_SRC | WGPU_USAGE_COPY_DST,
                                    err, "arena", &be->arena));
  RLX_RETURN_IF_ERROR(rlx_wg_buffer(c, RLX_WG_RUN_WORDS * 4,
                                    WGPU_USAGE_STORAGE | WGPU_USAGE_COPY_SRC | WGPU_USAGE_COPY_DST,
                                    err, "run state", &be->run));
  /* Zeroed so a never-written tensor reads deterministically. */
  rlx_wg_scope_push(c);
  WGPUCommandEncoder enc = new_encoder(be);
  c->f.wgpuCommandEncoderClearBuffer(enc, be->arena, 0, be->arena_size);
  c->f.wgpuCommandEncoderClearBuffer(enc, be->run, 0, RLX_WG_RUN_WORDS * 4);
  submit(be, enc);
  return rlx_wg_scope_pop(c, err, "clearing the arena");
}

static rlx_status wg_create(const rlx_step_list* steps, uint64_t arena_bytes,
                            const rlx_compile_options* opt, rlx_error* err,
                            rlx_backend_exec** out) {
  char reason[256] = "";
  rlx_wg_context* c = rlx_wg_context_get(reason, sizeof reason);
  if (!c) return rlx_fail(err, RLX_UNAVAILABLE, "webgpu: unavailable: %s", reason);
  rlx_backend_exec* be = calloc(1, sizeof *be);
  RLX_CHECK_ALLOC(err, be);
  be->c = c;
  be->prof.on = rlx_env_flag(RLX_ENV_WG_PROFILE);
  be->ts_state = -1;
  be->arena_bytes = arena_bytes;
  be->debug_nans = opt && opt->debug_nans;
  /* Whole offset-alignment units, at least one window when windowed, so
   * a window placed at the end stays inside the buffer. */
  be->arena_size = align_up(arena_bytes ? arena_bytes : 16, c->offset_align);
  be->window = be->arena_size <= c->max_binding ? be->arena_size : c->max_binding;
  be->mirror.backend = "webgpu";
  be->mirror.arena_bytes = be->arena_size;
  pthread_mutex_lock(&c->lock);
  rlx_status s = create_buffers(be, err);
  pthread_mutex_unlock(&c->lock);
  rlx_program_ops ops = {be, program_build, program_free};
  if (s == RLX_OK) s = rlx_program_cache_init(&be->programs, &ops, steps, err);
  if (s) {
    wg_destroy(be);
    return s;
  }
  *out = be;
  return RLX_OK;
}

void rlx_wg_exec_stats(const rlx_backend_exec* be, rlx_wg_stats* out) {
  memset(out, 0, sizeof *out);
  if (!be) return;
  *out = be->stats;
  out->window_bytes = be->window;
  out->arena_bytes = be->arena_size;
}

/* Dispatch report line: the steps this backend moved off their kernels
 * when it encoded them (tests assert native placement through it). */
static void wg_report(const rlx_backend_exec* be, char* buf, size_t cap) {
  const rlx_wg_stats* st = &be->stats;
  int n = snprintf(buf, cap, "webgpu: %llu steps encoded on fast kernels, %llu on the host fallback",
                   (unsigned long long)st->fast_steps, (unsigned long long)st->host_steps);
  if (n < 0 || (size_t)n >= cap || be->window >= be->arena_size) return;
  snprintf(buf + n, cap - (size_t)n,
           "; arena bound through %llu-byte windows: %llu step(s) staged, %llu on the host "
           "because their bytes exceed one window",
           (unsigned long long)be->window, (unsigned long long)st->staged_steps,
           (unsigned long long)st->window_host_steps);
}

const rlx_backend rlx_backend_webgpu = {
    .name = "webgpu",
    .probe = wg_probe,
    .supports = wg_supports,
    .alignment = 256,
    .create = wg_create,
    .destroy = wg_destroy,
    .upload = wg_upload,
    .download = wg_download,
    .copy = wg_copy,
    .run = wg_run,
    .select_outputs = wg_select_outputs,
    .report = wg_report,
};
