/* The mixture-of-experts block of Mixtral (and of any Llama-family config
 * with num_experts > 0), in place of the dense MLP, built from IR ops so
 * that every backend runs the routing on the device:
 *
 *   logits  = x . router^T                         [B, T, E]
 *   vals, e = TopK(logits, k)                      [B, T, k]  (i64 experts)
 *   weights = Softmax(vals)                        over the k (Mixtral's
 *             softmax over all E then renormalised over the top k is the
 *             same number: the common denominator cancels)
 *   h       = SiLU(x . W1[e]^T) * (x . W3[e]^T)    [B, T, k, F]  GroupedMatMul,
 *             the k experts of a token reading the same row of x
 *   y       = sum_k weights * (h . W2[e]^T)        [B, T, D]
 *
 * Expert weights, [E, out, in] as one tensor:
 *   GGUF: blk.N.ffn_gate_exps / ffn_up_exps / ffn_down_exps (dims [in,
 *     out, E]), f32 or quantized (then DequantGroupedMatMul on the raw
 *     rows, each expert's rows as DequantMatMul stores them);
 *     blk.N.ffn_gate_inp the router [E, D];
 *   safetensors: model.layers.N.block_sparse_moe.experts.J.{w1,w3,w2}
 *     .weight, one [out, in] tensor per expert, concatenated in the graph
 *     (params only: the compile-time hoist builds the [E, out, in] tensor
 *     once when the params are set, not per run); .gate.weight the router. */
#include <stdio.h>

#include "llm/llm.h"

typedef struct moe_builder {
  rlx_graph* g;
  const rlx_llm_config* c;
  const llm_source* src;
  int32_t layer;
  rlx_status st; /* the first failure; later calls are no-ops */
} moe_builder;

static int from_gguf(const moe_builder* m) { return m->src && m->src->gguf; }

/* The rlx_quant_scheme of a GGUF tensor, -1 for float (or not GGUF). */
static int32_t scheme_of(moe_builder* m, const char* name) {
  return from_gguf(m) && m->src->scheme_of ? m->src->scheme_of(m->src->ctx, name) : -1;
}

static rlx_tensor param(moe_builder* m, const char* name, rlx_dtype dt, const rlx_dim* shape,
                        int32_t rank) {
  rlx_tensor t = RLX_NONE;
  if (m->st == RLX_OK) m->st = rlx_graph_add_param(m->g, name, dt, shape, rank, &t);
  return t;
}

/* Bytes of a quantized row of n elements. */
static int64_t row_bytes(moe_builder* m, int32_t scheme, int64_t n) {
  int64_t rb = 0;
  if (m->st == RLX_OK) m->st = rlx_quant_row_bytes((rlx_quant_scheme)scheme, n, 0, &rb, NULL, 0);
  return rb;
}

/* x [..., in] . W^T for the router W [out, in] (float or quantized). */
static rlx_tensor router(moe_builder* m, rlx_tensor x) {
  char name[128];
  int64_t E = m->c->num_experts, D = m->c->hidden_size;
  if (from_gguf(m))
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", (int)m->layer);
  else
    snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", (int)m->layer);
  int32_t scheme = scheme_of(m, name);
  rlx_dim s[2] = {E, scheme >= 0 ? row_bytes(m, scheme, D) : D};
  rlx_tensor w = param(m, name, scheme >= 0 ? RLX_U8 : RLX_F32, s, 2), y = RLX_NONE;
  if (m->st != RLX_OK) return y;
  if (scheme >= 0)
    m->st = rlx_graph_dequant_matmul(m->g, x, w, RLX_NONE, RLX_NONE, (rlx_quant_scheme)scheme,
                                     0, &y);
  else
    m->st = rlx_graph_add_matmul(m->g, x, w, 0, 1, &y);
  return y;
}

/* The experts' W [E, out, in] from one tensor per expert (safetensors). */
static rlx_tensor stacked_experts(moe_builder* m, const char* which, int64_t out, int64_t in) {
  int32_t E = m->c->num_experts;
  rlx_tensor parts[1024], stacked = RLX_NONE;
  rlx_dim one[3] = {1, out, in};
  for (int32_t j = 0; j < E && m->st == RLX_OK; j++) {
    char name[160];
    snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight",
             (int)m->layer, (int)j, which);
    parts[j] = param(m, name, RLX_F32, one + 1, 2);
    if (m->st == RLX_OK) m->st = rlx_graph_add_reshape(m->g, parts[j], one, 3, &parts[j]);
  }
  if (m->st == RLX_OK) m->st = rlx_graph_add_concat(m->g, parts, E, 0, &stacked);
  return stacked;
}

