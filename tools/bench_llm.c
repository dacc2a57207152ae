/* rlx bench MODEL.gguf: prompt processing (ppN: one prefill run of N
 * random tokens) and text generation (tgN: N single-token steps from an
 * empty cache) in tokens per second, mean +- standard deviation over the
 * repetitions, as a Markdown table in the manner of llama-bench. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "llm_cli.h"

typedef struct bench_args {
  const char* model;
  const char* device;
  int64_t pp, tg, reps, threads;
  llm_compute compute; /* --tf32, --precision */
} bench_args;

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx bench MODEL.gguf [-p N] [-n N] [-r REPS] [--device D] [--threads N]\n"
          "                            [--tf32] [--precision bf16|f16|f32]\n"
          "\n"
          "Throughput of an LLM (GGUF file or safetensors checkpoint folder) in its\n"
          "KV-cache form, as llama-bench measures it: ppN is one prefill run of N\n"
          "random tokens (tokens / second of the run), tgN is N decode steps of one\n"
          "token each from an empty cache, each reading back its sampled token\n"
          "(greedy). One untimed warmup of each first (it compiles). Prints a\n"
          "Markdown table: model, size (bytes of the weights in the file), params,\n"
          "type (the main storage type of the weights beside the embedding), backend, test, t/s as mean +-\n"
          "standard deviation over the repetitions.\n"
          "\n"
          "options:\n"
          "  -p N         prompt tokens (default 512; 0: skip pp)\n"
          "  -n N         generated tokens (default 128; 0: skip tg)\n"
          "  -r REPS      repetitions (default 5)\n"
          "  --device D   cpu, cuda, vulkan, webgpu or best (default best)\n"
          "  --threads N  CPU threads (default: all cores)\n"
          "  --tf32       GPU backends may use TF32 tensor cores for f32 matmul\n"
          "  --precision P  bf16 or f16: compute the f32 activations in P (matmuls\n"
          "               on tensor cores); f32: as built (default)\n"
          "\n"
          "rlx bench FILE (a graph) is described by `rlx bench FILE --help`.\n");
}

static int parse(const char* cmd, int argc, char** argv, bench_args* a, int* help) {
  for (int i = 1; i < argc; i++) {
    const char* v = NULL;
    int m = 0, rc = CLI_OK;
    if (cli_is_help(argv[i])) {
      *help = 1;
      return CLI_OK;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "-p", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "-p", v, 0, 1 << 20, &a->pp);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "-n", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "-n", v, 0, 1 << 20, &a->tg);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "-r", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "-r", v, 1, 10000, &a->reps);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--device", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : CLI_OK;
      a->device = v;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--threads", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--threads", v, 0, 4096, &a->threads);
    } else if ((m = llm_compute_opt(cmd, argc, argv, &i, &a->compute)) != 0) {
      rc = m < 0 ? CLI_USAGE : CLI_OK;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx bench MODEL.gguf --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (a->model) {
      cli_error(cmd, "more than one MODEL ('%s' and '%s')", a->model, argv[i]);
      rc = CLI_USAGE;
    } else {
      a->model = argv[i];
    }
    if (rc != CLI_OK) return rc;
  }
  if (!a->model) {
    cli_error(cmd, "missing MODEL");
    return CLI_USAGE;
  }
  if (a->pp == 0 && a->tg == 0) {
    cli_error(cmd, "-p 0 and -n 0: nothing to measure");
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ model columns */

typedef struct model_info {
  char name[96];
  double bytes, params;
  char type[16];
} model_info;

/* ggml type ids rlx loads, by name. */
static const char* ggml_type_name(uint32_t t) {
  switch (t) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 8: return "Q8_0";
    case 12: return "Q4_K";
    case 30: return "BF16";
    default: return "other";
  }
}

/* Name, weight bytes, parameter count and the type holding most bytes
 * outside the embedding, from the GGUF tensor table (a checkpoint folder: from the config). */
static void describe(const char* path, const rlx_llm_config* c, model_info* mi) {
  memset(mi, 0, sizeof *mi);
  static const char* const arch[] = {"llama", "qwen2", "qwen3", "mistral", "gpt2", "gemma2"};
  snprintf(mi->name, sizeof mi->name, "%s %lldL %lldd",
           c->arch >= 0 && c->arch < 6 ? arch[c->arch] : "llm", (long long)c->num_layers,
           (long long)c->hidden_size);
  snprintf(mi->type, sizeof mi->type, "f32 (converted)");
  rlx_gguf* g = NULL;
  if (!llm_cli_is_gguf(path) || rlx_gguf_open(path, &g, NULL) != RLX_OK) return;
  double by_type[64] = {0};
  for (int64_t i = 0; i < rlx_gguf_tensor_count(g); i++) {
    rlx_gguf_tensor_info t;
    if (rlx_gguf_tensor(g, i, &t) != RLX_OK) continue;
    mi->bytes += (double)t.bytes;
    mi->params += (double)t.numel;
    /* the type column is the Linear weights' (the embedding is often kept wider) */
    if (t.type < 64 && strcmp(t.name, "token_embd.weight") != 0) by_type[t.type] += (double)t.bytes;
  }
  uint32_t best = 0;
  for (uint32_t t = 1; t < 64; t++)
    if (by_type[t] > by_type[best]) best = t;
  snprintf(mi->type, sizeof mi->type, "%s", ggml_type_name(best));
  rlx_gguf_close(g);
}

/* ------------------------------------------------------------ measuring */

