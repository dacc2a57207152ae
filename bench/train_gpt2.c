/* The GPT-2 training step of PERF.md: forward + backward + AdamW of the
 * built-in GPT (tools/gpt_model.c, GPT-2's architecture) at GPT-2 124M's
 * size by default, B4 T1024, through rlx_train_compile. Prints one JSON
 * line per run: compile ms, step ms (median of the timed steps, each
 * ending with the loss read back, so the device work is complete), the
 * first and last loss, and the executable's arena bytes (params, grads,
 * optimizer state and activations: the whole device footprint).
 *
 *   train_gpt2 [--device cuda] [--precision f32|tf32|bf16|f16] [--batch 4]
 *              [--ctx 1024] [--layers 12] [--heads 12] [--dim 768]
 *              [--vocab 50257] [--steps 10] [--warmup 3]
 *
 * Peer: ../shared/bench/peers_torch.py ("gpt2-124M train-step ...") and
 * scripts/device_train.sh, which runs both in one device call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tools/gpt_model.h" /* the CLI's GPT: public API only */
#include "rlx.h"

typedef struct bench_args {
  const char* device;
  const char* precision;
  gpt_config cfg;
  int64_t batch;
  int steps, warmup;
} bench_args;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int parse_args(int argc, char** argv, bench_args* a) {
  *a = (bench_args){"best", "f32", {50257, 1024, 12, 12, 768}, 4, 10, 3};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--device")) a->device = v;
    else if (!strcmp(k, "--precision")) a->precision = v;
    else if (!strcmp(k, "--batch")) a->batch = atoll(v);
    else if (!strcmp(k, "--ctx")) a->cfg.ctx = atoll(v);
    else if (!strcmp(k, "--layers")) a->cfg.layers = atoll(v);
    else if (!strcmp(k, "--heads")) a->cfg.heads = atoll(v);
    else if (!strcmp(k, "--dim")) a->cfg.dim = atoll(v);
    else if (!strcmp(k, "--vocab")) a->cfg.vocab = atoll(v);
    else if (!strcmp(k, "--steps")) a->steps = atoi(v);
    else if (!strcmp(k, "--warmup")) a->warmup = atoi(v);
    else return fprintf(stderr, "unknown option %s\n", k), 1;
  }
  char msg[256];
  if (gpt_config_check(&a->cfg, msg, sizeof msg)) return fprintf(stderr, "%s\n", msg), 1;
  return a->steps < 1 || a->batch < 1;
}

static int set_precision(const char* p, rlx_compile_options* o) {
  if (!strcmp(p, "tf32")) o->allow_tf32 = 1;
  else if (!strcmp(p, "bf16")) o->precision = RLX_PRECISION_BF16;
  else if (!strcmp(p, "f16")) o->precision = RLX_PRECISION_F16;
  else if (strcmp(p, "f32") != 0) return 1;
  return 0;
}

static rlx_status init_params(rlx_trainer* t, const gpt_config* c) {
  for (int32_t i = 0; i < gpt_param_count(c); i++) {
    gpt_param p;
    gpt_param_get(c, i, &p);
    float* v = malloc((size_t)p.numel * sizeof *v);
    if (!v) return RLX_RESOURCE_EXHAUSTED;
    gpt_param_init(c, &p, 1234, v);
    rlx_status s = rlx_trainer_set_param(t, p.name, RLX_F32, v, (size_t)p.numel * sizeof *v);
    free(v);
    if (s != RLX_OK) return s;
  }
  return RLX_OK;
}

static rlx_status set_batch(rlx_trainer* t, const bench_args* a) {
  int64_t n = a->batch * a->cfg.ctx;
  int32_t* ids = malloc((size_t)n * sizeof *ids);
  if (!ids) return RLX_RESOURCE_EXHAUSTED;
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids[i] = (int32_t)(x % (uint64_t)a->cfg.vocab);
  }
  rlx_dim shape[2] = {a->batch, a->cfg.ctx};
  size_t bytes = (size_t)n * sizeof *ids;
  rlx_status s = rlx_trainer_set_input(t, "ids", RLX_I32, shape, 2, ids, bytes);
  /* the targets are the ids themselves, as peers_torch.py's labels=ids */
  if (s == RLX_OK) s = rlx_trainer_set_input(t, "targets", RLX_I32, shape, 2, ids, bytes);
  free(ids);
  return s;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int run(const bench_args* a) {
  rlx_graph* g = NULL;
  rlx_tensor loss;
  if (rlx_graph_create(&g) != RLX_OK) return 1;
  if (gpt_build_train(g, &a->cfg, a->batch, a->cfg.ctx, &loss, NULL) != RLX_OK)
    return fprintf(stderr, "build: %s\n", rlx_graph_last_error(g)), 1;
  rlx_compile_options co;
  rlx_compile_options_init(&co);
  if (set_precision(a->precision, &co)) return fprintf(stderr, "bad --precision\n"), 1;
  rlx_train_options to;
  rlx_train_options_init(&to, RLX_OPTIMIZER_ADAMW);
  to.lr = 1e-4f; /* peers_torch.py's AdamW(lr=1e-4) */
  rlx_trainer* t = NULL;
  double t0 = now_ms();
  if (rlx_train_compile(g, loss, a->device, &co, &to, &t) != RLX_OK)
    return fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g)), 1;
  double compile_ms = now_ms() - t0;
  if (init_params(t, &a->cfg) != RLX_OK || set_batch(t, a) != RLX_OK)
    return fprintf(stderr, "setup: %s\n", rlx_trainer_last_error(t)), 1;
  float first = 0, last = 0;
  double* ms = calloc((size_t)a->steps, sizeof *ms);
  for (int i = 0; i < a->warmup + a->steps; i++) {
    double s0 = now_ms();
    if (rlx_trainer_step(t, &last) != RLX_OK)
      return fprintf(stderr, "step %d: %s\n", i, rlx_trainer_last_error(t)), 1;
    if (i == 0) first = last;
    if (i >= a->warmup) ms[i - a->warmup] = now_ms() - s0;
  }
  qsort(ms, (size_t)a->steps, sizeof *ms, cmp_double);
  rlx_memory_stats st = {0};
  rlx_exec_memory_stats(rlx_trainer_exec(t), &st);
  printf("{\"name\": \"rlx gpt2 train-step %s B%lld T%lld L%lld C%lld\", \"device\": \"%s\", "
         "\"ms\": %.3f, \"min_ms\": %.3f, \"compile_ms\": %.1f, \"loss_first\": %.5f, "
         "\"loss_last\": %.5f, \"arena_bytes\": %llu, \"backend_bytes\": %llu, \"launches\": %d}\n",
         a->precision, (long long)a->batch, (long long)a->cfg.ctx, (long long)a->cfg.layers,
         (long long)a->cfg.dim, a->device, ms[a->steps / 2], ms[0], compile_ms, first, last,
         (unsigned long long)st.arena_bytes, (unsigned long long)st.backend_bytes, st.launches);
  free(ms);
  rlx_trainer_destroy(t);
  rlx_graph_destroy(g);
  return 0;
}

int main(int argc, char** argv) {
  bench_args a;
  if (parse_args(argc, argv, &a)) {
    fprintf(stderr, "usage: train_gpt2 [--device D] [--precision f32|tf32|bf16|f16] [--batch B] "
                    "[--ctx T] [--layers L] [--heads H] [--dim C] [--vocab V] [--steps N] "
                    "[--warmup N]\n");
    return 2;
  }
  return run(&a);
}
