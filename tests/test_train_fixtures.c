/* Training fixtures in the llm.c style (tests/fixtures/train/<model>.bin,
 * written by scripts/gen_train_fixtures.py with PyTorch in f32 on the CPU):
 * a small GPT trained with AdamW, an MLP and a small CNN trained with SGD
 * momentum. Each model is built through include/rlx.h with the fixture's
 * param names and shapes; the GPT twice: by tools/gpt_model.c (the model
 * `rlx train --text` trains) and by a builder of its own here. On one device:
 *   *_forward   the forward output and loss at the initial params
 *               (rlx_compile);
 *   *_train     rlx_train_compile with keep_grads: the loss and every
 *               gradient of the first step, the losses of three steps and
 *               every param after the third update;
 *   *_composed_ce  the same with the cross-entropy written in Tier 1 ops,
 *               which tells a mismatch in the CrossEntropy op from one in
 *               the rest of the model.
 * Every comparison prints one line (name, error, tolerance) and each model
 * a summary; any comparison past its tolerance fails the test.
 *
 *   test_train_fixtures [DEVICE [DIR]]   (cpu by default; exit 77 = SKIP
 *                                         when the device is not built or
 *                                         cannot start; DIR replaces
 *                                         tests/fixtures/train) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "gpt_model.h"
#include "harness.h"

static const char* dev = "cpu";

/* f32 everywhere: rlx and PyTorch sum in different orders, which moves
 * results by a few units of 2^-24 per op (PyTorch's own f32 run is within
 * 1.1e-6 relative L2 of its f64 run on every quantity here but one, see
 * compare_qkv_bias; scripts/gen_train_fixtures.py prints it; rlx on the CPU,
 * Vulkan and WebGPU lands within 2.2e-6). 1e-4 leaves room for longer
 * reductions on GPUs while a 10% change of the learning rate still misses
 * it by 100x. */
#define TOL_F32 1e-4

/* ------------------------------------------------------------ fixture file */

enum { FX_F32 = 0, FX_I32 = 1, FX_MAX_RANK = 8 };

typedef struct fx_tensor {
  char name[96];
  int dtype; /* FX_F32 or FX_I32 */
  int32_t rank;
  rlx_dim shape[FX_MAX_RANK];
  int64_t numel;
  const void* data; /* into fixture.bytes (little-endian, C order) */
} fx_tensor;

typedef struct fixture {
  unsigned char* bytes;
  size_t size;
  fx_tensor* t;
  int n;
} fixture;

static const char* fixtures_dir = "tests/fixtures/train";

static void fixture_free(fixture* fx) {
  free(fx->bytes);
  free(fx->t);
  memset(fx, 0, sizeof *fx);
}

/* Reads n bytes at *pos, or fails when the file ends first. */
static int take(const fixture* fx, size_t* pos, size_t n, const unsigned char** out) {
  if (n > fx->size - *pos) return 0;
  *out = fx->bytes + *pos;
  *pos += n;
  return 1;
}

static int take_u32(const fixture* fx, size_t* pos, uint32_t* out) {
  const unsigned char* p;
  if (!take(fx, pos, 4, &p)) return 0;
  *out = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  return 1;
}

static int take_i64(const fixture* fx, size_t* pos, int64_t* out) {
  uint32_t lo, hi;
  if (!take_u32(fx, pos, &lo) || !take_u32(fx, pos, &hi)) return 0;
  *out = (int64_t)((uint64_t)hi << 32 | lo);
  return 1;
}

/* One record: name, dtype, rank, dims, data (format in the generator). */
static int parse_record(fixture* fx, size_t* pos, fx_tensor* t, char* why, size_t cap) {
  uint32_t len, dtype, rank;
  const unsigned char* p;
  if (!take_u32(fx, pos, &len) || len >= sizeof t->name || !take(fx, pos, len, &p)) {
    snprintf(why, cap, "bad record name at byte %zu", *pos);
    return 0;
  }
  memcpy(t->name, p, len);
  t->name[len] = '\0';
  if (!take_u32(fx, pos, &dtype) || !take_u32(fx, pos, &rank) || dtype > FX_I32 ||
      rank > FX_MAX_RANK) {
    snprintf(why, cap, "%s: bad dtype or rank", t->name);
    return 0;
  }
  t->dtype = (int)dtype;
  t->rank = (int32_t)rank;
  t->numel = 1;
  for (uint32_t d = 0; d < rank; d++) {
    if (!take_i64(fx, pos, &t->shape[d]) || t->shape[d] < 0 || t->shape[d] > (1 << 24)) {
      snprintf(why, cap, "%s: bad dim %u", t->name, d);
      return 0;
    }
    t->numel *= t->shape[d];
  }
  if (!take(fx, pos, (size_t)t->numel * 4, &p)) {
    snprintf(why, cap, "%s: data runs past the end of the file", t->name);
    return 0;
  }
  t->data = p;
  return 1;
}

