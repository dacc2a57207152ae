/* The KV-cache form of the LLM graph (rlx_llm_build_cache_graph) against
 * the full forward (rlx_llm_graph) of the same model on the CPU:
 *   - the logits at every position within 1e-5 relative, for prefill
 *     chunks of several sizes (padded ones too), token-by-token decode, and
 *     a schedule that switches between them in one executable (the caches
 *     carried over a switch of binding); GQA (llama), a sliding window
 *     (mistral), Qwen3's q/k norms, a GGUF file (GPT-J RoPE order), GPT-2
 *     (learned positions) and Gemma-2 (per-layer window, softcaps), from
 *     checkpoints and from GGUF files;
 *   - greedy generation equals the argmax of re-running the full forward;
 *   - the samplers: seeded runs reproducible, top-k 1 equals greedy, the
 *     tokens drawn with min-p / top-p lie in the set a host computation
 *     allows, the repetition penalty moves greedy where the host says.
 * Every device that can run here (or those named on the command line);
 * Qwen3, Mixtral, the GGUF files and top-p on the CPU only (lavapipe's
 * shader builds make every extra graph slow there).
 * The models: tests/llm_torch.py (safetensors) and tests/llm_chat_gguf.py
 * (GGUF files with a vocab); exits 77 (SKIP) without torch / gguf-py. */
#include <math.h>

#include "harness.h"
#include "llm_common.h"

#define SKIP_CODE 77
#define CACHE_TOLERANCE 1e-5
#define SEQ 20 /* tokens of the test sequence */

static char g_dir[512];
static const char* g_device = "cpu";

typedef struct model_run {
  rlx_llm* m;
  int64_t V;
  int64_t ids[SEQ];
  float* full; /* [SEQ, V]: the full forward's logits */
} model_run;

/* The full forward of ids on the CPU (the reference). */
static int full_forward(rlx_llm* m, const int64_t* ids, int64_t n, float* logits) {
  rlx_exec* e = NULL;
  if (rlx_compile(rlx_llm_graph(m), "cpu", NULL, &e) != RLX_OK) return 0;
  int64_t pos[64];
  for (int64_t t = 0; t < n; t++) pos[t] = t;
  rlx_dim shape[2] = {1, n};
  int64_t V = rlx_llm_get_config(m)->vocab_size;
  int ok = rlx_llm_set_params(m, e) == RLX_OK &&
           rlx_exec_set_input(e, "input_ids", RLX_I64, shape, 2, ids, (size_t)n * 8) == RLX_OK &&
           rlx_exec_set_input(e, "positions", RLX_I64, &n, 1, pos, (size_t)n * 8) == RLX_OK &&
           rlx_exec_run(e) == RLX_OK &&
           rlx_exec_read_output(e, 0, RLX_F32, logits, (size_t)(n * V) * 4) == RLX_OK;
  if (!ok) fprintf(stderr, "full forward: %s\n", rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  return ok;
}

static int open_model(const char* path, model_run* r) {
  memset(r, 0, sizeof *r);
  char* why = NULL;
  if (rlx_llm_load(path, NULL, &r->m, &why) != RLX_OK) {
    fprintf(stderr, "%s: %s\n", path, why ? why : "");
    rlx_free(why);
    return 0;
  }
  r->V = rlx_llm_get_config(r->m)->vocab_size;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int t = 0; t < SEQ; t++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    r->ids[t] = (int64_t)((x >> 33) % (uint64_t)r->V);
  }
  r->full = malloc((size_t)(SEQ * r->V) * sizeof(float));
  return r->full && full_forward(r->m, r->ids, SEQ, r->full);
}

static void close_model(model_run* r) {
  free(r->full);
  rlx_llm_destroy(r->m);
}

/* The cache form compiled on g_device with the caches as device state;
 * NULL (and *skipped) when the device is absent. */
