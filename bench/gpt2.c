/* GPT-2 124M shaped benchmark through the C API, random weights:
 *   forward  f32, B4 T1024 (logits for every position), and
 *   decode   f32, B1, one token against a KV cache of ~520 tokens. The caches
 *            are device state (rlx_compile_options.state_*): each layer's
 *            Where(pos == arange, new row, cache) is planned in the cache's
 *            own bytes, so a step writes only the new K/V rows and copies
 *            nothing; attention reads the cache with a keep-mask (keys <=
 *            pos). RLX_GPT2_DECODE_FEEDS=1 runs the older form instead (a
 *            new cache tensor per step, copied back by rlx_exec_feed).
 * Before timing, the same builders at a tiny configuration run on the device
 * and on the CPU and the logits are compared ("check_rel_l2"). One JSON line
 * per measurement; median of 10 (forward) / 20 (decode) after warm-up.
 * With RLX_CUDA_TIMING=1 (set here) "device_ms" is CUDA-event time.
 *
 *   gpt2 [device]      default cuda */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

typedef struct cfg {
  int64_t L, C, H, V, T; /* layers, width, heads, vocab, max positions */
} cfg;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + 1e-6 * (double)t.tv_nsec;
}

/* Device time of e's last run where the backend measures it (CUDA events
 * with RLX_CUDA_TIMING=1), else -1. */
static double device_ms(const rlx_exec* e) {
  double ms = -1;
  rlx_exec_last_device_ms(e, &ms);
  return ms;
}

