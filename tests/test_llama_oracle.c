/* rlx against llama.cpp itself on the same GGUF files. tests/llm_gguf.py
 * writes its seeded tiny Llama / Qwen2 / Qwen3 (f32, f16, q8_0, q4_0,
 * q4_k); llama.cpp's CPU library (npm @node-llama-cpp/linux-x64, unpacked
 * by scripts/setup_llama.sh, opened with dlopen: tests/llama_dl.h) runs a
 * seeded 16-token prompt with logits at every position, rlx runs the same
 * file and prompt on every device present (cpu, and vulkan / webgpu /
 * cuda when they are), and the logits are compared:
 *   max |rlx - llama.cpp| / max |llama.cpp|  below the case's tolerance
 * (the max abs error is printed too). Then 24 greedy tokens from the
 * prompt must be the same on both sides for the f32 files (llama.cpp
 * decodes with its KV cache, rlx re-runs the whole window per token).
 * Last, scripts/gen_random_gguf.py's tiny Q4_K_M file (random blocks,
 * q6_k mixed in, a byte-level BPE vocab): the same logits check, and a
 * text tokenized alike by both, so the benchmark files are valid models
 * for llama.cpp and rlx.
 * Exits 77 (ctest SKIP), saying why, without the library, its header,
 * third_party/llama.cpp's gguf-py or Debian's torch.
 *
 * test_llama_oracle [DEVICE...]: the rlx devices to compare (default all). */
#include <math.h>

#include "harness.h"
#include "llm_common.h"

#define SKIP_CODE 77

#ifndef RLX_HAVE_LLAMA_H
int main(void) {
  printf("SKIP: built without third_party/llama.cpp/include/llama.h (run "
         "scripts/setup_llama.sh, then configure again)\n");
  return SKIP_CODE;
}
#else
#include "llama_dl.h"

#define LLAMA_CPU_DIR "third_party/llama-cpu"
#define PROMPT_LEN 16
#define GREEDY_TOKENS 24

/* Tolerances on max |rlx - llama.cpp| / max |llama.cpp| over all logits,
 * set from what was measured on these files (cpu, 2 threads; the test
 * prints each) with a margin of about 2x:
 *   f32   both compute in f32; llama.cpp's KV cache is asked for f32 here
 *         (its default f16 would round K / V) and flash attention is off.
 *         Only summation order is left: 1.2e-6 .. 1.8e-6 measured.
 *   f16   llama.cpp's CPU f16 dot product rounds the activations to f16
 *         (2^-11 relative), rlx keeps them f32: 6e-4 .. 1.2e-3 measured.
 *   q8_0, q4_0  llama.cpp rounds the activations to q8_0 blocks (8-bit,
 *         one scale per 32 values: up to 1/254 of the block's max per
 *         value, 16x f16's step) before its integer dot product; rlx
 *         dequantizes the weights and keeps f32 activations: 1.8e-2 ..
 *         2.9e-2 measured.
 *   q4_k  the same with q8_K activation blocks (one scale per 256 values,
 *         so coarser): 3.0e-2 .. 4.3e-2 measured.
 * rlx itself is within 1e-4 of a float64 torch forward on the same
 * dequantized weights (test_llm_gguf), so these gaps are llama.cpp's
 * activation rounding. A wrong block layout, scale or RoPE pairing gives
 * errors of order 1. */
#define TOL_F32 1e-4
#define TOL_F16 3e-3
#define TOL_Q8_0 6e-2 /* q8_0 and q4_0 weights: q8_0 activations */
#define TOL_Q4_K 1e-1 /* k-quants: q8_K activations */

typedef struct oracle_case {
  const char* name; /* llm_gguf.py's case dir: <model>_<type> */
  double tolerance;
  int greedy; /* 1: the greedy generations must be identical */
} oracle_case;

