/* The built-in GPT of `rlx train --text` and `rlx generate CHECKPOINT`:
 * GPT-2's architecture (pre-norm blocks, learned positions, tied
 * embeddings), byte-level by default, built through the public API only.
 *
 * Param names follow Hugging Face's GPT-2 ("h.0.attn.c_attn.weight"), with
 * weights stored [in, out] as GPT-2's Conv1D stores them, so a PyTorch model
 * written the same way loads the same values:
 *   wte [V,C], wpe [T,C],
 *   h.i.ln_1.{weight,bias} [C]            LayerNorm, eps 1e-5
 *   h.i.attn.c_attn.{weight [C,3C], bias [3C]}   q | k | v
 *   h.i.attn.c_proj.{weight [C,C], bias [C]}
 *   h.i.ln_2.{weight,bias} [C]
 *   h.i.mlp.c_fc.{weight [C,4C], bias [4C]}    then GELU (tanh approximation)
 *   h.i.mlp.c_proj.{weight [4C,C], bias [C]}
 *   ln_f.{weight,bias} [C];  logits = ln_f(x) @ wte^T.
 * Every builder returns an rlx_status; on failure the graph holds the
 * message (rlx_graph_last_error). */
#ifndef RLX_TOOLS_GPT_MODEL_H
#define RLX_TOOLS_GPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

typedef struct gpt_config {
  int64_t vocab; /* 256 for bytes */
  int64_t ctx;   /* positions the model knows (rows of wpe) */
  int64_t layers;
  int64_t heads;
  int64_t dim; /* C; a multiple of heads */
} gpt_config;

/* 0 when the config is usable; otherwise 1 and a message in msg. */
int gpt_config_check(const gpt_config* c, char* msg, size_t cap);

/* How a param starts (GPT-2's init). */
typedef enum gpt_init {
  GPT_INIT_NORMAL,      /* N(0, 0.02) */
  GPT_INIT_NORMAL_PROJ, /* N(0, 0.02 / sqrt(2 * layers)): the residual projections */
  GPT_INIT_ZERO,        /* biases, LayerNorm biases */
  GPT_INIT_ONE,         /* LayerNorm weights */
} gpt_init;

typedef struct gpt_param {
  char name[64];
  int32_t rank;
  int64_t shape[2];
  int64_t numel;
  gpt_init init;
} gpt_param;

/* The params in a fixed order: wte, wpe, block 0 ... L-1, ln_f. */
int32_t gpt_param_count(const gpt_config* c);
void gpt_param_get(const gpt_config* c, int32_t index, gpt_param* out);
/* Fills out[numel] with p's initial value. The values depend only on the
 * seed and the param's name (not on the order params are made in). */
void gpt_param_init(const gpt_config* c, const gpt_param* p, uint64_t seed, float* out);
/* Sum of numel over every param. */
int64_t gpt_param_total(const gpt_config* c);

/* Forward over a batch: input "ids" i32 [B,T] (T <= ctx) -> logits f32
 * [B,T,V] in *out_logits. Sets no graph outputs. */
rlx_status gpt_build_forward(rlx_graph* g, const gpt_config* c, int64_t batch, int64_t T,
                             rlx_tensor* out_logits);
/* The training graph: gpt_build_forward plus input "targets" i32 [B,T] and
 * the mean cross-entropy of the logits against them, the graph's only
 * output (*out_loss, a scalar). *out_logits (may be NULL) gets the logits. */
rlx_status gpt_build_train(rlx_graph* g, const gpt_config* c, int64_t batch, int64_t T,
                           rlx_tensor* out_loss, rlx_tensor* out_logits);

/* One-token decode step against a KV cache held on the device.
 *   inputs:  "ids" i32 [1,1] (the token at position pos), "pos" i32 [1],
 *            and per layer l "k_cache<l>", "v_cache<l>" f32 [1,ctx,H,D];
 *   outputs: 0 the next token (i64 [1,1], rlx_graph_add_sample with top_k
 *            and temperature; temperature <= 0 is greedy),
 *            1 + 2l / 2 + 2l the updated caches of layer l (the new k / v
 *            row written at pos), and 1 + 2L the logits [1,1,V].
 * Compile with gpt_decode_states so the caches stay on the device. */
rlx_status gpt_build_decode(rlx_graph* g, const gpt_config* c, int32_t top_k, float temperature);
/* Names of the cache inputs in output order (k0, v0, k1, ...): fills
 * names[2L][32], ptrs and outs for rlx_compile_options.state_*; returns 2L. */
int32_t gpt_decode_states(const gpt_config* c, char (*names)[32], const char** ptrs, int32_t* outs,
                          int32_t cap);

/* The config file of a checkpoint ("key value" lines). Return 0 on
 * success, else 1 with a message in err. */
int gpt_config_save(const char* path, const gpt_config* c, char* err, size_t cap);
int gpt_config_load(const char* path, gpt_config* c, char* err, size_t cap);
/* The same from text in memory (len bytes, no NUL needed; `name` for the
 * messages): the first line is the magic, then "key value" lines; unknown
 * keys and '#' lines are skipped; the result must pass gpt_config_check.
 * 0 when usable, else 1 and a message. tests/fuzz_gptcfg.c fuzzes it. */
int gpt_config_parse(const char* text, size_t len, const char* name, gpt_config* c, char* err,
                     size_t cap);

#endif
