/* The forward graphs of GPT-2 and Gemma-2, built with the public graph API
 * (the Llama family is in llm_build.c; rlx_llm_build_from hands these two
 * archs over here).
 *
 * GPT-2:
 *   h = wte[input_ids] + wpe[positions]
 *   per layer:  q, k, v = split(c_attn(LayerNorm(h)))
 *               h += c_proj(Attention(q, k, v))           causal, 1 / sqrt(head_dim)
 *               h += mlp.c_proj(gelu_tanh(c_fc(LayerNorm(h))))
 *   logits = LayerNorm(h) @ wte^T
 * HF stores GPT-2's Conv1D weights [in, out]: x @ w reads them as stored.
 * llama.cpp's converter transposes them to [out, in] (ggml dims [in, out])
 * like every other Linear, so a GGUF file's weights are read transposed
 * (and may be quantized: DequantMatMul).
 *
 * Gemma-2:
 *   h = embed_tokens[input_ids] * embed_scale          (sqrt(hidden))
 *   per layer:  h += N_post_attn(o_proj(Attention(rope(q), rope(k), v)))  of N_in(h)
 *               h += N_post_ffw(down(gelu_tanh(gate(x)) * up(x))),  x = N_pre_ffw(h)
 *   logits = cap * tanh((N(h) @ embed^T) / cap)         (final_logit_softcapping)
 * N(x) = RmsNorm(x) * (1 + w): HF's Gemma norm; llama.cpp's converter
 * stores 1 + w in the file, so a GGUF weight is used as it is. Attention
 * scores are scaled by query_pre_attn_scalar^-1/2 and soft-capped
 * (cap * tanh(s / cap), attn_logit_softcapping); layer i slides (keys
 * within sliding_window of the query) when i % pattern < pattern - 1 (the
 * even layers for pattern 2; every layer for 0), else it is causal over
 * the whole run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "llm/llm.h"

typedef struct gg_builder {
  rlx_graph* g;
  const rlx_llm_config* c;
  const llm_source* src; /* NULL: a safetensors checkpoint (HF names) */
  rlx_status st;         /* the first failure; later calls are no-ops */
  rlx_dim B, T;
  rlx_tensor cos, sin, positions;
} gg_builder;

static int from_gguf(const gg_builder* b) { return b->src && b->src->gguf; }

/* The param's name: the HF pattern for a checkpoint, the GGUF one for a
 * GGUF file; %d is the layer. */
static void name_of(const gg_builder* b, const char* hf, const char* gguf, int32_t layer,
                    char* out, size_t cap) {
  snprintf(out, cap, from_gguf(b) ? gguf : hf, (int)layer);
}

static rlx_tensor typed_param(gg_builder* b, const char* name, rlx_dtype dtype, int32_t rank,
                              int64_t d0, int64_t d1) {
  rlx_tensor t = RLX_NONE;
  rlx_dim s[2] = {d0, d1};
  if (b->st == RLX_OK) b->st = rlx_graph_add_param(b->g, name, dtype, s, rank, &t);
  return t;
}

static rlx_tensor param(gg_builder* b, const char* hf, const char* gguf, int32_t layer,
                        int32_t rank, int64_t d0, int64_t d1) {
  char name[160];
  name_of(b, hf, gguf, layer, name, sizeof name);
  return typed_param(b, name, RLX_F32, rank, d0, d1);
}

/* A projection weight: f32 [out, in] read transposed, f32 [in, out] read
 * as stored (GPT-2's Conv1D in a checkpoint), or a GGUF file's quantized
 * blocks (u8 [out, row_bytes], DequantMatMul). */
typedef struct gg_weight {
  rlx_tensor t;
  int32_t scheme; /* rlx_quant_scheme, or -1 for a float weight */
  int32_t transposed;
} gg_weight;