/* Loads <dir>/<model>.bin; on failure says why. */
static int fixture_load(const char* model, fixture* fx, char* why, size_t cap) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.bin", fixtures_dir, model);
  memset(fx, 0, sizeof *fx);
  FILE* f = fopen(path, "rb");
  if (!f) {
    snprintf(why, cap, "cannot open %.200s", path);
    return 0;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  fx->bytes = size > 0 ? malloc((size_t)size) : NULL;
  fx->size = fx->bytes && fread(fx->bytes, 1, (size_t)size, f) == (size_t)size ? (size_t)size : 0;
  fclose(f);
  size_t pos = 0;
  const unsigned char* magic;
  uint32_t n;
  if (!take(fx, &pos, 8, &magic) || memcmp(magic, "RLXTRFX1", 8) != 0 ||
      !take_u32(fx, &pos, &n) || n > 4096) {
    snprintf(why, cap, "%.200s: not a training fixture (magic RLXTRFX1)", path);
    return 0;
  }
  fx->t = calloc(n ? n : 1, sizeof *fx->t);
  for (fx->n = 0; fx->t && fx->n < (int)n; fx->n++)
    if (!parse_record(fx, &pos, &fx->t[fx->n], why, cap)) return 0;
  return fx->t != NULL;
}

static const fx_tensor* fx_find(const fixture* fx, const char* name) {
  for (int i = 0; i < fx->n; i++)
    if (strcmp(fx->t[i].name, name) == 0) return &fx->t[i];
  return NULL;
}

static const fx_tensor* fx_find2(const fixture* fx, const char* prefix, const char* name) {
  char full[160];
  snprintf(full, sizeof full, "%s%s", prefix, name);
  return fx_find(fx, full);
}