static uint64_t rng = 0x853c49e6748fea9bull;
static float urand(void) { /* uniform [-1, 1) */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* ------------------------------------------------------------ builder */

static rlx_tensor param(rlx_graph* g, const char* name, int64_t a, int64_t b) {
  rlx_dim s[2] = {a, b};
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_param(g, name, RLX_F32, s, b ? 2 : 1, &t);
  return t;
}

static rlx_tensor lparam(rlx_graph* g, int l, const char* what, int64_t a, int64_t b) {
  char name[64];
  snprintf(name, sizeof name, "h%d.%s", l, what);
  return param(g, name, a, b);
}

static rlx_tensor reshape(rlx_graph* g, rlx_tensor x, int64_t a, int64_t b, int64_t c, int64_t d,
                          int64_t e, int rank) {
  rlx_dim s[5] = {a, b, c, d, e};
  rlx_tensor y = RLX_NONE;
  rlx_graph_add_reshape(g, x, s, rank, &y);
  return y;
}

/* q, k, v [B, T, H, D] from the fused projection [B, T, 3C]. */
static void split_qkv(rlx_graph* g, const cfg* c, rlx_tensor qkv, int64_t B, int64_t T,
                      rlx_tensor* out) {
  int64_t D = c->C / c->H;
  rlx_tensor r = reshape(g, qkv, B, T, 3, c->H, D, 5);
  for (int i = 0; i < 3; i++) {
    rlx_tensor n;
    rlx_graph_add_narrow(g, r, 2, i, 1, &n);
    out[i] = reshape(g, n, B, T, c->H, D, 0, 4);
  }
}

/* Embeddings -> L blocks -> final norm -> logits. `attend` supplies the
 * attention of layer l (full causal, or against the KV cache). */
typedef rlx_tensor (*attend_fn)(rlx_graph* g, const cfg* c, int l, rlx_tensor* qkv, void* ctx);

static rlx_tensor transformer(rlx_graph* g, const cfg* c, rlx_tensor wte, rlx_tensor h, int64_t B,
                              int64_t T, attend_fn attend, void* ctx) {
  rlx_tensor resid = h, pending = RLX_NONE, pending_bias = RLX_NONE, n;
  for (int l = 0; l <= c->L; l++) {
    int last = l == c->L;
    rlx_tensor gam = last ? param(g, "ln_f.g", c->C, 0) : lparam(g, l, "ln1.g", c->C, 0);
    rlx_tensor bet = last ? param(g, "ln_f.b", c->C, 0) : lparam(g, l, "ln1.b", c->C, 0);
    if (pending == RLX_NONE) {
      rlx_graph_add_layer_norm(g, resid, gam, bet, -1, 1e-5f, &n);
    } else { /* residual + MLP output (+ its bias), normalised, in one kernel */
      rlx_tensor sum;
      rlx_graph_add_fused_residual_layer_norm(g, resid, pending, pending_bias, gam, bet, 1e-5f, &n, &sum);
      resid = sum;
    }
    if (last) break;
    rlx_tensor qkv, parts[3], a, proj, n2, sum2, fc, out;
    rlx_graph_add_fused_matmul_bias_act(g, n, lparam(g, l, "attn.w", c->C, 3 * c->C),
                                        lparam(g, l, "attn.b", 3 * c->C, 0), 0, 0, RLX_ACT_NONE, &qkv);
    split_qkv(g, c, qkv, B, T, parts);
    a = attend(g, c, l, parts, ctx);
    a = reshape(g, a, B, T, c->C, 0, 0, 3);
    rlx_graph_add_matmul(g, a, lparam(g, l, "proj.w", c->C, c->C), 0, 0, &proj);
    rlx_graph_add_fused_residual_layer_norm(g, resid, proj, lparam(g, l, "proj.b", c->C, 0),
                                            lparam(g, l, "ln2.g", c->C, 0),
                                            lparam(g, l, "ln2.b", c->C, 0), 1e-5f, &n2, &sum2);
    resid = sum2;
    rlx_graph_add_fused_matmul_bias_act(g, n2, lparam(g, l, "fc.w", c->C, 4 * c->C),
                                        lparam(g, l, "fc.b", 4 * c->C, 0), 0, 0, RLX_ACT_GELU_APPROX, &fc);
    rlx_graph_add_matmul(g, fc, lparam(g, l, "fc2.w", 4 * c->C, c->C), 0, 0, &out);
    pending = out;
    pending_bias = lparam(g, l, "fc2.b", c->C, 0);
  }
  rlx_tensor logits;
  rlx_graph_add_matmul(g, n, wte, 0, 1, &logits); /* tied embedding */
  return logits;
}

static rlx_tensor attend_causal(rlx_graph* g, const cfg* c, int l, rlx_tensor* qkv, void* ctx) {
  rlx_attention_desc d = {(int32_t)c->H, (int32_t)c->H, (int32_t)(c->C / c->H), RLX_LAYOUT_BSHD,
                          RLX_MASK_CAUSAL, 0, 0, 0};
  rlx_tensor y;
  rlx_graph_add_attention(g, qkv[0], qkv[1], qkv[2], RLX_NONE, &d, &y);
  return y;
}

static void build_forward(rlx_graph* g, const cfg* c, int64_t B, int64_t T) {
  rlx_tensor wte = param(g, "wte", c->V, c->C), wpe = param(g, "wpe", c->T, c->C), ids, x, pe, h;
  rlx_dim is[2] = {B, T};
  rlx_graph_add_input(g, "ids", RLX_I64, is, 2, &ids);
  rlx_graph_add_gather(g, wte, ids, 0, &x);
  rlx_graph_add_narrow(g, wpe, 0, 0, T, &pe);
  rlx_graph_add_binary(g, RLX_BIN_ADD, x, pe, &h);
  rlx_tensor logits = transformer(g, c, wte, h, B, T, attend_causal, NULL);
  rlx_graph_set_outputs(g, &logits, 1);
}

/* Decode: one token at position `pos` against per-layer caches [1, T, H, D];
 * the updated caches are outputs 1 + 2l (k) and 2 + 2l (v). */
typedef struct decode_ctx {
  rlx_tensor keep, at_pos; /* bool [T]: key visible; bool [1, T, 1, 1]: slot to write */
  rlx_tensor new_cache[64];
} decode_ctx;

static rlx_tensor attend_cache(rlx_graph* g, const cfg* c, int l, rlx_tensor* qkv, void* vctx) {
  decode_ctx* dc = vctx;
  int64_t D = c->C / c->H;
  rlx_dim cs[4] = {1, c->T, c->H, D};
  rlx_tensor kv[2];
  for (int i = 0; i < 2; i++) {
    char name[32];
    snprintf(name, sizeof name, "%s_cache%d", i ? "v" : "k", l);
    rlx_tensor cache;
    rlx_graph_add_input(g, name, RLX_F32, cs, 4, &cache);
    rlx_graph_add_where(g, dc->at_pos, qkv[1 + i], cache, &kv[i]);
    dc->new_cache[2 * l + i] = kv[i];
  }
  rlx_attention_desc d = {(int32_t)c->H, (int32_t)c->H, (int32_t)D, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM,
                          0, 0, 0};
  rlx_tensor y;
  rlx_graph_add_attention(g, qkv[0], kv[0], kv[1], dc->keep, &d, &y);
  return y;
}

static void build_decode(rlx_graph* g, const cfg* c) {
  rlx_tensor wte = param(g, "wte", c->V, c->C), wpe = param(g, "wpe", c->T, c->C);
  rlx_tensor ids, pos, x, pe, h, ar;
  rlx_dim is[2] = {1, 1}, ps[1] = {1}, ts[1] = {c->T};
  rlx_graph_add_input(g, "ids", RLX_I64, is, 2, &ids);
  rlx_graph_add_input(g, "pos", RLX_I64, ps, 1, &pos);
  int64_t* arange = malloc(sizeof(int64_t) * (size_t)c->T);
  for (int64_t i = 0; i < c->T; i++) arange[i] = i;
  rlx_graph_add_constant(g, RLX_I64, ts, 1, arange, sizeof(int64_t) * (size_t)c->T, &ar);
  free(arange);
  decode_ctx dc;
  rlx_tensor eq;
  rlx_graph_add_compare(g, RLX_CMP_LE, ar, pos, &dc.keep);
  rlx_graph_add_compare(g, RLX_CMP_EQ, ar, pos, &eq);
  dc.at_pos = reshape(g, eq, 1, c->T, 1, 1, 0, 4);
  rlx_graph_add_gather(g, wte, ids, 0, &x);   /* [1, 1, C] */
  rlx_graph_add_gather(g, wpe, pos, 0, &pe);  /* [1, C] */
  rlx_graph_add_binary(g, RLX_BIN_ADD, x, pe, &h);
  rlx_tensor outs[1 + 64];
  outs[0] = transformer(g, c, wte, h, 1, 1, attend_cache, &dc);
  for (int64_t l = 0; l < 2 * c->L; l++) outs[1 + l] = dc.new_cache[l];
  rlx_graph_set_outputs(g, outs, (int32_t)(1 + 2 * c->L));
}

/* ------------------------------------------------------------ weights, inputs */

static int set_weights(rlx_exec* e, const cfg* c) {
  const char* per_layer[] = {"ln1.g", "ln1.b", "attn.w", "attn.b", "proj.w", "proj.b",
                             "ln2.g", "ln2.b", "fc.w", "fc.b", "fc2.w", "fc2.b"};
  int64_t sizes[] = {c->C, c->C, c->C * 3 * c->C, 3 * c->C, c->C * c->C, c->C,
                     c->C, c->C, c->C * 4 * c->C, 4 * c->C, 4 * c->C * c->C, c->C};
  int64_t biggest = c->V * c->C > 4 * c->C * c->C ? c->V * c->C : 4 * c->C * c->C;
  if (c->T * c->C > biggest) biggest = c->T * c->C;
  float* buf = malloc(sizeof(float) * (size_t)biggest);
  if (!buf) return 0;
  int ok = 1;
  for (int l = -1; l <= c->L && ok; l++) {
    int n = l < 0 ? 4 : (l == c->L ? 0 : 12);
    for (int k = 0; k < n && ok; k++) {
      char name[64];
      int64_t count;
      int gain;
      if (l < 0) {
        const char* top[] = {"wte", "wpe", "ln_f.g", "ln_f.b"};
        int64_t tsz[] = {c->V * c->C, c->T * c->C, c->C, c->C};
        snprintf(name, sizeof name, "%s", top[k]);
        count = tsz[k];
        gain = k == 2;
      } else {
        snprintf(name, sizeof name, "h%d.%s", l, per_layer[k]);
        count = sizes[k];
        gain = strstr(per_layer[k], ".g") != NULL;
      }
      for (int64_t i = 0; i < count; i++) buf[i] = gain ? 1.0f + 0.1f * urand() : 0.035f * urand();
      ok = rlx_exec_set_param(e, name, RLX_F32, buf, sizeof(float) * (size_t)count) == RLX_OK;
      if (!ok) fprintf(stderr, "set_param %s: %s\n", name, rlx_exec_last_error(e));
    }
  }
  free(buf);
  return ok;
}

static void set_ids(rlx_exec* e, const cfg* c, int64_t B, int64_t T, uint64_t seed) {
  int64_t* ids = malloc(sizeof(int64_t) * (size_t)(B * T));
  uint64_t s = seed;
  for (int64_t i = 0; i < B * T; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    ids[i] = (int64_t)((s >> 33) % (uint64_t)c->V);
  }
  rlx_dim shape[2] = {B, T};
  rlx_exec_set_input(e, "ids", RLX_I64, shape, 2, ids, sizeof(int64_t) * (size_t)(B * T));
  free(ids);
}

static int use_feeds(void) {
  const char* v = getenv("RLX_GPT2_DECODE_FEEDS");
  return v && strcmp(v, "1") == 0;
}

static void cache_name(char* buf, size_t cap, int l, int is_v) {
  snprintf(buf, cap, "%s_cache%d", is_v ? "v" : "k", l);
}

/* Compiles the decode graph with each cache as device state of its
 * updated-cache output (unless RLX_GPT2_DECODE_FEEDS=1). */
static rlx_status compile_decode(rlx_graph* g, const cfg* c, const char* device, int feeds,
                                 rlx_exec** e) {
  char names[64][32];
  const char* np[64];
  int32_t outs[64];
  int32_t n = (int32_t)(2 * c->L);
  for (int32_t i = 0; i < n; i++) {
    cache_name(names[i], sizeof names[i], i / 2, i % 2);
    np[i] = names[i];
    outs[i] = 1 + i;
  }
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  if (!feeds) {
    o.state_inputs = np;
    o.state_outputs = outs;
    o.n_states = n;
  }
  return rlx_compile(g, device, &o, e);
}

static void set_decode_inputs(rlx_exec* e, const cfg* c, int64_t pos, int first, int feeds) {
  int64_t id = (pos * 7919) % c->V;
  rlx_dim is[2] = {1, 1}, ps[1] = {1};
  rlx_exec_set_input(e, "ids", RLX_I64, is, 2, &id, sizeof id);
  rlx_exec_set_input(e, "pos", RLX_I64, ps, 1, &pos, sizeof pos);
  if (!first) return;
  int64_t D = c->C / c->H, n = c->T * c->C;
  rlx_dim cs[4] = {1, c->T, c->H, D};
  float* cache = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) cache[i] = 0.5f * urand();
  for (int l = 0; l < c->L; l++)
    for (int i = 0; i < 2; i++) {
      char name[32];
      cache_name(name, sizeof name, l, i);
      rlx_exec_set_input(e, name, RLX_F32, cs, 4, cache, sizeof(float) * (size_t)n);
      if (feeds) rlx_exec_feed(e, name, 1 + 2 * l + i, -1);
    }
  free(cache);
}

