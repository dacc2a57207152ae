/* The interface every backend implements. The executable (executable.c) owns
 * the graph, plan and step list; a backend turns the step list into whatever
 * it runs (kernels, pipelines, command buffers) and owns the device arena. */
#ifndef RLX_RUNTIME_BACKEND_H
#define RLX_RUNTIME_BACKEND_H

#include "passes/lower.h"

typedef struct rlx_backend_exec rlx_backend_exec; /* backend-private */


enum { RLX_PROBE_UNAVAILABLE = 0, RLX_PROBE_HARDWARE = 1, RLX_PROBE_SOFTWARE = 2 };

typedef struct rlx_backend {
  const char* name;
  /* RLX_PROBE_HARDWARE or RLX_PROBE_SOFTWARE (usable; software = an
   * emulated device such as lavapipe, which "best" ranks below the CPU
   * backend), else RLX_PROBE_UNAVAILABLE with the reason in `reason`. */
  int (*probe)(char* reason, size_t cap);
  /* 1 if the backend runs node ni natively (else it is decomposed or falls
   * back to the host). */
  int (*supports)(const rlx_graph* g, int32_t ni);
  uint64_t alignment;
  /* Allocates an arena of arena_bytes and prepares the steps. The step list
   * stays owned by the executable and outlives the backend exec. */
  rlx_status (*create)(const rlx_step_list* steps, uint64_t arena_bytes,
                       const rlx_compile_options* opt, rlx_error* err, rlx_backend_exec** out);
  void (*destroy)(rlx_backend_exec* be);
  rlx_status (*upload)(rlx_backend_exec* be, uint64_t offset, const void* src, uint64_t bytes,
                       rlx_error* err);
  rlx_status (*download)(rlx_backend_exec* be, uint64_t offset, void* dst, uint64_t bytes,
                         rlx_error* err);
  /* Device-to-device copy inside the arena (feeds). */
  rlx_status (*copy)(rlx_backend_exec* be, uint64_t dst, uint64_t src, uint64_t bytes,
                     rlx_error* err);
  /* Runs `steps` (the compiled list, or one lowered at an active extent with
   * the same plan). */
  rlx_status (*run)(rlx_backend_exec* be, const rlx_step_list* steps, const rlx_run_ctx* ctx,
                    rlx_error* err);
  /* Optional (NULL: not needed). Which graph outputs the caller will read
   * after the next runs (selected[i] != 0; NULL = all), for backends that
   * read outputs back in the run's own submission (WebGPU). */
  void (*select_outputs)(rlx_backend_exec* be, const uint8_t* selected, int32_t n_outputs);
  /* Optional (NULL: nothing to add). One line for the dispatch report about
   * what the backend decided on its own (steps it moved to the host
   * fallback, bind windows, ...); empty for nothing. */
  void (*report)(const rlx_backend_exec* be, char* buf, size_t cap);
  /* Optional (NULL: one buffer). The size of the buffers the backend splits
   * its arena into (Vulkan, past one allocation): the planner keeps smaller
   * tensors from straddling them (rlx_plan_options.boundary). */
  uint64_t (*arena_chunk)(void);
  /* Optional (NULL: none). Device bytes the exec holds beside its arena
   * (scratch, library workspaces): rlx_memory_stats.backend_bytes. */
  uint64_t (*extra_bytes)(const rlx_backend_exec* be);
} rlx_backend;

extern const rlx_backend rlx_backend_cpu;

/* Registry (device.c): the backend named `name`, or NULL. */
const rlx_backend* rlx_backend_find(const char* name);
/* Like rlx_backend_find without probing, telling the two misses apart:
 * RLX_NOT_FOUND (no such device) or RLX_UNIMPLEMENTED (not built in). */
rlx_status rlx_backend_lookup(const char* name, const rlx_backend** out_backend);

#endif
