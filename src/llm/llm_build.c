/* The forward graph of a Llama-family decoder (Llama, Qwen2, Qwen3,
 * Mistral), built with the public graph API, and its RoPE tables.
 *
 *   h = embed_tokens[input_ids]
 *   per layer:  h += o_proj(Attention(rope(q), rope(k), v))  of RmsNorm(h)
 *               h += down_proj(silu(gate_proj(x)) * up_proj(x)), x = RmsNorm(h)
 *   logits = RmsNorm(h) @ lm_head^T   (embed_tokens when tied)
 *
 * Weights stay as the checkpoint stores them, [out, in], and MatMul reads
 * them transposed: no copy or transposition at load time. */
#include "llm/llm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A builder keeps the first failure and turns every later call into a
 * no-op, so the code below reads as the architecture does; the graph holds
 * the failure's message. */
typedef struct llm_builder {
  rlx_graph* g;
  const rlx_llm_config* c;
  const llm_source* src; /* NULL: a safetensors checkpoint (HF names, NeoX RoPE) */
  rlx_status st;
  rlx_dim B, T;
  rlx_tensor cos, sin; /* [T, head_dim / 2], gathered at the run's positions */
} llm_builder;

/* A param called by its HF name, or by the file's name for that tensor
 * when the weights come from elsewhere (GGUF). */
static rlx_tensor typed_param(llm_builder* b, const char* hf_name, rlx_dtype dtype, int32_t rank,
                              int64_t d0, int64_t d1) {
  rlx_tensor t = RLX_NONE;
  rlx_dim s[2] = {d0, d1};
  char file_name[160];
  const char* name = hf_name;
  if (b->st == RLX_OK && b->src && b->src->gguf) {
    if (llm_gguf_name(hf_name, file_name, sizeof file_name) != RLX_OK) {
      b->st = RLX_INTERNAL;
      return t;
    }
    name = file_name;
  }
  if (b->st == RLX_OK) b->st = rlx_graph_add_param(b->g, name, dtype, s, rank, &t);
  return t;
}

static rlx_tensor param(llm_builder* b, const char* name, int32_t rank, int64_t d0, int64_t d1) {
  return typed_param(b, name, RLX_F32, rank, d0, d1);
}

/* A Linear weight [out, in]: f32, or the raw blocks of a quantized GGUF
 * tensor (u8 [out, row_bytes], DequantMatMul's W layout: GGUF rows run
 * along in). */
typedef struct llm_weight {
  rlx_tensor t;
  int32_t scheme; /* rlx_quant_scheme, or -1 for a float weight */
} llm_weight;

static llm_weight matrix(llm_builder* b, const char* hf_name, int64_t out, int64_t in) {
  llm_weight w = {RLX_NONE, -1};
  char file_name[160];
  if (b->src && b->src->scheme_of && b->st == RLX_OK &&
      llm_gguf_name(hf_name, file_name, sizeof file_name) == RLX_OK)
    w.scheme = b->src->scheme_of(b->src->ctx, file_name);
  if (w.scheme < 0) {
    w.t = param(b, hf_name, 2, out, in);
    return w;
  }
  int64_t row_bytes = 0;
  if (b->st == RLX_OK)
    b->st = rlx_quant_row_bytes((rlx_quant_scheme)w.scheme, in, 0, &row_bytes, NULL, 0);
  w.t = typed_param(b, hf_name, RLX_U8, 2, out, row_bytes);
  return w;
}

/* "model.layers.<layer>.<suffix>", the HF name of a layer's tensor. */
static rlx_tensor layer_param(llm_builder* b, int32_t layer, const char* suffix, int32_t rank,
                              int64_t d0, int64_t d1) {
  char name[128];
  snprintf(name, sizeof name, "model.layers.%d.%s", (int)layer, suffix);
  return param(b, name, rank, d0, d1);
}

static llm_weight layer_matrix(llm_builder* b, int32_t layer, const char* suffix, int64_t out,
                               int64_t in) {
  char name[128];
  snprintf(name, sizeof name, "model.layers.%d.%s", (int)layer, suffix);
  return matrix(b, name, out, in);
}

static rlx_tensor binary(llm_builder* b, rlx_binary_op op, rlx_tensor x, rlx_tensor y) {
  rlx_tensor z = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_binary(b->g, op, x, y, &z);
  return z;
}