static gg_weight matrix(gg_builder* b, const char* hf, const char* gguf, int32_t layer,
                        int64_t out, int64_t in) {
  gg_weight w = {RLX_NONE, -1, 1};
  char name[160];
  name_of(b, hf, gguf, layer, name, sizeof name);
  if (b->st == RLX_OK && b->src && b->src->scheme_of)
    w.scheme = b->src->scheme_of(b->src->ctx, name);
  if (w.scheme >= 0) {
    int64_t row_bytes = 0;
    if (b->st == RLX_OK)
      b->st = rlx_quant_row_bytes((rlx_quant_scheme)w.scheme, in, 0, &row_bytes, NULL, 0);
    w.t = typed_param(b, name, RLX_U8, 2, out, row_bytes);
    return w;
  }
  w.transposed = from_gguf(b) || b->c->arch != RLX_LLM_GPT2;
  w.t = w.transposed ? typed_param(b, name, RLX_F32, 2, out, in)
                     : typed_param(b, name, RLX_F32, 2, in, out);
  return w;
}

static rlx_tensor binary(gg_builder* b, rlx_binary_op op, rlx_tensor x, rlx_tensor y) {
  rlx_tensor z = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_binary(b->g, op, x, y, &z);
  return z;
}

static rlx_tensor activation(gg_builder* b, rlx_activation act, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_activation(b->g, act, x, &y);
  return y;
}

/* An f32 [1] constant, broadcast by the binary ops. */
static rlx_tensor scalar(gg_builder* b, float v) {
  rlx_tensor t = RLX_NONE;
  rlx_dim one = 1;
  if (b->st == RLX_OK) b->st = rlx_graph_add_constant(b->g, RLX_F32, &one, 1, &v, sizeof v, &t);
  return t;
}

static rlx_tensor linear(gg_builder* b, rlx_tensor x, gg_weight w, rlx_tensor bias) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK && w.scheme >= 0)
    b->st = rlx_graph_dequant_matmul(b->g, x, w.t, RLX_NONE, RLX_NONE,
                                     (rlx_quant_scheme)w.scheme, 0, &y);
  else if (b->st == RLX_OK)
    b->st = rlx_graph_add_matmul(b->g, x, w.t, 0, w.transposed, &y);
  return bias == RLX_NONE ? y : binary(b, RLX_BIN_ADD, y, bias);
}

static rlx_tensor gather(gg_builder* b, rlx_tensor table, rlx_tensor idx) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_gather(b->g, table, idx, 0, &y);
  return y;
}

static rlx_tensor reshape(gg_builder* b, rlx_tensor x, const rlx_dim* s, int32_t rank) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_reshape(b->g, x, s, rank, &y);
  return y;
}

/* [B, T, heads * head_dim] <-> [B, T, heads, head_dim] (BSHD). */
static rlx_tensor split_heads(gg_builder* b, rlx_tensor x, int32_t heads) {
  rlx_dim s[4] = {b->B, b->T, heads, b->c->head_dim};
  return reshape(b, x, s, 4);
}

static rlx_tensor merge_heads(gg_builder* b, rlx_tensor x, int32_t heads) {
  rlx_dim s[3] = {b->B, b->T, (rlx_dim)heads * b->c->head_dim};
  return reshape(b, x, s, 3);
}

/* Attention of layer `layer` with the arch's scale, softcap and mask. */
static rlx_tensor attend(gg_builder* b, int32_t layer, rlx_tensor q, rlx_tensor k, rlx_tensor v) {
  const rlx_llm_config* c = b->c;
  rlx_attention_desc d;
  memset(&d, 0, sizeof d);
  d.num_heads = c->num_heads;
  d.num_kv_heads = c->num_kv_heads;
  d.head_dim = c->head_dim;
  d.layout = RLX_LAYOUT_BSHD;
  d.softcap = c->attn_logit_softcap;
  if (c->query_pre_attn_scalar > 0.0f) d.score_scale = 1.0f / sqrtf(c->query_pre_attn_scalar);
  int32_t pattern = c->sliding_window_pattern;
  int slides = c->sliding_window > 0 && (pattern == 0 || layer % pattern < pattern - 1);
  d.mask = slides ? RLX_MASK_SLIDING : RLX_MASK_CAUSAL;
  d.window = slides ? c->sliding_window : 0;
  rlx_tensor a = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_attention(b->g, q, k, v, RLX_NONE, &d, &a);
  return merge_heads(b, a, c->num_heads);
}