/* One line per file of llm_gguf.py; a MoE (Mixtral) file adds one row. */
static const oracle_case k_cases[] = {
    {"llama_f32", TOL_F32, 1},   {"llama_f16", TOL_F16, 0},   {"llama_q8_0", TOL_Q8_0, 0},
    {"llama_q4_0", TOL_Q8_0, 0}, {"llama_q4_k", TOL_Q4_K, 0}, {"qwen2_f32", TOL_F32, 1},
    {"qwen2_f16", TOL_F16, 0},   {"qwen2_q8_0", TOL_Q8_0, 0}, {"qwen2_q4_0", TOL_Q8_0, 0},
    {"qwen2_q4_k", TOL_Q4_K, 0}, {"qwen3_f32", TOL_F32, 1},   {"qwen3_f16", TOL_F16, 0},
    {"qwen3_q8_0", TOL_Q8_0, 0}, {"qwen3_q4_0", TOL_Q8_0, 0}, {"qwen3_q4_k", TOL_Q4_K, 0},
    /* Mixtral (arch llama with expert_count, experts in ffn_*_exps): f32
     * only. llama.cpp's quantized activations move the router's logits
     * enough to pick another expert for some tokens of the quantized files
     * (measured rel 0.07 - 0.14 for q8_0 / q4_0 / q4_k, 2.4e-3 for f16),
     * so those files are checked against torch in test_llm_gguf instead. */
    {"mixtral_f32", TOL_F32, 1},
};

/* gen_random_gguf.py's file: q4_k and q6_k weights, both with q8_K activations */
static const oracle_case k_random_case = {"random_tiny_q4_k_m", TOL_Q4_K, 0};
#define RANDOM_TEXT "Hello world, the quick brown fox: 12345 <|end_of_text|> caf\xc3\xa9!"

static char g_dir[512];
static llama_dl g_llama;

/* The seeded prompt: PROMPT_LEN ids in [0, vocab) from a 64-bit LCG. */
static void make_prompt(int64_t vocab, int64_t* ids) {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < PROMPT_LEN; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    ids[i] = (int64_t)((s >> 33) % (uint64_t)vocab);
  }
}

static int argmax(const float* x, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = (int)i;
  return best;
}

/* llama.cpp's side of one file: logits [PROMPT_LEN, vocab] of the prompt
 * and (greedy > 0) that many greedy tokens after it. 1 on success. */
static int llama_run(const char* path, const int64_t* prompt, int64_t vocab, float* logits,
                     int greedy, int* tokens) {
  llama_dl* l = &g_llama;
  struct llama_model_params mp = l->llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* model = l->llama_model_load_from_file(path, mp);
  if (!model) {
    fprintf(stderr, "llama.cpp cannot load %s\n", path);
    return 0;
  }
  int ok = l->llama_vocab_n_tokens(l->llama_model_get_vocab(model)) == vocab;
  if (!ok) fprintf(stderr, "%s: llama.cpp's vocab size differs from rlx's\n", path);
  struct llama_context_params cp = l->llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = 64;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = cp.type_v = GGML_TYPE_F32; /* the default f16 cache would round K / V */
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  struct llama_context* ctx = ok ? l->llama_init_from_model(model, cp) : NULL;
  ok = ctx != NULL;
  struct llama_batch batch = l->llama_batch_init(PROMPT_LEN, 0, 1);
  llama_token ids[PROMPT_LEN];
  for (int i = 0; i < PROMPT_LEN; i++) ids[i] = (llama_token)prompt[i];
  llama_dl_fill_batch(&batch, ids, PROMPT_LEN, 0, 1);
  ok = ok && l->llama_decode(ctx, batch) == 0;
  for (int i = 0; ok && i < PROMPT_LEN; i++) {
    const float* row = l->llama_get_logits_ith(ctx, i);
    ok = row != NULL;
    if (ok) memcpy(logits + (size_t)i * vocab, row, (size_t)vocab * sizeof(float));
  }
  /* greedy decode with llama.cpp's KV cache: one token per llama_decode */
  const float* last = ok ? logits + (size_t)(PROMPT_LEN - 1) * vocab : NULL;
  for (int g = 0; ok && g < greedy; g++) {
    llama_token next = (llama_token)argmax(last, vocab);
    tokens[g] = next;
    if (g + 1 == greedy) break;
    llama_dl_fill_batch(&batch, &next, 1, PROMPT_LEN + g, 1);
    ok = l->llama_decode(ctx, batch) == 0;
    last = ok ? l->llama_get_logits_ith(ctx, -1) : NULL;
    ok = ok && last != NULL;
  }
  if (!ok) fprintf(stderr, "%s: llama.cpp's decode failed\n", path);
  l->llama_batch_free(batch);
  if (ctx) l->llama_free(ctx);
  l->llama_model_free(model);
  return ok;
}