static rlx_exec* compile_cache(model_run* r, const rlx_llm_sampling* s, int32_t all_logits,
                               int* skipped) {
  rlx_graph* g = NULL;
  *skipped = 0;
  if (rlx_llm_build_cache_graph(r->m, s, all_logits, &g) != RLX_OK) {
    fprintf(stderr, "cache graph: %s\n", rlx_llm_last_error(r->m));
    return NULL;
  }
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  rlx_exec* e = NULL;
  rlx_status st = rlx_llm_cache_compile_options(r->m, &o);
  if (st == RLX_OK) st = rlx_compile(g, g_device, &o, &e);
  if (st == RLX_UNAVAILABLE || st == RLX_UNIMPLEMENTED) *skipped = 1;
  else if (st != RLX_OK) fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g));
  rlx_graph_destroy(g);
  if (e && (rlx_llm_set_params(r->m, e) != RLX_OK || rlx_llm_cache_reset(r->m, e) != RLX_OK)) {
    fprintf(stderr, "params: %s\n", rlx_llm_last_error(r->m));
    rlx_exec_destroy(e);
    e = NULL;
  }
  return e;
}

/* Runs the sequence through e in chunks (sizes[i] tokens padded to
 * pads[i]); every real row's logits against the full forward. */
static double run_schedule(model_run* r, rlx_exec* e, const int64_t* sizes, const int64_t* pads,
                           int n_chunks) {
  double worst = 0.0;
  float* got = malloc((size_t)(64 * r->V) * sizeof(float));
  int64_t at = 0;
  for (int i = 0; i < n_chunks && at < SEQ; i++) {
    int64_t n = sizes[i] < SEQ - at ? sizes[i] : SEQ - at;
    int64_t chunk = pads[i] > n ? pads[i] : n;
    if (rlx_llm_cache_run(r->m, e, r->ids + at, n, chunk, at, NULL, 0) != RLX_OK ||
        rlx_exec_read_output(e, rlx_exec_output_count(e) - 1, RLX_F32, got,
                             (size_t)(chunk * r->V) * 4) != RLX_OK) {
      fprintf(stderr, "chunk %d: %s\n", i, rlx_llm_last_error(r->m));
      free(got);
      return INFINITY;
    }
    for (int64_t t = 0; t < n; t++) {
      double err = relative_error(got + t * r->V, r->full + (at + t) * r->V, (size_t)r->V);
      if (!(err <= worst)) worst = err;
    }
    at += n;
  }
  free(got);
  return at == SEQ ? worst : INFINITY;
}

static void check_schedules(const char* path, const char* name) {
  model_run r;
  CHECK(open_model(path, &r));
  int skipped = 0;
  rlx_exec* e = compile_cache(&r, NULL, 1, &skipped);
  if (skipped) {
    printf("  %-8s %s skipped\n", g_device, name);
    close_model(&r);
    return;
  }
  CHECK(e != NULL);
  static const int64_t ones[SEQ] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  static const int64_t whole[1] = {SEQ};
  static const int64_t chunks5[4] = {5, 5, 5, 5};
  static const int64_t mixed[8] = {7, 1, 1, 4, 1, 3, 2, 1}; /* prefill / decode switches */
  static const int64_t mixed_pad[8] = {8, 1, 1, 8, 1, 8, 8, 1};
  static const int64_t none[SEQ] = {0};
  double errs[4] = {run_schedule(&r, e, whole, none, 1), run_schedule(&r, e, chunks5, none, 4),
                    run_schedule(&r, e, mixed, mixed_pad, 8), run_schedule(&r, e, ones, none, SEQ)};
  printf("  %-8s %-8s cache vs full forward rel err: whole %.2g, chunks of 5 %.2g, mixed %.2g, "
         "token by token %.2g\n",
         g_device, name, errs[0], errs[1], errs[2], errs[3]);
  rlx_exec_destroy(e);
  close_model(&r);
  for (int i = 0; i < 4; i++) CHECK_MSG(errs[i] < CACHE_TOLERANCE, "schedule %d: %g", i, errs[i]);
}

static void model_path(char* out, size_t cap, const char* name) {
  snprintf(out, cap, "%s/%s", g_dir, name);
}

/* One model's schedules: the model folder / file under g_dir and its label. */
#define SCHEDULE_TEST(test, file, label) \
  TEST(test) {                           \
    char p[700];                         \
    model_path(p, sizeof p, file);       \
    check_schedules(p, label);           \
  }

SCHEDULE_TEST(llama_gqa, "llama", "llama")
SCHEDULE_TEST(mistral_sliding, "mistral", "mistral")
SCHEDULE_TEST(qwen3, "qwen3", "qwen3")
/* MoE: the routed MLP under the cache form */
SCHEDULE_TEST(mixtral, "mixtral", "mixtral")
SCHEDULE_TEST(gguf, "tiny_chatml.gguf", "gguf")
/* learned positions gathered at the run's positions, the fused c_attn */
SCHEDULE_TEST(gpt2, "gpt2", "gpt2")
/* window 3 on the even layers of 3 (20 tokens: it bites in decode), the
 * attention and final softcaps, query_pre_attn_scalar, the embed scale */