/* ------------------------------------------------------------------ GPT-2 */

static rlx_tensor layer_norm(gg_builder* b, rlx_tensor x, const char* hf, const char* gguf,
                             int32_t layer) {
  char hw[96], hb[96], gw[96], gb[96];
  snprintf(hw, sizeof hw, "%s.weight", hf);
  snprintf(hb, sizeof hb, "%s.bias", hf);
  snprintf(gw, sizeof gw, "%s.weight", gguf);
  snprintf(gb, sizeof gb, "%s.bias", gguf);
  int64_t D = b->c->hidden_size;
  rlx_tensor w = param(b, hw, gw, layer, 1, D, 0), bias = param(b, hb, gb, layer, 1, D, 0);
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_layer_norm(b->g, x, w, bias, 2, b->c->rms_norm_eps, &y);
  return y;
}

/* A Conv1D (or GGUF Linear) with its bias. */
static rlx_tensor gpt2_linear(gg_builder* b, int32_t layer, rlx_tensor x, const char* hf,
                              const char* gguf, int64_t out, int64_t in) {
  char hw[96], hb[96], gw[96], gb[96];
  snprintf(hw, sizeof hw, "transformer.h.%%d.%s.weight", hf);
  snprintf(hb, sizeof hb, "transformer.h.%%d.%s.bias", hf);
  snprintf(gw, sizeof gw, "blk.%%d.%s.weight", gguf);
  snprintf(gb, sizeof gb, "blk.%%d.%s.bias", gguf);
  gg_weight w = matrix(b, hw, gw, layer, out, in);
  return linear(b, x, w, param(b, hb, gb, layer, 1, out, 0));
}

static rlx_tensor narrow(gg_builder* b, rlx_tensor x, int64_t start, int64_t len) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_narrow(b->g, x, 2, start, len, &y);
  return y;
}

static rlx_tensor gpt2_layer(gg_builder* b, int32_t layer, rlx_tensor h) {
  int64_t D = b->c->hidden_size, F = b->c->intermediate_size;
  int32_t H = b->c->num_heads;
  rlx_tensor x = layer_norm(b, h, "transformer.h.%d.ln_1", "blk.%d.attn_norm", layer);
  rlx_tensor qkv = gpt2_linear(b, layer, x, "attn.c_attn", "attn_qkv", 3 * D, D);
  rlx_tensor q = split_heads(b, narrow(b, qkv, 0, D), H);
  rlx_tensor k = split_heads(b, narrow(b, qkv, D, D), H);
  rlx_tensor v = split_heads(b, narrow(b, qkv, 2 * D, D), H);
  rlx_tensor a = attend(b, layer, q, k, v);
  h = binary(b, RLX_BIN_ADD, h, gpt2_linear(b, layer, a, "attn.c_proj", "attn_output", D, D));
  x = layer_norm(b, h, "transformer.h.%d.ln_2", "blk.%d.ffn_norm", layer);
  rlx_tensor m = gpt2_linear(b, layer, x, "mlp.c_fc", "ffn_up", F, D);
  m = activation(b, RLX_ACT_GELU_APPROX, m);
  return binary(b, RLX_BIN_ADD, h, gpt2_linear(b, layer, m, "mlp.c_proj", "ffn_down", D, F));
}

static rlx_tensor gpt2_forward(gg_builder* b, rlx_tensor ids) {
  const rlx_llm_config* c = b->c;
  rlx_tensor wte =
      param(b, "transformer.wte.weight", "token_embd.weight", 0, 2, c->vocab_size, c->hidden_size);
  rlx_tensor wpe = param(b, "transformer.wpe.weight", "position_embd.weight", 0, 2,
                         c->max_positions, c->hidden_size);
  rlx_tensor h = binary(b, RLX_BIN_ADD, gather(b, wte, ids), gather(b, wpe, b->positions));
  for (int32_t layer = 0; layer < c->num_layers; layer++) h = gpt2_layer(b, layer, h);
  h = layer_norm(b, h, "transformer.ln_f", "output_norm", 0);
  gg_weight head = {wte, -1, 1};
  if (!c->tie_word_embeddings)
    head = matrix(b, "lm_head.weight", "output.weight", 0, c->vocab_size, c->hidden_size);
  return linear(b, h, head, RLX_NONE);
}

