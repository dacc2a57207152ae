/* Decompose: rewrites ops a backend lacks into ops it has.
 *
 * Builds a new graph node by node. A node the backend supports (or that has
 * no rule) is copied; an unsupported node with a rule is replaced by its
 * expansion. Rules (each exact, so results match the fused op):
 *   FusedMatMulBiasAct        -> MatMul + Add(bias) + Activation
 *   FusedResidualLayerNorm    -> Add(x, residual) [+ Add(bias)] + LayerNorm
 *   FusedResidualRmsNorm      -> Add(x, residual) [+ Add(bias)] + RmsNorm
 *   Softmax / LogSoftmax / Cumsum / ArgMax / ArgMin / TopK on a non-last axis
 *                             -> Transpose to last, op, Transpose back
 *   Conv                      -> [Pad] + Im2Col + batched MatMul over the
 *                                groups (+ Add bias, Add residual, Activation)
 *   ConvTranspose             -> zero insertion (Reshape + Pad of size-1
 *                                dims), Pad, weights swapped per group and
 *                                Reversed, then the Conv rule (stride 1)
 *   Im2Col with pads          -> Pad + Im2Col, on every backend (the
 *                                lowering of Im2Col is one strided copy)
 *   ElementwiseRegion         -> one Binary / Activation / Cast / scalar
 *                                Constant per instruction (+ Expand when
 *                                the result spans fewer dims than inputs)
 *   LRN (always, no backend has it) -> Mul, Reshape, avg Pool over channels,
 *                             Mul, Add, Pow, Div
 * Nodes still unsupported after this run on the host fallback. */
#ifndef RLX_PASSES_DECOMPOSE_H
#define RLX_PASSES_DECOMPOSE_H

#include "ir/graph.h"

typedef int (*rlx_supports_fn)(const rlx_graph* g, int32_t ni);

/* out_decomposed[op] (RLX_OP_COUNT entries, may be NULL) counts the nodes of
 * each op that were rewritten. */
rlx_status rlx_decompose(rlx_graph* g, rlx_supports_fn supports, rlx_graph** out,
                         int32_t* out_decomposed);

#endif
