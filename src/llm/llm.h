/* LLM graph builders from a model config (see the rlx_llm_* section of
 * rlx.h). llm_config.c fills rlx_llm_config from config.json (json-c),
 * llm_build.c builds the forward graph with the public graph API and the
 * RoPE tables, llm.c loads a checkpoint folder and binds its weights. */
#ifndef RLX_LLM_LLM_H
#define RLX_LLM_LLM_H

#include "rlx.h"
#include "base/error.h"

/* Range checks shared by every source of a config (config.json now, GGUF
 * metadata later): sizes positive and bounded, heads dividing, a rope
 * scaling with usable factors. */
rlx_status rlx_llm_config_check(const rlx_llm_config* c, rlx_error* err);

/* Rows of the RoPE tables the options ask for (max_seq or its default). */
int64_t rlx_llm_table_rows(const rlx_llm_config* c, const rlx_llm_options* o);

/* Builds the forward graph; the message of a failure goes to err. */
rlx_status rlx_llm_build(const rlx_llm_config* c, const rlx_llm_options* o, rlx_graph** out,
                         rlx_error* err);

/* Where the weights come from, when not a safetensors checkpoint: a GGUF
 * file names its tensors its own way (llm_gguf_name), may store Linear
 * weights quantized (scheme_of gives the rlx_quant_scheme of a tensor by
 * its GGUF name, -1 for a float one: those become DequantMatMul on the raw
 * blocks), and stores Llama's q / k rows permuted so that RoPE pairs are
 * adjacent (rope_style GPTJ). */
typedef struct llm_source {
  int gguf;
  rlx_rope_style rope_style;
  int32_t (*scheme_of)(void* ctx, const char* gguf_name);
  void* ctx;
} llm_source;

rlx_status rlx_llm_build_from(const rlx_llm_config* c, const rlx_llm_options* o,
                              const llm_source* src, rlx_graph** out, rlx_error* err);

/* ------------------------------------------------------------------ graph builder
 *
 * Shared by llm_build.c (the Llama family, the driver of both graph forms,
 * the KV-cache machinery) and llm_build_gpt2_gemma2.c. A builder keeps the
 * first failure and turns every later call into a no-op, so the builders
 * read as the architecture does; the graph holds the failure's message. */

typedef struct llm_cache llm_cache;

typedef struct llm_builder {
  rlx_graph* g;
  const rlx_llm_config* c;
  const llm_source* src; /* NULL: a safetensors checkpoint (HF names) */
  rlx_status st;
  rlx_dim B, T;
  rlx_tensor positions; /* i64 [T]: the run's positions */
  rlx_tensor cos, sin;  /* [T, head_dim / 2], gathered at the positions */
  rlx_tensor embed;     /* the token embedding (a tied head reads it) */
  llm_cache* cache;     /* the KV-cache form's state (NULL: the full forward) */
} llm_builder;

/* A Linear weight: f32 [out, in] read transposed, f32 [in, out] read as
 * stored (GPT-2's Conv1D in a checkpoint), or a GGUF file's quantized
 * blocks (u8 [out, row_bytes], DequantMatMul's W layout). */
typedef struct llm_weight {
  rlx_tensor t;
  int32_t scheme; /* rlx_quant_scheme, or -1 for a float weight */
  int32_t transposed;
} llm_weight;

/* One architecture's pieces, called by the driver in llm_build.c for the
 * full forward and the KV-cache form alike: the embedding of ids
 * ([B, T, hidden]), one decoder layer, and the final norm + head. */
typedef struct llm_arch {
  rlx_tensor (*embed)(llm_builder* b, rlx_tensor ids);
  rlx_tensor (*layer)(llm_builder* b, int32_t layer, rlx_tensor h);
  rlx_tensor (*logits)(llm_builder* b, rlx_tensor h);
} llm_arch;

/* GPT-2's or Gemma-2's pieces (llm_build_gpt2_gemma2.c). */
const llm_arch* llm_gpt2_gemma2_arch(const rlx_llm_config* c);

/* A param by the name the weights' file uses (no renaming here). */
rlx_tensor llm_param(llm_builder* b, const char* name, rlx_dtype dtype, int32_t rank, int64_t d0,
                     int64_t d1);
/* The Linear weight `name` [out, in]: quantized when the source says so,
 * else f32 [out, in] (transposed) or [in, out]. */
llm_weight llm_matrix(llm_builder* b, const char* name, int64_t out, int64_t in,
                      int32_t transposed);