/* ------------------------------------------------------------------ Gemma-2 */

/* RmsNorm(x) * (1 + w) for a checkpoint, * w for a GGUF file (which
 * holds 1 + w). */
static rlx_tensor gemma_norm(gg_builder* b, rlx_tensor x, const char* hf, const char* gguf,
                             int32_t layer) {
  rlx_tensor w = param(b, hf, gguf, layer, 1, b->c->hidden_size, 0);
  if (!from_gguf(b)) w = binary(b, RLX_BIN_ADD, w, scalar(b, 1.0f));
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_rms_norm(b->g, x, w, b->c->rms_norm_eps, &y);
  return y;
}

static rlx_tensor rope(gg_builder* b, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  int32_t hd = b->c->head_dim;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_rope(b->g, x, b->cos, b->sin, hd, hd,
                               b->src ? b->src->rope_style : RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &y);
  return y;
}

/* One Linear of a Gemma layer ("self_attn.q_proj" / "attn_q", ...). */
static rlx_tensor gemma_linear(gg_builder* b, int32_t layer, rlx_tensor x, const char* hf,
                               const char* gguf, int64_t out, int64_t in, int bias) {
  char hw[96], gw[96], hb[96], gb[96];
  snprintf(hw, sizeof hw, "model.layers.%%d.%s.weight", hf);
  snprintf(gw, sizeof gw, "blk.%%d.%s.weight", gguf);
  snprintf(hb, sizeof hb, "model.layers.%%d.%s.bias", hf);
  snprintf(gb, sizeof gb, "blk.%%d.%s.bias", gguf);
  gg_weight w = matrix(b, hw, gw, layer, out, in);
  return linear(b, x, w, bias ? param(b, hb, gb, layer, 1, out, 0) : RLX_NONE);
}

static rlx_tensor gemma_attention(gg_builder* b, int32_t layer, rlx_tensor x) {
  const rlx_llm_config* c = b->c;
  int64_t D = c->hidden_size, qd = (int64_t)c->num_heads * c->head_dim;
  int64_t kvd = (int64_t)c->num_kv_heads * c->head_dim;
  int bias = c->attention_bias;
  rlx_tensor q = gemma_linear(b, layer, x, "self_attn.q_proj", "attn_q", qd, D, bias);
  rlx_tensor k = gemma_linear(b, layer, x, "self_attn.k_proj", "attn_k", kvd, D, bias);
  rlx_tensor v = gemma_linear(b, layer, x, "self_attn.v_proj", "attn_v", kvd, D, bias);
  q = rope(b, split_heads(b, q, c->num_heads));
  k = rope(b, split_heads(b, k, c->num_kv_heads));
  rlx_tensor a = attend(b, layer, q, k, split_heads(b, v, c->num_kv_heads));
  return gemma_linear(b, layer, a, "self_attn.o_proj", "attn_output", D, qd, bias);
}

static rlx_tensor gemma_mlp(gg_builder* b, int32_t layer, rlx_tensor x) {
  int64_t D = b->c->hidden_size, F = b->c->intermediate_size;
  rlx_tensor gate = gemma_linear(b, layer, x, "mlp.gate_proj", "ffn_gate", F, D, 0);
  rlx_tensor up = gemma_linear(b, layer, x, "mlp.up_proj", "ffn_up", F, D, 0);
  rlx_tensor hidden = binary(b, RLX_BIN_MUL, activation(b, RLX_ACT_GELU_APPROX, gate), up);
  return gemma_linear(b, layer, hidden, "mlp.down_proj", "ffn_down", D, F, 0);
}