/* y = x . W[idx]^T for the experts' `which` projection (HF w1 / w3 / w2,
 * GGUF ffn_gate_exps / ffn_up_exps / ffn_down_exps) of shape [out, in]. */
static rlx_tensor experts(moe_builder* m, rlx_tensor x, rlx_tensor idx, const char* which,
                          const char* gguf_which, int64_t out, int64_t in) {
  rlx_tensor w = RLX_NONE, y = RLX_NONE;
  if (!from_gguf(m)) {
    w = stacked_experts(m, which, out, in);
    if (m->st == RLX_OK) m->st = rlx_graph_grouped_matmul(m->g, x, w, idx, 1, &y);
    return y;
  }
  char name[128];
  snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", (int)m->layer, gguf_which);
  int32_t scheme = scheme_of(m, name);
  rlx_dim s[3] = {m->c->num_experts, out, scheme >= 0 ? row_bytes(m, scheme, in) : in};
  w = param(m, name, scheme >= 0 ? RLX_U8 : RLX_F32, s, 3);
  if (m->st != RLX_OK) return y;
  if (scheme >= 0)
    m->st = rlx_graph_dequant_grouped_matmul(m->g, x, w, idx, RLX_NONE, RLX_NONE,
                                             (rlx_quant_scheme)scheme, 0, &y);
  else
    m->st = rlx_graph_grouped_matmul(m->g, x, w, idx, 1, &y);
  return y;
}

static rlx_tensor unary(moe_builder* m, rlx_activation act, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  if (m->st == RLX_OK) m->st = rlx_graph_add_activation(m->g, act, x, &y);
  return y;
}

static rlx_tensor binary(moe_builder* m, rlx_binary_op op, rlx_tensor a, rlx_tensor b) {
  rlx_tensor y = RLX_NONE;
  if (m->st == RLX_OK) m->st = rlx_graph_add_binary(m->g, op, a, b, &y);
  return y;
}

rlx_status rlx_llm_moe_block(rlx_graph* g, const rlx_llm_config* c, const llm_source* src,
                             int32_t layer, rlx_tensor x, rlx_tensor* out) {
  moe_builder m = {g, c, src, layer, RLX_OK};
  int64_t D = c->hidden_size, F = c->intermediate_size, k = c->num_experts_per_tok;
  rlx_tensor logits = router(&m, x), vals = RLX_NONE, idx = RLX_NONE, weights = RLX_NONE;
  if (m.st == RLX_OK) m.st = rlx_graph_add_topk(g, logits, k, -1, 1, &vals, &idx);
  if (m.st == RLX_OK) m.st = rlx_graph_add_softmax(g, vals, -1, &weights);
  rlx_tensor gate = experts(&m, x, idx, "w1", "gate", F, D); /* [B, T, k, F] */
  rlx_tensor up = experts(&m, x, idx, "w3", "up", F, D);
  rlx_tensor h = binary(&m, RLX_BIN_MUL, unary(&m, RLX_ACT_SILU, gate), up);
  rlx_tensor down = experts(&m, h, idx, "w2", "down", D, F); /* [B, T, k, D] */
  rlx_dim ws[4] = {0};
  rlx_dtype dt;
  int32_t rank = 0;
  if (m.st == RLX_OK) m.st = rlx_graph_tensor_type(g, weights, &dt, &rank, ws);
  ws[rank] = 1; /* weights [B, T, k, 1] against down [B, T, k, D] */
  if (m.st == RLX_OK) m.st = rlx_graph_add_reshape(g, weights, ws, rank + 1, &weights);
  rlx_tensor mixed = binary(&m, RLX_BIN_MUL, down, weights);
  int32_t axis = rank - 1;
  if (m.st == RLX_OK) m.st = rlx_graph_add_reduce(g, RLX_RED_SUM, mixed, &axis, 1, 0, out);
  return m.st;
}