SCHEDULE_TEST(gemma2, "gemma2", "gemma2")
SCHEDULE_TEST(gguf_gpt2, "tiny_gpt2.gguf", "gguf-gpt2")
/* the GGUF Gemma-2 (norms hold 1 + w, ffn_up in Q8_0: DequantMatMul) */
SCHEDULE_TEST(gguf_gemma2, "tiny_gemma2.gguf", "gguf-gem2")

static int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

/* The token output 0 holds after the last run. */
static int64_t next_token(rlx_exec* e) {
  int64_t tok = -1;
  if (rlx_exec_read_output(e, 0, RLX_I64, &tok, sizeof tok) != RLX_OK) return -1;
  return tok;
}

/* Greedy: a prompt of 6 tokens prefilled, 10 tokens decoded one by one
 * (the sampled token fed back); the full forward over the result agrees
 * that each generated token is the argmax at the position before it. */
static void check_greedy(const char* file, const char* name) {
  char p[700];
  model_path(p, sizeof p, file);
  model_run r;
  CHECK(open_model(p, &r));
  int skipped = 0;
  rlx_exec* e = compile_cache(&r, NULL, 0, &skipped);
  if (skipped) {
    close_model(&r);
    return;
  }
  CHECK(e != NULL);
  int64_t seq[16];
  memcpy(seq, r.ids, 6 * sizeof(int64_t));
  int ok = rlx_llm_cache_run(r.m, e, seq, 6, 8, 0, NULL, 0) == RLX_OK;
  for (int64_t t = 6; ok && t < 16; t++) {
    seq[t] = next_token(e);
    if (t < 15) ok = rlx_llm_cache_run(r.m, e, seq + t, 1, 1, t, NULL, 0) == RLX_OK;
  }
  rlx_exec_destroy(e);
  float* logits = malloc((size_t)(16 * r.V) * sizeof(float));
  ok = ok && logits && full_forward(r.m, seq, 16, logits);
  int agree = 0;
  for (int64_t t = 6; ok && t < 16; t++) agree += argmax(logits + (t - 1) * r.V, r.V) == seq[t];
  free(logits);
  close_model(&r);
  CHECK(ok);
  CHECK_MSG(agree == 10, "%s: %d of 10 generated tokens are the full forward's argmax", name,
            agree);
}

TEST(greedy_matches_full_forward) { check_greedy("llama", "llama"); }
TEST(greedy_gpt2) { check_greedy("gpt2", "gpt2"); }
TEST(greedy_gemma2) { check_greedy("gemma2", "gemma2"); }

/* The token drawn after the 8-token prompt with sampling s and seed. */
static int64_t draw(model_run* r, rlx_exec* e, uint64_t seed, const int64_t* recent, int64_t nr) {
  if (rlx_exec_set_seed(e, seed) != RLX_OK) return -1;
  if (rlx_llm_cache_run(r->m, e, r->ids, 8, 8, 0, recent, nr) != RLX_OK) return -1;
  return next_token(e);
}

/* Host: is token i allowed by min-p (at temperature t) / top-p over row l? */
static int minp_allows(const float* l, int64_t V, float min_p, float temp, int64_t i) {
  float top = l[argmax(l, V)];
  return expf((l[i] - top) / temp) >= min_p * (1.0f - 1e-5f);
}

static int topp_allows(const float* l, int64_t V, float top_p, float temp, int64_t i) {
  /* the tokens more probable than i hold less than top_p of the mass */
  double top = l[argmax(l, V)], z = 0.0, above = 0.0;
  for (int64_t j = 0; j < V; j++) {
    double pj = exp((l[j] - top) / temp);
    z += pj;
    if (l[j] > l[i]) above += pj;
  }
  return above / z < top_p + 1e-5;
}

static int allowed_count(const float* l, int64_t V, int minp, float param, float temp) {
  int n = 0;
  for (int64_t i = 0; i < V; i++)
    n += minp ? minp_allows(l, V, param, temp, i) : topp_allows(l, V, param, temp, i);
  return n;
}

/* 24 seeds: every draw allowed by the host's rule; the rule allows more
 * than one token and fewer than all, and the draws are not all one token. */
