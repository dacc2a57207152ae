/* The forward graph of a Llama-family decoder (Llama, Qwen2, Qwen3,
 * Mistral), built with the public graph API, and its RoPE tables.
 *
 *   h = embed_tokens[input_ids]
 *   per layer:  h += o_proj(Attention(rope(q), rope(k), v))  of RmsNorm(h)
 *               h += down_proj(silu(gate_proj(x)) * up_proj(x)), x = RmsNorm(h)
 *   logits = RmsNorm(h) @ lm_head^T   (embed_tokens when tied)
 *
 * Weights stay as the checkpoint stores them, [out, in], and MatMul reads
 * them transposed: no copy or transposition at load time.
 *
 * Also the driver of every arch (llm_arch: GPT-2 and Gemma-2 bring theirs
 * from llm_build_gpt2_gemma2.c) for both graph forms, the full forward and
 * the KV-cache form, and the builder helpers llm.h declares. */
#include "llm/llm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The KV-cache form (rlx_llm_build_cache_graph): per layer the caches
 * [1, rows, Hkv, head_dim] (BSHD), the T new rows written at positions
 * start .. start + count - 1, every query attending to the cache. */
struct llm_cache {
  int64_t rows;
  rlx_tensor keep;        /* bool [T, rows]: key j visible to query t (causal) */
  rlx_tensor keep_window; /* f32 [T, rows]: keep, and j within the sliding window */
  rlx_tensor at;          /* bool [1, rows, 1, 1]: the cache rows this run writes */
  rlx_tensor src_row;     /* i64 [rows]: which of the T new rows lands in cache row j */
  rlx_tensor* new_cache;  /* 2 * num_layers: k0, v0, k1, v1, ... */
};

static rlx_tensor attend_cache(llm_builder* b, int32_t layer, rlx_tensor q, rlx_tensor k,
                               rlx_tensor v, const rlx_attention_desc* d);

/* ------------------------------------------------------------------ shared helpers (llm.h) */

rlx_tensor llm_param(llm_builder* b, const char* name, rlx_dtype dtype, int32_t rank, int64_t d0,
                     int64_t d1) {
  rlx_tensor t = RLX_NONE;
  rlx_dim s[2] = {d0, d1};
  if (b->st == RLX_OK) b->st = rlx_graph_add_param(b->g, name, dtype, s, rank, &t);
  return t;
}

llm_weight llm_matrix(llm_builder* b, const char* name, int64_t out, int64_t in,
                      int32_t transposed) {
  llm_weight w = {RLX_NONE, -1, transposed};
  if (b->st == RLX_OK && b->src && b->src->scheme_of)
    w.scheme = b->src->scheme_of(b->src->ctx, name);
  if (w.scheme < 0) {
    w.t = transposed ? llm_param(b, name, RLX_F32, 2, out, in)
                     : llm_param(b, name, RLX_F32, 2, in, out);
    return w;
  }
  int64_t row_bytes = 0;
  if (b->st == RLX_OK)
    b->st = rlx_quant_row_bytes((rlx_quant_scheme)w.scheme, in, 0, &row_bytes, NULL, 0);
  w.transposed = 1;
  w.t = llm_param(b, name, RLX_U8, 2, out, row_bytes);
  return w;
}

rlx_tensor llm_binary(llm_builder* b, rlx_binary_op op, rlx_tensor x, rlx_tensor y) {
  rlx_tensor z = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_binary(b->g, op, x, y, &z);
  return z;
}

rlx_tensor llm_activation(llm_builder* b, rlx_activation act, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_activation(b->g, act, x, &y);
  return y;
}

static rlx_tensor constant(llm_builder* b, rlx_dtype dtype, const void* data, int64_t n) {
  rlx_tensor t = RLX_NONE;
  rlx_dim s[1] = {n};
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_constant(b->g, dtype, s, 1, data, (size_t)n * rlx_dtype_size(dtype), &t);
  return t;
}

rlx_tensor llm_scalar_f32(llm_builder* b, float v) { return constant(b, RLX_F32, &v, 1); }
static rlx_tensor scalar_i64(llm_builder* b, int64_t v) { return constant(b, RLX_I64, &v, 1); }

