/* rlx example gpt: builds a small GPT-2-style decoder through the public C
 * API and prints it in the text format (examples/tiny_gpt.rlx is its output
 * with the default sizes). Param names follow GPT-2's checkpoint names so
 * the CLI's init rule (".g" -> 1, ".b" -> 0, else normal(0, 0.02)) gives a
 * well-scaled model without a checkpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

typedef struct gpt_config {
  int64_t vocab, dim, layers, heads, ctx;
} gpt_config;

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx example gpt [--vocab 256] [--dim 64] [--layers 2] [--heads 4]\n"
          "                       [--ctx 32] [--out FILE]\n"
          "\n"
          "Builds a GPT-2-style decoder and prints it in the rlx text format (or writes\n"
          "it to --out FILE). Input \"tokens\" i64[ctx]; output logits f32[ctx,vocab].\n"
          "Token + learned position embeddings; per layer: layer_norm -> fused QKV\n"
          "projection -> causal attention (BSHD) -> output projection -> residual ->\n"
          "layer_norm -> MLP (gelu_approx) -> residual; final layer_norm; logits\n"
          "against the tied token embedding. Run it with `rlx generate\n"
          "FILE --random-params` (it has no checkpoint: the weights are made up).\n");
}

/* The builder keeps the first error on the graph; every helper below checks
 * the status and stops, so one failure yields one message. */
typedef struct builder {
  rlx_graph* g;
  rlx_status s;
} builder;

static rlx_tensor param(builder* b, const char* name, int32_t rank, int64_t d0, int64_t d1) {
  rlx_tensor t = RLX_NONE;
  rlx_dim shape[2] = {d0, d1};
  if (b->s == RLX_OK) b->s = rlx_graph_add_param(b->g, name, RLX_F32, shape, rank, &t);
  return t;
}

static rlx_tensor label(builder* b, rlx_tensor t, const char* name) {
  if (b->s == RLX_OK) b->s = rlx_graph_set_name(b->g, t, name);
  return t;
}

static rlx_tensor layer_norm(builder* b, rlx_tensor x, const char* prefix, int64_t dim) {
  char gname[64], bname[64];
  snprintf(gname, sizeof gname, "%s.g", prefix);
  snprintf(bname, sizeof bname, "%s.b", prefix);
  rlx_tensor gamma = param(b, gname, 1, dim, 0), beta = param(b, bname, 1, dim, 0);
  rlx_tensor out = RLX_NONE;
  if (b->s == RLX_OK) b->s = rlx_graph_add_layer_norm(b->g, x, gamma, beta, -1, 1e-5f, &out);
  return label(b, out, prefix);
}

/* x [ctx, in] @ W [in, out] + bias [out], then act: GPT-2's Conv1D layer. */
static rlx_tensor linear(builder* b, rlx_tensor x, const char* prefix, int64_t in, int64_t out,
                         rlx_activation act) {
  char wname[64], bname[64];
  snprintf(wname, sizeof wname, "%s.w", prefix);
  snprintf(bname, sizeof bname, "%s.b", prefix);
  rlx_tensor w = param(b, wname, 2, in, out), bias = param(b, bname, 1, out, 0);
  rlx_tensor y = RLX_NONE;
  if (b->s == RLX_OK)
    b->s = rlx_graph_add_fused_matmul_bias_act(b->g, x, w, bias, 0, 0, act, &y);
  return label(b, y, prefix);
}

static rlx_tensor add(builder* b, rlx_tensor x, rlx_tensor y, const char* name) {
  rlx_tensor out = RLX_NONE;
  if (b->s == RLX_OK) b->s = rlx_graph_add_binary(b->g, RLX_BIN_ADD, x, y, &out);
  return label(b, out, name);
}

static rlx_tensor reshape(builder* b, rlx_tensor x, const rlx_dim* shape, int32_t rank) {
  rlx_tensor out = RLX_NONE;
  if (b->s == RLX_OK) b->s = rlx_graph_add_reshape(b->g, x, shape, rank, &out);
  return out;
}

static rlx_tensor narrow(builder* b, rlx_tensor x, int32_t axis, int64_t start, int64_t len,
                         const char* name) {
  rlx_tensor out = RLX_NONE;
  if (b->s == RLX_OK) b->s = rlx_graph_add_narrow(b->g, x, axis, start, len, &out);
  return label(b, out, name);
}

/* Causal self-attention: one packed QKV projection viewed as
 * [1, ctx, 3*heads, head_dim] (GPT-2 packs q | k | v along the features, so
 * heads [0, H) are q, [H, 2H) k, [2H, 3H) v), then attention in BSHD. */
