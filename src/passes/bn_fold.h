/* BatchNorm folding: CONV -> BATCH_NORM becomes one CONV whose weight and
 * bias absorb the norm (inference), computed by small per-channel graph ops
 * that constant folding evaluates when the parameters are constants:
 *   scale = gamma / sqrt(var + eps)        (gamma absent: 1)
 *   w'    = w * scale[oc]                  (over every output channel)
 *   b'    = (b - mean) * scale + beta      (b, beta absent: 0)
 * A pair is folded when the BatchNorm's only input x is the Conv's output,
 * nothing else reads that output (graph outputs count as readers), and the
 * Conv is channels-first with no activation and no residual (either would
 * sit between the convolution and the norm). Run by rlx_compile before
 * decompose. */
#ifndef RLX_PASSES_BN_FOLD_H
#define RLX_PASSES_BN_FOLD_H

#include "ir/graph.h"

/* Rewrites g into a new graph *out (g is left as it was); *out_folded
 * (may be NULL) receives the number of BatchNorms folded. Failures are
 * reported on g. */
rlx_status rlx_fold_batch_norm(rlx_graph* g, rlx_graph** out, int32_t* out_folded);

#endif