/* rlx's greedy tokens on device: the whole window re-run per token. */
static int rlx_greedy(rlx_llm* m, const char* device, const int64_t* prompt, int64_t vocab,
                      int n, int* tokens) {
  int64_t ids[PROMPT_LEN + GREEDY_TOKENS];
  memcpy(ids, prompt, PROMPT_LEN * sizeof(int64_t));
  float* logits = malloc((size_t)(PROMPT_LEN + n) * vocab * sizeof(float));
  int r = logits ? 1 : -1;
  for (int g = 0; r > 0 && g < n; g++) {
    int64_t t = PROMPT_LEN + g;
    npy_array in = {.dtype = RLX_I64, .rank = 2, .shape = {1, t}, .data = ids,
                    .bytes = (size_t)t * sizeof(int64_t)};
    r = run_on(m, device, &in, logits, (size_t)t * vocab * sizeof(float));
    if (r <= 0) break;
    tokens[g] = argmax(logits + (size_t)(t - 1) * vocab, vocab);
    ids[t] = tokens[g];
  }
  free(logits);
  return r;
}

/* max |got - want| over n values */
static double max_abs_error(const float* got, const float* want, size_t n) {
  double diff = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= diff)) diff = d; /* NaN sticks */
  }
  return diff;
}

static void print_tokens(const char* who, const int* t, int n) {
  printf("    %-9s", who);
  for (int i = 0; i < n; i++) printf(" %d", t[i]);
  printf("\n");
}

/* The comparisons of one file; want / got hold PROMPT_LEN * vocab floats. */
static void compare_case(const oracle_case* c, rlx_llm* m, const char* path, int64_t vocab,
                         float* want, float* got) {
  int64_t prompt[PROMPT_LEN];
  make_prompt(vocab, prompt);
  size_t n = (size_t)PROMPT_LEN * (size_t)vocab;
  int want_tokens[GREEDY_TOKENS], got_tokens[GREEDY_TOKENS];
  int greedy = c->greedy ? GREEDY_TOKENS : 0;
  CHECK(llama_run(path, prompt, vocab, want, greedy, want_tokens));
  double scale = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  int ran = 0;
  npy_array ids = {.dtype = RLX_I64, .rank = 2, .shape = {1, PROMPT_LEN}, .data = prompt,
                   .bytes = sizeof prompt};
  for (int d = 0; d < g_n_devices; d++) {
    int r = run_on(m, g_devices[d], &ids, got, n * sizeof(float));
    CHECK(r >= 0);
    if (r == 0) continue;
    ran++;
    double abs_err = max_abs_error(got, want, n);
    double rel = abs_err / (scale > 0 ? scale : 1.0);
    printf("  %-8s %-12s vs llama.cpp: max abs %.3g  rel %.3g  (limit %.0e)\n", g_devices[d],
           c->name, abs_err, rel, c->tolerance);
    CHECK(rel < c->tolerance);
    if (!greedy || strcmp(g_devices[d], "cpu") != 0) continue;
    int same = rlx_greedy(m, "cpu", prompt, vocab, greedy, got_tokens) > 0 &&
               memcmp(got_tokens, want_tokens, sizeof want_tokens) == 0;
    printf("  %-8s %-12s greedy %d tokens: %s\n", g_devices[d], c->name, greedy,
           same ? "identical to llama.cpp's" : "DIFFERENT");
    if (!same) {
      print_tokens("llama.cpp", want_tokens, greedy);
      print_tokens("rlx", got_tokens, greedy);
    }
    CHECK(same);
  }
  CHECK(ran > 0 || g_devices != k_all_devices); /* the CPU always runs */
}

static void check_case(const oracle_case* c) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s/model.gguf", g_dir, c->name);
  rlx_llm* m = NULL;
  char* why = NULL;
  int loaded = rlx_llm_load(path, NULL, &m, &why) == RLX_OK;
  if (!loaded) fprintf(stderr, "%s: %s\n", c->name, why ? why : "");
  rlx_free(why);
  CHECK(loaded);
  int64_t vocab = rlx_llm_get_config(m)->vocab_size;
  size_t n = (size_t)PROMPT_LEN * (size_t)vocab;
  float* want = malloc(n * sizeof(float));
  float* got = malloc(n * sizeof(float));
  int allocated = want && got;
  if (allocated) compare_case(c, m, path, vocab, want, got);
  free(want);
  free(got);
  rlx_llm_destroy(m);
  CHECK(allocated);
}