rlx_tensor llm_linear(llm_builder* b, rlx_tensor x, llm_weight w, rlx_tensor bias) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK && w.scheme >= 0)
    b->st = rlx_graph_dequant_matmul(b->g, x, w.t, RLX_NONE, RLX_NONE,
                                     (rlx_quant_scheme)w.scheme, 0, &y);
  else if (b->st == RLX_OK)
    b->st = rlx_graph_add_matmul(b->g, x, w.t, 0, w.transposed, &y);
  return bias == RLX_NONE ? y : llm_binary(b, RLX_BIN_ADD, y, bias);
}

rlx_tensor llm_gather(llm_builder* b, rlx_tensor x, rlx_tensor idx, int32_t axis) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_gather(b->g, x, idx, axis, &y);
  return y;
}

static rlx_tensor reshape(llm_builder* b, rlx_tensor x, rlx_dim d0, rlx_dim d1, rlx_dim d2,
                          rlx_dim d3, int32_t rank) {
  rlx_tensor y = RLX_NONE;
  rlx_dim s[4] = {d0, d1, d2, d3};
  if (b->st == RLX_OK) b->st = rlx_graph_add_reshape(b->g, x, s, rank, &y);
  return y;
}

rlx_tensor llm_split_heads(llm_builder* b, rlx_tensor x, int32_t heads) {
  return reshape(b, x, b->B, b->T, heads, b->c->head_dim, 4);
}

rlx_tensor llm_merge_heads(llm_builder* b, rlx_tensor x, int32_t heads) {
  return reshape(b, x, b->B, b->T, (rlx_dim)heads * b->c->head_dim, 0, 3);
}

rlx_tensor llm_rope(llm_builder* b, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  int32_t hd = b->c->head_dim;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_rope(b->g, x, b->cos, b->sin, hd, hd,
                               b->src ? b->src->rope_style : RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &y);
  return y;
}

/* Layer i slides (keys within sliding_window of the query) when
 * i % pattern < pattern - 1, every layer for pattern 0 (Mistral); the
 * others are causal over the whole run. */
static int layer_slides(const rlx_llm_config* c, int32_t layer) {
  int32_t pattern = c->sliding_window_pattern;
  return c->sliding_window > 0 && (pattern == 0 || layer % pattern < pattern - 1);
}

rlx_tensor llm_attention(llm_builder* b, int32_t layer, rlx_tensor q, rlx_tensor k, rlx_tensor v) {
  const rlx_llm_config* c = b->c;
  rlx_attention_desc d;
  memset(&d, 0, sizeof d);
  d.num_heads = c->num_heads;
  d.num_kv_heads = c->num_kv_heads;
  d.head_dim = c->head_dim;
  d.layout = RLX_LAYOUT_BSHD;
  d.softcap = c->attn_logit_softcap;
  if (c->query_pre_attn_scalar > 0.0f) d.score_scale = 1.0f / sqrtf(c->query_pre_attn_scalar);
  int slides = layer_slides(c, layer);
  d.mask = slides ? RLX_MASK_SLIDING : RLX_MASK_CAUSAL;
  d.window = slides ? c->sliding_window : 0;
  if (b->cache) return attend_cache(b, layer, q, k, v, &d);
  rlx_tensor a = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_attention(b->g, q, k, v, RLX_NONE, &d, &a);
  return a;
}

/* ------------------------------------------------------------------ the Llama family */

/* A param called by its HF name, or by the file's name for that tensor
 * when the weights come from elsewhere (GGUF). */
static const char* file_name(llm_builder* b, const char* hf_name, char* buf, size_t cap) {
  if (!(b->st == RLX_OK && b->src && b->src->gguf)) return hf_name;
  if (llm_gguf_name(hf_name, buf, cap) != RLX_OK) b->st = RLX_INTERNAL;
  return buf;
}

static rlx_tensor param(llm_builder* b, const char* hf_name, int32_t rank, int64_t d0, int64_t d1) {
  char buf[160];
  return llm_param(b, file_name(b, hf_name, buf, sizeof buf), RLX_F32, rank, d0, d1);
}