/* The 4 bytes of element i (little-endian in the file, whatever the host). */
static uint32_t fx_bits(const fx_tensor* t, int64_t i) {
  const unsigned char* p = (const unsigned char*)t->data + 4 * i;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float fx_f32(const fx_tensor* t, int64_t i) {
  uint32_t u = fx_bits(t, i);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* A scalar hyper-parameter or config value; `fallback` when absent. */
static double fx_scalar(const fixture* fx, const char* name, double fallback) {
  const fx_tensor* t = fx_find(fx, name);
  if (!t || t->numel != 1) return fallback;
  return t->dtype == FX_F32 ? (double)fx_f32(t, 0) : (double)(int32_t)fx_bits(t, 0);
}

static int starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ------------------------------------------------------------ model builders */

/* A model under construction: the graph, its forward output and its loss. */
typedef struct model {
  rlx_graph* g;
  rlx_tensor output, loss;
} model;

#define TRY(g, expr)                                                 \
  do {                                                               \
    if ((expr) != RLX_OK) {                                          \
      fprintf(stderr, "%s: %s\n", #expr, rlx_graph_last_error(g));   \
      return RLX_INVALID_ARGUMENT;                                   \
    }                                                                \
  } while (0)

/* The graph param (or input) `name` with the fixture record's shape. */
static rlx_status leaf(rlx_graph* g, const fixture* fx, const char* prefix, const char* name,
                       rlx_tensor* out) {
  const fx_tensor* t = fx_find2(fx, prefix, name);
  if (!t) {
    fprintf(stderr, "fixture has no %s%s\n", prefix, name);
    return RLX_NOT_FOUND;
  }
  rlx_dtype dt = t->dtype == FX_F32 ? RLX_F32 : RLX_I32;
  if (strcmp(prefix, "param.") == 0) return rlx_graph_add_param(g, name, dt, t->shape, t->rank, out);
  return rlx_graph_add_input(g, name, dt, t->shape, t->rank, out);
}

static rlx_status param(rlx_graph* g, const fixture* fx, const char* name, rlx_tensor* out) {
  return leaf(g, fx, "param.", name, out);
}

/* x @ <name>.weight + <name>.bias, then act. */
static rlx_status linear(rlx_graph* g, const fixture* fx, const char* name, rlx_tensor x,
                         rlx_activation act, rlx_tensor* out) {
  char n[96];
  rlx_tensor w, b;
  snprintf(n, sizeof n, "%s.weight", name);
  TRY(g, param(g, fx, n, &w));
  snprintf(n, sizeof n, "%s.bias", name);
  TRY(g, param(g, fx, n, &b));
  TRY(g, rlx_graph_add_fused_matmul_bias_act(g, x, w, b, 0, 0, act, out));
  return RLX_OK;
}

static rlx_status layer_norm(rlx_graph* g, const fixture* fx, const char* name, rlx_tensor x,
                             rlx_tensor* out) {
  char n[96];
  rlx_tensor w, b;
  snprintf(n, sizeof n, "%s.weight", name);
  TRY(g, param(g, fx, n, &w));
  snprintf(n, sizeof n, "%s.bias", name);
  TRY(g, param(g, fx, n, &b));
  TRY(g, rlx_graph_add_layer_norm(g, x, w, b, 2, 1e-5f, out));
  return RLX_OK;
}

typedef struct gpt_dims {
  int64_t L, H, C, T, B;
} gpt_dims;

/* Causal self-attention of block `p` ("h.i."): x [B,T,C] -> [B,T,C]. */
static rlx_status gpt_attention(rlx_graph* g, const fixture* fx, const gpt_dims* d,
                                const char* p, rlx_tensor x, rlx_tensor* out) {
  char n[96];
  rlx_tensor qkv, part[3];
  snprintf(n, sizeof n, "%sattn.c_attn", p);
  TRY(g, linear(g, fx, n, x, RLX_ACT_NONE, &qkv));
  rlx_dim heads[4] = {d->B, d->T, d->H, d->C / d->H}, flat[3] = {d->B, d->T, d->C};
  for (int i = 0; i < 3; i++) { /* q, k, v: consecutive C-wide column blocks */
    TRY(g, rlx_graph_add_narrow(g, qkv, 2, i * d->C, d->C, &part[i]));
    TRY(g, rlx_graph_add_reshape(g, part[i], heads, 4, &part[i]));
  }
  rlx_attention_desc desc = {(int32_t)d->H, 0, (int32_t)(d->C / d->H), RLX_LAYOUT_BSHD,
                             RLX_MASK_CAUSAL, 0, 0.0f, 0.0f};
  rlx_tensor a;
  TRY(g, rlx_graph_add_attention(g, part[0], part[1], part[2], RLX_NONE, &desc, &a));
  TRY(g, rlx_graph_add_reshape(g, a, flat, 3, &a));
  snprintf(n, sizeof n, "%sattn.c_proj", p);
  return linear(g, fx, n, a, RLX_ACT_NONE, out);
}

/* One pre-LayerNorm block: x + attn(ln_1(x)), then + mlp(ln_2(.)). */
static rlx_status gpt_block(rlx_graph* g, const fixture* fx, const gpt_dims* d, int i,
                            rlx_tensor* x) {
  char p[32], n[96];
  rlx_tensor h;
  snprintf(p, sizeof p, "h.%d.", i);
  snprintf(n, sizeof n, "%sln_1", p);
  TRY(g, layer_norm(g, fx, n, *x, &h));
  TRY(g, gpt_attention(g, fx, d, p, h, &h));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, *x, h, x));
  snprintf(n, sizeof n, "%sln_2", p);
  TRY(g, layer_norm(g, fx, n, *x, &h));
  snprintf(n, sizeof n, "%smlp.c_fc", p);
  TRY(g, linear(g, fx, n, h, RLX_ACT_GELU_APPROX, &h));
  snprintf(n, sizeof n, "%smlp.c_proj", p);
  TRY(g, linear(g, fx, n, h, RLX_ACT_NONE, &h));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, *x, h, x));
  return RLX_OK;
}

/* GPT-2: ids -> wte + wpe -> blocks -> ln_f -> logits = x @ wte^T. */
static rlx_status build_gpt(const fixture* fx, model* m) {
  gpt_dims d = {(int64_t)fx_scalar(fx, "cfg.layers", 0), (int64_t)fx_scalar(fx, "cfg.heads", 1),
                (int64_t)fx_scalar(fx, "cfg.channels", 0), 0, 0};
  const fx_tensor* ids_fx = fx_find(fx, "input.ids");
  if (!ids_fx || ids_fx->rank != 2 || d.L <= 0 || d.C % d.H != 0) return RLX_INVALID_ARGUMENT;
  d.B = ids_fx->shape[0];
  d.T = ids_fx->shape[1];
  rlx_graph* g = m->g;
  rlx_tensor ids, targets, wte, wpe, x, pos;
  TRY(g, leaf(g, fx, "input.", "ids", &ids));
  TRY(g, leaf(g, fx, "input.", "targets", &targets));
  TRY(g, param(g, fx, "wte", &wte));
  TRY(g, param(g, fx, "wpe", &wpe));
  TRY(g, rlx_graph_add_gather(g, wte, ids, 0, &x));
  TRY(g, rlx_graph_add_narrow(g, wpe, 0, 0, d.T, &pos));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, x, pos, &x));
  for (int i = 0; i < (int)d.L; i++) TRY(g, gpt_block(g, fx, &d, i, &x));
  TRY(g, layer_norm(g, fx, "ln_f", x, &x));
  TRY(g, rlx_graph_add_matmul(g, x, wte, 0, 1, &m->output));
  m->loss = targets; /* the loss is added by add_loss (a Tier 2 op) */
  return RLX_OK;
}

