/* Reduced-precision compilation: an f32 graph computed in bf16 or f16
 * (rlx_compile_options.precision), without the user rewriting the graph.
 *
 * The executable's interface does not change: f32 graph inputs and params
 * stay f32 and are cast once where a reduced-precision node first reads
 * them, f32 constants are converted at compile time, and every f32 graph
 * output is cast back to f32. Inside, a node is lowered (its f32 inputs
 * and outputs become the reduced dtype) when
 *   - its op is on the list below, and
 *   - it reads a float *activation*: a value that depends on a graph input
 *     and is not index arithmetic. Values computed from params and
 *     constants alone (the BatchNorm fold's rescaled weights, transposed
 *     or reshaped params) are parameter preprocessing: they stay f32 and
 *     are cast where an activation op reads them, so they are rounded
 *     once, and a pass that computes them once per param change hoists
 *     the cast with them. Index arithmetic (integers cast to float, and
 *     what only such values, params and constants compute: positions,
 *     rotary angles, masks) stays f32 too, so a position is not rounded to
 *     8 bits of mantissa before it meets the activations, and
 *   - it has no float operand of another dtype (an f16 or f64 value the
 *     model itself chose is left as it is).
 * Integer and bool values are untouched; a Cast written in the model keeps
 * its target dtype (a Cast to f32 of a lowered value yields the reduced
 * dtype: every f32 value computed inside becomes reduced).
 *
 * Lowered ops: data movement (reshape, transpose, narrow, concat, expand,
 * reverse, gather, pad, depth/space, im2col, stop_gradient, cast), the
 * elementwise family (binary, compare, where, activation), matmul and its
 * fused form, conv / conv transpose (cuDNN's bf16/f16 path on CUDA), pool,
 * resize, reduce, softmax / log-softmax, the norms (layer, rms, their fused
 * residual forms, group, channel, batch) and attention (and its backward,
 * whose row statistics are f32) / rope, and the backward ops of the norms,
 * softmax / log-softmax and rope, and DequantMatMul (its x and output;
 * the quantized weight's f32 scales stay f32, and the CUDA prefill then
 * multiplies on tensor cores with W rounded to the reduced dtype in its
 * panels). Every
 * backend has kernels for bf16 and f16 of these (f16/bf16 are in every
 * backend's load/store switch), and their kernels accumulate in f32 or
 * f64 whatever the storage dtype (matmul, conv, reductions, norms and
 * softmax load into float accumulators), so only the stored values are
 * rounded.
 *
 * Costs to know: the reduced copies of params live in the arena beside
 * the f32 params (which stay the interface), and are cast every run until
 * a hoisting pass computes them once per param change; a device-state
 * input (a KV cache) declared f32 is cast whole every run, so a model that
 * updates a large cache in place should declare the cache bf16 / f16
 * itself. f16 overflows past 65504 where bf16 keeps f32's range.
 *
 * Kept in f32 (casts around them): scatter_add (accumulates into its
 * output's storage), cumsum (a running sum), argmax / argmin / topk (a
 * rounding tie changes the index answer), sample (probabilities), grid
 * sample and roi align (their second operand holds coordinates), lrn (a
 * power of a window sum), and any op not listed above: the optimizer
 * updates (sgd_update, adam_update) among them, so a trainer's params and
 * optimizer state, which are f32 inputs, stay f32 master copies. An update
 * reads a reduced gradient as it is (no cast: the kernels load any float
 * dtype and widening is exact), and the params an update trains that
 * lowered nodes read have their Inputs and casts emitted first, together,
 * so a backend may run those casts as one launch.
 *
 * Training (rlx_train_compile) also names the nodes it adds around the
 * gradients (accumulators, the global norm, clipping and loss-scale
 * arithmetic on the hyper tensor) with the label prefix below: a labelled
 * node is never lowered, so a sum of squares of f16 gradients cannot
 * overflow and an accumulator or learning rate is not rounded to 8 bits. */
#ifndef RLX_PASSES_PRECISION_H
#define RLX_PASSES_PRECISION_H

#include "ir/graph.h"

/* Label prefix (rlx_graph_set_name) of nodes kept in f32. */
#define RLX_PRECISION_F32_LABEL "rlx.f32:"

/* Rewrites g into a new graph *out computing in `dtype` (RLX_BF16 or
 * RLX_F16); g is left as it was. *out_lowered (may be NULL) receives the
 * number of nodes lowered. Failures are reported on g. */
rlx_status rlx_lower_precision(rlx_graph* g, rlx_dtype dtype, rlx_graph** out,
                               int32_t* out_lowered);

#endif
