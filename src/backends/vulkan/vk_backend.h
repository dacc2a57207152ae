/* The Vulkan backend as the rest of rlx sees it (registry, tests). Built only
 * when RLX_HAVE_VULKAN is defined (CMake found glslc and the headers). */
#ifndef RLX_BACKENDS_VULKAN_VK_BACKEND_H
#define RLX_BACKENDS_VULKAN_VK_BACKEND_H

#include "runtime/backend.h"

extern const rlx_backend rlx_backend_vulkan;

/* Introspection for tests (tests/test_vulkan.c). */
typedef struct rlx_vk_stats {
  int32_t segments;     /* command buffers (GPU runs between host steps) */
  int32_t dispatches;   /* recorded dispatches */
  int32_t barriers;     /* recorded step-to-step barriers */
  int32_t host_steps;   /* steps run on the host fallback */
  int32_t recordings;   /* step lists recorded so far (compiled + extents) */
  uint64_t submits;     /* queue submissions by run() so far */
  uint64_t window_bytes;     /* arena bytes one step's binding covers (= arena if it fits) */
  int32_t window_host_steps; /* steps on the host because their bytes span more than a window */
  int32_t vec_steps;         /* steps on the vectorised kernels (eltwise_vec, rows) */
  int32_t staged_steps;      /* steps run through the staging buffer (bytes too far apart) */
  int32_t chunks;            /* buffers (allocations) backing the arena */
  uint64_t chunk_bytes;      /* bytes of each but the last */
} rlx_vk_stats;

/* Stats of a backend exec (the one behind an executable's current binding). */
void rlx_vk_exec_stats(const rlx_backend_exec* be, rlx_vk_stats* out);
/* Validation-layer warnings + errors seen in this process (0 when the layer
 * is off). */
uint64_t rlx_vk_validation_messages(void);
/* GPU time (ms) of this thread's last run under RLX_VK_TIMING=1, else -1. */
double rlx_vk_last_run_ms(void);

#endif