/* The same GPT from tools/gpt_model.c (the model `rlx train --text`
 * trains), with its own loss: the sizes come from the fixture. */
static rlx_status build_gpt_model(const fixture* fx, model* m) {
  gpt_config c = {(int64_t)fx_scalar(fx, "cfg.vocab", 0), (int64_t)fx_scalar(fx, "cfg.context", 0),
                  (int64_t)fx_scalar(fx, "cfg.layers", 0), (int64_t)fx_scalar(fx, "cfg.heads", 0),
                  (int64_t)fx_scalar(fx, "cfg.channels", 0)};
  const fx_tensor* ids = fx_find(fx, "input.ids");
  char msg[256];
  if (!ids || ids->rank != 2 || gpt_config_check(&c, msg, sizeof msg) != 0) {
    fprintf(stderr, "gpt fixture config: %s\n", ids ? msg : "no input.ids");
    return RLX_INVALID_ARGUMENT;
  }
  TRY(m->g, gpt_build_train(m->g, &c, ids->shape[0], ids->shape[1], &m->loss, &m->output));
  return RLX_OK;
}

/* x -> fc1 + tanh -> fc2 + relu -> fc3. */
static rlx_status build_mlp(const fixture* fx, model* m) {
  rlx_graph* g = m->g;
  rlx_tensor x, y, h;
  TRY(g, leaf(g, fx, "input.", "x", &x));
  TRY(g, leaf(g, fx, "input.", "y", &y));
  TRY(g, linear(g, fx, "fc1", x, RLX_ACT_TANH, &h));
  TRY(g, linear(g, fx, "fc2", h, RLX_ACT_RELU, &h));
  TRY(g, linear(g, fx, "fc3", h, RLX_ACT_NONE, &m->output));
  m->loss = y;
  return RLX_OK;
}

/* x -> conv 3x3 s1 p1 + relu -> max pool 2 -> conv 3x3 s2 p1 -> global
 * average pool -> [N, C] -> fc. */
