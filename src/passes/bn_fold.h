/* Conv folds. BatchNorm folding: CONV -> BATCH_NORM becomes one CONV whose weight and
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

/* Conv epilogue fusion: CONV / CONV_TRANSPOSE (no activation, no residual
 * yet) -> [Add of a tensor of the output's exact type] -> [Activation]
 * becomes one node with that residual input and act attribute
 * (y = act(conv + bias + residual), the op's definition), emitted where the
 * last absorbed node stood. Each link must be the only reader of the value
 * before it (graph outputs count as readers). Backends with a native conv
 * run it as one kernel (cuDNN's ConvBiasActivation on CUDA, the CPU's fused
 * epilogue); elsewhere decompose.c expands it again. Run by rlx_compile
 * after the BatchNorm fold. *out_fused (may be NULL): convs that absorbed
 * something. */
rlx_status rlx_fuse_conv_epilogues(rlx_graph* g, rlx_graph** out, int32_t* out_fused);
/* The same for the node kinds named (RLX_EPILOGUE_* bits); with
 * RLX_EPILOGUE_MATMUL, MATMUL -> [Add of a bias vector
 * [N] over the last dim] -> [Activation] becomes FUSED_MATMUL_BIAS_ACT
 * (cuBLASLt's bias / GELU / ReLU epilogues on CUDA; decompose.c expands it
 * where a backend has no fused matmul). In training graphs the Add's sum
 * usually has other readers (the activation's gradient), so only the bias
 * is absorbed there. */
enum { RLX_EPILOGUE_CONV = 1, RLX_EPILOGUE_MATMUL = 2 };
rlx_status rlx_fuse_epilogues(rlx_graph* g, int kinds, rlx_graph** out, int32_t* out_fused);

/* Shared by the rewrites above: copy node n of a source graph into dst
 * with its inputs renamed through map (source value -> dst value; its
 * outputs are recorded there); the source graph's outputs through map. */
rlx_status rlx_copy_node(rlx_graph* dst, const rlx_node* n, rlx_tensor* map);
rlx_status rlx_copy_outputs(const rlx_graph* g, rlx_graph* dst, const rlx_tensor* map);
/* Readers of each value (node inputs and graph outputs) and the producing
 * node of each value (-1: none); malloc'd, NULL when out of memory. */
int32_t* rlx_reader_counts(const rlx_graph* g);
int32_t* rlx_value_producers(const rlx_graph* g);

#endif