/* Weights stay [out, in] as the checkpoint stores them (read transposed). */
static llm_weight matrix(llm_builder* b, const char* hf_name, int64_t out, int64_t in) {
  char buf[160];
  return llm_matrix(b, file_name(b, hf_name, buf, sizeof buf), out, in, 1);
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

static rlx_tensor rms_norm(llm_builder* b, rlx_tensor x, rlx_tensor w) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_rms_norm(b->g, x, w, b->c->rms_norm_eps, &y);
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
  rlx_tensor y = llm_split_heads(b, llm_linear(b, x, w, bias), heads);
  if (which == 'v') return y;
  if (c->qk_norm) {
    snprintf(name, sizeof name, "self_attn.%c_norm.weight", which);
    y = rms_norm(b, y, layer_param(b, layer, name, 1, c->head_dim, 0));
  }
  return llm_rope(b, y);
}

static rlx_tensor attention_block(llm_builder* b, int32_t layer, rlx_tensor x) {
  const rlx_llm_config* c = b->c;
  rlx_tensor q = project(b, layer, x, 'q', c->num_heads);
  rlx_tensor k = project(b, layer, x, 'k', c->num_kv_heads);
  rlx_tensor v = project(b, layer, x, 'v', c->num_kv_heads);
  rlx_tensor a = llm_attention(b, layer, q, k, v);
  llm_weight wo = layer_matrix(b, layer, "self_attn.o_proj.weight", c->hidden_size,
                               (int64_t)c->num_heads * c->head_dim);
  return llm_linear(b, llm_merge_heads(b, a, c->num_heads), wo, RLX_NONE);
}

static rlx_tensor mlp_block(llm_builder* b, int32_t layer, rlx_tensor x) {
  const rlx_llm_config* c = b->c;
  if (c->num_experts > 0) { /* Mixtral: routed experts (llm_moe.c) */
    rlx_tensor y = RLX_NONE;
    if (b->st == RLX_OK) b->st = rlx_llm_moe_block(b->g, c, b->src, layer, x, &y);
    return y;
  }
  int64_t D = c->hidden_size, F = c->intermediate_size;
  rlx_tensor gate =
      llm_linear(b, x, layer_matrix(b, layer, "mlp.gate_proj.weight", F, D), RLX_NONE);
  rlx_tensor up = llm_linear(b, x, layer_matrix(b, layer, "mlp.up_proj.weight", F, D), RLX_NONE);
  rlx_tensor hidden = llm_binary(b, RLX_BIN_MUL, llm_activation(b, RLX_ACT_SILU, gate), up);
  return llm_linear(b, hidden, layer_matrix(b, layer, "mlp.down_proj.weight", D, F), RLX_NONE);
}

static rlx_tensor decoder_layer(llm_builder* b, int32_t layer, rlx_tensor h) {
  int64_t D = b->c->hidden_size;
  rlx_tensor x = rms_norm(b, h, layer_param(b, layer, "input_layernorm.weight", 1, D, 0));
  h = llm_binary(b, RLX_BIN_ADD, h, attention_block(b, layer, x));
  x = rms_norm(b, h, layer_param(b, layer, "post_attention_layernorm.weight", 1, D, 0));
  return llm_binary(b, RLX_BIN_ADD, h, mlp_block(b, layer, x));
}

static rlx_tensor llama_embed(llm_builder* b, rlx_tensor ids) {
  const rlx_llm_config* c = b->c;
  b->embed = param(b, "model.embed_tokens.weight", 2, c->vocab_size, c->hidden_size);
  return llm_gather(b, b->embed, ids, 0);
}

static rlx_tensor llama_logits(llm_builder* b, rlx_tensor h) {
  const rlx_llm_config* c = b->c;
  h = rms_norm(b, h, param(b, "model.norm.weight", 1, c->hidden_size, 0));
  llm_weight head = {b->embed, -1, 1};
  if (!c->tie_word_embeddings) head = matrix(b, "lm_head.weight", c->vocab_size, c->hidden_size);
  return llm_linear(b, h, head, RLX_NONE);
}

static const llm_arch llama_arch = {llama_embed, decoder_layer, llama_logits};

static const llm_arch* arch_of(const rlx_llm_config* c) {
  if (c->arch == RLX_LLM_GPT2 || c->arch == RLX_LLM_GEMMA2) return llm_gpt2_gemma2_arch(c);
  return &llama_arch;
}

