/* Hoisting parameter-only work out of every run.
 *
 * ONNX initializers and builder params are PARAM leaves, fed at run time, so
 * whatever the graph computes from params (and constants) alone would run on
 * every rlx_exec_run: the BatchNorm fold's rescaled weights, ConvTranspose's
 * reversed weights, casts and transposes of weights. This pass moves such
 * work into a separate *derived* graph (params -> hoisted values) and gives
 * the run graph one new PARAM leaf per hoisted value in its place. The
 * runtime (executable.c) evaluates the derived graph on the CPU whenever the
 * params it reads change, and uploads the results like params.
 *
 * A node is hoisted when every input is computed from PARAM / CONSTANT
 * leaves only and its op is deterministic (Sample draws from the run's seed;
 * Deferred is not a computation). A hoisted value that the run still reads
 * becomes a leaf only when
 *  - it costs no more memory than the leaves it is computed from (their
 *    bytes, each leaf counted once): an Expand of a small param to a large
 *    tensor stays in the run;
 *  - its cone does some work (not views of one leaf alone: those cost no
 *    step anyway);
 *  - it is not a graph output (a param-only output is computed by the run
 *    as before).
 * Otherwise its node stays in the run, and its inputs are considered in
 * its place; when a hoisted node also reads it, the derived graph computes
 * it as well. A graph that reads no INPUT hoists nothing: it is param work
 * as a whole (the derived graph itself, compiled for the CPU, is one).
 *
 * Hoisted leaves are named "hoisted.<k>" (a suffix added if the graph has
 * that name already); they never reach the param listing, which comes from
 * the user's graph. Shapes must be static (the compiled graph is
 * specialised).
 *
 * Training (issue 15) will update params on the device, with optimizer
 * steps that write a param's bytes in the arena. A value hoisted from such
 * a param would then be stale: the host copy it is computed from no longer
 * holds the param, and nothing re-evaluates it after a device-side write.
 * Hoisting must then exclude every param an optimizer writes (treat it like
 * an INPUT here), or re-run the derived graph on the device after each
 * update. */
#ifndef RLX_PASSES_HOIST_H
#define RLX_PASSES_HOIST_H

#include "ir/graph.h"

/* What a hoist moved out of the run. */
typedef struct rlx_hoist_stats {
  int32_t values; /* hoisted values: leaves of the run graph, outputs of the derived */
  int32_t nodes;  /* nodes moved out of the run */
  uint64_t bytes; /* bytes of the hoisted values */
} rlx_hoist_stats;

/* Picks the nodes of g to hoist: *out_hoisted (malloc'd, one byte per node
 * of g, 1 = moves out of the run). Failures are reported on g. */
rlx_status rlx_hoist_select(const rlx_graph* g, uint8_t** out_hoisted);

/* Rewrites g without the nodes marked in `hoisted` (from rlx_hoist_select
 * on g, or on a graph of the same structure): *out_run (new) reads each
 * hoisted value it needs from a new PARAM leaf, in value order; params and
 * constants only hoisted nodes read are dropped. *out_derived (may be NULL:
 * not built) receives the graph computing those values, in the same order,
 * as its outputs, from the params (same names) and constants they need, or
 * NULL when nothing is hoisted. *out_leaves (may be NULL) receives the
 * value id in *out_run of each hoisted leaf (malloc'd, stats->values
 * entries). Failures are reported on g. */
rlx_status rlx_hoist_apply(rlx_graph* g, const uint8_t* hoisted, rlx_graph** out_run,
                           rlx_graph** out_derived, rlx_tensor** out_leaves,
                           rlx_hoist_stats* stats);

#endif