/* The same text tokenized by llama.cpp and rlx (specials added and parsed). */
static void compare_tokenizers(const char* path) {
  struct llama_model_params mp = g_llama.llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.vocab_only = true;
  struct llama_model* model = g_llama.llama_model_load_from_file(path, mp);
  CHECK(model != NULL);
  llama_token want[256];
  int32_t n_want = g_llama.llama_tokenize(g_llama.llama_model_get_vocab(model), RANDOM_TEXT,
                                          (int32_t)strlen(RANDOM_TEXT), want, 256, true, true);
  g_llama.llama_model_free(model);
  rlx_tokenizer* t = NULL;
  CHECK(rlx_tokenizer_load(path, &t, NULL) == RLX_OK);
  int32_t* got = NULL;
  int64_t n_got = 0;
  rlx_status s = rlx_tokenizer_encode(t, RANDOM_TEXT, strlen(RANDOM_TEXT),
                                      RLX_TOKENIZE_ADD_SPECIAL | RLX_TOKENIZE_PARSE_SPECIAL,
                                      &got, &n_got);
  rlx_tokenizer_destroy(t);
  int same = s == RLX_OK && n_want > 0 && n_got == n_want &&
             memcmp(got, want, (size_t)n_want * sizeof(int32_t)) == 0;
  printf("  tokenizer    %s: %d tokens, %s\n", k_random_case.name, (int)n_want,
         same ? "identical to llama.cpp's" : "DIFFERENT");
  if (!same) {
    int w[256], n = n_got < 256 ? (int)n_got : 256;
    for (int i = 0; i < n; i++) w[i] = got[i];
    print_tokens("llama.cpp", want, n_want > 0 ? n_want : 0);
    print_tokens("rlx", w, n);
  }
  rlx_free(got);
  CHECK(same);
}

/* scripts/gen_random_gguf.py's tiny q4_k_m file into g_dir. 0 = made. */
static int make_random_file(void) {
  char cmd[1600];
  const char* py = getenv("RLX_TEST_PYTHON"); /* as llm_common.h's llm_generate */
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/%s' && %s scripts/gen_random_gguf.py --preset tiny "
           "--type q4_k_m --jobs 1 -o '%s/%s/model.gguf' > /dev/null",
           g_dir, k_random_case.name, py && *py ? py : "/usr/bin/python3", g_dir,
           k_random_case.name);
  fflush(stdout);
  int st = system(cmd);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static void run_case(const oracle_case* c, const char* only) {
  if (only && !strstr(c->name, only)) return;
  int before = test_failures;
  test_current = c->name;
  check_case(c);
  if (c == &k_random_case) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s/model.gguf", g_dir, c->name);
    compare_tokenizers(path);
  }
  printf("%s %s\n", test_failures == before ? "PASS" : "FAIL", c->name);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc > 1) {
    g_devices = (const char**)(argv + 1);
    g_n_devices = argc - 1;
  }
  char why[1400];
  if (!llama_dl_open(&g_llama, LLAMA_CPU_DIR, 1, why, sizeof why)) {
    printf("SKIP: %s\n", why);
    return SKIP_CODE;
  }
  snprintf(g_dir, sizeof g_dir, "%s/llama_oracle_test", RLX_BUILD_DIR);
  int code = llm_generate("tests/llm_gguf.py", g_dir);
  if (code != 0) {
    printf("SKIP: tests/llm_gguf.py exited %d (needs third_party/llama.cpp and Debian's "
           "python3-torch)\n", code);
    return SKIP_CODE;
  }
  const char* only = getenv("RLX_TEST_ONLY");
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(&k_cases[i], only);
  if (!only || strstr(k_random_case.name, only)) {
    if (make_random_file() == 0) {
      run_case(&k_random_case, only);
    } else {
      test_failures++;
      fprintf(stderr, "scripts/gen_random_gguf.py failed\n");
    }
  }
  (void)llm_check_case; /* llm_common.h's whole-file check: test_llm_gguf's */
  llama_dl_close(&g_llama);
  return test_summary();
}
#endif