/* ------------------------------------------------------------ checks */

static double rel_l2_logits(rlx_exec* a, rlx_exec* b, int64_t n) {
  double* x = malloc(sizeof(double) * (size_t)n);
  double* y = malloc(sizeof(double) * (size_t)n);
  double num = 0, den = 0;
  int ok = x && y && rlx_exec_read_output(a, 0, RLX_F64, x, sizeof(double) * (size_t)n) == RLX_OK &&
           rlx_exec_read_output(b, 0, RLX_F64, y, sizeof(double) * (size_t)n) == RLX_OK;
  for (int64_t i = 0; ok && i < n; i++) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  free(x);
  free(y);
  return ok ? sqrt(num / (den > 0 ? den : 1)) : INFINITY;
}

/* Tiny config on device and CPU: forward logits, then 3 decode steps (the
 * CPU keeps its caches with feeds, the device as device state unless
 * RLX_GPT2_DECODE_FEEDS=1, so the two cache mechanisms check each other). */
static void check_small(const char* device, double* fwd_err, double* dec_err) {
  cfg c = {2, 64, 4, 97, 24};
  rlx_graph *gf = NULL, *gd = NULL;
  rlx_graph_create(&gf);
  rlx_graph_create(&gd);
  build_forward(gf, &c, 2, 16);
  build_decode(gd, &c);
  rlx_exec *f[2] = {NULL, NULL}, *d[2] = {NULL, NULL};
  const char* devs[2] = {device, "cpu"};
  *fwd_err = *dec_err = INFINITY;
  int ok = 1;
  uint64_t start = rng;
  for (int k = 0; k < 2 && ok; k++) {
    int feeds = k == 1 || use_feeds();
    ok = rlx_compile(gf, devs[k], NULL, &f[k]) == RLX_OK && compile_decode(gd, &c, devs[k], feeds, &d[k]) == RLX_OK;
    if (!ok) fprintf(stderr, "compile small on %s: %s | %s\n", devs[k], rlx_graph_last_error(gf), rlx_graph_last_error(gd));
    rng = start; /* same weights and caches on both devices */
    ok = ok && set_weights(f[k], &c);
    rng = start;
    ok = ok && set_weights(d[k], &c);
    set_ids(f[k], &c, 2, 16, 5);
    ok = ok && rlx_exec_run(f[k]) == RLX_OK;
    for (int64_t p = 10; p < 13 && ok; p++) {
      set_decode_inputs(d[k], &c, p, p == 10, feeds);
      ok = rlx_exec_run(d[k]) == RLX_OK;
      if (!ok) fprintf(stderr, "decode on %s: %s\n", devs[k], rlx_exec_last_error(d[k]));
    }
  }
  if (ok) {
    *fwd_err = rel_l2_logits(f[0], f[1], 2 * 16 * c.V);
    *dec_err = rel_l2_logits(d[0], d[1], c.V);
  }
  for (int k = 0; k < 2; k++) {
    rlx_exec_destroy(f[k]);
    rlx_exec_destroy(d[k]);
  }
  rlx_graph_destroy(gf);
  rlx_graph_destroy(gd);
}

