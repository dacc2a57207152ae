/* rlx generate: autoregressive token generation with a GPT-style graph
 * (input "tokens" [ctx] of token ids, first output logits [ctx, vocab]). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "cli_common.h"
#include "llm_cli.h"
#include "train_util.h"

enum {
  GEN_OPTS = CLI_OPT_DEVICE | CLI_OPT_STRICT | CLI_OPT_INIT | CLI_OPT_PARAMS | CLI_OPT_BIND |
             CLI_OPT_THREADS
};

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx generate FILE [--prompt 1,2,3] [--tokens 16] [--temperature T]\n"
          "                         [--seed N] [--report] [model options]\n"
          "       rlx generate CHECKPOINT_DIR --prompt \"text\" ...   (see rlx generate DIR --help)\n"
          "       rlx generate MODEL.gguf --prompt \"text\" ...       (see rlx generate MODEL.gguf --help)\n"
          "\n"
          "Generates token ids with FILE, a graph with one input \"tokens\" (i64 or i32,\n"
          "shape [ctx]) whose first output is the logits [ctx, vocab] (e.g. the graph\n"
          "from `rlx example gpt`). The prompt is padded to ctx with zeros; each step\n"
          "runs the whole window, reads the logits row of the last real token, picks\n"
          "the next token and appends it, until --tokens are made or the window is\n"
          "full. Prints the prompt, the generated ids, the median per-token latency\n"
          "and the total time.\n"
          "\n"
          "options:\n"
          "  --prompt IDS        comma-separated token ids (default 1,2,3)\n"
          "  --tokens N          tokens to generate (default 16)\n"
          "  --temperature T     0 (default): greedy argmax; > 0: sample from\n"
          "                      softmax(logits / T), on the host\n"
          "  --seed N            sampling seed (default 0)\n"
          "  --report            print the dispatch report at the end\n");
  cli_model_opts_help(f, GEN_OPTS);
  fprintf(f, "  (--device defaults to best here: the first available of cuda, vulkan,\n"
             "   webgpu, cpu)\n");
}

typedef struct gen_args {
  cli_model_opts model;
  const char* prompt;
  int64_t tokens;
  double temperature;
  uint64_t seed;
  int report;
} gen_args;

/* Everything the generation loop needs to know about the model. */
typedef struct gen_model {
  rlx_dtype token_dtype;
  int64_t ctx, vocab;
} gen_model;

static int parse_args(const char* cmd, int argc, char** argv, gen_args* a, int* out_help) {
  for (int i = 1; i < argc; i++) {
    const char* v = NULL;
    int m = cli_model_opt(cmd, argc, argv, &i, GEN_OPTS, &a->model);
    if (m < 0) return -m;
    if (m > 0) continue;
    int rc = CLI_OK;
    if (cli_is_help(argv[i])) {
      *out_help = 1;
      return CLI_OK;
    } else if (strcmp(argv[i], "--report") == 0) {
      a->report = 1;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--prompt", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : CLI_OK;
      a->prompt = v;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--tokens", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--tokens", v, 0, 1 << 24, &a->tokens);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--temperature", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_f64(cmd, "--temperature", v, &a->temperature);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--seed", &v)) != 0) {
      int64_t s = 0;
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--seed", v, 0, INT64_MAX, &s);
      a->seed = (uint64_t)s;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx generate --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (a->model.file) {
      cli_error(cmd, "more than one FILE ('%s' and '%s')", a->model.file, argv[i]);
      rc = CLI_USAGE;
    } else {
      a->model.file = argv[i];
    }
    if (rc != CLI_OK) return rc;
  }
  if (!a->model.file) {
    cli_error(cmd, "missing FILE");
    usage(stderr);
    return CLI_USAGE;
  }
  if (a->temperature < 0) {
    cli_error(cmd, "--temperature must be >= 0");
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* Parses "1,2,3" into ids (each in [0, vocab)); *out_n ids, at most cap. */
static int parse_prompt(const char* cmd, const char* text, int64_t vocab, int64_t* ids,
                        int64_t cap, int64_t* out_n) {
  int64_t n = 0;
  const char* p = text;
  while (*p) {
    char item[32];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof item) {
      cli_error(cmd, "--prompt: bad token list '%s' (expected ids like 1,2,3)", text);
      return CLI_USAGE;
    }
    memcpy(item, p, len);
    item[len] = '\0';
    if (n >= cap) {
      cli_error(cmd, "--prompt has more than ctx=%lld tokens", (long long)cap);
      return CLI_USAGE;
    }
    if (cli_parse_i64(cmd, "--prompt token", item, 0, vocab - 1, &ids[n]) != CLI_OK)
      return CLI_USAGE;
    n++;
    p += len;
    if (*p == ',') p++;
  }
  if (n == 0) {
    cli_error(cmd, "--prompt is empty");
    return CLI_USAGE;
  }
  *out_n = n;
  return CLI_OK;
}