/* ------------------------------------------------------------------ the driver */

/* Static size, or the named symbol when size is 0. */
static rlx_dim dim_of(llm_builder* b, int64_t size, const char* symbol) {
  rlx_dim d = size;
  if (size == 0 && b->st == RLX_OK) b->st = rlx_graph_symbol(b->g, symbol, &d);
  return d;
}

/* The inputs input_ids [B, T] and positions [T] (b->positions) and, for
 * the archs with RoPE, the tables of `rows` rows gathered at the
 * positions; returns input_ids. */
static rlx_tensor inputs_and_tables(llm_builder* b, int64_t rows) {
  rlx_tensor ids = RLX_NONE;
  rlx_dim ids_shape[2] = {b->B, b->T};
  if (b->st == RLX_OK) b->st = rlx_graph_add_input(b->g, "input_ids", RLX_I64, ids_shape, 2, &ids);
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_input(b->g, "positions", RLX_I64, &b->T, 1, &b->positions);
  if (!llm_has_rope(b->c)) return ids;
  int32_t half = b->c->head_dim / 2;
  b->cos = llm_gather(b, llm_param(b, "rope.cos", RLX_F32, 2, rows, half), b->positions, 0);
  b->sin = llm_gather(b, llm_param(b, "rope.sin", RLX_F32, 2, rows, half), b->positions, 0);
  return ids;
}

/* The hidden state after the last layer. */
static rlx_tensor decoder(llm_builder* b, const llm_arch* arch, rlx_tensor ids) {
  rlx_tensor h = arch->embed(b, ids);
  for (int32_t layer = 0; layer < b->c->num_layers; layer++) h = arch->layer(b, layer, h);
  return h;
}

