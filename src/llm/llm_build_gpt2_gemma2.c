/* The pieces of GPT-2 and Gemma-2 (embedding, decoder layer, head) that
 * llm_build.c's driver assembles into the full forward and the KV-cache
 * form; the attention (full or over the caches) and the RoPE tables are
 * llm_build.c's, shared with the Llama family.
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
#include <stdio.h>

#include "llm/llm.h"

static int from_gguf(const llm_builder* b) { return b->src && b->src->gguf; }

/* The param's name: the HF pattern for a checkpoint, the GGUF one for a
 * GGUF file; %d is the layer. */
static void name_of(const llm_builder* b, const char* hf, const char* gguf, int32_t layer,
                    char* out, size_t cap) {
  snprintf(out, cap, from_gguf(b) ? gguf : hf, (int)layer);
}

static rlx_tensor param(llm_builder* b, const char* hf, const char* gguf, int32_t layer,
                        int32_t rank, int64_t d0, int64_t d1) {
  char name[160];
  name_of(b, hf, gguf, layer, name, sizeof name);
  return llm_param(b, name, RLX_F32, rank, d0, d1);
}

/* A projection weight [out, in]; GPT-2's Conv1D in a checkpoint is stored
 * [in, out] (read as stored). */
static llm_weight matrix(llm_builder* b, const char* hf, const char* gguf, int32_t layer,
                         int64_t out, int64_t in) {
  char name[160];
  name_of(b, hf, gguf, layer, name, sizeof name);
  return llm_matrix(b, name, out, in, from_gguf(b) || b->c->arch != RLX_LLM_GPT2);
}

/* The tied head (the embedding, [vocab, hidden]) or output.weight. */
static llm_weight head(llm_builder* b, const char* hf, const char* gguf) {
  const rlx_llm_config* c = b->c;
  llm_weight w = {b->embed, -1, 1};
  return c->tie_word_embeddings ? w : matrix(b, hf, gguf, 0, c->vocab_size, c->hidden_size);
}

/* ------------------------------------------------------------------ GPT-2 */

static rlx_tensor layer_norm(llm_builder* b, rlx_tensor x, const char* hf, const char* gguf,
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
static rlx_tensor gpt2_linear(llm_builder* b, int32_t layer, rlx_tensor x, const char* hf,
                              const char* gguf, int64_t out, int64_t in) {
  char hw[96], hb[96], gw[96], gb[96];
  snprintf(hw, sizeof hw, "transformer.h.%%d.%s.weight", hf);
  snprintf(hb, sizeof hb, "transformer.h.%%d.%s.bias", hf);
  snprintf(gw, sizeof gw, "blk.%%d.%s.weight", gguf);
  snprintf(gb, sizeof gb, "blk.%%d.%s.bias", gguf);
  llm_weight w = matrix(b, hw, gw, layer, out, in);
  return llm_linear(b, x, w, param(b, hb, gb, layer, 1, out, 0));
}

static rlx_tensor narrow(llm_builder* b, rlx_tensor x, int64_t start, int64_t len) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_narrow(b->g, x, 2, start, len, &y);
  return y;
}

static rlx_tensor gpt2_layer(llm_builder* b, int32_t layer, rlx_tensor h) {
  int64_t D = b->c->hidden_size, F = b->c->intermediate_size;
  int32_t H = b->c->num_heads;
  rlx_tensor x = layer_norm(b, h, "transformer.h.%d.ln_1", "blk.%d.attn_norm", layer);
  rlx_tensor qkv = gpt2_linear(b, layer, x, "attn.c_attn", "attn_qkv", 3 * D, D);
  rlx_tensor q = llm_split_heads(b, narrow(b, qkv, 0, D), H);
  rlx_tensor k = llm_split_heads(b, narrow(b, qkv, D, D), H);
  rlx_tensor v = llm_split_heads(b, narrow(b, qkv, 2 * D, D), H);
  rlx_tensor a = llm_merge_heads(b, llm_attention(b, layer, q, k, v), H);
  h = llm_binary(b, RLX_BIN_ADD, h, gpt2_linear(b, layer, a, "attn.c_proj", "attn_output", D, D));
  x = layer_norm(b, h, "transformer.h.%d.ln_2", "blk.%d.ffn_norm", layer);
  rlx_tensor m = gpt2_linear(b, layer, x, "mlp.c_fc", "ffn_up", F, D);
  m = llm_activation(b, RLX_ACT_GELU_APPROX, m);
  return llm_binary(b, RLX_BIN_ADD, h, gpt2_linear(b, layer, m, "mlp.c_proj", "ffn_down", D, F));
}