/* Checks the graph's contract: input "tokens" [ctx] (the only input) and
 * output 0 of shape [ctx, vocab]. */
static int inspect_model(const char* cmd, const rlx_graph* g, const rlx_exec* e,
                         const cli_bindings* b, gen_model* m) {
  rlx_value_info tokens = {0};
  int found = 0;
  for (int32_t i = 0; i < rlx_graph_input_count(g); i++) {
    rlx_value_info info;
    if (rlx_graph_get_input(g, i, &info) != RLX_OK) return CLI_FAIL;
    if (strcmp(info.name, "tokens") != 0) {
      cli_error(cmd, "the graph has an input '%s': generate feeds only \"tokens\"", info.name);
      return CLI_FAIL;
    }
    tokens = info;
    found = 1;
  }
  if (!found) {
    cli_error(cmd, "the graph has no input named \"tokens\"");
    return CLI_FAIL;
  }
  const rlx_value_info* t = &tokens;
  if (t->rank != 1 || (t->dtype != RLX_I64 && t->dtype != RLX_I32)) {
    char buf[128];
    cli_error(cmd, "input \"tokens\" is %s: expected i64[ctx] or i32[ctx]",
              cli_format_type(t, buf, sizeof buf));
    return CLI_FAIL;
  }
  if (cli_concrete_shape(cmd, b, t, "input \"tokens\"", &m->ctx) != CLI_OK) return CLI_FAIL;
  m->token_dtype = t->dtype;
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  if (rlx_exec_output_count(e) < 1 || rlx_exec_output_type(e, 0, &dt, &rank, shape) != RLX_OK) {
    cli_error(cmd, "the graph has no output (expected logits [ctx, vocab])");
    return CLI_FAIL;
  }
  if (rank != 2 || shape[0] != m->ctx || !rlx_dtype_is_float(dt) || shape[1] < 1) {
    cli_error(cmd, "output 0 is %s rank %d: expected float logits [ctx=%lld, vocab]",
              rlx_dtype_name(dt), (int)rank, (long long)m->ctx);
    return CLI_FAIL;
  }
  m->vocab = shape[1];
  return CLI_OK;
}

static int64_t argmax_row(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (row[i] > row[best]) best = i;
  return best;
}

/* Samples from softmax(row / temperature); NaN logits get no mass. */
static int64_t sample_row(const float* row, int64_t n, double temperature, uint64_t* rng) {
  double mx = -INFINITY, total = 0;
  for (int64_t i = 0; i < n; i++)
    if (row[i] > mx) mx = row[i];
  if (!isfinite(mx)) return argmax_row(row, n);
  for (int64_t i = 0; i < n; i++)
    if (!isnan(row[i])) total += exp((row[i] - mx) / temperature);
  double r = cli_rng_uniform(rng) * total, acc = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(row[i])) continue;
    acc += exp((row[i] - mx) / temperature);
    if (r < acc) return i;
  }
  return argmax_row(row, n);
}

