/* Elementwise fusion: chains (DAGs) of float elementwise ops become one
 * ElementwiseRegion node (ops.def; program format in ir/region.h).
 *
 * A region grows from a root (visited from the end of the graph) backwards
 * over the producers of its operands: float Binary ops, Activations and
 * Casts between float dtypes whose output has the root's exact type, whose
 * every reader is already in the region and that are not graph outputs.
 * Single-element Constants of the region's dtype become immediates (the
 * Constant node is dropped when nothing else reads it); every other operand
 * is an input, broadcast into the output shape. At most
 * RLX_REGION_MAX_INSTRS instructions and RLX_REGION_MAX_INPUTS inputs; a
 * region of one op is left alone. Producers are taken in descending node
 * order, so when one is considered every region member that could read it
 * has been seen: the pass is linear in the graph (each node is a root once
 * and joins at most one region).
 *
 * Run by rlx_compile after decompose and before hoisting (the nodes hoisting
 * would move out of the run are kept out of regions), before planning, for the
 * backends that run the op natively (CPU, CUDA); RLX_NO_FUSION=1 turns it
 * off. */
#ifndef RLX_PASSES_FUSE_ELEMENTWISE_H
#define RLX_PASSES_FUSE_ELEMENTWISE_H

#include "ir/graph.h"
#include "passes/decompose.h"

typedef struct rlx_fuse_options {
  int allow_f64;            /* regions in f64 (CPU); else f32 / f16 / bf16 only */
  rlx_supports_fn supports; /* only nodes the backend runs natively join (NULL: all) */
  const uint8_t* keep_out;  /* per node of g, 1: never joins (what hoisting will move); may be NULL */
  int32_t max_live;         /* > 0: programs need at most this many registers (rlx_region_max_live) */
} rlx_fuse_options;

/* Rewrites g into a new graph *out (g is left as it was). out_fused
 * (RLX_OP_COUNT entries, may be NULL) is incremented per op by the nodes
 * absorbed into regions; *out_regions (may be NULL) gets the number of
 * regions made. Failures are reported on g. */
rlx_status rlx_fuse_elementwise(rlx_graph* g, const rlx_fuse_options* opt, rlx_graph** out,
                                int32_t* out_fused, int32_t* out_regions);

#endif