static rlx_tensor rms_norm(llm_builder* b, rlx_tensor x, rlx_tensor w) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_rms_norm(b->g, x, w, b->c->rms_norm_eps, &y);
  return y;
}

/* x @ w^T (+ bias): w is [out, in] as HF's Linear stores it. */
static rlx_tensor linear(llm_builder* b, rlx_tensor x, llm_weight w, rlx_tensor bias) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK && w.scheme >= 0)
    b->st = rlx_graph_dequant_matmul(b->g, x, w.t, RLX_NONE, RLX_NONE,
                                     (rlx_quant_scheme)w.scheme, 0, &y);
  else if (b->st == RLX_OK)
    b->st = rlx_graph_add_matmul(b->g, x, w.t, 0, 1, &y);
  return bias == RLX_NONE ? y : binary(b, RLX_BIN_ADD, y, bias);
}

static rlx_tensor gather(llm_builder* b, rlx_tensor table, rlx_tensor idx) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_gather(b->g, table, idx, 0, &y);
  return y;
}

/* [B, T, heads * head_dim] <-> [B, T, heads, head_dim] (BSHD: a view). */
static rlx_tensor split_heads(llm_builder* b, rlx_tensor x, int32_t heads) {
  rlx_tensor y = RLX_NONE;
  rlx_dim s[4] = {b->B, b->T, heads, b->c->head_dim};
  if (b->st == RLX_OK) b->st = rlx_graph_add_reshape(b->g, x, s, 4, &y);
  return y;
}

static rlx_tensor merge_heads(llm_builder* b, rlx_tensor x, int32_t heads) {
  rlx_tensor y = RLX_NONE;
  rlx_dim s[3] = {b->B, b->T, (rlx_dim)heads * b->c->head_dim};
  if (b->st == RLX_OK) b->st = rlx_graph_add_reshape(b->g, x, s, 3, &y);
  return y;
}

static rlx_tensor rope(llm_builder* b, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  int32_t hd = b->c->head_dim;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_rope(b->g, x, b->cos, b->sin, hd, hd,
                               b->src ? b->src->rope_style : RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &y);
  return y;
}

/* One of q / k / v: projection (+ bias), heads split, and for q and k the
 * per-head RmsNorm (Qwen3) and RoPE. */
static rlx_tensor project(llm_builder* b, int32_t layer, rlx_tensor x, char which,
                          int32_t heads) {
  const rlx_llm_config* c = b->c;
  int64_t out = (int64_t)heads * c->head_dim;
  char name[32];
  snprintf(name, sizeof name, "self_attn.%c_proj.weight", which);
  llm_weight w = layer_matrix(b, layer, name, out, c->hidden_size);
  rlx_tensor bias = RLX_NONE;
  if (c->attention_bias) {
    snprintf(name, sizeof name, "self_attn.%c_proj.bias", which);
    bias = layer_param(b, layer, name, 1, out, 0);
  }
  rlx_tensor y = split_heads(b, linear(b, x, w, bias), heads);
  if (which == 'v') return y;
  if (c->qk_norm) {
    snprintf(name, sizeof name, "self_attn.%c_norm.weight", which);
    y = rms_norm(b, y, layer_param(b, layer, name, 1, c->head_dim, 0));
  }
  return rope(b, y);
}

static rlx_tensor attention_block(llm_builder* b, int32_t layer, rlx_tensor x) {
  const rlx_llm_config* c = b->c;
  rlx_tensor q = project(b, layer, x, 'q', c->num_heads);
  rlx_tensor k = project(b, layer, x, 'k', c->num_kv_heads);
  rlx_tensor v = project(b, layer, x, 'v', c->num_kv_heads);
  rlx_attention_desc d;
  memset(&d, 0, sizeof d);
  d.num_heads = c->num_heads;
  d.num_kv_heads = c->num_kv_heads;
  d.head_dim = c->head_dim;
  d.layout = RLX_LAYOUT_BSHD;
  d.mask = c->sliding_window > 0 ? RLX_MASK_SLIDING : RLX_MASK_CAUSAL;
  d.window = c->sliding_window;
  rlx_tensor a = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_attention(b->g, q, k, v, RLX_NONE, &d, &a);
  llm_weight wo = layer_matrix(b, layer, "self_attn.o_proj.weight", c->hidden_size,
                               (int64_t)c->num_heads * c->head_dim);
  return linear(b, merge_heads(b, a, c->num_heads), wo, RLX_NONE);
}

