/* Vulkan backend: the arena is one device-local storage buffer; every step's
 * parameters live in one device-local parameter buffer uploaded at compile
 * time (the push constant carries the record's index); one descriptor set
 * binds arena, parameters and a small host-visible run-state buffer (per-run
 * seed, first run-time error: only Sample and failing index checks touch
 * it, so no hot loop reads host memory).
 *
 * The arena is bound as a dynamic storage buffer whose range is a window:
 * the whole arena when one binding addresses it (maxStorageBufferRange,
 * and our shaders' 32-bit byte offsets), else a window placed per step by
 * its dynamic offset over the bytes it touches (place_window), with the
 * step's view offsets rebased to the window. A step whose bytes are too far
 * apart for one window is staged (its ranges copied into a one-window
 * staging buffer, run there, its writes copied back, all inside the command
 * buffer); one whose own bytes exceed a window runs on the host fallback.
 * Dynamic offsets are 32-bit, so there is one descriptor set per 2 GiB of
 * a chunk (below).
 *
 * A device caps one allocation and one VkBuffer (maxMemoryAllocationSize,
 * often 4 GiB, and maxBufferSize), so the arena is several chunks, each its
 * own buffer and allocation, every one but the last of chunk_bytes; arena
 * byte offsets stay global everywhere else. A window lies inside one chunk
 * (descriptor sets per chunk); a step whose bytes cross a chunk boundary is
 * staged, its copies split per chunk, as are uploads, downloads, copies and
 * the host fallback's transfers (the planner keeps tensors no larger than
 * a chunk inside one: rlx_backend.arena_chunk).
 *
 * RLX_VK_MAX_BINDING=N / RLX_VK_SET_SPAN=N / RLX_VK_MAX_CHUNK=N shrink the
 * window, the set spacing and the chunks (tests run the suite windowed and
 * chunked on lavapipe);
 * RLX_VK_TIMING=1 prints GPU time per run (timestamps) at destroy;
 * RLX_VK_DEBUG_PIPES=1 prints each step's kernel and window at compile.
 *
 * Command buffers are recorded once per step list, with a
 * pipeline barrier only where a step's byte ranges conflict with what ran
 * since the last barrier (read-after-write, write-after-read,
 * write-after-write), and resubmitted on every run.
 *
 * A step the GPU does not run (RLX_K_HOST, or one the encoder refuses) splits
 * the schedule into segments: the host downloads that step's byte ranges
 * into a host mirror of the arena, runs the CPU reference, and uploads what
 * it wrote. An active extent lowers a different step list over the same
 * plan; it is recorded on first use and cached until the extent changes. */
#ifdef RLX_HAVE_VULKAN
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "ir/dtype.h"
#include "backends/vulkan/shaders/layout.h"
#include "backends/common/common.h"
#include "runtime/trace.h"
#include "backends/vulkan/vk_internal.h"

enum { MAX_PENDING = 64 };
static const uint64_t STAGING_CHUNK = 16u << 20;

typedef struct vk_segment {
  int32_t first, count;
  int host;           /* 1: one step on the host fallback */
  VkCommandBuffer cb; /* GPU segments */
} vk_segment;

/* A recorded step list. */
typedef struct vk_program {
  rlx_step* steps; /* private copy: identifies the list for the extent cache */
  int32_t n;
  rlx_vk_buffer params;
  VkDescriptorPool dpool;
  VkDescriptorSet* sets; /* be->set_first[c] + j binds chunk c from j * set_span
                            (dynamic offsets are 32-bit, chunks may not be) */
  uint32_t n_sets;
  vk_segment* segs;
  int32_t n_segs;
  rlx_vk_dispatch* disp;
  uint8_t* on_host;
  uint64_t* window_at; /* per step: arena byte where its window starts */
  rlx_stage_plan** staged; /* per step: NULL unless it runs through the staging buffer */
  VkDescriptorSet stage_set; /* binds the staging buffer as the arena */
  rlx_step_list* host_lowered; /* per step, for RLX_K_HOST nodes (lazily) */
} vk_program;

struct rlx_backend_exec {
  rlx_vk_context* c;
  uint64_t arena_bytes;
  uint64_t arena_size;   /* of the chunks together: whole alignment units */
  uint64_t window;       /* bytes one step's binding covers (at most a chunk) */
  uint64_t window_align; /* dynamic offsets are multiples of this */
  uint64_t set_span;     /* chunk bytes between descriptor sets' base offsets */
  /* The arena: chunk c holds arena bytes [c * chunk_bytes, +its size); every
   * chunk but the last is chunk_bytes long (one allocation and one VkBuffer
   * each: a device caps both) */
  rlx_vk_buffer* chunks;
  uint32_t n_chunks;
  uint64_t chunk_bytes;
  uint32_t* set_first; /* per chunk (and one past): index of its first descriptor set */
  rlx_vk_buffer run, staging;
  rlx_vk_buffer stage; /* device-local, one window: steps too spread out for one */
  /* RLX_VK_TIMING=1: GPU time of each run from timestamps around every
   * segment, summarised on stderr when the exec is destroyed */
  VkQueryPool timer;
  /* RLX_TRACE: two timestamps per step of the longest segment traced so
   * far; trace_stamps: -1 not yet asked, 0 the queue has no timestamps. */
  VkQueryPool trace_q;
  uint32_t trace_q_n;
  int trace_stamps;
  double run_ms[64];
  int32_t n_runs;
  VkCommandPool pool;
  VkCommandBuffer xfer;
  VkFence fence;
  rlx_program_cache programs; /* vk_program* for the compiled list and active extents */
  rlx_host_mirror mirror;      /* host fallback's copy of the arena (and debug_nans checks) */
  int debug_nans;  /* one step per submission, outputs checked after each */
  uint64_t validation_seen;
  rlx_vk_stats stats;
};

/* ------------------------------------------------------------ chunks */

static uint32_t chunk_of(const rlx_backend_exec* be, uint64_t at) {
  uint64_t c = at / be->chunk_bytes;
  return c < be->n_chunks ? (uint32_t)c : be->n_chunks - 1;
}

static uint64_t chunk_begin(const rlx_backend_exec* be, uint32_t c) {
  return (uint64_t)c * be->chunk_bytes;
}

static uint64_t chunk_size(const rlx_backend_exec* be, uint32_t c) {
  return c + 1 < be->n_chunks ? be->chunk_bytes : be->arena_size - chunk_begin(be, c);
}

/* Bytes a binding into chunk c covers: the last chunk may be shorter than
 * a window. */
static uint64_t chunk_window(const rlx_backend_exec* be, uint32_t c) {
  uint64_t n = chunk_size(be, c);
  return n < be->window ? n : be->window;
}

/* Records copies between arena bytes [at, at + bytes) and `other` from
 * other_at, one region per chunk the range crosses. to_arena: other ->
 * arena. */
