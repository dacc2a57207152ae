/* The built-in GPT (see gpt_model.h for the architecture and names). */
#include "gpt_model.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPT_MAX_LAYERS 64
#define GPT_LN_EPS 1e-5f

static void set_msg(char* msg, size_t cap, const char* fmt, ...) {
  if (!msg || cap == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
}

int gpt_config_check(const gpt_config* c, char* msg, size_t cap) {
  if (c->vocab < 2 || c->vocab > (1 << 24)) {
    set_msg(msg, cap, "vocab %lld: expected 2 .. 16777216", (long long)c->vocab);
    return 1;
  }
  if (c->ctx < 1 || c->ctx > (1 << 16)) {
    set_msg(msg, cap, "context %lld: expected 1 .. 65536", (long long)c->ctx);
    return 1;
  }
  if (c->layers < 1 || c->layers > GPT_MAX_LAYERS) {
    set_msg(msg, cap, "layers %lld: expected 1 .. %d", (long long)c->layers, GPT_MAX_LAYERS);
    return 1;
  }
  if (c->heads < 1 || c->dim < 1 || c->dim > (1 << 16) || c->dim % c->heads != 0) {
    set_msg(msg, cap, "dim %lld with %lld heads: dim must be a positive multiple of heads",
            (long long)c->dim, (long long)c->heads);
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------ params */

/* The twelve params of a block, in order. */
static const struct {
  const char* suffix;
  int rank;
  int in_mult, out_mult; /* shape {in_mult*C, out_mult*C}, or {out_mult*C} at rank 1 */
  gpt_init init;
} k_block[] = {
    {"ln_1.weight", 1, 0, 1, GPT_INIT_ONE},
    {"ln_1.bias", 1, 0, 1, GPT_INIT_ZERO},
    {"attn.c_attn.weight", 2, 1, 3, GPT_INIT_NORMAL},
    {"attn.c_attn.bias", 1, 0, 3, GPT_INIT_ZERO},
    {"attn.c_proj.weight", 2, 1, 1, GPT_INIT_NORMAL_PROJ},
    {"attn.c_proj.bias", 1, 0, 1, GPT_INIT_ZERO},
    {"ln_2.weight", 1, 0, 1, GPT_INIT_ONE},
    {"ln_2.bias", 1, 0, 1, GPT_INIT_ZERO},
    {"mlp.c_fc.weight", 2, 1, 4, GPT_INIT_NORMAL},
    {"mlp.c_fc.bias", 1, 0, 4, GPT_INIT_ZERO},
    {"mlp.c_proj.weight", 2, 4, 1, GPT_INIT_NORMAL_PROJ},
    {"mlp.c_proj.bias", 1, 0, 1, GPT_INIT_ZERO},
};
enum { BLOCK_PARAMS = sizeof k_block / sizeof k_block[0] };

int32_t gpt_param_count(const gpt_config* c) {
  return (int32_t)(2 + BLOCK_PARAMS * c->layers + 2);
}

static void fill_param(gpt_param* p, const char* name, int32_t rank, int64_t a, int64_t b,
                       gpt_init init) {
  snprintf(p->name, sizeof p->name, "%s", name);
  p->rank = rank;
  p->shape[0] = a;
  p->shape[1] = rank == 2 ? b : 0;
  p->numel = rank == 2 ? a * b : a;
  p->init = init;
}

void gpt_param_get(const gpt_config* c, int32_t index, gpt_param* out) {
  int32_t last = gpt_param_count(c) - 2;
  if (index <= 1) {
    fill_param(out, index ? "wpe" : "wte", 2, index ? c->ctx : c->vocab, c->dim, GPT_INIT_NORMAL);
    return;
  }
  if (index >= last) {
    int bias = index == last + 1;
    fill_param(out, bias ? "ln_f.bias" : "ln_f.weight", 1, c->dim, 0,
               bias ? GPT_INIT_ZERO : GPT_INIT_ONE);
    return;
  }
  int32_t layer = (index - 2) / BLOCK_PARAMS, k = (index - 2) % BLOCK_PARAMS;
  char name[64];
  snprintf(name, sizeof name, "h.%d.%s", (int)layer, k_block[k].suffix);
  if (k_block[k].rank == 2)
    fill_param(out, name, 2, k_block[k].in_mult * c->dim, k_block[k].out_mult * c->dim,
               k_block[k].init);
  else
    fill_param(out, name, 1, k_block[k].out_mult * c->dim, 0, k_block[k].init);
}

int64_t gpt_param_total(const gpt_config* c) {
  int64_t total = 0;
  for (int32_t i = 0; i < gpt_param_count(c); i++) {
    gpt_param p;
    gpt_param_get(c, i, &p);
    total += p.numel;
  }
  return total;
}

/* splitmix64: a small, well-mixed generator, seeded per param by its name
 * so a param's initial value does not depend on the order of the others. */
static uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform01(uint64_t* s) {
  return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double std_normal(uint64_t* s) { /* Box-Muller; 1 - u keeps log away from 0 */
  double u = 1.0 - uniform01(s), v = uniform01(s);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

void gpt_param_init(const gpt_config* c, const gpt_param* p, uint64_t seed, float* out) {
  uint64_t state = seed ^ 0x6a09e667f3bcc909ull;
  for (const char* q = p->name; *q; q++) state = (state ^ (uint8_t)*q) * 0x100000001b3ull;
  double std = p->init == GPT_INIT_NORMAL_PROJ ? 0.02 / sqrt(2.0 * (double)c->layers) : 0.02;
  for (int64_t i = 0; i < p->numel; i++) {
    if (p->init == GPT_INIT_ZERO)
      out[i] = 0.0f;
    else if (p->init == GPT_INIT_ONE)
      out[i] = 1.0f;
    else
      out[i] = (float)(std * std_normal(&state));
  }
}

/* ------------------------------------------------------------ builders */

/* A builder keeps the first failure and turns every later call into a
 * no-op, so the graph code reads straight through and the caller sees one
 * status (the graph holds its message). */
typedef struct builder {
  rlx_graph* g;
  const gpt_config* c;
  rlx_status st;
} builder;

static rlx_tensor param(builder* b, const char* name, int64_t a, int64_t d1) {
  rlx_tensor t = RLX_NONE;
  rlx_dim s[2] = {a, d1};
  if (b->st == RLX_OK) b->st = rlx_graph_add_param(b->g, name, RLX_F32, s, d1 ? 2 : 1, &t);
  return t;
}

static rlx_tensor block_param(builder* b, int layer, const char* suffix, int64_t a, int64_t d1) {
  char name[64];
  snprintf(name, sizeof name, "h.%d.%s", layer, suffix);
  return param(b, name, a, d1);
}

static rlx_tensor reshape(builder* b, rlx_tensor x, const rlx_dim* shape, int32_t rank) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_reshape(b->g, x, shape, rank, &y);
  return y;
}

static rlx_tensor binary(builder* b, rlx_binary_op op, rlx_tensor x, rlx_tensor y) {
  rlx_tensor z = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_binary(b->g, op, x, y, &z);
  return z;
}

static rlx_tensor layer_norm(builder* b, rlx_tensor x, rlx_tensor w, rlx_tensor bias) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_layer_norm(b->g, x, w, bias, -1, GPT_LN_EPS, &y);
  return y;
}

/* x @ w + bias, then act (RLX_ACT_NONE: none). Plain MatMul, Add and
 * Activation nodes: each has a gradient rule of its own. */
static rlx_tensor linear(builder* b, rlx_tensor x, rlx_tensor w, rlx_tensor bias,
                         rlx_activation act) {
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_matmul(b->g, x, w, 0, 0, &y);
  y = binary(b, RLX_BIN_ADD, y, bias);
  if (act != RLX_ACT_NONE && b->st == RLX_OK) b->st = rlx_graph_add_activation(b->g, act, y, &y);
  return y;
}

static void name_node(builder* b, rlx_tensor t, const char* fmt, int layer) {
  char name[64];
  snprintf(name, sizeof name, fmt, layer);
  if (b->st == RLX_OK) b->st = rlx_graph_set_name(b->g, t, name);
}

/* q, k, v [B,S,H,D] from the fused projection [B,S,3C]. */
static void split_qkv(builder* b, rlx_tensor qkv, int64_t B, int64_t S, rlx_tensor* out) {
  int64_t H = b->c->heads, D = b->c->dim / b->c->heads;
  rlx_dim five[5] = {B, S, 3, H, D}, four[4] = {B, S, H, D};
  rlx_tensor r = reshape(b, qkv, five, 5);
  for (int i = 0; i < 3; i++) {
    rlx_tensor n = RLX_NONE;
    if (b->st == RLX_OK) b->st = rlx_graph_add_narrow(b->g, r, 2, i, 1, &n);
    out[i] = reshape(b, n, four, 4);
  }
}

/* Attention of one layer over q, k, v [B,S,H,D] -> [B,S,H,D]: causal over
 * the window when training, against the KV cache when decoding. */
typedef rlx_tensor (*attend_fn)(builder* b, int layer, const rlx_tensor* qkv, void* ctx);

static rlx_tensor block(builder* b, int l, rlx_tensor x, int64_t B, int64_t S, attend_fn attend,
                        void* ctx) {
  int64_t C = b->c->dim;
  rlx_tensor h = layer_norm(b, x, block_param(b, l, "ln_1.weight", C, 0),
                            block_param(b, l, "ln_1.bias", C, 0));
  rlx_tensor qkv = linear(b, h, block_param(b, l, "attn.c_attn.weight", C, 3 * C),
                          block_param(b, l, "attn.c_attn.bias", 3 * C, 0), RLX_ACT_NONE);
  rlx_tensor parts[3];
  split_qkv(b, qkv, B, S, parts);
  rlx_tensor a = b->st == RLX_OK ? attend(b, l, parts, ctx) : RLX_NONE;
  rlx_dim merged[3] = {B, S, C};
  a = linear(b, reshape(b, a, merged, 3), block_param(b, l, "attn.c_proj.weight", C, C),
             block_param(b, l, "attn.c_proj.bias", C, 0), RLX_ACT_NONE);
  x = binary(b, RLX_BIN_ADD, x, a);
  h = layer_norm(b, x, block_param(b, l, "ln_2.weight", C, 0),
                 block_param(b, l, "ln_2.bias", C, 0));
  h = linear(b, h, block_param(b, l, "mlp.c_fc.weight", C, 4 * C),
             block_param(b, l, "mlp.c_fc.bias", 4 * C, 0), RLX_ACT_GELU_APPROX);
  h = linear(b, h, block_param(b, l, "mlp.c_proj.weight", 4 * C, C),
             block_param(b, l, "mlp.c_proj.bias", C, 0), RLX_ACT_NONE);
  x = binary(b, RLX_BIN_ADD, x, h);
  name_node(b, x, "h.%d", l);
  return x;
}

/* Blocks, final LayerNorm and the tied output projection: x [B,S,C] ->
 * logits [B,S,V]. */
static rlx_tensor trunk(builder* b, rlx_tensor wte, rlx_tensor x, int64_t B, int64_t S,
                        attend_fn attend, void* ctx) {
  for (int l = 0; l < b->c->layers; l++) x = block(b, l, x, B, S, attend, ctx);
  x = layer_norm(b, x, param(b, "ln_f.weight", b->c->dim, 0), param(b, "ln_f.bias", b->c->dim, 0));
  rlx_tensor logits = RLX_NONE;
  if (b->st == RLX_OK) b->st = rlx_graph_add_matmul(b->g, x, wte, 0, 1, &logits);
  name_node(b, logits, "logits", 0);
  return logits;
}

static rlx_tensor attend_causal(builder* b, int layer, const rlx_tensor* qkv, void* ctx) {
  (void)layer;
  (void)ctx;
  int32_t H = (int32_t)b->c->heads;
  rlx_attention_desc d = {H, H, (int32_t)(b->c->dim / H), RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0,
                          0, 0};
  rlx_tensor y = RLX_NONE;
  b->st = rlx_graph_add_attention(b->g, qkv[0], qkv[1], qkv[2], RLX_NONE, &d, &y);
  return y;
}

rlx_status gpt_build_forward(rlx_graph* g, const gpt_config* c, int64_t batch, int64_t T,
                             rlx_tensor* out_logits) {
  builder b = {g, c, RLX_OK};
  if (!g || !c || !out_logits || batch < 1 || T < 1 || T > c->ctx) return RLX_INVALID_ARGUMENT;
  rlx_tensor wte = param(&b, "wte", c->vocab, c->dim), wpe = param(&b, "wpe", c->ctx, c->dim);
  rlx_tensor ids = RLX_NONE, tok = RLX_NONE, pos = RLX_NONE;
  rlx_dim is[2] = {batch, T};
  if (b.st == RLX_OK) b.st = rlx_graph_add_input(g, "ids", RLX_I32, is, 2, &ids);
  if (b.st == RLX_OK) b.st = rlx_graph_add_gather(g, wte, ids, 0, &tok);  /* [B,T,C] */
  if (b.st == RLX_OK) b.st = rlx_graph_add_narrow(g, wpe, 0, 0, T, &pos); /* [T,C] */
  rlx_tensor x = binary(&b, RLX_BIN_ADD, tok, pos);
  *out_logits = trunk(&b, wte, x, batch, T, attend_causal, NULL);
  return b.st;
}

rlx_status gpt_build_train(rlx_graph* g, const gpt_config* c, int64_t batch, int64_t T,
                           rlx_tensor* out_loss, rlx_tensor* out_logits) {
  rlx_tensor logits = RLX_NONE, targets = RLX_NONE, loss = RLX_NONE;
  if (!out_loss) return RLX_INVALID_ARGUMENT;
  rlx_status st = gpt_build_forward(g, c, batch, T, &logits);
  rlx_dim ts[2] = {batch, T};
  if (st == RLX_OK) st = rlx_graph_add_input(g, "targets", RLX_I32, ts, 2, &targets);
  /* ignore_index -1: every byte is a real target. */
  if (st == RLX_OK) st = rlx_graph_add_cross_entropy(g, logits, targets, -1, 0.0f, &loss);
  if (st == RLX_OK) st = rlx_graph_set_name(g, loss, "loss");
  if (st == RLX_OK) st = rlx_graph_set_outputs(g, &loss, 1);
  *out_loss = loss;
  if (out_logits) *out_logits = logits;
  return st;
}

/* ------------------------------------------------------------ decode */

typedef struct decode_ctx {
  rlx_tensor keep;   /* bool [ctx]: keys at positions <= pos are visible */
  rlx_tensor at_pos; /* bool [1,ctx,1,1]: the cache row this step writes */
  rlx_tensor new_cache[2 * GPT_MAX_LAYERS];
} decode_ctx;

static void cache_name(char* buf, size_t cap, int layer, int is_v) {
  snprintf(buf, cap, "%s_cache%d", is_v ? "v" : "k", layer);
}

/* Writes this step's k and v rows into the layer's caches (Where at pos:
 * elementwise over the cache, so the planner keeps it in the cache's own
 * bytes) and attends to every filled position. */
static rlx_tensor attend_cache(builder* b, int layer, const rlx_tensor* qkv, void* vctx) {
  decode_ctx* dc = vctx;
  int32_t H = (int32_t)b->c->heads, D = (int32_t)(b->c->dim / H);
  rlx_dim cs[4] = {1, b->c->ctx, H, D};
  rlx_tensor kv[2] = {RLX_NONE, RLX_NONE};
  for (int i = 0; i < 2 && b->st == RLX_OK; i++) {
    char name[32];
    cache_name(name, sizeof name, layer, i);
    rlx_tensor cache = RLX_NONE;
    b->st = rlx_graph_add_input(b->g, name, RLX_F32, cs, 4, &cache);
    if (b->st == RLX_OK) b->st = rlx_graph_add_where(b->g, dc->at_pos, qkv[1 + i], cache, &kv[i]);
    dc->new_cache[2 * layer + i] = kv[i];
  }
  rlx_attention_desc d = {H, H, D, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0};
  rlx_tensor y = RLX_NONE;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_attention(b->g, qkv[0], kv[0], kv[1], dc->keep, &d, &y);
  return y;
}

/* keep = arange <= pos, at_pos = arange == pos (reshaped to broadcast
 * over the cache [1,ctx,H,D]). */
static void position_masks(builder* b, rlx_tensor pos, decode_ctx* dc) {
  int64_t T = b->c->ctx;
  int32_t* arange = malloc(sizeof(int32_t) * (size_t)T);
  if (!arange) {
    b->st = RLX_RESOURCE_EXHAUSTED;
    return;
  }
  for (int64_t i = 0; i < T; i++) arange[i] = (int32_t)i;
  rlx_dim ts[1] = {T};
  rlx_tensor ar = RLX_NONE, eq = RLX_NONE;
  if (b->st == RLX_OK)
    b->st = rlx_graph_add_constant(b->g, RLX_I32, ts, 1, arange, sizeof(int32_t) * (size_t)T, &ar);
  free(arange);
  if (b->st == RLX_OK) b->st = rlx_graph_add_compare(b->g, RLX_CMP_LE, ar, pos, &dc->keep);
  if (b->st == RLX_OK) b->st = rlx_graph_add_compare(b->g, RLX_CMP_EQ, ar, pos, &eq);
  rlx_dim four[4] = {1, T, 1, 1};
  dc->at_pos = reshape(b, eq, four, 4);
}

rlx_status gpt_build_decode(rlx_graph* g, const gpt_config* c, int32_t top_k, float temperature) {
  builder b = {g, c, RLX_OK};
  if (!g || !c || c->layers > GPT_MAX_LAYERS) return RLX_INVALID_ARGUMENT;
  rlx_tensor wte = param(&b, "wte", c->vocab, c->dim), wpe = param(&b, "wpe", c->ctx, c->dim);
  rlx_tensor ids = RLX_NONE, pos = RLX_NONE, tok = RLX_NONE, pe = RLX_NONE, next = RLX_NONE;
  rlx_dim is[2] = {1, 1}, ps[1] = {1};
  if (b.st == RLX_OK) b.st = rlx_graph_add_input(g, "ids", RLX_I32, is, 2, &ids);
  if (b.st == RLX_OK) b.st = rlx_graph_add_input(g, "pos", RLX_I32, ps, 1, &pos);
  decode_ctx dc;
  memset(&dc, 0, sizeof dc);
  position_masks(&b, pos, &dc);
  if (b.st == RLX_OK) b.st = rlx_graph_add_gather(g, wte, ids, 0, &tok); /* [1,1,C] */
  if (b.st == RLX_OK) b.st = rlx_graph_add_gather(g, wpe, pos, 0, &pe);  /* [1,C] */
  rlx_tensor x = binary(&b, RLX_BIN_ADD, tok, pe);
  rlx_tensor logits = trunk(&b, wte, x, 1, 1, attend_cache, &dc);
  if (b.st == RLX_OK) b.st = rlx_graph_add_sample(g, logits, top_k, 1.0f, temperature, &next);
  if (b.st != RLX_OK) return b.st;
  rlx_tensor outs[2 + 2 * GPT_MAX_LAYERS];
  int32_t n = 0;
  outs[n++] = next;
  for (int64_t i = 0; i < 2 * c->layers; i++) outs[n++] = dc.new_cache[i];
  outs[n++] = logits;
  return rlx_graph_set_outputs(g, outs, n);
}

int32_t gpt_decode_states(const gpt_config* c, char (*names)[32], const char** ptrs, int32_t* outs,
                          int32_t cap) {
  int32_t n = (int32_t)(2 * c->layers);
  if (n > cap) return -1;
  for (int32_t i = 0; i < n; i++) {
    cache_name(names[i], 32, i / 2, i % 2);
    ptrs[i] = names[i];
    outs[i] = 1 + i;
  }
  return n;
}

/* ------------------------------------------------------------ config file */

static const char k_magic[] = "rlx-gpt 1";

int gpt_config_save(const char* path, const gpt_config* c, char* err, size_t cap) {
  FILE* f = fopen(path, "w");
  if (!f) {
    set_msg(err, cap, "%s: %s", path, strerror(errno));
    return 1;
  }
  fprintf(f, "%s\nvocab %lld\nctx %lld\nlayers %lld\nheads %lld\ndim %lld\n", k_magic,
          (long long)c->vocab, (long long)c->ctx, (long long)c->layers, (long long)c->heads,
          (long long)c->dim);
  if (fclose(f) != 0) {
    set_msg(err, cap, "%s: %s", path, strerror(errno));
    return 1;
  }
  return 0;
}

/* The field of c a key names, or NULL. */
static int64_t* config_field(gpt_config* c, const char* key) {
  if (strcmp(key, "vocab") == 0) return &c->vocab;
  if (strcmp(key, "ctx") == 0) return &c->ctx;
  if (strcmp(key, "layers") == 0) return &c->layers;
  if (strcmp(key, "heads") == 0) return &c->heads;
  if (strcmp(key, "dim") == 0) return &c->dim;
  return NULL;
}

/* The next line of text[*at, len) without its line ending into line (cap
 * bytes, longer lines cut); 0 at the end of the text. */
static int next_line(const char* text, size_t len, size_t* at, char* line, size_t cap) {
  if (*at >= len) return 0;
  size_t n = 0;
  while (*at < len && text[*at] != '\n') {
    if (text[*at] != '\r' && n + 1 < cap) line[n++] = text[*at];
    (*at)++;
  }
  if (*at < len) (*at)++; /* the newline */
  line[n] = '\0';
  return 1;
}

int gpt_config_parse(const char* text, size_t len, const char* name, gpt_config* c, char* err,
                     size_t cap) {
  char line[256];
  size_t at = 0;
  int lineno = 0;
  memset(c, 0, sizeof *c);
  while (next_line(text, len, &at, line, sizeof line)) {
    if (++lineno == 1) {
      if (strcmp(line, k_magic) != 0) {
        set_msg(err, cap, "%s: not an rlx GPT config (first line '%.64s', expected '%s')", name,
                line, k_magic);
        return 1;
      }
      continue;
    }
    char key[64];
    long long value;
    int64_t* field = NULL;
    if (line[0] == '\0' || line[0] == '#') continue;
    if (sscanf(line, "%63s %lld", key, &value) == 2) field = config_field(c, key);
    if (field) *field = value;
    /* Unknown keys are notes for people (how it was trained); skip them. */
  }
  if (lineno == 0) {
    set_msg(err, cap, "%s: empty file", name);
    return 1;
  }
  return gpt_config_check(c, err, cap) != 0;
}

int gpt_config_load(const char* path, gpt_config* c, char* err, size_t cap) {
  enum { MAX_BYTES = 1 << 16 }; /* a config is a few lines */
  FILE* f = fopen(path, "rb");
  if (!f) {
    set_msg(err, cap, "%s: %s", path, strerror(errno));
    return 1;
  }
  char* text = malloc(MAX_BYTES + 1);
  size_t n = text ? fread(text, 1, MAX_BYTES + 1, f) : 0;
  int bad_read = ferror(f);
  fclose(f);
  int rc = 1;
  if (!text) set_msg(err, cap, "%s: out of host memory", path);
  else if (bad_read) set_msg(err, cap, "%s: read error", path);
  else if (n > MAX_BYTES) set_msg(err, cap, "%s: larger than %d bytes: not a GPT config", path, MAX_BYTES);
  else rc = gpt_config_parse(text, n, path, c, err, cap);
  free(text);
  return rc;
}