static rlx_tensor gemma_layer(gg_builder* b, int32_t layer, rlx_tensor h) {
  rlx_tensor x =
      gemma_norm(b, h, "model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", layer);
  rlx_tensor a = gemma_norm(b, gemma_attention(b, layer, x),
                            "model.layers.%d.post_attention_layernorm.weight",
                            "blk.%d.post_attention_norm.weight", layer);
  h = binary(b, RLX_BIN_ADD, h, a);
  x = gemma_norm(b, h, "model.layers.%d.pre_feedforward_layernorm.weight",
                 "blk.%d.ffn_norm.weight", layer);
  rlx_tensor m = gemma_norm(b, gemma_mlp(b, layer, x),
                            "model.layers.%d.post_feedforward_layernorm.weight",
                            "blk.%d.post_ffw_norm.weight", layer);
  return binary(b, RLX_BIN_ADD, h, m);
}

/* cap * tanh(x / cap) */
static rlx_tensor softcap(gg_builder* b, rlx_tensor x, float cap) {
  rlx_tensor y = binary(b, RLX_BIN_MUL, x, scalar(b, 1.0f / cap));
  return binary(b, RLX_BIN_MUL, activation(b, RLX_ACT_TANH, y), scalar(b, cap));
}

static rlx_tensor gemma_forward(gg_builder* b, rlx_tensor ids, int64_t rows) {
  const rlx_llm_config* c = b->c;
  int32_t half = c->head_dim / 2;
  b->cos = gather(b, typed_param(b, "rope.cos", RLX_F32, 2, rows, half), b->positions);
  b->sin = gather(b, typed_param(b, "rope.sin", RLX_F32, 2, rows, half), b->positions);
  rlx_tensor embed = param(b, "model.embed_tokens.weight", "token_embd.weight", 0, 2,
                           c->vocab_size, c->hidden_size);
  rlx_tensor h = gather(b, embed, ids);
  if (c->embed_scale > 0.0f) h = binary(b, RLX_BIN_MUL, h, scalar(b, c->embed_scale));
  for (int32_t layer = 0; layer < c->num_layers; layer++) h = gemma_layer(b, layer, h);
  h = gemma_norm(b, h, "model.norm.weight", "output_norm.weight", 0);
  gg_weight head = {embed, -1, 1};
  if (!c->tie_word_embeddings)
    head = matrix(b, "lm_head.weight", "output.weight", 0, c->vocab_size, c->hidden_size);
  rlx_tensor logits = linear(b, h, head, RLX_NONE);
  return c->final_logit_softcap > 0.0f ? softcap(b, logits, c->final_logit_softcap) : logits;
}

/* ------------------------------------------------------------------ entry */

static rlx_dim dim_of(gg_builder* b, int64_t size, const char* symbol) {
  rlx_dim d = size;
  if (size == 0 && b->st == RLX_OK) b->st = rlx_graph_symbol(b->g, symbol, &d);
  return d;
}

rlx_status llm_build_gpt2_gemma2(const rlx_llm_config* c, const rlx_llm_options* o,
                                 const llm_source* src, rlx_graph** out, rlx_error* err) {
  gg_builder b = {NULL, c, src, RLX_OK, 0, 0, RLX_NONE, RLX_NONE, RLX_NONE};
  if (rlx_graph_create(&b.g) != RLX_OK)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  b.B = dim_of(&b, o->batch, "B");
  b.T = dim_of(&b, o->seq_len, "T");
  rlx_tensor ids = RLX_NONE;
  rlx_dim ids_shape[2] = {b.B, b.T};
  if (b.st == RLX_OK) b.st = rlx_graph_add_input(b.g, "input_ids", RLX_I64, ids_shape, 2, &ids);
  if (b.st == RLX_OK)
    b.st = rlx_graph_add_input(b.g, "positions", RLX_I64, &b.T, 1, &b.positions);
  rlx_tensor logits = c->arch == RLX_LLM_GPT2 ? gpt2_forward(&b, ids)
                                              : gemma_forward(&b, ids, rlx_llm_table_rows(c, o));
  if (b.st == RLX_OK) b.st = rlx_graph_set_name(b.g, logits, "logits");
  if (b.st == RLX_OK) b.st = rlx_graph_set_outputs(b.g, &logits, 1);
  if (b.st != RLX_OK) {
    rlx_status s = rlx_fail(err, b.st, "llm: building the graph: %s", rlx_graph_last_error(b.g));
    rlx_graph_destroy(b.g);
    return s;
  }
  *out = b.g;
  return RLX_OK;
}