static rlx_status build_cnn(const fixture* fx, model* m) {
  rlx_graph* g = m->g;
  rlx_tensor x, targets, w1, b1, w2, b2, h;
  TRY(g, leaf(g, fx, "input.", "x", &x));
  TRY(g, leaf(g, fx, "input.", "targets", &targets));
  TRY(g, param(g, fx, "conv1.weight", &w1));
  TRY(g, param(g, fx, "conv1.bias", &b1));
  TRY(g, param(g, fx, "conv2.weight", &w2));
  TRY(g, param(g, fx, "conv2.bias", &b2));
  int64_t s1[2] = {1, 1}, s2[2] = {2, 2}, pad1[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
  TRY(g, rlx_graph_add_conv(g, x, w1, b1, RLX_NONE, 2, s1, pad1, NULL, 1, RLX_ACT_RELU,
                            RLX_CONV_CHANNELS_FIRST, &h));
  TRY(g, rlx_graph_add_pool(g, h, RLX_POOL_MAX, 2, k2, k2, NULL, NULL, 0, 0, &h));
  TRY(g, rlx_graph_add_conv(g, h, w2, b2, RLX_NONE, 2, s2, pad1, NULL, 1, RLX_ACT_NONE,
                            RLX_CONV_CHANNELS_FIRST, &h));
  rlx_dim hs[RLX_MAX_RANK];
  int32_t rank = 0;
  rlx_dtype dt;
  TRY(g, rlx_graph_tensor_type(g, h, &dt, &rank, hs));
  int64_t global[2] = {hs[2], hs[3]};
  TRY(g, rlx_graph_add_pool(g, h, RLX_POOL_AVG, 2, global, global, NULL, NULL, 0, 0, &h));
  rlx_dim flat[2] = {hs[0], hs[1]};
  TRY(g, rlx_graph_add_reshape(g, h, flat, 2, &h));
  TRY(g, linear(g, fx, "fc", h, RLX_ACT_NONE, &m->output));
  m->loss = targets;
  return RLX_OK;
}

/* ------------------------------------------------------------ models table */

/* LOSS_CE_COMPOSED is the same mean cross-entropy written with Tier 1 ops
 * (log_softmax, a one-hot Where, Reduce): it trains the rest of a model
 * with nothing of the CrossEntropy op (forward kernel or gradient rule), so
 * a mismatch in that op and one elsewhere in the model tell apart. */
typedef enum loss_kind { LOSS_CROSS_ENTROPY, LOSS_CE_COMPOSED, LOSS_MSE } loss_kind;

typedef struct model_spec {
  const char* name;    /* in the printed lines */
  const char* fixture; /* tests/fixtures/train/<fixture>.bin */
  rlx_status (*build)(const fixture* fx, model* m);
  loss_kind loss;
  int builds_loss; /* 1: build sets m->loss itself */
  rlx_optimizer optimizer;
} model_spec;

static const model_spec GPT = {"gpt", "gpt", build_gpt, LOSS_CROSS_ENTROPY, 0,
                               RLX_OPTIMIZER_ADAMW};
static const model_spec GPT_MODEL = {"gpt_model", "gpt", build_gpt_model, LOSS_CROSS_ENTROPY, 1,
                                     RLX_OPTIMIZER_ADAMW};
static const model_spec GPT_COMPOSED = {"gpt_composed_ce", "gpt", build_gpt, LOSS_CE_COMPOSED, 0,
                                        RLX_OPTIMIZER_ADAMW};
static const model_spec CNN_COMPOSED = {"cnn_composed_ce", "cnn", build_cnn, LOSS_CE_COMPOSED, 0,
                                        RLX_OPTIMIZER_SGD};
static const model_spec MLP = {"mlp", "mlp", build_mlp, LOSS_MSE, 0, RLX_OPTIMIZER_SGD};
static const model_spec CNN = {"cnn", "cnn", build_cnn, LOSS_CROSS_ENTROPY, 0, RLX_OPTIMIZER_SGD};

/* -mean(log_softmax(logits)[row, target[row]]) for logits [N, V] and
 * targets [N] (i32): the target's entry is picked by a one-hot Where. */
static rlx_status composed_cross_entropy(rlx_graph* g, rlx_tensor logits, rlx_tensor targets,
                                         rlx_dim n, rlx_dim v, rlx_tensor* out) {
  int32_t* iota = malloc((size_t)v * sizeof *iota);
  if (!iota) return RLX_RESOURCE_EXHAUSTED;
  for (int32_t i = 0; i < (int32_t)v; i++) iota[i] = i;
  rlx_dim row[2] = {1, v}, col[2] = {n, 1};
  rlx_tensor classes, t, hot, logp, zero, picked;
  float zero_f = 0.0f;
  rlx_status st = rlx_graph_add_constant(g, RLX_I32, row, 2, iota, (size_t)v * sizeof *iota,
                                         &classes);
  free(iota);
  RLX_RETURN_IF_ERROR(st);
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, targets, col, 2, &t));
  RLX_RETURN_IF_ERROR(rlx_graph_add_compare(g, RLX_CMP_EQ, classes, t, &hot));
  RLX_RETURN_IF_ERROR(rlx_graph_add_log_softmax(g, logits, 1, &logp));
  RLX_RETURN_IF_ERROR(rlx_graph_add_constant(g, RLX_F32, NULL, 0, &zero_f, sizeof zero_f, &zero));
  RLX_RETURN_IF_ERROR(rlx_graph_add_where(g, hot, logp, zero, &picked));
  RLX_RETURN_IF_ERROR(rlx_graph_add_reduce(g, RLX_RED_SUM, picked, NULL, 0, 0, &picked));
  float inv_n = -1.0f / (float)n;
  rlx_tensor scale;
  RLX_RETURN_IF_ERROR(rlx_graph_add_constant(g, RLX_F32, NULL, 0, &inv_n, sizeof inv_n, &scale));
  return rlx_graph_add_binary(g, RLX_BIN_MUL, picked, scale, out);
}

/* The loss of the built model: m->loss holds the targets until then. */
static rlx_status add_loss(const model_spec* s, model* m) {
  rlx_tensor targets = m->loss;
  if (s->loss == LOSS_MSE) return rlx_graph_add_mse_loss(m->g, m->output, targets, &m->loss);
  rlx_dim shape[RLX_MAX_RANK];
  int32_t rank = 0;
  rlx_dtype dt;
  rlx_tensor logits = m->output;
  RLX_RETURN_IF_ERROR(rlx_graph_tensor_type(m->g, logits, &dt, &rank, shape));
  if (rank > 2) { /* [B, T, V] -> [B*T, V], targets [B*T], as F.cross_entropy was given */
    rlx_dim rows[2] = {RLX_DIM_INFER, shape[rank - 1]}, flat[1] = {RLX_DIM_INFER};
    RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(m->g, logits, rows, 2, &logits));
    RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(m->g, targets, flat, 1, &targets));
  }
  if (s->loss == LOSS_CE_COMPOSED) {
    int64_t n = 1;
    for (int32_t d = 0; d + 1 < rank; d++) n *= shape[d];
    return composed_cross_entropy(m->g, logits, targets, n, shape[rank - 1], &m->loss);
  }
  return rlx_graph_add_cross_entropy(m->g, logits, targets, -100, 0.0f, &m->loss);
}

/* ------------------------------------------------------------ comparison */

/* The comparisons of one model on one device: each prints a line; `bad`
 * counts those past their tolerance. */