static rlx_tensor mlp_block(llm_builder* b, int32_t layer, rlx_tensor x) {
  const rlx_llm_config* c = b->c;
  if (c->num_experts > 0) { /* Mixtral: routed experts (llm_moe.c) */
    rlx_tensor y = RLX_NONE;
    if (b->st == RLX_OK) b->st = rlx_llm_moe_block(b->g, c, b->src, layer, x, &y);
    return y;
  }
  int64_t D = c->hidden_size, F = c->intermediate_size;
  rlx_tensor gate = linear(b, x, layer_matrix(b, layer, "mlp.gate_proj.weight", F, D), RLX_NONE);
  rlx_tensor up = linear(b, x, layer_matrix(b, layer, "mlp.up_proj.weight", F, D), RLX_NONE);
  if (b->st == RLX_OK) b->st = rlx_graph_add_activation(b->g, RLX_ACT_SILU, gate, &gate);
  rlx_tensor hidden = binary(b, RLX_BIN_MUL, gate, up);
  return linear(b, hidden, layer_matrix(b, layer, "mlp.down_proj.weight", D, F), RLX_NONE);
}

static rlx_tensor decoder_layer(llm_builder* b, int32_t layer, rlx_tensor h) {
  int64_t D = b->c->hidden_size;
  rlx_tensor x = rms_norm(b, h, layer_param(b, layer, "input_layernorm.weight", 1, D, 0));
  h = binary(b, RLX_BIN_ADD, h, attention_block(b, layer, x));
  x = rms_norm(b, h, layer_param(b, layer, "post_attention_layernorm.weight", 1, D, 0));
  return binary(b, RLX_BIN_ADD, h, mlp_block(b, layer, x));
}

/* Static size, or the named symbol when size is 0. */
static rlx_dim dim_of(llm_builder* b, int64_t size, const char* symbol) {
  rlx_dim d = size;
  if (size == 0 && b->st == RLX_OK) b->st = rlx_graph_symbol(b->g, symbol, &d);
  return d;
}

static rlx_tensor inputs_and_tables(llm_builder* b, int64_t rows) {
  rlx_tensor ids = RLX_NONE, pos = RLX_NONE;
  rlx_dim ids_shape[2] = {b->B, b->T};
  if (b->st == RLX_OK) b->st = rlx_graph_add_input(b->g, "input_ids", RLX_I64, ids_shape, 2, &ids);
  if (b->st == RLX_OK) b->st = rlx_graph_add_input(b->g, "positions", RLX_I64, &b->T, 1, &pos);
  b->cos = gather(b, param(b, "rope.cos", 2, rows, b->c->head_dim / 2), pos);
  b->sin = gather(b, param(b, "rope.sin", 2, rows, b->c->head_dim / 2), pos);
  return ids;
}

int64_t rlx_llm_table_rows(const rlx_llm_config* c, const rlx_llm_options* o) {
  if (o && o->max_seq > 0) return o->max_seq;
  return c->max_positions < 4096 ? c->max_positions : 4096;
}

static rlx_status check_options(const rlx_llm_options* o, rlx_error* err) {
  if (o->batch < 0 || o->seq_len < 0 || o->max_seq < 0 || o->max_seq > (1 << 24))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "llm options: batch %lld, seq_len %lld, max_seq %lld: expected >= 0 (0 = "
                    "symbolic / default), max_seq <= 2^24",
                    (long long)o->batch, (long long)o->seq_len, (long long)o->max_seq);
  return RLX_OK;
}

rlx_status rlx_llm_build(const rlx_llm_config* c, const rlx_llm_options* opt, rlx_graph** out,
                         rlx_error* err) {
  return rlx_llm_build_from(c, opt, NULL, out, err);
}