/* The graph to *out, or the builder's failure to err (`what` names the form). */
static rlx_status finish(llm_builder* b, const char* what, rlx_graph** out, rlx_error* err) {
  if (b->st != RLX_OK) {
    rlx_status s =
        rlx_fail(err, b->st, "llm: building the %s: %s", what, rlx_graph_last_error(b->g));
    rlx_graph_destroy(b->g);
    return s;
  }
  *out = b->g;
  return RLX_OK;
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
  const llm_arch* arch = arch_of(c);
  llm_builder b = {NULL, c, src, RLX_OK, 0, 0, RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE, NULL};
  if (rlx_graph_create(&b.g) != RLX_OK)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  b.B = dim_of(&b, o->batch, "B");
  b.T = dim_of(&b, o->seq_len, "T");
  rlx_tensor ids = inputs_and_tables(&b, rlx_llm_table_rows(c, o));
  rlx_tensor logits = arch->logits(&b, decoder(&b, arch, ids));
  if (b.st == RLX_OK) b.st = rlx_graph_set_name(b.g, logits, "logits");
  if (b.st == RLX_OK) b.st = rlx_graph_set_outputs(b.g, &logits, 1);
  return finish(&b, "graph", out, err);
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

/* ------------------------------------------------------------------ the KV-cache form
 *
 * One graph serves prefill and decode: T (symbolic) new tokens at positions
 * start .. start + count - 1 (count <= T; the rest of a padded chunk is
 * ignored) are written into per-layer caches held as device state, and
 * every query attends to the cache rows up to its own position. The write
 * is Where(at, rows, cache), elementwise over the cache, so the memory
 * planner keeps the new cache in the old one's bytes (no copy per run);
 * rows is the T new rows gathered to the cache rows they land in. */

static rlx_tensor node_input(llm_builder* b, const char* name, rlx_dtype dtype,
                             const rlx_dim* shape, int32_t rank) {
  rlx_tensor t = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_input(b->g, name, dtype, shape, rank, &t);
  return t;
}

/* 0, 1, ..., n - 1 (i64). */
static rlx_tensor arange(llm_builder* b, int64_t n) {
  int64_t* v = malloc((size_t)n * sizeof *v);
  if (!v) {
    if (b->st == RLX_OK) b->st = RLX_RESOURCE_EXHAUSTED;
    return RLX_NONE;
  }
  for (int64_t i = 0; i < n; i++) v[i] = i;
  rlx_tensor t = constant(b, RLX_I64, v, n);
  free(v);
  return t;
}

static rlx_tensor compare(llm_builder* b, rlx_compare_op op, rlx_tensor x, rlx_tensor y) {
  rlx_tensor z = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_compare(b->g, op, x, y, &z);
  return z;
}

static rlx_tensor where(llm_builder* b, rlx_tensor cond, rlx_tensor x, rlx_tensor y) {
  rlx_tensor z = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_where(b->g, cond, x, y, &z);
  return z;
}

static rlx_tensor cast_f32(llm_builder* b, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_cast(b->g, x, RLX_F32, &y);
  return y;
}

/* The masks of a run: with d = j - start for cache row j,
 *   src_row[j]        = clamp(d, 0, count - 1)   (the new row written there)
 *   at[j]             = src_row[j] == d          (start <= j < start + count)
 *   keep[t, j]        = j <= positions[t]
 *   keep_window[t, j] = keep[t, j] and j > positions[t] - window
 * (the layers that slide read keep_window, the others keep). */
static void cache_masks(llm_builder* b, rlx_tensor start, rlx_tensor count) {
  llm_cache* k = b->cache;
  rlx_tensor ar = arange(b, k->rows);
  rlx_tensor d = llm_binary(b, RLX_BIN_SUB, ar, start);
  rlx_tensor last = llm_binary(b, RLX_BIN_SUB, count, scalar_i64(b, 1));
  k->src_row = llm_binary(b, RLX_BIN_MIN, llm_binary(b, RLX_BIN_MAX, d, scalar_i64(b, 0)), last);
  k->at = reshape(b, compare(b, RLX_CMP_EQ, k->src_row, d), 1, k->rows, 1, 1, 4);
  rlx_tensor row = reshape(b, ar, 1, k->rows, 0, 0, 2);
  rlx_tensor col = reshape(b, b->positions, b->T, 1, 0, 0, 2);
  k->keep = compare(b, RLX_CMP_LE, row, col);
  if (b->c->sliding_window > 0) {
    rlx_tensor lo = llm_binary(b, RLX_BIN_SUB, col, scalar_i64(b, b->c->sliding_window));
    rlx_tensor in_window = compare(b, RLX_CMP_GT, row, lo);
    k->keep_window = llm_binary(b, RLX_BIN_MUL, cast_f32(b, k->keep), cast_f32(b, in_window));
  }
}

static rlx_tensor attend_cache(llm_builder* b, int32_t layer, rlx_tensor q, rlx_tensor k,
                               rlx_tensor v, const rlx_attention_desc* d) {
  llm_cache* kc = b->cache;
  rlx_tensor kv[2] = {k, v};
  rlx_dim shape[4] = {1, kc->rows, b->c->num_kv_heads, b->c->head_dim};
  for (int i = 0; i < 2; i++) {
    char name[48];
    snprintf(name, sizeof name, "%s_cache.%d", i ? "v" : "k", (int)layer);
    rlx_tensor cache = node_input(b, name, RLX_F32, shape, 4);
    rlx_tensor rows = llm_gather(b, kv[i], kc->src_row, 1);
    kv[i] = where(b, kc->at, rows, cache);
    kc->new_cache[2 * layer + i] = kv[i];
  }
  rlx_attention_desc cd = *d;
  cd.mask = RLX_MASK_CUSTOM;
  cd.window = 0;
  rlx_tensor keep = d->mask == RLX_MASK_SLIDING ? kc->keep_window : kc->keep;
  rlx_tensor a = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_attention(b->g, q, kv[0], kv[1], keep, &cd, &a);
  return a;
}

/* Repetition penalty (CTRL's): a logit of a token among the last
 * repeat_last_n ("recent"; vocab_size marks an empty slot) is divided by
 * the penalty when positive, multiplied when negative. Which tokens were
 * seen is ScatterAdd of ones into V + 1 zeros (the extra one takes the
 * empty slots), O(V + repeat_last_n) per step. */
static rlx_tensor repeat_penalty(llm_builder* b, rlx_tensor logits, const rlx_llm_sampling* s) {
  rlx_dim n = s->repeat_last_n;
  int64_t V = b->c->vocab_size;
  rlx_tensor recent = node_input(b, "recent", RLX_I64, &n, 1);
  float* buf = calloc((size_t)(V + 1 > n ? V + 1 : n), sizeof(float));
  if (!buf) {
    if (b->st == RLX_OK) b->st = RLX_RESOURCE_EXHAUSTED;
    return logits;
  }
  rlx_tensor zeros = constant(b, RLX_F32, buf, V + 1);
  for (int64_t i = 0; i < n; i++) buf[i] = 1.0f;
  rlx_tensor ones = constant(b, RLX_F32, buf, n);
  free(buf);
  rlx_tensor counts = RLX_NONE, seen = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_scatter_add(b->g, zeros, recent, ones, 0, &counts);
  if (b->st == RLX_OK) b->st = rlx_graph_add_narrow(b->g, counts, 0, 0, V, &seen);
  rlx_tensor positive = compare(b, RLX_CMP_GT, logits, llm_scalar_f32(b, 0.0f));
  rlx_tensor down = llm_binary(b, RLX_BIN_MUL, logits, llm_scalar_f32(b, 1.0f / s->repeat_penalty));
  rlx_tensor up = llm_binary(b, RLX_BIN_MUL, logits, llm_scalar_f32(b, s->repeat_penalty));
  rlx_tensor penalized = where(b, positive, down, up);
  return where(b, compare(b, RLX_CMP_GT, seen, llm_scalar_f32(b, 0.5f)), penalized, logits);
}

/* Min-p: keeps tokens whose probability (at the temperature) is at least
 * min_p times the top one's: p_i / p_max = exp((l_i - l_max) / temp) >= min_p
 * <=> l_i >= l_max + temp * ln(min_p). The others get -1e30 (exp gives 0). */
static rlx_tensor min_p_filter(llm_builder* b, rlx_tensor logits, const rlx_llm_sampling* s) {
  int32_t axis = 2;
  rlx_tensor top = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_reduce(b->g, RLX_RED_MAX, logits, &axis, 1, 1, &top);
  float margin = s->temperature * logf(s->min_p);
  rlx_tensor floor_ = llm_binary(b, RLX_BIN_ADD, top, llm_scalar_f32(b, margin));
  return where(b, compare(b, RLX_CMP_GE, logits, floor_), logits, llm_scalar_f32(b, -1e30f));
}

/* The next token from logits [1, 1, V]: penalties, min-p, then top-k,
 * top-p and temperature in the Sample op (greedy at temperature <= 0). */
static rlx_tensor sample_next(llm_builder* b, rlx_tensor logits, const rlx_llm_sampling* s) {
  if (s->repeat_penalty != 1.0f && s->repeat_last_n > 0) logits = repeat_penalty(b, logits, s);
  if (s->min_p > 0.0f && s->temperature > 0.0f) logits = min_p_filter(b, logits, s);
  rlx_tensor next = RLX_NONE;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_sample(b->g, logits, s->top_k, s->top_p, s->temperature, &next);
  if (b->st == RLX_OK) b->st = rlx_graph_set_name(b->g, next, "next");
  return next;
}

void rlx_llm_sampling_init(rlx_llm_sampling* s) {
  if (!s) return;
  memset(s, 0, sizeof *s);
  s->top_p = 1.0f;
  s->repeat_penalty = 1.0f;
  s->repeat_last_n = 64;
}

static rlx_status check_sampling(const rlx_llm_sampling* s, rlx_error* err) {
  if (!(s->temperature >= 0.0f) || s->top_k < 0 || !(s->top_p > 0.0f && s->top_p <= 1.0f) ||
      !(s->min_p >= 0.0f && s->min_p < 1.0f) || !(s->repeat_penalty > 0.0f) ||
      s->repeat_last_n < 0 || s->repeat_last_n > 65536)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "llm sampling: temperature %g (>= 0), top_k %d (>= 0), top_p %g (0 < p <= 1), "
                    "min_p %g (0 <= p < 1), repeat_penalty %g (> 0), repeat_last_n %d (0 .. 65536)",
                    (double)s->temperature, (int)s->top_k, (double)s->top_p, (double)s->min_p,
                    (double)s->repeat_penalty, (int)s->repeat_last_n);
  return RLX_OK;
}

