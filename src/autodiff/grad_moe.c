/* Gradient rules of the MoE ops: GroupedMatMul and DequantGroupedMatMul.
 *
 * y[r] = x[r / x_rep] . W[idx[r]]:
 *   dx[i] = sum over the x_rep rows r of i of dy[r] . W[idx[r]]^T: the same
 *           op over dy with transpose_b flipped, then summed over the k
 *           axis when k experts share a row of x;
 *   dW[e] = sum over r with idx[r] == e of x_r^T dy[r] (W[e] as [K, N]):
 *           the rows masked one-hot per expert, then one MatMul over r
 *           (an R x E x K intermediate; exact, and built from ops every
 *           backend runs);
 *   idx: none (an integer choice; routing weights get their gradient
 *        through the Softmax that produced them).
 * A quantized W (and its scales) gets none, as for DequantMatMul. */
#include <stdlib.h>

#include "autodiff/grad.h"

/* dx: the same node kind over dy, transpose_b flipped, summed over k. */
static rlx_status grouped_dx(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dy, rlx_tensor* dx) {
  rlx_type xt = *rlx_tensor_type(c->g, n->in[0]), it = *rlx_tensor_type(c->g, n->in[2]);
  rlx_node_attrs a = n->a;
  a.transpose_b = !n->a.transpose_b;
  rlx_tensor in[5] = {dy, n->in[1], n->in[2], n->n_in > 3 ? n->in[3] : RLX_NONE,
                      n->n_in > 4 ? n->in[4] : RLX_NONE};
  rlx_tensor out[RLX_MAX_OUTPUTS] = {RLX_NONE};
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(c->g, n->op, &a, in, n->n_in, out));
  *dx = out[0];
  if (it.rank == xt.rank) { /* k experts per row of x: sum their contributions */
    int32_t axis = it.rank - 1;
    RLX_RETURN_IF_ERROR(rlx_graph_add_reduce(c->g, RLX_RED_SUM, *dx, &axis, 1, 0, dx));
  }
  return RLX_OK;
}

/* t as [rows, last] (rows inferred). */
static rlx_status as_rows(rlx_graph* g, rlx_tensor t, rlx_dim last, rlx_tensor* out) {
  rlx_dim s[2] = {RLX_DIM_INFER, last};
  return rlx_graph_add_reshape(g, t, s, 2, out);
}

/* The one-hot [R, E, 1] mask of idx in dtype dt. */
static rlx_status one_hot(rlx_graph* g, rlx_tensor idx, int64_t E, rlx_dtype dt,
                          rlx_tensor* out) {
  rlx_type it = *rlx_tensor_type(g, idx);
  int64_t* ids = malloc(sizeof(int64_t) * (size_t)E);
  int32_t* ids32 = malloc(sizeof(int32_t) * (size_t)E);
  if (!ids || !ids32) {
    free(ids);
    free(ids32);
    return RLX_RESOURCE_EXHAUSTED;
  }
  for (int64_t e = 0; e < E; e++) ids[e] = e, ids32[e] = (int32_t)e;
  rlx_dim es[3] = {1, E, 1}, rs[3] = {RLX_DIM_INFER, 1, 1};
  rlx_tensor iota = RLX_NONE, r = RLX_NONE;
  int wide = it.dtype == RLX_I64;
  rlx_status st = rlx_graph_add_constant(g, it.dtype, es, 3, wide ? (void*)ids : (void*)ids32,
                                         (size_t)E * (wide ? 8 : 4), &iota);
  free(ids);
  free(ids32);
  RLX_RETURN_IF_ERROR(st);
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, idx, rs, 3, &r));
  RLX_RETURN_IF_ERROR(rlx_graph_add_compare(g, RLX_CMP_EQ, r, iota, &r));
  return rlx_graph_add_cast(g, r, dt, out);
}

/* dW of a float GroupedMatMul (see the file comment). */
static rlx_status grouped_dw(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dy, rlx_tensor* dw) {
  rlx_graph* g = c->g;
  rlx_type xt = *rlx_tensor_type(g, n->in[0]), wt = *rlx_tensor_type(g, n->in[1]),
           it = *rlx_tensor_type(g, n->in[2]), yt = *rlx_tensor_type(g, dy);
  rlx_dim K = xt.shape[xt.rank - 1], N = yt.shape[yt.rank - 1], E = wt.shape[0];
  rlx_tensor x = n->in[0], mask = RLX_NONE, rows = RLX_NONE, other = RLX_NONE, t = RLX_NONE;
  if (it.rank == xt.rank) { /* repeat each row of x for its k experts */
    rlx_type st = xt;
    st.shape[st.rank] = K;
    st.shape[st.rank - 1] = it.shape[it.rank - 1];
    st.rank++;
    rlx_dim one[RLX_MAX_RANK];
    for (int32_t d = 0; d < xt.rank - 1; d++) one[d] = xt.shape[d];
    one[xt.rank - 1] = 1;
    one[xt.rank] = K;
    RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, x, one, xt.rank + 1, &x));
    RLX_RETURN_IF_ERROR(rlx_graph_add_expand(g, x, st.shape, st.rank, &x));
  }
  RLX_RETURN_IF_ERROR(one_hot(g, n->in[2], E, xt.dtype, &mask));
  /* the side masked per expert is the one W's first stored dim indexes */
  int w_nk = n->a.transpose_b; /* W[e] stored [N, K]: dW = (mask * dy)^T x */
  RLX_RETURN_IF_ERROR(as_rows(g, w_nk ? dy : x, w_nk ? N : K, &rows));
  RLX_RETURN_IF_ERROR(as_rows(g, w_nk ? x : dy, w_nk ? K : N, &other));
  rlx_dim r3[3] = {RLX_DIM_INFER, 1, w_nk ? N : K};
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, rows, r3, 3, &rows));
  RLX_RETURN_IF_ERROR(rlx_graph_add_binary(g, RLX_BIN_MUL, mask, rows, &t));
  rlx_dim flat[2] = {RLX_DIM_INFER, E * (w_nk ? N : K)};
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, t, flat, 2, &t));
  RLX_RETURN_IF_ERROR(rlx_graph_add_matmul(g, t, other, 1, 0, &t));
  return rlx_graph_add_reshape(g, t, wt.shape, 3, dw);
}

RLX_GRAD_RULE(rlx_grad_grouped_matmul) {
  if (rlx_grad_wants(c, n, 0)) RLX_RETURN_IF_ERROR(grouped_dx(c, n, dy[0], &dx[0]));
  if (n->op == RLX_OP_GROUPED_MATMUL && rlx_grad_wants(c, n, 1))
    RLX_RETURN_IF_ERROR(grouped_dw(c, n, dy[0], &dx[1]));
  return RLX_OK;
}