static void print_row(const char* name, const char* device, double* wall, double* dev, int n,
                      double tokens, double check) {
  qsort(wall, (size_t)n, sizeof(double), cmp_double);
  qsort(dev, (size_t)n, sizeof(double), cmp_double);
  double med = dev[n / 2] > 0 ? dev[n / 2] : wall[n / 2];
  printf("{\"name\": \"%s\", \"device\": \"%s\", \"ms\": %.4f, \"device_ms\": %.4f, \"p10_ms\": %.4f, "
         "\"p90_ms\": %.4f, \"tokens_per_s\": %.1f, \"check_rel_l2\": %.3g}\n",
         name, device, wall[n / 2], dev[n / 2], wall[n / 10], wall[n * 9 / 10], tokens / (med * 1e-3), check);
  fflush(stdout);
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cuda";
  setenv("RLX_CUDA_TIMING", "1", 0);
  double fwd_err, dec_err;
  check_small(device, &fwd_err, &dec_err);
  fprintf(stderr, "gpt2 small check on %s: forward rel L2 %.3g, decode rel L2 %.3g\n", device, fwd_err, dec_err);

  cfg c = {12, 768, 12, 50257, 1024};
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  double wall[20], dev[20];
  int ok = 1;
  const char* only = getenv("RLX_GPT2_ONLY"); /* "decode": skip the forward */
  if (only && strcmp(only, "decode") == 0) goto decode;
  rlx_graph_create(&g);
  build_forward(g, &c, 4, 1024);
  double t0 = now_ms();
  if (rlx_compile(g, device, NULL, &e) != RLX_OK) {
    printf("{\"name\": \"gpt2-124M forward f32 B4 T1024\", \"error\": \"%s\"}\n", rlx_graph_last_error(g));
    return 1;
  }
  double compile_ms = now_ms() - t0;
  if (!set_weights(e, &c)) return 1;
  set_ids(e, &c, 4, 1024, 1);
  rlx_exec_select_outputs(e, NULL, 0);
  for (int i = 0; i < 3 && ok; i++) ok = rlx_exec_run(e) == RLX_OK;
  for (int i = 0; i < 10 && ok; i++) {
    double t = now_ms();
    ok = rlx_exec_run(e) == RLX_OK;
    wall[i] = now_ms() - t;
    dev[i] = device_ms(e);
  }
  if (!ok) printf("{\"name\": \"gpt2-124M forward f32 B4 T1024\", \"error\": \"%s\"}\n", rlx_exec_last_error(e));
  else print_row("gpt2-124M forward f32 B4 T1024", device, wall, dev, 10, 4 * 1024, fwd_err);
  char* report = NULL;
  if (rlx_exec_report(e, &report) == RLX_OK) fprintf(stderr, "%s", report);
  rlx_free(report);
  fprintf(stderr, "gpt2 forward compile %.1f ms\n", compile_ms);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);