static void check_filter(model_run* r, int minp, float param) {
  rlx_llm_sampling s;
  rlx_llm_sampling_init(&s);
  s.temperature = 2.0f;
  if (minp) s.min_p = param;
  else s.top_p = param;
  int skipped = 0;
  rlx_exec* e = compile_cache(r, &s, 0, &skipped);
  if (skipped) return;
  CHECK(e != NULL);
  const float* l = r->full + 7 * r->V;
  int bad = 0, distinct = 0;
  int64_t first = -2;
  for (uint64_t seed = 1; seed <= 24; seed++) {
    int64_t tok = draw(r, e, seed, NULL, 0);
    if (tok < 0 || tok >= r->V ||
        !(minp ? minp_allows(l, r->V, param, 2.0f, tok) : topp_allows(l, r->V, param, 2.0f, tok)))
      bad++;
    if (first == -2) first = tok;
    distinct += tok != first;
  }
  rlx_exec_destroy(e);
  int n_allowed = allowed_count(l, r->V, minp, param, 2.0f);
  printf("  %-8s %s %.2f: %d of %lld tokens allowed, %d draws outside, %d differ from the first\n",
         g_device, minp ? "min-p" : "top-p", (double)param, n_allowed, (long long)r->V, bad,
         distinct);
  CHECK(n_allowed > 1 && n_allowed < r->V);
  CHECK(bad == 0);
  CHECK(distinct > 0);
}

TEST(samplers) {
  char p[700];
  model_path(p, sizeof p, "llama");
  model_run r;
  CHECK(open_model(p, &r));
  int64_t greedy = argmax(r.full + 7 * r.V, r.V);
  rlx_llm_sampling s;
  rlx_llm_sampling_init(&s);
  s.temperature = 1.5f;
  int skipped = 0;
  rlx_exec* e = compile_cache(&r, &s, 0, &skipped);
  if (skipped) {
    close_model(&r);
    return;
  }
  CHECK(e != NULL);
  /* seeded: the same seed draws the same token; seeds differ somewhere */
  int64_t a = draw(&r, e, 7, NULL, 0), b = draw(&r, e, 7, NULL, 0);
  int differ = 0;
  for (uint64_t seed = 1; seed <= 16; seed++) differ += draw(&r, e, seed, NULL, 0) != a;
  rlx_exec_destroy(e);
  CHECK(a >= 0 && a == b);
  CHECK(differ > 0);
  /* top-k 1 at any temperature is greedy */
  s.top_k = 1;
  e = compile_cache(&r, &s, 0, &skipped);
  CHECK(e != NULL);
  int64_t k1 = draw(&r, e, 3, NULL, 0);
  rlx_exec_destroy(e);
  CHECK_MSG(k1 == greedy, "top-k 1 drew %lld, argmax %lld", (long long)k1, (long long)greedy);
  check_filter(&r, 1, 0.3f);
  if (strcmp(g_device, "cpu") == 0) check_filter(&r, 0, 0.5f); /* Sample's top-p: test_parity */
  close_model(&r);
}

/* Greedy with the penalty on the argmax token (and a -1 slot, none): the
 * draw is the argmax of the host's penalized logits, and not the plain
 * argmax when the penalty is strong enough to move it. */
TEST(repeat_penalty) {
  char p[700];
  model_path(p, sizeof p, "llama");
  model_run r;
  CHECK(open_model(p, &r));
  const float* l = r.full + 7 * r.V;
  int64_t top = argmax(l, r.V);
  rlx_llm_sampling s;
  rlx_llm_sampling_init(&s);
  s.repeat_penalty = 8.0f;
  s.repeat_last_n = 4;
  int skipped = 0;
  rlx_exec* e = compile_cache(&r, &s, 0, &skipped);
  if (skipped) {
    close_model(&r);
    return;
  }
  CHECK(e != NULL);
  int64_t recent[3] = {top, -1, (top + 1) % r.V}; /* -1: no token, ignored */
  int64_t got = draw(&r, e, 1, recent, 3);
  rlx_exec_destroy(e);
  float* pen = malloc((size_t)r.V * sizeof(float));
  memcpy(pen, l, (size_t)r.V * sizeof(float));
  for (int i = 0; i < 3; i += 2) {
    float* x = &pen[recent[i]];
    *x = *x > 0 ? *x / 8.0f : *x * 8.0f;
  }
  int64_t want = argmax(pen, r.V);
  free(pen);
  close_model(&r);
  CHECK_MSG(got == want, "penalized greedy drew %lld, host says %lld", (long long)got,
            (long long)want);
  CHECK(want != top);
}