static void copy_chunked(const rlx_backend_exec* be, VkCommandBuffer cb, VkBuffer other,
                         uint64_t at, uint64_t other_at, uint64_t bytes, int to_arena) {
  while (bytes > 0) {
    uint32_t c = chunk_of(be, at);
    uint64_t local = at - chunk_begin(be, c), room = chunk_size(be, c) - local;
    uint64_t n = bytes < room ? bytes : room;
    VkBuffer chunk = be->chunks[c].buf;
    VkBufferCopy region = {to_arena ? other_at : local, to_arena ? local : other_at, n};
    be->c->f.vkCmdCopyBuffer(cb, to_arena ? other : chunk, to_arena ? chunk : other, 1, &region);
    at += n;
    other_at += n;
    bytes -= n;
  }
}

/* Records arena -> arena copies of `bytes` from src to dst (ranges that do
 * not overlap), split wherever either side crosses a chunk boundary. */
static void copy_within(const rlx_backend_exec* be, VkCommandBuffer cb, uint64_t dst, uint64_t src,
                        uint64_t bytes) {
  while (bytes > 0) {
    uint32_t cs = chunk_of(be, src), cd = chunk_of(be, dst);
    uint64_t ls = src - chunk_begin(be, cs), ld = dst - chunk_begin(be, cd);
    uint64_t n = bytes, room_s = chunk_size(be, cs) - ls, room_d = chunk_size(be, cd) - ld;
    if (n > room_s) n = room_s;
    if (n > room_d) n = room_d;
    VkBufferCopy region = {ls, ld, n};
    be->c->f.vkCmdCopyBuffer(cb, be->chunks[cs].buf, be->chunks[cd].buf, 1, &region);
    src += n;
    dst += n;
    bytes -= n;
  }
}

/* ------------------------------------------------------------ probe */

static int vk_probe(char* reason, size_t cap) {
  rlx_vk_context* c = rlx_vk_context_get(reason, cap);
  if (!c) return RLX_PROBE_UNAVAILABLE;
  snprintf(reason, cap, "%s%s", c->device_name, c->validation ? " (validation layer on)" : "");
  if (c->subgroups) {
    size_t len = strlen(reason);
    snprintf(reason + len, cap - len, ", subgroup %u", c->subgroup_size);
  }
  if (c->coopmat) {
    size_t len = strlen(reason);
    snprintf(reason + len, cap - len, ", f16 cooperative matrices (%s%s)",
             c->coopmat == 1 ? "KHR" : "NV", c->cm2_shader ? " + workgroup scope" : "");
  }
  return c->software ? RLX_PROBE_SOFTWARE : RLX_PROBE_HARDWARE;
}

static int vk_supports(const rlx_graph* g, int32_t ni) { return rlx_vk_supports_node(g, ni); }

/* Fails the call if the validation layer reported anything since the last
 * check: with RLX_VK_VALIDATION=1 a message is a test failure. */
static rlx_status check_validation(rlx_backend_exec* be, rlx_error* err, const char* when) {
  uint64_t n = rlx_vk_validation_count();
  if (n == be->validation_seen) return RLX_OK;
  uint64_t fresh = n - be->validation_seen;
  be->validation_seen = n;
  return rlx_fail(err, RLX_INTERNAL, "vulkan: %llu validation message(s) during %s (see stderr)",
                  (unsigned long long)fresh, when);
}

/* ------------------------------------------------------------ transfers */

static rlx_status begin_xfer(rlx_backend_exec* be, rlx_error* err) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = be->c->f.vkBeginCommandBuffer(be->xfer, &bi);
  return r == VK_SUCCESS ? RLX_OK : rlx_vk_fail(err, r, "vkBeginCommandBuffer");
}

static void memory_barrier(rlx_backend_exec* be, VkCommandBuffer cb, VkPipelineStageFlags src,
                           VkAccessFlags src_access, VkPipelineStageFlags dst,
                           VkAccessFlags dst_access) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  be->c->f.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static rlx_status end_submit_xfer(rlx_backend_exec* be, rlx_error* err) {
  VkResult r = be->c->f.vkEndCommandBuffer(be->xfer);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkEndCommandBuffer");
  return rlx_vk_submit_wait(be->c, be->xfer, be->fence, err);
}

static rlx_status ensure_staging(rlx_backend_exec* be, uint64_t bytes, rlx_error* err) {
  if (be->staging.buf && be->staging.size >= bytes) return RLX_OK;
  rlx_vk_buffer_destroy(be->c, &be->staging);
  return rlx_vk_buffer_create(be->c, bytes, 1, err, &be->staging);
}

static rlx_status check_range(const rlx_backend_exec* be, uint64_t off, uint64_t bytes,
                              rlx_error* err) {
  if (off > be->arena_bytes || bytes > be->arena_bytes - off)
    return rlx_fail(err, RLX_INTERNAL, "vulkan: arena access [%llu, +%llu) outside %llu bytes",
                    (unsigned long long)off, (unsigned long long)bytes,
                    (unsigned long long)be->arena_bytes);
  return RLX_OK;
}

/* Copies between the arena and host memory through the staging buffer, in
 * chunks. to_device: host -> arena. */