static void random_ids(int64_t* ids, int64_t n, int64_t vocab, uint64_t* state) {
  for (int64_t i = 0; i < n; i++) ids[i] = (int64_t)(cli_rng_next(state) % (uint64_t)vocab);
}

/* Tokens per second of one pp run (prefill of n tokens at position 0). */
static int time_pp(const char* cmd, llm_session* s, int64_t* ids, int64_t n, double* tps) {
  int64_t next = 0;
  double t0 = cli_now_ms();
  if (llm_session_step(cmd, s, ids, n, n, 0, NULL, 0, &next) != CLI_OK) return CLI_FAIL;
  *tps = n * 1000.0 / fmax(cli_now_ms() - t0, 1e-6);
  return CLI_OK;
}

/* Tokens per second of n decode steps from position 0, each token fed back. */
static int time_tg(const char* cmd, llm_session* s, int64_t first, int64_t n, double* tps) {
  int64_t tok = first;
  double t0 = cli_now_ms();
  for (int64_t pos = 0; pos < n; pos++)
    if (llm_session_step(cmd, s, &tok, 1, 1, pos, NULL, 0, &tok) != CLI_OK) return CLI_FAIL;
  *tps = n * 1000.0 / fmax(cli_now_ms() - t0, 1e-6);
  return CLI_OK;
}

static void mean_std(const double* x, int64_t n, double* mean, double* sd) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) sum += x[i];
  *mean = sum / (double)n;
  for (int64_t i = 0; i < n; i++) sq += (x[i] - *mean) * (x[i] - *mean);
  *sd = n > 1 ? sqrt(sq / (double)(n - 1)) : 0.0;
}

static void print_row(const model_info* mi, const char* backend, const char* test, double mean,
                      double sd) {
  printf("| %-20s | %10.2f MiB | %8.2f M | %-8s | %-8s | %-7s | %10.2f ± %-8.2f |\n", mi->name,
         mi->bytes / 1048576.0, mi->params / 1e6, mi->type, backend, test, mean, sd);
  fflush(stdout);
}

/* All pp repetitions, then all tg ones: a switch between the two bindings
 * (T = p and T = 1) moves the caches and params, so it is kept out of the
 * timed runs by a warmup after it. */
static int measure(const char* cmd, llm_session* s, const bench_args* a, const model_info* mi,
                   const char* backend) {
  int64_t V = rlx_llm_get_config(s->m)->vocab_size;
  uint64_t state = 0x5eed;
  int64_t* ids = malloc(sizeof(int64_t) * (size_t)(a->pp > 0 ? a->pp : 1));
  double* tps = malloc(sizeof(double) * (size_t)a->reps);
  int rc = ids && tps ? CLI_OK : CLI_FAIL;
  char test[32];
  double mean = 0, sd = 0, warm = 0;
  if (rc == CLI_OK && a->pp > 0) {
    random_ids(ids, a->pp, V, &state);
    rc = time_pp(cmd, s, ids, a->pp, &warm);
    for (int64_t r = 0; rc == CLI_OK && r < a->reps; r++) rc = time_pp(cmd, s, ids, a->pp, &tps[r]);
    snprintf(test, sizeof test, "pp%lld", (long long)a->pp);
    if (rc == CLI_OK) { /* every repetition filled tps */
      mean_std(tps, a->reps, &mean, &sd);
      print_row(mi, backend, test, mean, sd);
    }
  }
  if (rc == CLI_OK && a->tg > 0) {
    int64_t first = (int64_t)(cli_rng_next(&state) % (uint64_t)V);
    rc = time_tg(cmd, s, first, a->tg < 4 ? a->tg : 4, &warm);
    for (int64_t r = 0; rc == CLI_OK && r < a->reps; r++) rc = time_tg(cmd, s, first, a->tg, &tps[r]);
    snprintf(test, sizeof test, "tg%lld", (long long)a->tg);
    if (rc == CLI_OK) {
      mean_std(tps, a->reps, &mean, &sd);
      print_row(mi, backend, test, mean, sd);
    }
  }
  free(ids);
  free(tps);
  return rc;
}

int cmd_bench_llm(int argc, char** argv) {
  const char* cmd = "bench";
  bench_args a = {NULL, "best", 512, 128, 5, 0, {0, 0, 0}};
  int help = 0;
  int rc = parse(cmd, argc, argv, &a, &help);
  if (help) {
    usage(stdout);
    return CLI_OK;
  }
  if (rc != CLI_OK) return rc;
  llm_session s;
  int64_t ctx = a.pp > a.tg ? a.pp : a.tg;
  a.compute.threads = (int32_t)a.threads;
  rc = llm_session_open(cmd, a.model, ctx, a.device, &a.compute, NULL, &s);
  if (rc != CLI_OK) return rc;
  model_info mi;
  describe(a.model, rlx_llm_get_config(s.m), &mi);
  const char* backend = a.device;
  rlx_device_resolve(a.device, &backend);
  printf("| %-20s | %14s | %10s | %-8s | %-8s | %-7s | %21s |\n", "model", "size", "params",
         "type", "backend", "test", "t/s");
  printf("| %.20s | %.14s | %.10s | %.8s | %.8s | %.7s | %.21s |\n", "--------------------",
         "-------------:", "---------:", "--------", "--------", "-------",
         "--------------------:");
  rc = measure(cmd, &s, &a, &mi, backend);
  llm_session_free(&s);
  return rc;
}