/* Errors, not crashes: a run past the cache, bad sampling options. */
TEST(errors) {
  char p[700];
  model_path(p, sizeof p, "llama");
  model_run r;
  CHECK(open_model(p, &r));
  int skipped = 0;
  rlx_exec* e = compile_cache(&r, NULL, 0, &skipped);
  CHECK(e != NULL);
  int64_t rows = rlx_llm_cache_rows(r.m);
  CHECK(rlx_llm_cache_run(r.m, e, r.ids, 4, 4, rows - 2, NULL, 0) == RLX_OUT_OF_RANGE);
  CHECK(strstr(rlx_llm_last_error(r.m), "cache holds") != NULL);
  CHECK(rlx_llm_cache_run(r.m, e, r.ids, 4, 2, 0, NULL, 0) == RLX_OUT_OF_RANGE);
  rlx_exec_destroy(e);
  rlx_llm_sampling s;
  rlx_llm_sampling_init(&s);
  s.top_p = 1.5f;
  rlx_graph* g = NULL;
  CHECK(rlx_llm_build_cache_graph(r.m, &s, 0, &g) == RLX_INVALID_ARGUMENT);
  CHECK(g == NULL);
  CHECK(strstr(rlx_llm_last_error(r.m), "top_p") != NULL);
  close_model(&r);
  /* GPT-2's learned positions end at n_positions (32): a longer cache is
   * refused by name */
  model_path(p, sizeof p, "gpt2");
  rlx_llm_options o;
  rlx_llm_options_init(&o);
  o.max_seq = 40;
  rlx_llm* m = NULL;
  char* why = NULL;
  CHECK(rlx_llm_load(p, &o, &m, &why) == RLX_OK);
  rlx_free(why);
  CHECK(rlx_llm_build_cache_graph(m, NULL, 0, &g) == RLX_INVALID_ARGUMENT && g == NULL);
  CHECK(strstr(rlx_llm_last_error(m), "learned positions end at 32") != NULL);
  rlx_llm_destroy(m);
}

/* test_llm_cache [DEVICE...]: devices to check on (default: cpu, vulkan,
 * webgpu; the absent ones are reported as skipped). */
int main(int argc, char** argv) {
  static const char* defaults[] = {"cpu", "vulkan", "webgpu"};
  const char** devices = argc > 1 ? (const char**)(argv + 1) : defaults;
  int n_devices = argc > 1 ? argc - 1 : 3;
  (void)llm_check_case; /* llm_common.h's oracle check: not used here */
  snprintf(g_dir, sizeof g_dir, "%s/llm_cache_test", RLX_BUILD_DIR);
  rlx_llm_config probe;
  char* why = NULL;
  if (rlx_llm_config_parse("x", 1, &probe, &why) == RLX_UNIMPLEMENTED) {
    printf("SKIP: %s\n", why);
    rlx_free(why);
    return SKIP_CODE;
  }
  rlx_free(why);
  int code = llm_generate("tests/llm_torch.py", g_dir);
  if (code == 0) code = llm_generate("tests/llm_chat_gguf.py", g_dir);
  if (code != 0) {
    printf("SKIP: the model generators exited %d (need torch and gguf-py)\n", code);
    return SKIP_CODE;
  }
  for (int d = 0; d < n_devices; d++) {
    g_device = devices[d];
    printf("device %s\n", g_device);
    RUN(llama_gqa);
    RUN(mistral_sliding);
    if (strcmp(g_device, "cpu") == 0) { /* the GPU backends' shader builds are slow on lavapipe */
      RUN(qwen3);
      RUN(mixtral);
      RUN(gguf);
    }
    RUN(gpt2);
    RUN(gemma2);
    if (strcmp(g_device, "cpu") == 0) {
      RUN(gguf_gpt2);
      RUN(gguf_gemma2);
    }
    RUN(greedy_matches_full_forward);
    RUN(greedy_gpt2);
    RUN(greedy_gemma2);
    RUN(samplers);
    RUN(repeat_penalty);
  }
  g_device = "cpu";
  RUN(errors);
  return test_summary();
}
