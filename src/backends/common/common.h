/* What every GPU backend shares, written once:
 *  - the host fallback: a step the device cannot run executes with the CPU
 *    reference against a host mirror of the arena (the read ranges are
 *    downloaded, the write ranges uploaded back);
 *  - the program cache: the compiled step list's program, plus programs
 *    built for step lists lowered at an active extent, matched by content;
 *  - run-time error messages that name a step's node (NaN/Inf under
 *    debug_nans, an index out of range);
 *  - the native-support rule the shader backends share (no f64
 *    arithmetic); RLX_*_HOST_OPS forcing reads rlx_env_list_has.
 * A backend supplies only its device transfers and program build/free. */
#ifndef RLX_BACKENDS_COMMON_H
#define RLX_BACKENDS_COMMON_H

#include "runtime/backend.h"

/* ------------------------------------------------------------ host fallback */

/* A backend's arena transfers: read device bytes [off, off+bytes) into dst,
 * write src into them. Both complete before returning. */
typedef struct rlx_arena_io {
  void* be;
  rlx_status (*read)(void* be, uint64_t off, void* dst, uint64_t bytes, rlx_error* err);
  rlx_status (*write)(void* be, uint64_t off, const void* src, uint64_t bytes, rlx_error* err);
} rlx_arena_io;

/* The host copy of a device arena, allocated on first use. */
typedef struct rlx_host_mirror {
  const char* backend; /* names the backend in messages */
  uint64_t arena_bytes;
  uint8_t* bytes;
} rlx_host_mirror;

void rlx_host_mirror_free(rlx_host_mirror* m);

/* Runs step s on the host: downloads what it reads (and what it writes: a
 * strided output rewrites only some of the bytes its range spans), runs the
 * CPU reference, uploads what it writes. A RLX_K_HOST step runs its node's
 * native steps, lowered against ctx's graph and plan into *lowered (kept
 * by the caller between runs; NULL: lowered for this call only). */
rlx_status rlx_host_run_step(rlx_host_mirror* m, const rlx_arena_io* io, const rlx_step* s,
                             rlx_step_list* lowered, const rlx_run_ctx* ctx, rlx_error* err);

/* debug_nans: downloads step s's outputs and fails naming its node if one
 * holds NaN/Inf. */
rlx_status rlx_host_check_finite(rlx_host_mirror* m, const rlx_arena_io* io, const rlx_step* s,
                                 const rlx_run_ctx* ctx, rlx_error* err);

/* ------------------------------------------------------------ messages */

/* "<op> '<name>' (node N)" for node ni of ctx's graph, or "node N". */
const char* rlx_run_node_name(const rlx_run_ctx* ctx, int32_t node, char* buf, size_t cap);
/* The debug_nans failure: output `out` of node `node` holds a non-finite
 * value at element `element`. */
rlx_status rlx_fail_non_finite(rlx_error* err, const rlx_run_ctx* ctx, int32_t node, int64_t out,
                               int64_t element);
/* A gather/scatter index out of range, as a kernel reported it. */
rlx_status rlx_fail_index(rlx_error* err, const rlx_run_ctx* ctx, int32_t node, const char* kind,
                          int64_t value, int64_t axis_len);

/* ------------------------------------------------------------ program cache */

#define RLX_PROGRAM_CACHE_SLOTS 4

typedef struct rlx_program_ops {
  void* be;
  rlx_status (*build)(void* be, const rlx_step_list* steps, rlx_error* err, void** out);
  void (*free)(void* be, void* program);
} rlx_program_ops;

/* The compiled list's program (`main`), and the least recently used of a
 * few programs for lists lowered at an active extent. A list matches a
 * slot when its steps are byte-identical (hash first, then memcmp). */
typedef struct rlx_program_cache {
  rlx_program_ops ops;
  const rlx_step_list* compiled;
  void* main;
  struct {
    void* program;
    rlx_step* steps; /* copy of the list it was built for */
    int32_t n;
    uint64_t hash, age;
  } slot[RLX_PROGRAM_CACHE_SLOTS];
  uint64_t clock;
} rlx_program_cache;

/* Builds the main program for the compiled list. */
rlx_status rlx_program_cache_init(rlx_program_cache* c, const rlx_program_ops* ops,
                                  const rlx_step_list* compiled, rlx_error* err);
/* The program for `steps`: main for the compiled list, else a cached or
 * newly built one (evicting the least recently used). */
rlx_status rlx_program_cache_get(rlx_program_cache* c, const rlx_step_list* steps, rlx_error* err,
                                 void** out);
/* Frees every program; the cache may be re-initialised. */
void rlx_program_cache_free(rlx_program_cache* c);

/* ------------------------------------------------------------ native support */

/* The rule shared by the shader backends (Vulkan, WebGPU), which have no
 * f64 arithmetic: data movement runs natively in any dtype (converted
 * exactly); any other node with an f64 operand goes to the host. Each
 * backend adds its own kernel limits (attention head dims, ...). */
int rlx_shader_supports_node(const rlx_graph* g, int32_t ni);
/* A DequantGroupedMatMul step's W geometry for the shader kernels
 * (quant.glsl / quant.wgsl): each expert's stored rows of cols elements.
 * 0 when the kernels cannot run it: bad params, or x, y, the scale groups
 * past 32-bit element indices, or W (w_offset bytes into the binding) not
 * 4-byte aligned or past 32-bit byte addresses. */
int rlx_shader_gqmm_geometry(const rlx_gmm_params* p, uint64_t w_offset, int64_t* rows,
                             int64_t* cols);
/* Whether node ni reads or writes a dtype added after bool (i16 u16 u32 u64,
 * float8), which rlx_shader_supports_node sends to the host. */
int rlx_shader_node_has_newer_dtype(const rlx_graph* g, int32_t ni);

#endif
