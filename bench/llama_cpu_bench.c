/* llama.cpp's CPU library as rlx's CPU peer (issue 17): prompt processing
 * (pp) and decode (tg) tokens/s on a GGUF file, measured the way
 * llama-bench measures them, printed in its table format. The library is
 * npm @node-llama-cpp/linux-x64 (scripts/setup_llama.sh unpacks it into
 * third_party/llama-cpu/), opened with dlopen() (tests/llama_dl.h).
 *   pp N: one llama_decode of N random tokens (an empty cache each time)
 *   tg N: N llama_decode calls of one token each (positions 0 .. N-1)
 * Each test runs once to warm up, then -r times; tokens/s is the mean over
 * the runs (the spread as in llama-bench: standard deviation). The
 * context keeps llama.cpp's defaults (f16 KV cache, flash attention auto)
 * apart from its size and the thread count, as llama-bench does.
 *
 * usage: llama_cpu_bench MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3]
 *                        [--lib third_party/llama-cpu] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef RLX_HAVE_LLAMA_H
int main(void) {
  printf("llama_cpu_bench: built without third_party/llama.cpp/include/llama.h (run "
         "scripts/setup_llama.sh, then configure again)\n");
  return 77;
}
#else
#include "../tests/llama_dl.h"

typedef struct bench_args {
  const char* model;
  const char* lib;
  int n_prompt, n_gen, threads, reps;
} bench_args;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int parse_args(int argc, char** argv, bench_args* a) {
  *a = (bench_args){NULL, "third_party/llama-cpu", 512, 128, 2, 3};
  for (int i = 1; i < argc; i++) {
    const char* s = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(s, "-p") == 0 && has_value) a->n_prompt = atoi(argv[++i]);
    else if (strcmp(s, "-n") == 0 && has_value) a->n_gen = atoi(argv[++i]);
    else if (strcmp(s, "-t") == 0 && has_value) a->threads = atoi(argv[++i]);
    else if (strcmp(s, "-r") == 0 && has_value) a->reps = atoi(argv[++i]);
    else if (strcmp(s, "--lib") == 0 && has_value) a->lib = argv[++i];
    else if (s[0] != '-' && !a->model) a->model = s;
    else {
      fprintf(stderr, "llama_cpu_bench: unknown or incomplete option '%s'\n", s);
      return 0;
    }
  }
  if (!a->model || a->n_prompt < 0 || a->n_gen < 0 || a->threads < 1 || a->reps < 1 ||
      a->n_prompt > 1 << 16 || a->n_gen > 1 << 16) {
    fprintf(stderr, "usage: llama_cpu_bench MODEL.gguf [-p 512] [-n 128] [-t 2] [-r 3] "
                    "[--lib DIR]\n");
    return 0;
  }
  return 1;
}

/* One timed run of a test: n_prompt tokens in one batch (pp) or n_gen
 * single-token batches (tg), from an empty cache. Seconds, or -1. */
static double run_once(llama_dl* l, struct llama_context* ctx, struct llama_batch* batch,
                       const llama_token* ids, int n_prompt, int n_gen) {
  l->llama_memory_clear(l->llama_get_memory(ctx), true);
  double t0 = now_s();
  if (n_prompt > 0) {
    llama_dl_fill_batch(batch, ids, n_prompt, 0, 0);
    if (l->llama_decode(ctx, *batch) != 0) return -1;
  }
  for (int i = 0; i < n_gen; i++) {
    llama_dl_fill_batch(batch, ids + i, 1, i, 1);
    if (l->llama_decode(ctx, *batch) != 0) return -1;
  }
  l->llama_synchronize(ctx);
  return now_s() - t0;
}

/* Runs test pp (n_prompt > 0) or tg (n_gen > 0) and prints its row. */
static int bench_test(llama_dl* l, struct llama_context* ctx, struct llama_batch* batch,
                      const llama_token* ids, const bench_args* a, const char* row_head,
                      int n_prompt, int n_gen) {
  double sum = 0, sum2 = 0;
  for (int r = -1; r < a->reps; r++) { /* r = -1: warm-up */
    double t = run_once(l, ctx, batch, ids, n_prompt, n_gen);
    if (t <= 0) {
      fprintf(stderr, "llama_cpu_bench: llama_decode failed\n");
      return 0;
    }
    if (r < 0) continue;
    double tps = (n_prompt + n_gen) / t;
    sum += tps;
    sum2 += tps * tps;
  }
  double mean = sum / a->reps, var = sum2 / a->reps - mean * mean;
  char test[32];
  snprintf(test, sizeof test, "%s%d", n_prompt ? "pp" : "tg", n_prompt ? n_prompt : n_gen);
  printf("%s %13s | %13.2f ± %.2f |\n", row_head, test, mean, sqrt(var > 0 ? var : 0));
  fflush(stdout);
  return 1;
}

int main(int argc, char** argv) {
  bench_args a;
  if (!parse_args(argc, argv, &a)) return 2;
  llama_dl l;
  char why[1400];
  if (!llama_dl_open(&l, a.lib, 1, why, sizeof why)) {
    fprintf(stderr, "llama_cpu_bench: %s\n", why);
    return 77;
  }
  struct llama_model_params mp = l.llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* model = l.llama_model_load_from_file(a.model, mp);
  if (!model) {
    fprintf(stderr, "llama_cpu_bench: llama.cpp cannot load %s\n", a.model);
    return 1;
  }
  int n_max = a.n_prompt > a.n_gen ? a.n_prompt : a.n_gen;
  struct llama_context_params cp = l.llama_context_default_params();
  cp.n_ctx = (uint32_t)(a.n_prompt + a.n_gen + 16);
  cp.n_batch = (uint32_t)(n_max > 1 ? n_max : 1);
  cp.n_threads = cp.n_threads_batch = a.threads;
  cp.no_perf = true;
  struct llama_context* ctx = l.llama_init_from_model(model, cp);
  int32_t vocab = l.llama_vocab_n_tokens(l.llama_model_get_vocab(model));
  llama_token* ids = malloc((size_t)(n_max + 1) * sizeof *ids);
  int ok = ctx && ids && vocab > 0;
  struct llama_batch batch = l.llama_batch_init(n_max > 1 ? n_max : 1, 0, 1);
  srand(1234);
  for (int i = 0; ok && i <= n_max; i++) ids[i] = rand() % vocab;
  char desc[128], head[256];
  l.llama_model_desc(model, desc, sizeof desc);
  snprintf(head, sizeof head, "| %-28s | %9.2f GiB | %8.2f B | %-7s | %7d |", desc,
           (double)l.llama_model_size(model) / (1 << 30),
           (double)l.llama_model_n_params(model) / 1e9, "CPU", a.threads);
  printf("| %-28s | %13s | %10s | %-7s | %7s | %13s | %20s |\n", "model", "size", "params",
         "backend", "threads", "test", "t/s");
  printf("| %.28s | %.13s | %.10s | %.7s | %.7s | %.13s | %.20s |\n",
         "-----------------------------", "-------------:", "---------:", "-------",
         "------:", "------------:", "-------------------:");
  if (ok && a.n_prompt > 0) ok = bench_test(&l, ctx, &batch, ids, &a, head, a.n_prompt, 0);
  if (ok && a.n_gen > 0) ok = bench_test(&l, ctx, &batch, ids, &a, head, 0, a.n_gen);
  l.llama_batch_free(batch);
  free(ids);
  if (ctx) l.llama_free(ctx);
  l.llama_model_free(model);
  llama_dl_close(&l);
  return ok ? 0 : 1;
}
#endif