/* Logits [1, T, V] (all_logits) or [1, 1, V] of the last real token, and
 * the next token from the last real token's logits. */
static void cache_head(llm_builder* b, const llm_arch* arch, rlx_tensor h, rlx_tensor count,
                       const rlx_llm_sampling* s, int32_t all_logits, rlx_tensor* next,
                       rlx_tensor* logits) {
  rlx_tensor last = llm_binary(b, RLX_BIN_SUB, count, scalar_i64(b, 1));
  if (!all_logits) h = llm_gather(b, h, last, 1);
  *logits = arch->logits(b, h);
  if (b->st == RLX_OK) b->st = rlx_graph_set_name(b->g, *logits, "logits");
  *next = sample_next(b, all_logits ? llm_gather(b, *logits, last, 1) : *logits, s);
}

static rlx_status cache_outputs(llm_builder* b, rlx_tensor next, rlx_tensor logits) {
  int32_t n_caches = 2 * b->c->num_layers;
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(n_caches + 2));
  if (!outs) return RLX_RESOURCE_EXHAUSTED;
  outs[0] = next;
  for (int32_t i = 0; i < n_caches; i++) outs[1 + i] = b->cache->new_cache[i];
  outs[1 + n_caches] = logits;
  rlx_status s = rlx_graph_set_outputs(b->g, outs, n_caches + 2);
  free(outs);
  return s;
}