/* wte[ids] + wpe[positions] */
static rlx_tensor gpt2_embed(llm_builder* b, rlx_tensor ids) {
  const rlx_llm_config* c = b->c;
  b->embed =
      param(b, "transformer.wte.weight", "token_embd.weight", 0, 2, c->vocab_size, c->hidden_size);
  rlx_tensor wpe = param(b, "transformer.wpe.weight", "position_embd.weight", 0, 2,
                         c->max_positions, c->hidden_size);
  return llm_binary(b, RLX_BIN_ADD, llm_gather(b, b->embed, ids, 0),
                    llm_gather(b, wpe, b->positions, 0));
}

static rlx_tensor gpt2_logits(llm_builder* b, rlx_tensor h) {
  h = layer_norm(b, h, "transformer.ln_f", "output_norm", 0);
  return llm_linear(b, h, head(b, "lm_head.weight", "output.weight"), RLX_NONE);
}

/* ------------------------------------------------------------------ Gemma-2 */

/* RmsNorm(x) * (1 + w) for a checkpoint, * w for a GGUF file (which
 * holds 1 + w). */
static rlx_tensor gemma_norm(llm_builder* b, rlx_tensor x, const char* hf, const char* gguf,
                             int32_t layer) {
  rlx_tensor w = param(b, hf, gguf, layer, 1, b->c->hidden_size, 0);
  if (!from_gguf(b)) w = llm_binary(b, RLX_BIN_ADD, w, llm_scalar_f32(b, 1.0f));
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_rms_norm(b->g, x, w, b->c->rms_norm_eps, &y);
  return y;
}

/* One Linear of a Gemma layer ("self_attn.q_proj" / "attn_q", ...). */
static rlx_tensor gemma_linear(llm_builder* b, int32_t layer, rlx_tensor x, const char* hf,
                               const char* gguf, int64_t out, int64_t in, int bias) {
  char hw[96], gw[96], hb[96], gb[96];
  snprintf(hw, sizeof hw, "model.layers.%%d.%s.weight", hf);
  snprintf(gw, sizeof gw, "blk.%%d.%s.weight", gguf);
  snprintf(hb, sizeof hb, "model.layers.%%d.%s.bias", hf);
  snprintf(gb, sizeof gb, "blk.%%d.%s.bias", gguf);
  llm_weight w = matrix(b, hw, gw, layer, out, in);
  return llm_linear(b, x, w, bias ? param(b, hb, gb, layer, 1, out, 0) : RLX_NONE);
}

static rlx_tensor gemma_attention(llm_builder* b, int32_t layer, rlx_tensor x) {
  const rlx_llm_config* c = b->c;
  int64_t D = c->hidden_size, qd = (int64_t)c->num_heads * c->head_dim;
  int64_t kvd = (int64_t)c->num_kv_heads * c->head_dim;
  int bias = c->attention_bias;
  rlx_tensor q = gemma_linear(b, layer, x, "self_attn.q_proj", "attn_q", qd, D, bias);
  rlx_tensor k = gemma_linear(b, layer, x, "self_attn.k_proj", "attn_k", kvd, D, bias);
  rlx_tensor v = gemma_linear(b, layer, x, "self_attn.v_proj", "attn_v", kvd, D, bias);
  q = llm_rope(b, llm_split_heads(b, q, c->num_heads));
  k = llm_rope(b, llm_split_heads(b, k, c->num_kv_heads));
  rlx_tensor a = llm_attention(b, layer, q, k, llm_split_heads(b, v, c->num_kv_heads));
  a = llm_merge_heads(b, a, c->num_heads);
  return gemma_linear(b, layer, a, "self_attn.o_proj", "attn_output", D, qd, bias);
}

