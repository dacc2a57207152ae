/* Residual-norm fusion: Add(x, r) -> LayerNorm / RmsNorm over the last dim
 * becomes FUSED_RESIDUAL_LAYER_NORM / FUSED_RESIDUAL_RMS_NORM, whose second
 * output is the sum. Other readers of the sum (the next block's residual
 * path, the norm's gradient in a training graph) read that output, so the
 * sum is still written once and only the norm's re-read of it and one
 * launch go away. Conditions: x, r and the sum have one type (no
 * broadcast, a float dtype); a LayerNorm normalises the last dim only.
 * The fused node stands where the Add stood when gamma / beta exist by
 * then, else where the norm stood when nothing between the two reads the
 * sum. Run by rlx_compile before decompose (RLX_NO_NORM_FUSION=1 skips it);
 * every backend runs the fused forms natively. */
#ifndef RLX_PASSES_FUSE_RESIDUAL_NORM_H
#define RLX_PASSES_FUSE_RESIDUAL_NORM_H

#include "ir/graph.h"

/* Rewrites g into a new graph *out (g is left as it was); *out_fused (may
 * be NULL): norms that absorbed their Add. Failures are reported on g. */
rlx_status rlx_fuse_residual_norms(rlx_graph* g, rlx_graph** out, int32_t* out_fused);

#endif