static void cache_graph(llm_builder* b, const llm_arch* arch, const rlx_llm_sampling* s,
                        int32_t all_logits) {
  rlx_dim one = 1;
  b->B = 1;
  b->T = dim_of(b, 0, "T");
  rlx_tensor ids = inputs_and_tables(b, b->cache->rows);
  rlx_tensor start = node_input(b, "start", RLX_I64, &one, 1);
  rlx_tensor count = node_input(b, "count", RLX_I64, &one, 1);
  cache_masks(b, start, count);
  rlx_tensor next = RLX_NONE, logits = RLX_NONE;
  cache_head(b, arch, decoder(b, arch, ids), count, s, all_logits, &next, &logits);
  if (b->st == RLX_OK) b->st = cache_outputs(b, next, logits);
}

/* Cache rows a model can address: any for RoPE, GPT-2's learned
 * position table ends at max_positions. */
static rlx_status check_rows(const rlx_llm_config* c, int64_t rows, rlx_error* err) {
  if (rows < 1 || rows > (1 << 24))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm cache: %lld rows (expected 1 .. 2^24)",
                    (long long)rows);
  if (!llm_has_rope(c) && rows > c->max_positions)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "llm cache: %lld rows, but the model's learned positions end at %lld "
                    "(max_positions)",
                    (long long)rows, (long long)c->max_positions);
  return RLX_OK;
}

rlx_status rlx_llm_build_cache_from(const rlx_llm_config* c, int64_t rows, const llm_source* src,
                                    const rlx_llm_sampling* sampling, int32_t all_logits,
                                    rlx_graph** out, rlx_error* err) {
  rlx_llm_sampling greedy;
  rlx_llm_sampling_init(&greedy);
  const rlx_llm_sampling* s = sampling ? sampling : &greedy;
  if (!c || !out) return rlx_fail(err, RLX_INVALID_ARGUMENT, "llm: NULL config or out_graph");
  *out = NULL;
  RLX_RETURN_IF_ERROR(rlx_llm_config_check(c, err));
  RLX_RETURN_IF_ERROR(check_sampling(s, err));
  RLX_RETURN_IF_ERROR(check_rows(c, rows, err));
  llm_cache cache = {rows, RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE, NULL};
  cache.new_cache = calloc((size_t)(2 * c->num_layers), sizeof(rlx_tensor));
  llm_builder b = {NULL, c, src, RLX_OK, 0, 0, RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE, &cache};
  if (!cache.new_cache || rlx_graph_create(&b.g) != RLX_OK) {
    free(cache.new_cache);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  cache_graph(&b, arch_of(c), s, all_logits);
  free(cache.new_cache);
  return finish(&b, "cache graph", out, err);
}