static rlx_tensor gemma_mlp(llm_builder* b, int32_t layer, rlx_tensor x) {
  int64_t D = b->c->hidden_size, F = b->c->intermediate_size;
  rlx_tensor gate = gemma_linear(b, layer, x, "mlp.gate_proj", "ffn_gate", F, D, 0);
  rlx_tensor up = gemma_linear(b, layer, x, "mlp.up_proj", "ffn_up", F, D, 0);
  rlx_tensor hidden = llm_binary(b, RLX_BIN_MUL, llm_activation(b, RLX_ACT_GELU_APPROX, gate), up);
  return gemma_linear(b, layer, hidden, "mlp.down_proj", "ffn_down", D, F, 0);
}

static rlx_tensor gemma_layer(llm_builder* b, int32_t layer, rlx_tensor h) {
  rlx_tensor x =
      gemma_norm(b, h, "model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", layer);
  rlx_tensor a = gemma_norm(b, gemma_attention(b, layer, x),
                            "model.layers.%d.post_attention_layernorm.weight",
                            "blk.%d.post_attention_norm.weight", layer);
  h = llm_binary(b, RLX_BIN_ADD, h, a);
  x = gemma_norm(b, h, "model.layers.%d.pre_feedforward_layernorm.weight",
                 "blk.%d.ffn_norm.weight", layer);
  rlx_tensor m = gemma_norm(b, gemma_mlp(b, layer, x),
                            "model.layers.%d.post_feedforward_layernorm.weight",
                            "blk.%d.post_ffw_norm.weight", layer);
  return llm_binary(b, RLX_BIN_ADD, h, m);
}

/* cap * tanh(x / cap) */
static rlx_tensor softcap(llm_builder* b, rlx_tensor x, float cap) {
  rlx_tensor y = llm_binary(b, RLX_BIN_MUL, x, llm_scalar_f32(b, 1.0f / cap));
  return llm_binary(b, RLX_BIN_MUL, llm_activation(b, RLX_ACT_TANH, y), llm_scalar_f32(b, cap));
}

static rlx_tensor gemma_embed(llm_builder* b, rlx_tensor ids) {
  const rlx_llm_config* c = b->c;
  b->embed = param(b, "model.embed_tokens.weight", "token_embd.weight", 0, 2, c->vocab_size,
                   c->hidden_size);
  rlx_tensor h = llm_gather(b, b->embed, ids, 0);
  if (c->embed_scale > 0.0f) h = llm_binary(b, RLX_BIN_MUL, h, llm_scalar_f32(b, c->embed_scale));
  return h;
}

static rlx_tensor gemma_logits(llm_builder* b, rlx_tensor h) {
  const rlx_llm_config* c = b->c;
  h = gemma_norm(b, h, "model.norm.weight", "output_norm.weight", 0);
  rlx_tensor logits = llm_linear(b, h, head(b, "lm_head.weight", "output.weight"), RLX_NONE);
  return c->final_logit_softcap > 0.0f ? softcap(b, logits, c->final_logit_softcap) : logits;
}

/* ------------------------------------------------------------------ entry */

const llm_arch* llm_gpt2_gemma2_arch(const rlx_llm_config* c) {
  static const llm_arch gpt2 = {gpt2_embed, gpt2_layer, gpt2_logits};
  static const llm_arch gemma2 = {gemma_embed, gemma_layer, gemma_logits};
  return c->arch == RLX_LLM_GPT2 ? &gpt2 : &gemma2;
}
