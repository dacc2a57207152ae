/* Channels-last layout pass (the channels_last compile option).
 *
 * Exported convolution networks are channels-first (NCHW), while cuDNN's
 * tensor-core convolutions are fastest channels-last (NHWC). This pass
 * rewrites every channels-first Conv to channels_last_ohwi (x, residual
 * and y [N, spatial..., C], w [OC, k..., C/g], transposed once from the
 * [OC, C/g, k...] param) and every channels-first ConvTranspose to
 * channels_last (its w keeps its layout), and carries the NHWC values
 * through the ops between convolutions that do not care about the order of
 * the axes:
 *   - Activation;
 *   - Binary where the output is shaped like a carried operand and the
 *     other operand is carried too, has the same rank (it is transposed:
 *     the same permutation broadcasts alike), holds one element, or
 *     broadcasts per channel ([C, 1, 1], reshaped to [1, 1, 1, C]);
 *   - max / avg Pool (its conv_layout attribute becomes channels_last);
 *   - Reduce over exactly the spatial axes (kept dims stay carried).
 * A value enters NHWC through one Transpose (shared by all its channels-last
 * readers) and leaves through one Transpose back (shared by all readers
 * that need NCHW, graph outputs included), a Reshape instead where the
 * spatial dims or the channels are all 1 (the same bytes). Results equal the
 * original graph's up to f32 rounding order. Run by rlx_compile after the
 * BatchNorm fold and conv epilogue fusion (which expect channels-first)
 * and before decompose. */
#ifndef RLX_PASSES_LAYOUT_H
#define RLX_PASSES_LAYOUT_H

#include "ir/graph.h"

/* Rewrites g into a new graph *out (g is left as it was); *out_transposes
 * (may be NULL) receives the number of activation Transposes inserted
 * (weights not counted). Failures are reported on g. */
rlx_status rlx_layout_channels_last(rlx_graph* g, rlx_graph** out, int32_t* out_transposes);

#endif