typedef struct tally {
  const char* model;
  const char* phase; /* "forward" or "training" */
  int checked, bad;
  double worst;         /* largest error / tolerance seen */
  char worst_what[192]; /* and where */
} tally;

static double rel_l2_f32(const float* got, const fx_tensor* want, int64_t lo, int64_t hi) {
  double num = 0, den = 0;
  for (int64_t i = lo; i < hi; i++) {
    double w = fx_f32(want, i), d = (double)got[i] - w;
    if (isnan(got[i])) return INFINITY;
    num += d * d;
    den += w * w;
  }
  return sqrt(num) / (den > 0 ? sqrt(den) : 1e-300);
}

static double max_abs_f32(const float* got, const fx_tensor* want, int64_t lo, int64_t hi) {
  double m = 0;
  for (int64_t i = lo; i < hi; i++) {
    double d = fabs((double)got[i] - fx_f32(want, i));
    if (!(d <= m)) m = isnan(d) ? INFINITY : d;
  }
  return m;
}

static void report(tally* t, const char* what, const char* measure, double err, double tol) {
  int ok = err <= tol;
  t->checked++;
  t->bad += !ok;
  if (!(err / tol <= t->worst)) {
    t->worst = err / tol;
    snprintf(t->worst_what, sizeof t->worst_what, "%.100s %s %.3g", what, measure, err);
  }
  printf("  %s %s %-40s %s %.3g (tol %.0e) %s\n", dev, t->model, what, measure, err, tol,
         ok ? "ok" : "MISMATCH");
}

static void summarize(const tally* t) {
  printf("  %s %s %s: %d comparisons, %d past tolerance; closest to its tolerance: %s\n", dev,
         t->model, t->phase, t->checked, t->bad, t->checked ? t->worst_what : "none");
}

static void compare(tally* t, const char* what, const float* got, const fx_tensor* want) {
  report(t, what, "rel L2", rel_l2_f32(got, want, 0, want->numel), TOL_F32);
}

/* A final GPT c_attn.bias: its key third has a gradient that is exactly
 * zero in exact arithmetic (adding a constant to every key of a query's row
 * leaves its softmax unchanged), so in f32 it is rounding noise (~1e-11
 * in PyTorch), and AdamW divides that noise by sqrt(v) + eps = noise + 1e-8:
 * the key third moves by up to lr per step in a direction set by the noise
 * of the backend's sums. Its query and value thirds compare as usual; the
 * key third only has to stay within the 3 * lr an update could move it. */
static void compare_qkv_bias(tally* t, const char* what, const float* got, const fx_tensor* want,
                             double lr) {
  int64_t c = want->numel / 3;
  char part[160];
  double num = 0, den = 0;
  for (int64_t i = 0; i < want->numel; i++) {
    if (i >= c && i < 2 * c) continue;
    double w = fx_f32(want, i), d = (double)got[i] - w;
    num += isnan(got[i]) ? INFINITY : d * d;
    den += w * w;
  }
  snprintf(part, sizeof part, "%s[q,v]", what);
  report(t, part, "rel L2", sqrt(num) / (den > 0 ? sqrt(den) : 1e-300), TOL_F32);
  snprintf(part, sizeof part, "%s[k]", what);
  report(t, part, "max abs", max_abs_f32(got, want, c, 2 * c), 3 * lr);
}

/* ------------------------------------------------------------ running */

/* Params and inputs go to rlx straight from the file's bytes, which are
 * little-endian like every host rlx builds for. */
static rlx_dtype rlx_dtype_of(const fx_tensor* t) { return t->dtype == FX_F32 ? RLX_F32 : RLX_I32; }

/* Builds the model's graph, output and loss, with the fixture's shapes. */
static int build(const model_spec* s, const fixture* fx, model* m) {
  memset(m, 0, sizeof *m);
  if (rlx_graph_create(&m->g) != RLX_OK) return 0;
  if (s->build(fx, m) != RLX_OK) return 0;
  if (!s->builds_loss && add_loss(s, m) != RLX_OK) {
    fprintf(stderr, "%s loss: %s\n", s->name, rlx_graph_last_error(m->g));
    return 0;
  }
  return 1;
}

/* The forward at the initial params (compiled for inference): its output
 * and loss against the fixture's. */