rlx_status rlx_llm_build_from(const rlx_llm_config* c, const rlx_llm_options* opt,
                              const llm_source* src, rlx_graph** out, rlx_error* err) {
  rlx_llm_options defaults;
  rlx_llm_options_init(&defaults);
  const rlx_llm_options* o = opt ? opt : &defaults;
  if (!c || !out) return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm: NULL config or out_graph");
  *out = NULL;
  RLX_RETURN_IF_ERROR(rlx_llm_config_check(c, err));
  RLX_RETURN_IF_ERROR(check_options(o, err));
  if (c->arch == RLX_LLM_GPT2 || c->arch == RLX_LLM_GEMMA2)
    return llm_build_gpt2_gemma2(c, o, src, out, err);
  llm_builder b = {NULL, c, src, RLX_OK, 0, 0, RLX_NONE, RLX_NONE};
  if (rlx_graph_create(&b.g) != RLX_OK)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  b.B = dim_of(&b, o->batch, "B");
  b.T = dim_of(&b, o->seq_len, "T");
  rlx_tensor ids = inputs_and_tables(&b, rlx_llm_table_rows(c, o));
  rlx_tensor embed = param(&b, "model.embed_tokens.weight", 2, c->vocab_size, c->hidden_size);
  rlx_tensor h = gather(&b, embed, ids);
  for (int32_t layer = 0; layer < c->num_layers; layer++) h = decoder_layer(&b, layer, h);
  h = rms_norm(&b, h, param(&b, "model.norm.weight", 1, c->hidden_size, 0));
  llm_weight head = {embed, -1};
  if (!c->tie_word_embeddings) head = matrix(&b, "lm_head.weight", c->vocab_size, c->hidden_size);
  rlx_tensor logits = linear(&b, h, head, RLX_NONE);
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

void rlx_llm_options_init(rlx_llm_options* o) {
  if (o) memset(o, 0, sizeof *o);
}

rlx_status rlx_llm_build_graph(const rlx_llm_config* c, const rlx_llm_options* o,
                               rlx_graph** out_graph, char** out_error) {
  rlx_error err = {{0}};
  return rlx_llm_report(rlx_llm_build(c, o, out_graph, &err), &err, out_error);
}

/* ------------------------------------------------------------------ RoPE tables */

/* Llama 3.1's frequency scaling: wavelengths shorter than
 * original / high_freq_factor keep their frequency, those longer than
 * original / low_freq_factor are divided by factor, and the band between
 * blends the two linearly in original / wavelength. */
static double llama3_scaled(const rlx_llm_config* c, double freq) {
  double original = (double)c->rope_original_max_positions;
  double wavelen = 6.283185307179586 / freq; /* 2 pi / freq */
  if (wavelen < original / c->rope_high_freq_factor) return freq;
  if (wavelen > original / c->rope_low_freq_factor) return freq / c->rope_factor;
  double smooth = (original / wavelen - c->rope_low_freq_factor) /
                  (c->rope_high_freq_factor - c->rope_low_freq_factor);
  return (1.0 - smooth) * freq / c->rope_factor + smooth * freq;
}

static double rope_frequency(const rlx_llm_config* c, const float* divisors, int32_t i) {
  double freq = pow(c->rope_theta, -2.0 * i / (double)c->head_dim);
  if (divisors) freq /= (double)divisors[i];
  switch (c->rope_scaling) {
    case RLX_LLM_ROPE_LINEAR: return freq / c->rope_factor;
    case RLX_LLM_ROPE_LLAMA3: return llama3_scaled(c, freq);
    default: return freq;
  }
}

rlx_status rlx_llm_rope_tables(const rlx_llm_config* c, int64_t n_positions, float* cos_out,
                               float* sin_out) {
  return rlx_llm_rope_tables_from(c, NULL, n_positions, cos_out, sin_out);
}

rlx_status rlx_llm_rope_tables_from(const rlx_llm_config* c, const float* divisors,
                                    int64_t n_positions, float* cos_out, float* sin_out) {
  rlx_error err;
  if (!c || !cos_out || !sin_out || n_positions < 0) return RLX_INVALID_ARGUMENT;
  RLX_RETURN_IF_ERROR(rlx_llm_config_check(c, &err));
  int32_t half = c->head_dim / 2;
  for (int32_t i = 0; i < half; i++) {
    double freq = rope_frequency(c, divisors, i);
    for (int64_t p = 0; p < n_positions; p++) {
      double angle = (double)p * freq;
      cos_out[p * half + i] = (float)cos(angle);
      sin_out[p * half + i] = (float)sin(angle);
    }
  }
  return RLX_OK;
}