static rlx_status transfer(rlx_backend_exec* be, uint64_t offset, void* host, uint64_t bytes,
                           int to_device, rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, offset, bytes, err));
  uint64_t chunk = bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK;
  if (bytes == 0) return RLX_OK;
  RLX_RETURN_IF_ERROR(ensure_staging(be, chunk, err));
  for (uint64_t done = 0; done < bytes; done += chunk) {
    uint64_t n = bytes - done < chunk ? bytes - done : chunk;
    if (to_device) memcpy(be->staging.map, (uint8_t*)host + done, (size_t)n);
    RLX_RETURN_IF_ERROR(begin_xfer(be, err));
    /* Earlier compute work in submission order must be done with the bytes. */
    memory_barrier(be, be->xfer, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                   VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    copy_chunked(be, be->xfer, be->staging.buf, offset + done, 0, n, to_device);
    memory_barrier(be, be->xfer, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    RLX_RETURN_IF_ERROR(end_submit_xfer(be, err));
    if (!to_device) memcpy((uint8_t*)host + done, be->staging.map, (size_t)n);
  }
  return RLX_OK;
}

static rlx_status vk_upload(rlx_backend_exec* be, uint64_t offset, const void* src,
                            uint64_t bytes, rlx_error* err) {
  RLX_RETURN_IF_ERROR(transfer(be, offset, (void*)src, bytes, 1, err));
  return check_validation(be, err, "upload");
}

static rlx_status vk_download(rlx_backend_exec* be, uint64_t offset, void* dst, uint64_t bytes,
                              rlx_error* err) {
  RLX_RETURN_IF_ERROR(transfer(be, offset, dst, bytes, 0, err));
  return check_validation(be, err, "download");
}

/* Device-to-device (feeds). Overlapping ranges go through the staging
 * buffer: vkCmdCopyBuffer forbids overlapping regions. */
static rlx_status vk_copy(rlx_backend_exec* be, uint64_t dst, uint64_t src, uint64_t bytes,
                          rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_range(be, dst, bytes, err));
  RLX_RETURN_IF_ERROR(check_range(be, src, bytes, err));
  if (bytes == 0 || dst == src) return RLX_OK;
  int overlap = dst < src + bytes && src < dst + bytes;
  if (overlap) RLX_RETURN_IF_ERROR(ensure_staging(be, bytes, err));
  RLX_RETURN_IF_ERROR(begin_xfer(be, err));
  const VkAccessFlags any = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                            VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  memory_barrier(be, be->xfer, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, any,
                 VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  if (overlap) {
    copy_chunked(be, be->xfer, be->staging.buf, src, 0, bytes, 0);
    memory_barrier(be, be->xfer, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
    copy_chunked(be, be->xfer, be->staging.buf, dst, 0, bytes, 1);
  } else {
    copy_within(be, be->xfer, dst, src, bytes);
  }
  RLX_RETURN_IF_ERROR(end_submit_xfer(be, err));
  return check_validation(be, err, "copy");
}

/* ------------------------------------------------------------ recording */

typedef struct pending {
  rlx_range r[MAX_PENDING], w[MAX_PENDING];
  int nr, nw;
} pending;

static int overlaps(rlx_range a, rlx_range b) { return a.begin < b.end && b.begin < a.end; }

static int any_overlap(const rlx_range* list, int n, const rlx_range* with, int32_t m) {
  for (int i = 0; i < n; i++)
    for (int32_t j = 0; j < m; j++)
      if (overlaps(list[i], with[j])) return 1;
  return 0;
}

/* 1 if step s must wait for what ran since the last barrier. */
static int needs_barrier(const pending* p, const rlx_step* s) {
  return any_overlap(p->w, p->nw, s->reads, s->n_reads) ||  /* RAW */
         any_overlap(p->w, p->nw, s->writes, s->n_writes) || /* WAW */
         any_overlap(p->r, p->nr, s->writes, s->n_writes) || /* WAR */
         p->nr + s->n_reads > MAX_PENDING || p->nw + s->n_writes > MAX_PENDING;
}

static void compute_barrier(rlx_backend_exec* be, VkCommandBuffer cb) {
  memory_barrier(be, cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
}

/* Binds the window that starts at arena byte `at`: the descriptor set of
 * its chunk below it, the rest as the dynamic offset. */
static void bind_window(rlx_backend_exec* be, const vk_program* pg, VkCommandBuffer cb,
                        uint64_t at) {
  uint32_t c = chunk_of(be, at);
  uint64_t local = at - chunk_begin(be, c), k = local / be->set_span;
  uint32_t dyn = (uint32_t)(local - k * be->set_span);
  be->c->f.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, be->c->pipe_layout, 0, 1,
                                   &pg->sets[be->set_first[c] + k], 1, &dyn);
}

static void dispatch(rlx_backend_exec* be, const vk_program* pg, VkCommandBuffer cb, int32_t i) {
  uint32_t base = (uint32_t)i * RLXVK_REC_WORDS;
  be->c->f.vkCmdPushConstants(cb, be->c->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &base);
  be->c->f.vkCmdDispatch(cb, pg->disp[i].groups_x, pg->disp[i].groups_y, 1);
  be->stats.dispatches++;
}

/* A staged step: its merged byte ranges copied into the staging buffer, the
 * dispatch against it, its written ranges copied back; barriers on both
 * sides order it with every step before and after. */
static void record_staged(rlx_backend_exec* be, const vk_program* pg, VkCommandBuffer cb,
                          int32_t i) {
  rlx_vk_context* c = be->c;
  const rlx_stage_plan* sp = pg->staged[i];
  const VkAccessFlags all = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags both = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  memory_barrier(be, cb, both, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  for (int32_t k = 0; k < sp->n; k++)
    copy_chunked(be, cb, be->stage.buf, sp->r[k].begin, sp->at[k],
                 sp->r[k].end - sp->r[k].begin, 0);
  memory_barrier(be, cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  uint32_t zero = 0;
  c->f.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe_layout, 0, 1,
                               &pg->stage_set, 1, &zero);
  dispatch(be, pg, cb, i);
  memory_barrier(be, cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
  for (int32_t k = 0; k < sp->n; k++)
    if (sp->written[k])
      copy_chunked(be, cb, be->stage.buf, sp->r[k].begin, sp->at[k],
                   sp->r[k].end - sp->r[k].begin, 1);
  memory_barrier(be, cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, both, all);
  be->stats.barriers += 4;
}

/* What recording a segment carries from one step to the next. */
typedef struct recording {
  pending p;
  VkPipeline bound;
  uint64_t bound_at;
} recording;

/* Records step i of the segment into cb (nothing for an empty step). */
static rlx_status record_step(rlx_backend_exec* be, const vk_program* pg, VkCommandBuffer cb,
                              int32_t i, recording* rec, rlx_error* err) {
  rlx_vk_context* c = be->c;
  const rlx_step* s = &pg->steps[i];
  const rlx_vk_dispatch* d = &pg->disp[i];
  if (d->groups_x == 0) return RLX_OK;
  VkPipeline pipe;
  RLX_RETURN_IF_ERROR(rlx_vk_pipeline(c, d->pipe, err, &pipe));
  if (pipe != rec->bound) c->f.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
  rec->bound = pipe;
  if (pg->staged[i]) { /* ordered with everything around it by its own barriers */
    record_staged(be, pg, cb, i);
    rec->p.nr = rec->p.nw = 0;
    rec->bound_at = UINT64_MAX;
    return RLX_OK;
  }
  if (needs_barrier(&rec->p, s)) {
    compute_barrier(be, cb);
    be->stats.barriers++;
    rec->p.nr = rec->p.nw = 0;
  }
  if (pg->window_at[i] != rec->bound_at) {
    rec->bound_at = pg->window_at[i];
    bind_window(be, pg, cb, rec->bound_at);
  }
  dispatch(be, pg, cb, i);
  for (int32_t k = 0; k < s->n_reads; k++) rec->p.r[rec->p.nr++] = s->reads[k];
  for (int32_t k = 0; k < s->n_writes; k++) rec->p.w[rec->p.nw++] = s->writes[k];
  return RLX_OK;
}

/* Records the segment's steps into a new command buffer *cb. `trace`
 * (VK_NULL_HANDLE: none) gets two timestamps per step, queries 2k and
 * 2k + 1 for the segment's k-th step, both at the bottom of the pipe: a
 * step's time runs from when the work before it finished to when its own
 * did. */
static rlx_status record_commands(rlx_backend_exec* be, const vk_program* pg, const vk_segment* seg,
                                  VkQueryPool trace, VkCommandBuffer* cb, rlx_error* err) {
  rlx_vk_context* c = be->c;
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = be->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = c->f.vkAllocateCommandBuffers(c->device, &ai, cb);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  r = c->f.vkBeginCommandBuffer(*cb, &bi);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkBeginCommandBuffer");
  if (be->timer) {
    c->f.vkCmdResetQueryPool(*cb, be->timer, 0, 2);
    c->f.vkCmdWriteTimestamp(*cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, be->timer, 0);
  }
  if (trace) c->f.vkCmdResetQueryPool(*cb, trace, 0, 2 * (uint32_t)seg->count);
  /* Uploads, feeds and host-fallback writes before this submission. */
  memory_barrier(be, *cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                 VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  recording rec = {.p = {.nr = 0, .nw = 0}, .bound = VK_NULL_HANDLE, .bound_at = UINT64_MAX};
  for (int32_t i = seg->first; i < seg->first + seg->count; i++) {
    uint32_t q = 2 * (uint32_t)(i - seg->first);
    if (trace) c->f.vkCmdWriteTimestamp(*cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, trace, q);
    RLX_RETURN_IF_ERROR(record_step(be, pg, *cb, i, &rec, err));
    if (trace) c->f.vkCmdWriteTimestamp(*cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, trace, q + 1);
  }
  /* Results become visible to downloads, copies and the host. */
  memory_barrier(be, *cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                 VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
  if (be->timer) c->f.vkCmdWriteTimestamp(*cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, be->timer, 1);
  r = c->f.vkEndCommandBuffer(*cb);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkEndCommandBuffer");
  return RLX_OK;
}

static rlx_status record_segment(rlx_backend_exec* be, vk_program* pg, vk_segment* seg,
                                 rlx_error* err) {
  return record_commands(be, pg, seg, VK_NULL_HANDLE, &seg->cb, err);
}

/* Set k's arena binding: the staging buffer for the last set, else the
 * chunk whose sets k falls among, from (k - its first) * set_span. */
static VkDescriptorBufferInfo arena_binding(const rlx_backend_exec* be, const vk_program* pg,
                                           uint32_t k) {
  if (k == pg->n_sets) return (VkDescriptorBufferInfo){be->stage.buf, 0, be->window};
  uint32_t c = 0;
  while (k >= be->set_first[c + 1]) c++;
  uint64_t from = (uint64_t)(k - be->set_first[c]) * be->set_span;
  return (VkDescriptorBufferInfo){be->chunks[c].buf, from, chunk_window(be, c)};
}

/* Descriptor sets every set_span of each chunk: binding 0 (dynamic) covers
 * a window from there, 1 the records, 2 the run state. */
static rlx_status make_descriptor_sets(rlx_backend_exec* be, vk_program* pg, rlx_error* err) {
  rlx_vk_context* c = be->c;
  pg->n_sets = be->set_first[be->n_chunks];
  /* one more (the last) for the staging buffer */
  pg->sets = calloc(pg->n_sets + 1, sizeof *pg->sets);
  RLX_CHECK_ALLOC(err, pg->sets);
  uint32_t total = pg->n_sets + 1;
  VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC, total},
                                {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 2 * total}};
  VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pi.maxSets = total;
  pi.poolSizeCount = 2;
  pi.pPoolSizes = ps;
  VkResult r = c->f.vkCreateDescriptorPool(c->device, &pi, NULL, &pg->dpool);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateDescriptorPool");
  for (uint32_t k = 0; k < total; k++) {
    int stage = k == pg->n_sets;
    if (stage && !be->stage.buf) break;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pg->dpool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &c->set_layout;
    r = c->f.vkAllocateDescriptorSets(c->device, &ai, &pg->sets[k]);
    if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkAllocateDescriptorSets");
    VkDescriptorBufferInfo bufs[3] = {arena_binding(be, pg, k),
                                      {pg->params.buf, 0, VK_WHOLE_SIZE},
                                      {be->run.buf, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3];
    memset(w, 0, sizeof w);
    for (uint32_t i = 0; i < 3; i++) {
      w[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      w[i].dstSet = pg->sets[k];
      w[i].dstBinding = i;
      w[i].descriptorCount = 1;
      w[i].descriptorType = i == 0 ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC
                                   : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w[i].pBufferInfo = &bufs[i];
    }
    c->f.vkUpdateDescriptorSets(c->device, 3, w, 0, NULL);
    if (stage) pg->stage_set = pg->sets[k];
  }
  return RLX_OK;
}

/* (program cache callback) */
static void program_free(void* be_, void* program) {
  rlx_backend_exec* be = be_;
  vk_program* pg = program;
  if (!pg) return;
  rlx_vk_context* c = be->c;
  for (int32_t i = 0; i < pg->n_segs; i++)
    if (pg->segs[i].cb) c->f.vkFreeCommandBuffers(c->device, be->pool, 1, &pg->segs[i].cb);
  if (pg->dpool) c->f.vkDestroyDescriptorPool(c->device, pg->dpool, NULL);
  free(pg->sets);
  free(pg->window_at);
  if (pg->staged)
    for (int32_t i = 0; i < pg->n; i++) free(pg->staged[i]);
  free(pg->staged);
  rlx_vk_buffer_destroy(c, &pg->params);
  if (pg->host_lowered)
    for (int32_t i = 0; i < pg->n; i++) rlx_step_list_free(&pg->host_lowered[i]);
  free(pg->host_lowered);
  free(pg->segs);
  free(pg->disp);
  free(pg->on_host);
  free(pg->steps);
  free(pg);
}

/* Copy of step s with every view's offset moved to window start `base`.
 * A view that touches no bytes may lie outside the window: it gets offset 0. */
static void rebased_step(const rlx_step* s, uint64_t base, rlx_step* out) {
  *out = *s;
  rlx_view* views[RLX_STEP_MAX_IN + RLX_STEP_MAX_OUT];
  int nv = 0;
  for (int32_t i = 0; i < s->n_in && i < RLX_STEP_MAX_IN; i++) views[nv++] = &out->in[i];
  for (int32_t i = 0; i < s->n_out && i < RLX_STEP_MAX_OUT; i++) views[nv++] = &out->out[i];
  for (int v = 0; v < nv; v++) {
    if (views[v]->rank < 0) continue;
    rlx_range r = rlx_view_range(views[v]);
    views[v]->offset = r.begin == r.end || views[v]->offset < base ? 0 : views[v]->offset - base;
  }
}

/* The start (*base, arena byte, a multiple of window_align) of a window
 * inside one chunk that covers every byte step s touches: from its lowest
 * byte rounded down, pulled back so the window ends inside the chunk.
 * *bytes: the window's length. Returns 0 if no such window exists (bytes
 * too far apart, or in two chunks: the step is then staged). */
static int place_window(const rlx_backend_exec* be, const rlx_step* s, uint64_t* base,
                        uint64_t* bytes) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int32_t k = 0; k < s->n_reads + s->n_writes; k++) {
    rlx_range r = k < s->n_reads ? s->reads[k] : s->writes[k - s->n_reads];
    if (r.begin < lo) lo = r.begin;
    if (r.end > hi) hi = r.end;
  }
  if (lo > hi) lo = hi = 0; /* touches nothing */
  uint32_t c = chunk_of(be, lo);
  uint64_t w = chunk_window(be, c), last = chunk_begin(be, c) + chunk_size(be, c) - w;
  uint64_t b = lo / be->window_align * be->window_align;
  if (b > last) b = last;
  *base = b;
  *bytes = w;
  return hi <= b + w;
}

/* Encodes step i against its window (the whole arena when one binding
 * covers it). Returns 1 if it must run on the host fallback. */
static int encode_placed(rlx_backend_exec* be, vk_program* pg, int32_t i, int32_t* words) {
  const rlx_step* s = &pg->steps[i];
  uint32_t max_x = be->c->limits.maxComputeWorkGroupCount[0];
  if (max_x > 65535) max_x = 65535;
  pg->window_at[i] = 0;
  if ((be->n_chunks == 1 && be->window >= be->arena_size) || s->kernel == RLX_K_HOST)
    return rlx_vk_encode_step(s, i, be->arena_bytes, max_x, words, &pg->disp[i]);
  uint64_t base = 0, bytes = 0;
  rlx_step moved;
  if (place_window(be, s, &base, &bytes)) {
    rebased_step(s, base, &moved);
    pg->window_at[i] = base;
    return rlx_vk_encode_step(&moved, i, bytes, max_x, words, &pg->disp[i]);
  }
  rlx_stage_plan sp;
  rlx_step_stage_plan(s, be->window_align, &sp);
  if (sp.bytes > be->window) { /* not even its own bytes fit one window */
    memset(&pg->disp[i], 0, sizeof pg->disp[i]);
    be->stats.window_host_steps++;
    return 1;
  }
  rlx_step_staged(s, &sp, &moved);
  if (rlx_vk_encode_step(&moved, i, be->window, max_x, words, &pg->disp[i])) return 1;
  pg->staged[i] = malloc(sizeof sp);
  if (!pg->staged[i]) return 1; /* out of host memory: the host fallback still works */
  *pg->staged[i] = sp;
  be->stats.staged_steps++;
  return 0;
}

/* Host bytes into a device-local buffer through the staging buffer. */
static rlx_status upload_to(rlx_backend_exec* be, VkBuffer dst, const void* src, uint64_t bytes,
                            rlx_error* err) {
  uint64_t chunk = bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK;
  RLX_RETURN_IF_ERROR(ensure_staging(be, chunk, err));
  for (uint64_t done = 0; done < bytes; done += chunk) {
    uint64_t n = bytes - done < chunk ? bytes - done : chunk;
    memcpy(be->staging.map, (const uint8_t*)src + done, (size_t)n);
    RLX_RETURN_IF_ERROR(begin_xfer(be, err));
    VkBufferCopy region = {0, done, n};
    be->c->f.vkCmdCopyBuffer(be->xfer, be->staging.buf, dst, 1, &region);
    memory_barrier(be, be->xfer, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT);
    RLX_RETURN_IF_ERROR(end_submit_xfer(be, err));
  }
  return RLX_OK;
}

/* Encodes every step's record, uploads the records into device-local
 * memory (every invocation reads its record: host memory would put PCIe
 * reads in every kernel) and splits the list into GPU segments and host
 * steps. */
static rlx_status encode_program(rlx_backend_exec* be, vk_program* pg, rlx_error* err) {
  size_t n = (size_t)(pg->n > 0 ? pg->n : 1);
  int32_t* words = calloc(n * RLXVK_REC_WORDS, sizeof *words);
  RLX_CHECK_ALLOC(err, words);
  for (int32_t i = 0; i < pg->n; i++) {
    pg->on_host[i] = (uint8_t)encode_placed(be, pg, i, words + (size_t)i * RLXVK_REC_WORDS);
    int new_seg = pg->n_segs == 0 || pg->on_host[i] || pg->segs[pg->n_segs - 1].host ||
                  be->debug_nans;
    if (new_seg) pg->segs[pg->n_segs++] = (vk_segment){i, 0, pg->on_host[i], VK_NULL_HANDLE};
    pg->segs[pg->n_segs - 1].count++;
    if (pg->on_host[i]) be->stats.host_steps++;
    else if (pg->disp[i].pipe == RLX_VK_PIPE_ELTWISE_VEC || pg->disp[i].pipe == RLX_VK_PIPE_ROWS)
      be->stats.vec_steps++;
    if (rlx_env_flag(RLX_ENV_VK_DEBUG_PIPES))
      fprintf(stderr, "vk step %d %s pipe %d host %d %s@%llu\n", i,
              rlx_kernel_name(pg->steps[i].kernel), (int)pg->disp[i].pipe, pg->on_host[i],
              pg->staged[i] ? "staged" : "window", (unsigned long long)pg->window_at[i]);
  }
  uint64_t bytes = (uint64_t)n * RLXVK_REC_WORDS * 4;
  rlx_status s = RLX_OK;
  int any_staged = 0;
  for (int32_t i = 0; i < pg->n; i++) any_staged |= pg->staged[i] != NULL;
  if (any_staged && !be->stage.buf) s = rlx_vk_buffer_create(be->c, be->window, 0, err, &be->stage);
  if (s == RLX_OK) s = rlx_vk_buffer_create(be->c, bytes, 0, err, &pg->params);
  if (s == RLX_OK) s = upload_to(be, pg->params.buf, words, bytes, err);
  free(words);
  return s;
}

/* (program cache callback) */
static rlx_status program_build(void* be_, const rlx_step_list* list, rlx_error* err,
                                void** out) {
  rlx_backend_exec* be = be_;
  vk_program* pg = calloc(1, sizeof *pg);
  RLX_CHECK_ALLOC(err, pg);
  size_t n = (size_t)(list->n > 0 ? list->n : 1);
  pg->n = list->n;
  pg->steps = malloc(n * sizeof *pg->steps);
  pg->segs = calloc(n, sizeof *pg->segs);
  pg->disp = calloc(n, sizeof *pg->disp);
  pg->on_host = calloc(n, 1);
  pg->window_at = calloc(n, sizeof *pg->window_at);
  pg->staged = calloc(n, sizeof *pg->staged);
  pg->host_lowered = calloc(n, sizeof *pg->host_lowered);
  if (!pg->steps || !pg->segs || !pg->disp || !pg->on_host || !pg->window_at || !pg->staged ||
      !pg->host_lowered) {
    program_free(be, pg);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (list->n > 0) memcpy(pg->steps, list->steps, (size_t)list->n * sizeof *pg->steps);
  rlx_status s = encode_program(be, pg, err);
  if (s == RLX_OK) s = make_descriptor_sets(be, pg, err);
  for (int32_t i = 0; i < pg->n_segs && s == RLX_OK; i++) {
    if (pg->segs[i].host) continue;
    s = record_segment(be, pg, &pg->segs[i], err);
    be->stats.segments++;
  }
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
  return transfer(be, off, dst, bytes, 0, err);
}

static rlx_status io_write(void* be, uint64_t off, const void* src, uint64_t bytes, rlx_error* err) {
  return transfer(be, off, (void*)src, bytes, 1, err);
}

static rlx_arena_io arena_io(rlx_backend_exec* be) {
  rlx_arena_io io = {be, io_read, io_write};
  return io;
}

/* ------------------------------------------------------------ run */

static rlx_status check_run_error(rlx_backend_exec* be, const vk_program* pg,
                                  const rlx_run_ctx* ctx, rlx_error* err) {
  volatile uint32_t* run = be->run.map;
  if (run[RLXVK_RUN_ERR] == 0) return RLX_OK;
  uint32_t step = run[RLXVK_RUN_ERR_STEP];
  int64_t value = (int64_t)((uint64_t)run[RLXVK_RUN_ERR_VAL_LO] |
                            ((uint64_t)run[RLXVK_RUN_ERR_VAL_HI] << 32));
  int32_t node = step < (uint32_t)pg->n ? pg->steps[step].node : -1;
  rlx_kernel kind = step < (uint32_t)pg->n ? pg->steps[step].kernel : RLX_K_COUNT;
  return rlx_fail_index(err, ctx, node, rlx_kernel_name(kind), value, run[RLXVK_RUN_ERR_LEN]);
}

/* Milliseconds between the last submission's two timestamps. */
static double segment_ms(rlx_backend_exec* be) {
  uint64_t ts[2] = {0, 0};
  VkResult r = be->c->f.vkGetQueryPoolResults(be->c->device, be->timer, 0, 2, sizeof ts, ts, 8,
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS || ts[1] < ts[0]) return 0;
  return (double)(ts[1] - ts[0]) * be->c->limits.timestampPeriod * 1e-6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* GPU time of this thread's last run (RLX_VK_TIMING=1; -1: none), for
 * rlx_exec_last_device_ms. */
static _Thread_local double t_last_run_ms = -1.0;
double rlx_vk_last_run_ms(void) { return t_last_run_ms; }

static void print_timing(rlx_backend_exec* be) {
  int32_t n = be->n_runs < 64 ? be->n_runs : 64;
  if (n == 0) return;
  double t[64];
  memcpy(t, be->run_ms, sizeof(double) * (size_t)n);
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  fprintf(stderr, "rlx vulkan timing: %d runs, GPU time median %.4f ms (p10 %.4f, p90 %.4f)\n",
          be->n_runs, t[n / 2], t[n / 10], t[n * 9 / 10]);
}

/* ------------------------------------------------------------ tracing */

/* Whether the queue writes timestamps (its family's timestampValidBits). */
static int queue_has_timestamps(const rlx_vk_context* c) {
  uint32_t n = 0;
  c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &n, NULL);
  VkQueueFamilyProperties q[16];
  if (n > 16) n = 16;
  c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &n, q);
  return c->queue_family < n && q[c->queue_family].timestampValidBits > 0;
}

/* A query pool with room for n timestamps (be->trace_q), grown on demand. */
static rlx_status trace_queries(rlx_backend_exec* be, uint32_t n, rlx_error* err) {
  rlx_vk_context* c = be->c;
  if (be->trace_q && be->trace_q_n >= n) return RLX_OK;
  if (be->trace_q) c->f.vkDestroyQueryPool(c->device, be->trace_q, NULL);
  be->trace_q = VK_NULL_HANDLE;
  be->trace_q_n = 0;
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = n;
  VkResult r = c->f.vkCreateQueryPool(c->device, &qi, NULL, &be->trace_q);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateQueryPool (trace)");
  be->trace_q_n = n;
  return RLX_OK;
}

/* No timestamps on this queue: the submission's host time, split evenly
 * over its steps (the events say so). */
static void trace_split(const vk_program* pg, const vk_segment* seg, const rlx_trace_run* tr,
                        double t0, double t1) {
  double each = (t1 - t0) / (double)(seg->count ? seg->count : 1);
  for (int32_t k = 0; k < seg->count; k++)
    rlx_trace_step(tr, seg->first + k, &pg->steps[seg->first + k], NULL, 0, t0 + each * k, each,
                   "submission wall clock split evenly (queue has no timestamps)");
}

/* The segment's per-step timestamps, placed on the host clock from the
 * submission's host time. */
static rlx_status trace_stamps(rlx_backend_exec* be, const vk_program* pg, const vk_segment* seg,
                               const rlx_trace_run* tr, double t_submit, rlx_error* err) {
  rlx_vk_context* c = be->c;
  uint32_t n = 2 * (uint32_t)seg->count;
  uint64_t* ticks = malloc(sizeof(uint64_t) * n);
  RLX_CHECK_ALLOC(err, ticks);
  VkResult r = c->f.vkGetQueryPoolResults(c->device, be->trace_q, 0, n, sizeof(uint64_t) * n, ticks,
                                          8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) {
    free(ticks);
    return rlx_vk_fail(err, r, "vkGetQueryPoolResults (trace)");
  }
  double us_per_tick = (double)c->limits.timestampPeriod * 1e-3;
  for (int32_t k = 0; k < seg->count; k++) {
    double start = (double)(int64_t)(ticks[2 * k] - ticks[0]) * us_per_tick;
    double dur = (double)(int64_t)(ticks[2 * k + 1] - ticks[2 * k]) * us_per_tick;
    rlx_trace_step(tr, seg->first + k, &pg->steps[seg->first + k], NULL, 0, t_submit + start, dur,
                   "timestamp queries");
  }
  free(ticks);
  return RLX_OK;
}

/* Runs a GPU segment as a one-off command buffer with timestamps around
 * every step (the recorded one has none: tracing off costs nothing). */
static rlx_status submit_traced(rlx_backend_exec* be, const vk_program* pg, const vk_segment* seg,
                                const rlx_trace_run* tr, rlx_error* err) {
  rlx_vk_context* c = be->c;
  if (be->trace_stamps < 0) be->trace_stamps = queue_has_timestamps(c);
  if (!be->trace_stamps || seg->count <= 0) { /* (a pool of no queries is invalid) */
    double t0 = rlx_trace_now_us();
    RLX_RETURN_IF_ERROR(rlx_vk_submit_wait(c, seg->cb, be->fence, err));
    trace_split(pg, seg, tr, t0, rlx_trace_now_us());
    return RLX_OK;
  }
  RLX_RETURN_IF_ERROR(trace_queries(be, 2 * (uint32_t)seg->count, err));
  VkCommandBuffer cb = VK_NULL_HANDLE;
  rlx_status s = record_commands(be, pg, seg, be->trace_q, &cb, err);
  double t_submit = rlx_trace_now_us();
  if (s == RLX_OK) s = rlx_vk_submit_wait(c, cb, be->fence, err);
  if (cb) c->f.vkFreeCommandBuffers(c->device, be->pool, 1, &cb);
  if (s == RLX_OK) s = trace_stamps(be, pg, seg, tr, t_submit, err);
  return s;
}

static rlx_status vk_run(rlx_backend_exec* be, const rlx_step_list* steps, const rlx_run_ctx* ctx,
                         rlx_error* err) {
  void* cached;
  RLX_RETURN_IF_ERROR(rlx_program_cache_get(&be->programs, steps, err, &cached));
  vk_program* pg = cached;
  rlx_arena_io io = arena_io(be);
  volatile uint32_t* run = be->run.map;
  uint64_t seed = ctx ? ctx->seed : 0;
  run[RLXVK_RUN_SEED_LO] = (uint32_t)seed;
  run[RLXVK_RUN_SEED_HI] = (uint32_t)(seed >> 32);
  run[RLXVK_RUN_ERR] = 0;
  double gpu_ms = 0;
  for (int32_t i = 0; i < pg->n_segs; i++) {
    vk_segment* seg = &pg->segs[i];
    if (seg->host) {
      double t0 = ctx && ctx->trace ? rlx_trace_now_us() : 0;
      RLX_RETURN_IF_ERROR(rlx_host_run_step(&be->mirror, &io, &pg->steps[seg->first],
                                            &pg->host_lowered[seg->first], ctx, err));
      if (ctx && ctx->trace)
        rlx_trace_step(ctx->trace, seg->first, &pg->steps[seg->first], "host", RLX_TRACE_TID_HOST,
                       t0, rlx_trace_now_us() - t0, "wall clock");
      continue;
    }
    if (ctx && ctx->trace) RLX_RETURN_IF_ERROR(submit_traced(be, pg, seg, ctx->trace, err));
    else RLX_RETURN_IF_ERROR(rlx_vk_submit_wait(be->c, seg->cb, be->fence, err));
    be->stats.submits++;
    if (be->timer) gpu_ms += segment_ms(be);
    RLX_RETURN_IF_ERROR(check_run_error(be, pg, ctx, err));
    if (be->debug_nans)
      for (int32_t k = seg->first; k < seg->first + seg->count; k++)
        RLX_RETURN_IF_ERROR(rlx_host_check_finite(&be->mirror, &io, &pg->steps[k], ctx, err));
  }
  if (be->timer) be->run_ms[be->n_runs++ % 64] = t_last_run_ms = gpu_ms;
  return check_validation(be, err, "run");
}

/* ------------------------------------------------------------ create / destroy */

static void vk_destroy(rlx_backend_exec* be) {
  if (!be) return;
  rlx_vk_context* c = be->c;
  if (c) {
    /* Every submission was waited for: nothing of ours is in flight (and
     * vkDeviceWaitIdle would race other threads' queue submissions). */
    print_timing(be);
    rlx_program_cache_free(&be->programs);
    if (be->timer) c->f.vkDestroyQueryPool(c->device, be->timer, NULL);
    if (be->trace_q) c->f.vkDestroyQueryPool(c->device, be->trace_q, NULL);
    if (be->xfer) c->f.vkFreeCommandBuffers(c->device, be->pool, 1, &be->xfer);
    if (be->pool) c->f.vkDestroyCommandPool(c->device, be->pool, NULL);
    if (be->fence) c->f.vkDestroyFence(c->device, be->fence, NULL);
    rlx_vk_buffer_destroy(c, &be->staging);
    rlx_vk_buffer_destroy(c, &be->stage);
    rlx_vk_buffer_destroy(c, &be->run);
    for (uint32_t k = 0; be->chunks && k < be->n_chunks; k++)
      rlx_vk_buffer_destroy(c, &be->chunks[k]);
  }
  free(be->chunks);
  free(be->set_first);
  rlx_host_mirror_free(&be->mirror);
  free(be);
}

static rlx_status create_queue_objects(rlx_backend_exec* be, rlx_error* err) {
  rlx_vk_context* c = be->c;
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = c->queue_family;
  VkResult r = c->f.vkCreateCommandPool(c->device, &pi, NULL, &be->pool);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = be->pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  r = c->f.vkAllocateCommandBuffers(c->device, &ai, &be->xfer);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkAllocateCommandBuffers");
  if (rlx_env_flag(RLX_ENV_VK_TIMING)) {
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    r = c->f.vkCreateQueryPool(c->device, &qi, NULL, &be->timer);
    if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateQueryPool");
  }
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  r = c->f.vkCreateFence(c->device, &fi, NULL, &be->fence);
  if (r != VK_SUCCESS) return rlx_vk_fail(err, r, "vkCreateFence");
  return RLX_OK;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Dynamic offsets and windows start at multiples of this: at least the
 * planner's alignment, so rebased views keep theirs. */
static uint64_t window_alignment(const rlx_vk_context* c) {
  uint64_t align = c->limits.minStorageBufferOffsetAlignment;
  return align > 256 ? align : 256;
}

/* The largest chunk: one allocation and one VkBuffer (RLX_VK_MAX_CHUNK
 * lowers it, for tests), in whole alignment units, at least one. */
static uint64_t max_chunk(const rlx_vk_context* c) {
  uint64_t most = UINT64_MAX, align = window_alignment(c);
  if (c->max_allocation && c->max_allocation < most) most = c->max_allocation;
  if (c->max_buffer && c->max_buffer < most) most = c->max_buffer;
  uint64_t forced = rlx_env_size(RLX_ENV_VK_MAX_CHUNK);
  if (forced && forced < most) most = forced;
  most = most / align * align;
  return most ? most : align;
}

/* (backend hook for the memory planner) The device's chunk size, 0 without
 * a device. */
static uint64_t vk_arena_chunk(void) {
  char reason[256];
  rlx_vk_context* c = rlx_vk_context_get(reason, sizeof reason);
  return c ? max_chunk(c) : 0;
}

/* Bytes of the largest device-local memory heap (where the arena goes). */
static uint64_t device_heap(const rlx_vk_context* c) {
  uint64_t most = 0;
  for (uint32_t h = 0; h < c->mem.memoryHeapCount; h++)
    if ((c->mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        c->mem.memoryHeaps[h].size > most)
      most = c->mem.memoryHeaps[h].size;
  return most;
}

/* An arena must fit the device's memory and its allocation count: refused
 * at compile with the numbers (chunks make any size allocatable, and a
 * software device would otherwise take the host's memory until killed). */
static rlx_status check_fits(const rlx_backend_exec* be, rlx_error* err) {
  const rlx_vk_context* c = be->c;
  uint64_t heap = device_heap(c);
  if (heap && be->arena_size > heap)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED,
                    "vulkan: arena of %llu bytes exceeds %s's device memory (%llu bytes)",
                    (unsigned long long)be->arena_bytes, c->device_name, (unsigned long long)heap);
  /* a few allocations are not the arena's: parameters, staging, run state */
  uint64_t count = c->limits.maxMemoryAllocationCount;
  if (count && (uint64_t)be->n_chunks + 16 > count)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED,
                    "vulkan: arena of %llu bytes needs %u chunks of %llu bytes; %s allows %llu "
                    "allocations",
                    (unsigned long long)be->arena_bytes, be->n_chunks,
                    (unsigned long long)be->chunk_bytes, c->device_name, (unsigned long long)count);
  return RLX_OK;
}

/* Descriptor sets per chunk: one every set_span while a whole window still
 * fits after it. */
static rlx_status count_sets(rlx_backend_exec* be, rlx_error* err) {
  be->set_first = calloc((size_t)be->n_chunks + 1, sizeof *be->set_first);
  RLX_CHECK_ALLOC(err, be->set_first);
  uint64_t total = 0;
  for (uint32_t c = 0; c < be->n_chunks; c++) {
    be->set_first[c] = (uint32_t)total;
    total += (chunk_size(be, c) - chunk_window(be, c)) / be->set_span + 1;
    if (total > UINT32_MAX / 2)
      return rlx_fail(err, RLX_RESOURCE_EXHAUSTED,
                      "vulkan: arena of %llu bytes needs %llu descriptor sets",
                      (unsigned long long)be->arena_bytes, (unsigned long long)total);
  }
  be->set_first[be->n_chunks] = (uint32_t)total;
  return RLX_OK;
}

/* Sizes the arena's chunks and the window one binding covers: the smaller
 * of maxStorageBufferRange, what 32-bit byte offsets in our shaders address
 * (RLX_VK_MAX_BINDING lowers it, for tests) and a chunk. */
static rlx_status size_arena(rlx_backend_exec* be, rlx_error* err) {
  const rlx_vk_context* c = be->c;
  be->window_align = window_alignment(c);
  uint64_t binding = c->limits.maxStorageBufferRange;
  if (binding > 0xfffffff0u) binding = 0xfffffff0u;
  uint64_t forced = rlx_env_size(RLX_ENV_VK_MAX_BINDING);
  if (forced && forced < binding) binding = forced;
  binding = binding / be->window_align * be->window_align;
  if (binding == 0) binding = be->window_align;
  be->arena_size = align_up(be->arena_bytes ? be->arena_bytes : 16, be->window_align);
  be->chunk_bytes = max_chunk(c);
  if (be->chunk_bytes > be->arena_size) be->chunk_bytes = be->arena_size;
  uint64_t n = (be->arena_size + be->chunk_bytes - 1) / be->chunk_bytes;
  be->n_chunks = n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
  RLX_RETURN_IF_ERROR(check_fits(be, err));
  be->window = be->chunk_bytes <= binding ? be->chunk_bytes : binding;
  /* descriptor sets start every 2 GiB of a chunk: dynamic offsets are
   * 32-bit (RLX_VK_SET_SPAN lowers it, for tests) */
  uint64_t span = rlx_env_size(RLX_ENV_VK_SET_SPAN);
  be->set_span = span ? align_up(span, be->window_align) : (uint64_t)1 << 31;
  return count_sets(be, err);
}

/* One device-local buffer per chunk (zero_arena clears them). */
static rlx_status create_chunks(rlx_backend_exec* be, rlx_error* err) {
  be->chunks = calloc(be->n_chunks, sizeof *be->chunks);
  RLX_CHECK_ALLOC(err, be->chunks);
  for (uint32_t k = 0; k < be->n_chunks; k++) {
    rlx_error why;
    if (rlx_vk_buffer_create(be->c, chunk_size(be, k), 0, &why, &be->chunks[k]) != RLX_OK)
      return rlx_fail(err, RLX_RESOURCE_EXHAUSTED,
                      "vulkan: arena of %llu bytes, chunk %u of %u (%llu bytes): %s",
                      (unsigned long long)be->arena_bytes, k + 1, be->n_chunks,
                      (unsigned long long)chunk_size(be, k), why.msg);
  }
  return RLX_OK;
}

static rlx_status zero_arena(rlx_backend_exec* be, rlx_error* err) {
  RLX_RETURN_IF_ERROR(begin_xfer(be, err));
  for (uint32_t k = 0; k < be->n_chunks; k++)
    be->c->f.vkCmdFillBuffer(be->xfer, be->chunks[k].buf, 0, VK_WHOLE_SIZE, 0);
  memory_barrier(be, be->xfer, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                 VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                 VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  return end_submit_xfer(be, err);
}

static rlx_status vk_create(const rlx_step_list* steps, uint64_t arena_bytes,
                            const rlx_compile_options* opt, rlx_error* err,
                            rlx_backend_exec** out) {
  char reason[256] = "";
  rlx_vk_context* c = rlx_vk_context_get(reason, sizeof reason);
  if (!c) return rlx_fail(err, RLX_UNAVAILABLE, "vulkan: %s", reason);
  rlx_backend_exec* be = calloc(1, sizeof *be);
  RLX_CHECK_ALLOC(err, be);
  be->c = c;
  be->arena_bytes = arena_bytes;
  be->mirror.backend = "vulkan";
  be->mirror.arena_bytes = arena_bytes;
  be->debug_nans = opt && opt->debug_nans;
  be->trace_stamps = -1; /* asked at the first traced run */
  be->validation_seen = rlx_vk_validation_count();
  rlx_status s = size_arena(be, err);
  be->stats.window_bytes = be->window;
  be->stats.chunks = (int32_t)be->n_chunks;
  be->stats.chunk_bytes = be->chunk_bytes;
  /* whole alignment units: 64-bit accesses at the end and a window placed
   * at the end stay inside the buffer */
  if (s == RLX_OK) s = create_chunks(be, err);
  if (s == RLX_OK && rlx_env_flag(RLX_ENV_VK_DEBUG_PIPES))
    fprintf(stderr, "vk arena %llu bytes: %u chunk(s) of up to %llu, %llu-byte windows\n",
            (unsigned long long)be->arena_bytes, be->n_chunks,
            (unsigned long long)be->chunk_bytes, (unsigned long long)be->window);
  if (s == RLX_OK) s = rlx_vk_buffer_create(c, RLXVK_RUN_WORDS * 4, 1, err, &be->run);
  if (s == RLX_OK) s = create_queue_objects(be, err);
  if (s == RLX_OK) s = zero_arena(be, err);
  rlx_program_ops ops = {be, program_build, program_free};
  if (s == RLX_OK) s = rlx_program_cache_init(&be->programs, &ops, steps, err);
  if (s == RLX_OK) s = check_validation(be, err, "compile");
  if (s) {
    vk_destroy(be);
    return s;
  }
  memset(be->run.map, 0, RLXVK_RUN_WORDS * 4);
  *out = be;
  return RLX_OK;
}

void rlx_vk_exec_stats(const rlx_backend_exec* be, rlx_vk_stats* out) {
  memset(out, 0, sizeof *out);
  if (be) *out = be->stats;
}

/* Dispatch report line: the steps this backend moved off their kernels. */
static void vk_report(const rlx_backend_exec* be, char* buf, size_t cap) {
  const rlx_vk_stats* st = &be->stats;
  int n = snprintf(buf, cap, "vulkan: %d dispatches, %d on vectorised kernels, %d on the host fallback",
                   st->dispatches, st->vec_steps, st->host_steps);
  if (n < 0 || (size_t)n >= cap || be->window >= be->arena_size) return;
  int m = snprintf(buf + n, cap - (size_t)n,
                   "; arena bound through %llu-byte windows: %d step(s) staged, %d on the host "
                   "because their bytes exceed one window",
                   (unsigned long long)be->window, st->staged_steps, st->window_host_steps);
  if (m < 0 || (size_t)(n + m) >= cap || be->n_chunks == 1) return;
  snprintf(buf + n + m, cap - (size_t)(n + m), "; arena in %u buffers of up to %llu bytes",
           be->n_chunks, (unsigned long long)be->chunk_bytes);
}

const rlx_backend rlx_backend_vulkan = {
    .name = "vulkan",
    .probe = vk_probe,
    .supports = vk_supports,
    .alignment = 256,
    .create = vk_create,
    .destroy = vk_destroy,
    .upload = vk_upload,
    .download = vk_download,
    .copy = vk_copy,
    .run = vk_run,
    .report = vk_report,
    .arena_chunk = vk_arena_chunk,
};
#else
typedef int rlx_vk_backend_unused;
#endif