decode:
  rlx_graph_create(&g);
  build_decode(g, &c);
  if (compile_decode(g, &c, device, use_feeds(), &e) != RLX_OK) {
    printf("{\"name\": \"gpt2-124M decode-step f32 B1 ctx~520\", \"error\": \"%s\"}\n", rlx_graph_last_error(g));
    return 1;
  }
  if (!set_weights(e, &c)) return 1;
  rlx_exec_select_outputs(e, (int32_t[]){0}, 1);
  ok = 1;
  int64_t pos = 512;
  set_decode_inputs(e, &c, pos, 1, use_feeds());
  for (int i = 0; i < 3 && ok; i++, pos++) {
    set_decode_inputs(e, &c, pos, 0, 0);
    ok = rlx_exec_run(e) == RLX_OK;
  }
  for (int i = 0; i < 20 && ok; i++, pos++) {
    set_decode_inputs(e, &c, pos, 0, 0);
    double t = now_ms();
    ok = rlx_exec_run(e) == RLX_OK;
    wall[i] = now_ms() - t;
    dev[i] = device_ms(e);
  }
  if (!ok) printf("{\"name\": \"gpt2-124M decode-step f32 B1 ctx~520\", \"error\": \"%s\"}\n", rlx_exec_last_error(e));
  else print_row("gpt2-124M decode-step f32 B1 ctx~520", device, wall, dev, 20, 1, dec_err);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return 0;
}