static void check_forward(const model_spec* s) {
  char why[256] = "";
  fixture fx;
  model m;
  tally t = {s->name, "forward", 0, 0, 0.0, ""};
  int loaded = fixture_load(s->fixture, &fx, why, sizeof why);
  if (!loaded) fixture_free(&fx);
  CHECK_MSG(loaded, "%s", why);
  rlx_tensor outs[2];
  int built = build(s, &fx, &m);
  outs[0] = m.output;
  outs[1] = m.loss;
  built = built && rlx_graph_set_outputs(m.g, outs, 2) == RLX_OK;
  rlx_exec* e = built ? test_compile_on(m.g, dev, NULL) : NULL;
  const fx_tensor* want = fx_find(&fx, "output");
  const fx_tensor* want_loss = fx_find(&fx, "loss");
  float* got = want ? malloc((size_t)want->numel * sizeof(float)) : NULL;
  float loss = NAN;
  int ran = e && got && want_loss;
  for (int i = 0; ran && i < fx.n; i++) {
    const fx_tensor* r = &fx.t[i];
    if (starts_with(r->name, "param."))
      ran = rlx_exec_set_param(e, r->name + 6, RLX_F32, r->data, (size_t)r->numel * 4) == RLX_OK;
    else if (starts_with(r->name, "input."))
      ran = rlx_exec_set_input(e, r->name + 6, rlx_dtype_of(r), r->shape, r->rank, r->data,
                               (size_t)r->numel * 4) == RLX_OK;
  }
  ran = ran && rlx_exec_run(e) == RLX_OK &&
        rlx_exec_read_output(e, 0, RLX_F32, got, (size_t)want->numel * sizeof(float)) == RLX_OK &&
        rlx_exec_read_output(e, 1, RLX_F32, &loss, sizeof loss) == RLX_OK;
  if (e && !ran) fprintf(stderr, "%s forward: %s\n", s->name, rlx_exec_last_error(e));
  if (ran) {
    compare(&t, "output", got, want);
    compare(&t, "loss", &loss, want_loss);
  }
  free(got);
  rlx_exec_destroy(e);
  rlx_graph_destroy(m.g);
  fixture_free(&fx);
  CHECK_MSG(built && ran, "%s: could not build or run the forward", s->name);
  summarize(&t);
  CHECK_MSG(t.bad == 0, "%s: %d of %d comparisons past tolerance", s->name, t.bad, t.checked);
}

/* The optimizer's options from the fixture's hyper.* records. */
static void train_options(const model_spec* s, const fixture* fx, rlx_train_options* o) {
  rlx_train_options_init(o, s->optimizer);
  o->lr = (float)fx_scalar(fx, "hyper.lr", o->lr);
  o->keep_grads = 1;
  if (s->optimizer == RLX_OPTIMIZER_SGD) {
    o->sgd.momentum = (float)fx_scalar(fx, "hyper.momentum", o->sgd.momentum);
    o->sgd.dampening = (float)fx_scalar(fx, "hyper.dampening", o->sgd.dampening);
    o->sgd.weight_decay = (float)fx_scalar(fx, "hyper.weight_decay", o->sgd.weight_decay);
    o->sgd.nesterov = fx_scalar(fx, "hyper.nesterov", 0) != 0;
  } else {
    o->adam.beta1 = (float)fx_scalar(fx, "hyper.beta1", o->adam.beta1);
    o->adam.beta2 = (float)fx_scalar(fx, "hyper.beta2", o->adam.beta2);
    o->adam.eps = (float)fx_scalar(fx, "hyper.eps", o->adam.eps);
    o->adam.weight_decay = (float)fx_scalar(fx, "hyper.weight_decay", o->adam.weight_decay);
  }
}

static int feed_trainer(rlx_trainer* tr, const fixture* fx) {
  for (int i = 0; i < fx->n; i++) {
    const fx_tensor* r = &fx->t[i];
    rlx_status st = RLX_OK;
    if (starts_with(r->name, "param."))
      st = rlx_trainer_set_param(tr, r->name + 6, RLX_F32, r->data, (size_t)r->numel * 4);
    else if (starts_with(r->name, "input."))
      st = rlx_trainer_set_input(tr, r->name + 6, rlx_dtype_of(r), r->shape, r->rank, r->data,
                                 (size_t)r->numel * 4);
    if (st != RLX_OK) {
      fprintf(stderr, "%s: %s\n", r->name, rlx_trainer_last_error(tr));
      return 0;
    }
  }
  return 1;
}

/* Reads every param's gradient (prefix "grad.") or value ("final.") from the
 * trainer and compares it with the fixture. */
static int compare_params(rlx_trainer* tr, const fixture* fx, const char* prefix, double lr,
                          tally* t) {
  for (int i = 0; i < fx->n; i++) {
    const fx_tensor* want = &fx->t[i];
    if (!starts_with(want->name, prefix)) continue;
    const char* name = want->name + strlen(prefix);
    size_t bytes = (size_t)want->numel * sizeof(float);
    float* got = malloc(bytes ? bytes : 1);
    rlx_status st = !got ? RLX_RESOURCE_EXHAUSTED
                    : prefix[0] == 'g' ? rlx_trainer_read_grad(tr, name, RLX_F32, got, bytes)
                                       : rlx_trainer_read_param(tr, name, RLX_F32, got, bytes);
    if (st != RLX_OK) {
      fprintf(stderr, "read %s: %s\n", want->name, got ? rlx_trainer_last_error(tr) : "no memory");
      free(got);
      return 0;
    }
    if (prefix[0] == 'f' && strstr(name, "attn.c_attn.bias"))
      compare_qkv_bias(t, want->name, got, want, lr);
    else
      compare(t, want->name, got, want);
    free(got);
  }
  return 1;
}