static rlx_tensor attention_block(builder* b, const gpt_config* c, rlx_tensor x, int l) {
  char name[64];
  int64_t hd = c->dim / c->heads;
  snprintf(name, sizeof name, "h%d.attn.c_attn", l);
  rlx_tensor qkv = linear(b, x, name, c->dim, 3 * c->dim, RLX_ACT_NONE);
  rlx_dim packed[4] = {1, c->ctx, 3 * c->heads, hd};
  qkv = reshape(b, qkv, packed, 4);
  snprintf(name, sizeof name, "h%d.attn.q", l);
  rlx_tensor q = narrow(b, qkv, 2, 0, c->heads, name);
  snprintf(name, sizeof name, "h%d.attn.k", l);
  rlx_tensor k = narrow(b, qkv, 2, c->heads, c->heads, name);
  snprintf(name, sizeof name, "h%d.attn.v", l);
  rlx_tensor v = narrow(b, qkv, 2, 2 * c->heads, c->heads, name);
  rlx_attention_desc d;
  memset(&d, 0, sizeof d);
  d.num_heads = (int32_t)c->heads;
  d.num_kv_heads = (int32_t)c->heads;
  d.head_dim = (int32_t)hd;
  d.layout = RLX_LAYOUT_BSHD;
  d.mask = RLX_MASK_CAUSAL;
  rlx_tensor att = RLX_NONE;
  if (b->s == RLX_OK) b->s = rlx_graph_add_attention(b->g, q, k, v, RLX_NONE, &d, &att);
  snprintf(name, sizeof name, "h%d.attn", l);
  label(b, att, name);
  rlx_dim flat[2] = {c->ctx, c->dim};
  att = reshape(b, att, flat, 2);
  snprintf(name, sizeof name, "h%d.attn.c_proj", l);
  return linear(b, att, name, c->dim, c->dim, RLX_ACT_NONE);
}

static rlx_tensor mlp_block(builder* b, const gpt_config* c, rlx_tensor x, int l) {
  char name[64];
  snprintf(name, sizeof name, "h%d.mlp.c_fc", l);
  rlx_tensor h = linear(b, x, name, c->dim, 4 * c->dim, RLX_ACT_GELU_APPROX);
  snprintf(name, sizeof name, "h%d.mlp.c_proj", l);
  return linear(b, h, name, 4 * c->dim, c->dim, RLX_ACT_NONE);
}

/* Token embedding + position embedding. The positions are a constant index
 * 0..ctx-1 gathered from wpe, so wpe could be longer than ctx. */
static rlx_tensor embeddings(builder* b, const gpt_config* c, rlx_tensor* out_wte) {
  rlx_dim tshape[1] = {c->ctx};
  rlx_tensor tokens = RLX_NONE, pos = RLX_NONE, tok_emb = RLX_NONE, pos_emb = RLX_NONE;
  if (b->s == RLX_OK) b->s = rlx_graph_add_input(b->g, "tokens", RLX_I64, tshape, 1, &tokens);
  rlx_tensor wte = param(b, "wte", 2, c->vocab, c->dim);
  rlx_tensor wpe = param(b, "wpe", 2, c->ctx, c->dim);
  int64_t* idx = malloc((size_t)c->ctx * sizeof *idx);
  if (!idx) {
    if (b->s == RLX_OK) b->s = RLX_RESOURCE_EXHAUSTED;
    return RLX_NONE;
  }
  for (int64_t i = 0; i < c->ctx; i++) idx[i] = i;
  if (b->s == RLX_OK)
    b->s = rlx_graph_add_constant(b->g, RLX_I64, tshape, 1, idx,
                                  (size_t)c->ctx * sizeof *idx, &pos);
  free(idx);
  label(b, pos, "positions");
  if (b->s == RLX_OK) b->s = rlx_graph_add_gather(b->g, wte, tokens, 0, &tok_emb);
  label(b, tok_emb, "tok_emb");
  if (b->s == RLX_OK) b->s = rlx_graph_add_gather(b->g, wpe, pos, 0, &pos_emb);
  label(b, pos_emb, "pos_emb");
  *out_wte = wte;
  return add(b, tok_emb, pos_emb, "embed");
}

static rlx_status build_gpt(const gpt_config* c, rlx_graph** out_graph) {
  builder b = {NULL, rlx_graph_create(out_graph)};
  if (b.s != RLX_OK) return b.s;
  b.g = *out_graph;
  rlx_tensor wte = RLX_NONE;
  rlx_tensor h = embeddings(&b, c, &wte);
  for (int l = 0; l < (int)c->layers; l++) {
    char name[64];
    snprintf(name, sizeof name, "h%d.ln_1", l);
    rlx_tensor a = attention_block(&b, c, layer_norm(&b, h, name, c->dim), l);
    snprintf(name, sizeof name, "h%d.res_attn", l);
    h = add(&b, h, a, name);
    snprintf(name, sizeof name, "h%d.ln_2", l);
    rlx_tensor m = mlp_block(&b, c, layer_norm(&b, h, name, c->dim), l);
    snprintf(name, sizeof name, "h%d.res_mlp", l);
    h = add(&b, h, m, name);
  }
  h = layer_norm(&b, h, "ln_f", c->dim);
  rlx_tensor logits = RLX_NONE;
  if (b.s == RLX_OK) b.s = rlx_graph_add_matmul(b.g, h, wte, 0, 1, &logits);
  label(&b, logits, "logits");
  if (b.s == RLX_OK) b.s = rlx_graph_set_outputs(b.g, &logits, 1);
  return b.s;
}