static int set_tokens(const char* cmd, rlx_exec* e, const gen_model* m, const int64_t* ids,
                      void* staging) {
  /* Token ids are exact integers: convert from i64, never through a double. */
  if (rlx_dtype_convert(staging, m->token_dtype, ids, RLX_I64, m->ctx) != RLX_OK) {
    cli_error(cmd, "input \"tokens\": cannot convert the ids");
    return CLI_FAIL;
  }
  size_t bytes = (size_t)m->ctx * rlx_dtype_size(m->token_dtype);
  rlx_dim shape[1] = {m->ctx};
  if (rlx_exec_set_input(e, "tokens", m->token_dtype, shape, 1, staging, bytes) != RLX_OK) {
    cli_error(cmd, "input \"tokens\": %s", rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

static void print_ids(const char* what, const int64_t* ids, int64_t n) {
  printf("%s:", what);
  for (int64_t i = 0; i < n; i++) printf(" %lld", (long long)ids[i]);
  printf("\n");
}

/* The generation loop. Every step runs the full window: positions past the
 * last real token hold padding (0), but the causal mask means row len-1 of
 * the logits only sees positions <= len-1, so the padding cannot change the
 * token chosen. */
static int generate(const char* cmd, rlx_exec* e, const gen_model* m, const gen_args* a,
                    int64_t* ids, int64_t prompt_len, double* step_ms, int64_t* out_len) {
  float* row = malloc((size_t)m->vocab * sizeof *row);
  void* staging = malloc((size_t)m->ctx * sizeof(int64_t));
  if (!row || !staging) {
    free(row);
    free(staging);
    cli_error(cmd, "out of memory");
    return CLI_FAIL;
  }
  uint64_t rng = a->seed ^ 0x5851f42d4c957f2dull;
  int64_t len = prompt_len;
  int rc = CLI_OK;
  for (int64_t step = 0; step < a->tokens && len < m->ctx && rc == CLI_OK; step++) {
    double t0 = cli_now_ms();
    rc = set_tokens(cmd, e, m, ids, staging);
    if (rc == CLI_OK && rlx_exec_run(e) != RLX_OK) {
      cli_error(cmd, "run failed at step %lld: %s", (long long)step, rlx_exec_last_error(e));
      rc = CLI_FAIL;
    }
    if (rc == CLI_OK && rlx_exec_read_output_row(e, 0, len - 1, RLX_F32, row,
                                                 (size_t)m->vocab * sizeof *row) != RLX_OK) {
      cli_error(cmd, "reading logits row %lld: %s", (long long)(len - 1),
                rlx_exec_last_error(e));
      rc = CLI_FAIL;
    }
    if (rc != CLI_OK) break;
    ids[len++] = a->temperature > 0 ? sample_row(row, m->vocab, a->temperature, &rng)
                                    : argmax_row(row, m->vocab);
    step_ms[step] = cli_now_ms() - t0;
  }
  free(row);
  free(staging);
  *out_len = len;
  return rc;
}

static int run_generation(const char* cmd, rlx_graph* g, rlx_exec* e, const gen_args* a) {
  gen_model m;
  if (inspect_model(cmd, g, e, &a->model.bindings, &m) != CLI_OK) return CLI_FAIL;
  int32_t only_logits = 0;
  /* Only the logits come back from each run; other outputs stay on the device. */
  if (rlx_exec_select_outputs(e, &only_logits, 1) != RLX_OK) {
    cli_error(cmd, "select outputs: %s", rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  int64_t* ids = calloc((size_t)m.ctx, sizeof *ids);
  double* step_ms = calloc((size_t)(a->tokens > 0 ? a->tokens : 1), sizeof *step_ms);
  int64_t prompt_len = 0, len = 0;
  int rc = ids && step_ms ? CLI_OK : CLI_FAIL;
  if (rc != CLI_OK) cli_error(cmd, "out of memory");
  if (rc == CLI_OK)
    rc = parse_prompt(cmd, a->prompt ? a->prompt : "1,2,3", m.vocab, ids, m.ctx, &prompt_len);
  double t0 = cli_now_ms();
  if (rc == CLI_OK) rc = generate(cmd, e, &m, a, ids, prompt_len, step_ms, &len);
  double total = cli_now_ms() - t0;
  if (rc == CLI_OK) {
    int64_t made = len - prompt_len;
    const char* device = a->model.device;
    rlx_device_resolve(a->model.device, &device);
    printf("model: %s on %s (ctx %lld, vocab %lld), %s\n", a->model.file, device,
           (long long)m.ctx, (long long)m.vocab,
           a->temperature > 0 ? "sampling" : "greedy");
    print_ids("prompt", ids, prompt_len);
    print_ids("generated", ids + prompt_len, made);
    if (made < a->tokens)
      printf("stopped: the context window (ctx %lld) is full\n", (long long)m.ctx);
    printf("per-token latency: median %.3f ms; total %.3f ms for %lld tokens\n",
           cli_quantile(step_ms, (int)made, 0.5), total, (long long)made);
    if (a->report) rc = cli_print_report(cmd, e);
  }
  free(ids);
  free(step_ms);
  return rc;
}

/* Whether the FILE argument (the first that is not an option or an
 * option's value) is a directory: a checkpoint of `rlx train --text`. */
static int names_checkpoint_dir(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') {
      int has_value = strchr(argv[i], '=') == NULL && strcmp(argv[i], "--report") != 0 &&
                      strcmp(argv[i], "--strict") != 0 && strcmp(argv[i], "--tf32") != 0 &&
                      strcmp(argv[i], "--random-params") != 0 &&
                      strcmp(argv[i], "--channels-last") != 0 && !cli_is_help(argv[i]);
      i += has_value;
      continue;
    }
    struct stat st;
    return stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode);
  }
  return 0;
}

int cmd_generate(int argc, char** argv) {
  const char* cmd = "generate";
  if (llm_cli_names_llm(argc, argv)) return cmd_generate_llm(argc, argv);
  if (names_checkpoint_dir(argc, argv)) return cmd_generate_gpt(argc, argv);
  gen_args a;
  memset(&a, 0, sizeof a);
  cli_model_opts_init(&a.model);
  a.model.device = "best";
  a.tokens = 16;
  int help = 0;
  int rc = parse_args(cmd, argc, argv, &a, &help);
  if (help) {
    usage(stdout);
    cli_model_opts_free(&a.model);
    return CLI_OK;
  }
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  if (rc == CLI_OK) rc = cli_prepare(cmd, &a.model, 0, &g, &e);
  if (rc == CLI_OK) rc = run_generation(cmd, g, e, &a);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  cli_model_opts_free(&a.model);
  return rc;
}