/* Three steps: loss and gradients of the first, the three losses, the
 * params after the third. */
static int train_and_compare(rlx_trainer* tr, const fixture* fx, double lr, tally* t) {
  const fx_tensor* loss_fx = fx_find(fx, "loss");
  const fx_tensor* losses_fx = fx_find(fx, "losses");
  if (!loss_fx || !losses_fx || losses_fx->numel < 1) return 0;
  float losses[16];
  int steps = (int)(losses_fx->numel < 16 ? losses_fx->numel : 16);
  for (int s = 0; s < steps; s++) {
    if (rlx_trainer_step(tr, &losses[s]) != RLX_OK) {
      fprintf(stderr, "step %d: %s\n", s + 1, rlx_trainer_last_error(tr));
      return 0;
    }
    if (s == 0) {
      compare(t, "loss", &losses[0], loss_fx);
      if (!compare_params(tr, fx, "grad.", lr, t)) return 0;
    }
  }
  compare(t, "losses", losses, losses_fx);
  for (int s = 0; s < steps; s++)
    printf("  %s %s step %d loss %.7f (PyTorch %.7f)\n", dev, t->model, s + 1, losses[s],
           fx_f32(losses_fx, s));
  if (rlx_trainer_step_count(tr) != steps) {
    fprintf(stderr, "step count %lld, want %d\n", (long long)rlx_trainer_step_count(tr), steps);
    return 0;
  }
  return compare_params(tr, fx, "final.", lr, t);
}

static void check_training(const model_spec* s) {
  char why[256] = "";
  fixture fx;
  model m;
  tally t = {s->name, "training", 0, 0, 0.0, ""};
  int loaded = fixture_load(s->fixture, &fx, why, sizeof why);
  if (!loaded) fixture_free(&fx);
  CHECK_MSG(loaded, "%s", why);
  int built = build(s, &fx, &m);
  rlx_train_options o;
  train_options(s, &fx, &o);
  rlx_trainer* tr = NULL;
  int compiled = built && rlx_train_compile(m.g, m.loss, dev, NULL, &o, &tr) == RLX_OK;
  if (built && !compiled) fprintf(stderr, "%s train compile: %s\n", s->name, rlx_graph_last_error(m.g));
  int ran = compiled && feed_trainer(tr, &fx) && train_and_compare(tr, &fx, o.lr, &t);
  rlx_trainer_destroy(tr);
  rlx_graph_destroy(m.g);
  fixture_free(&fx);
  CHECK_MSG(ran, "%s: could not build, compile or train (see above)", s->name);
  summarize(&t);
  CHECK_MSG(t.bad == 0, "%s: %d of %d comparisons past tolerance", s->name, t.bad, t.checked);
}

TEST(gpt_forward) { check_forward(&GPT); }
TEST(gpt_model_forward) { check_forward(&GPT_MODEL); }
TEST(gpt_model_train) { check_training(&GPT_MODEL); }
TEST(mlp_forward) { check_forward(&MLP); }
TEST(mlp_train) { check_training(&MLP); }
TEST(cnn_forward) { check_forward(&CNN); }
TEST(cnn_train) { check_training(&CNN); }
TEST(cnn_train_composed_ce) { check_training(&CNN_COMPOSED); }
TEST(gpt_train_composed_ce) { check_training(&GPT_COMPOSED); }

/* 1 available, 0 not built / cannot start (SKIP), -1 unknown name. */
static int device_available(const char* name) {
  if (strcmp(name, "cpu") == 0) return 1;
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) != RLX_OK || strcmp(info.name, name) != 0) continue;
    if (!info.available) printf("SKIP %s (%s)\n", name, info.detail);
    return info.available ? 1 : 0;
  }
  printf("FAIL no device named '%s'\n", name);
  return -1;
}

int main(int argc, char** argv) {
  if (argc > 1) dev = argv[1];
  if (argc > 2) fixtures_dir = argv[2];
  int avail = device_available(dev);
  if (avail < 0) return 1;
  if (avail == 0) return 77;
  RUN(mlp_forward);
  RUN(mlp_train);
  RUN(cnn_forward);
  RUN(cnn_train);
  RUN(cnn_train_composed_ce);
  RUN(gpt_forward);
  RUN(gpt_model_forward);
  RUN(gpt_model_train);
  RUN(gpt_train_composed_ce);
  return test_summary();
}
