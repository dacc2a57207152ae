/* Constant folding: values that depend on constants only are computed once,
 * on the host, with the CPU reference kernels (the oracle, handed in as
 * rlx_fold_step_fn), called directly:
 * decompose -> plan -> lower -> rlx_ref_run_step over a host arena. No
 * executable, no device registry: passes stay below the runtime, and the ONNX
 * importer (io) folds shape computations without compiling anything.
 *
 * The steps are the ones rlx_compile(.., "cpu") with options.reference = 1
 * would run (same decomposition, same 64-byte plan), so a folded value is
 * bit for bit what the CPU reference computes at run time. */
#ifndef RLX_PASSES_FOLD_H
#define RLX_PASSES_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"

#include "passes/lower.h"

/* Runs one lowered step against a host arena. Callers pass the CPU
 * reference's rlx_ref_run_step (backends/cpu/cpu.h): it is handed in, so
 * the passes layer does not reach up into the backends. */
typedef rlx_status (*rlx_fold_step_fn)(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                       rlx_error* err);

/* One evaluated value; data is malloc'd (free()), never NULL. */
typedef struct rlx_fold_value {
  rlx_type type; /* static dims */
  void* data;
  size_t bytes;
} rlx_fold_value;

void rlx_fold_value_free(rlx_fold_value* v);

/* Evaluates g's outputs once. g holds constants and computations on them
 * only (an Input or Param is INVALID_ARGUMENT), with static dims.
 * out_values has room for g->n_outputs; on failure nothing is left
 * allocated. Errors (RESOURCE_EXHAUSTED, a kernel's OUT_OF_RANGE, ...) go to
 * g->err. Random ops run with seed 0. */
rlx_status rlx_fold_evaluate(rlx_graph* g, rlx_fold_step_fn run_step, rlx_fold_value* out_values);

/* Graph -> graph: *out is g with every value that depends on constants only
 * (computed by a non-leaf node whose inputs all are, transitively,
 * Constants; Sample excluded: it is seeded per run) replaced, where some
 * remaining node or a graph output reads it, by a Constant holding its
 * value. Nodes and Constants that only fed folded values are dropped
 * (Inputs and Params always stay). Labels, symbols and
 * the output order are kept. When the values to evaluate exceed max_bytes
 * in all, nothing is folded (*out is a copy). *out_folded (may be NULL)
 * receives the number of nodes removed. Errors go to g->err. */
rlx_status rlx_fold_constants(rlx_graph* g, rlx_fold_step_fn run_step, int64_t max_bytes,
                              rlx_graph** out, int32_t* out_folded);

#endif