rlx_tensor llm_binary(llm_builder* b, rlx_binary_op op, rlx_tensor x, rlx_tensor y);
rlx_tensor llm_activation(llm_builder* b, rlx_activation act, rlx_tensor x);
rlx_tensor llm_scalar_f32(llm_builder* b, float v); /* f32 [1], broadcast by binary ops */
/* x @ w (transposed as w says) + bias (RLX_NONE: none). */
rlx_tensor llm_linear(llm_builder* b, rlx_tensor x, llm_weight w, rlx_tensor bias);
rlx_tensor llm_gather(llm_builder* b, rlx_tensor x, rlx_tensor idx, int32_t axis);
/* [B, T, heads * head_dim] <-> [B, T, heads, head_dim] (BSHD: a view). */
rlx_tensor llm_split_heads(llm_builder* b, rlx_tensor x, int32_t heads);
rlx_tensor llm_merge_heads(llm_builder* b, rlx_tensor x, int32_t heads);
/* RoPE of x [B, T, heads, head_dim] with b->cos / b->sin. */
rlx_tensor llm_rope(llm_builder* b, rlx_tensor x);
/* Attention of layer `layer` over q, k, v (BSHD) with the config's score
 * scale, softcap and mask (sliding on the layers the window pattern
 * names, else causal); in the KV-cache form over the layer's caches.
 * Returns [B, T, heads, head_dim]. */
rlx_tensor llm_attention(llm_builder* b, int32_t layer, rlx_tensor q, rlx_tensor k, rlx_tensor v);

/* 1 when the arch's graph has the "rope.cos" / "rope.sin" params (all but
 * GPT-2, whose positions are learned). */
static inline int llm_has_rope(const rlx_llm_config* c) { return c->arch != RLX_LLM_GPT2; }
/* The mixture-of-experts block of layer `layer` (llm_moe.c) over x [B, T,
 * hidden]: router, top-k, softmax over the k, SiLU-gated experts through
 * GroupedMatMul, weighted sum; params named as src's files name them. */
rlx_status rlx_llm_moe_block(rlx_graph* g, const rlx_llm_config* c, const llm_source* src,
                             int32_t layer, rlx_tensor x, rlx_tensor* out);

/* The RoPE tables with each frequency i divided by divisors[i] (NULL:
 * none): GGUF's rope_freqs.weight, how llama.cpp's converter stores
 * Llama 3.1's rope scaling. */
rlx_status rlx_llm_rope_tables_from(const rlx_llm_config* c, const float* divisors,
                                    int64_t n_positions, float* cos_out, float* sin_out);

/* The KV-cache form (see rlx_llm_build_cache_graph) with caches of `rows`
 * rows; sampling NULL: greedy. */
rlx_status rlx_llm_build_cache_from(const rlx_llm_config* c, int64_t rows, const llm_source* src,
                                    const rlx_llm_sampling* sampling, int32_t all_logits,
                                    rlx_graph** out, rlx_error* err);

/* ------------------------------------------------------------------ GGUF (llm_gguf.c) */

/* The GGUF name of the tensor an HF name stands for ("model.layers.3.
 * self_attn.q_proj.weight" -> "blk.3.attn_q.weight"); names without a GGUF
 * counterpart (the RoPE tables) are copied. RLX_INVALID_ARGUMENT when out
 * is too small. */
rlx_status llm_gguf_name(const char* hf_name, char* out, size_t cap);

/* The rlx_quant_scheme of a ggml type id, or -1 when it has none. */
int32_t llm_ggml_scheme(uint32_t ggml_type);

/* rlx_llm_config from a GGUF file's metadata (and token_embd's shape);
 * *divisors gets rope_freqs.weight's values (malloc'd, head_dim / 2) when
 * the file has that tensor, else NULL; *style the RoPE style the arch's
 * converter leaves the q / k rows in. Errors name the key. */
rlx_status llm_gguf_config(rlx_gguf* g, rlx_llm_config* c, float** divisors,
                           rlx_rope_style* style, rlx_error* err);

/* The tensor behind GGUF param p (present, its shape, a type the param
 * can take) and, for f32 params, its values converted / dequantized into
 * f32 (dst, numel floats); for u8 params the raw bytes are in t->data. */
rlx_status llm_gguf_check(rlx_gguf* g, const rlx_value_info* p, rlx_gguf_tensor_info* t,
                          rlx_error* err);
rlx_status llm_gguf_to_f32(const rlx_gguf_tensor_info* t, float* dst, rlx_error* err);

/* Fills *out with the message of err (malloc'd) when out is not NULL. */
rlx_status rlx_llm_report(rlx_status s, const rlx_error* err, char** out);

#endif