static int check_config(const char* cmd, const gpt_config* c) {
  if (c->dim % c->heads != 0) {
    cli_error(cmd, "--dim %lld is not a multiple of --heads %lld", (long long)c->dim,
              (long long)c->heads);
    return CLI_USAGE;
  }
  return CLI_OK;
}

static int parse_args(const char* cmd, int argc, char** argv, gpt_config* c,
                      const char** out_path, int* out_help) {
  struct {
    const char* name;
    int64_t* field;
    int64_t hi;
  } sizes[] = {{"--vocab", &c->vocab, 1 << 20}, {"--dim", &c->dim, 1 << 16},
               {"--layers", &c->layers, 1024},  {"--heads", &c->heads, 1024},
               {"--ctx", &c->ctx, 1 << 20}};
  for (int i = 2; i < argc; i++) {
    const char* v = NULL;
    int m = 0;
    if (cli_is_help(argv[i])) {
      *out_help = 1;
      return CLI_OK;
    }
    if ((m = cli_opt_value(cmd, argc, argv, &i, "--out", &v)) != 0) {
      if (m < 0) return CLI_USAGE;
      *out_path = v;
      continue;
    }
    size_t k = 0;
    for (; k < sizeof sizes / sizeof sizes[0]; k++)
      if ((m = cli_opt_value(cmd, argc, argv, &i, sizes[k].name, &v)) != 0) break;
    if (m < 0) return CLI_USAGE;
    if (m == 0) {
      cli_error(cmd, "unexpected argument '%s' (see rlx example --help)", argv[i]);
      return CLI_USAGE;
    }
    int rc = cli_parse_i64(cmd, sizes[k].name, v, 1, sizes[k].hi, sizes[k].field);
    if (rc != CLI_OK) return rc;
  }
  return check_config(cmd, c);
}

/* The printed graph with a comment after the "rlx 1" line saying how it was
 * made, so a committed copy says how to regenerate it. */
static int write_text(const char* cmd, const char* path, const gpt_config* c,
                      const char* text) {
  FILE* f = path ? fopen(path, "wb") : stdout;
  if (!f) {
    cli_error(cmd, "cannot write '%s'", path);
    return CLI_FAIL;
  }
  const char* nl = strchr(text, '\n');
  size_t head = nl ? (size_t)(nl - text) + 1 : strlen(text);
  fwrite(text, 1, head, f);
  fprintf(f,
          "# GPT-2-style decoder made by: rlx example gpt --vocab %lld --dim %lld "
          "--layers %lld --heads %lld --ctx %lld\n",
          (long long)c->vocab, (long long)c->dim, (long long)c->layers, (long long)c->heads,
          (long long)c->ctx);
  fputs(text + head, f);
  int failed = ferror(f);
  if (path && fclose(f) != 0) failed = 1;
  if (failed) {
    cli_error(cmd, "cannot write '%s'", path ? path : "stdout");
    return CLI_FAIL;
  }
  return CLI_OK;
}

int cmd_example(int argc, char** argv) {
  const char* cmd = "example";
  if (argc >= 2 && cli_is_help(argv[1])) {
    usage(stdout);
    return CLI_OK;
  }
  if (argc < 2 || strcmp(argv[1], "gpt") != 0) {
    if (argc >= 2) cli_error(cmd, "unknown example '%s' (available: gpt)", argv[1]);
    usage(stderr);
    return CLI_USAGE;
  }
  gpt_config c = {256, 64, 2, 4, 32};
  const char* path = NULL;
  int help = 0;
  int rc = parse_args(cmd, argc, argv, &c, &path, &help);
  if (help) {
    usage(stdout);
    return CLI_OK;
  }
  if (rc != CLI_OK) return rc;
  rlx_graph* g = NULL;
  char* text = NULL;
  rlx_status s = build_gpt(&c, &g);
  if (s == RLX_OK) s = rlx_graph_print(g, &text);
  if (s != RLX_OK) {
    cli_error(cmd, "building the gpt graph failed (%s): %s", rlx_status_name(s),
              g ? rlx_graph_last_error(g) : "out of memory");
    rlx_graph_destroy(g);
    return CLI_FAIL;
  }
  rc = write_text(cmd, path, &c, text);
  rlx_free(text);
  rlx_graph_destroy(g);
  return rc;
}
