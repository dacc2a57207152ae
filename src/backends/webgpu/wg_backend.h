/* The WebGPU backend's vtable and its statistics (for tests and benches). */
#ifndef RLX_BACKENDS_WEBGPU_WG_BACKEND_H
#define RLX_BACKENDS_WEBGPU_WG_BACKEND_H

#include "runtime/backend.h"

extern const rlx_backend rlx_backend_webgpu;

typedef struct rlx_wg_stats {
  uint64_t runs, submits, passes, dispatches, readbacks, sync_downloads;
  uint64_t recordings;   /* step lists encoded (compile + each new extent) */
  uint64_t host_steps;   /* steps sent to the host fallback when encoded */
  uint64_t staged_steps; /* steps run through the staging buffer */
  uint64_t window_host_steps; /* of host_steps, those whose bytes exceed one window staged */
  uint64_t fast_steps;   /* steps on a fast-path kernel (RLX_WG_ELTWISE_VEC and after) */
  uint64_t window_bytes; /* arena binding window (= arena when it fits) */
  uint64_t arena_bytes;
} rlx_wg_stats;

/* Counters of one backend executable (zeros for NULL). */
void rlx_wg_exec_stats(const rlx_backend_exec* be, rlx_wg_stats* out);

#endif
