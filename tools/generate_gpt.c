/* rlx generate CHECKPOINT_DIR: streams text from a GPT trained by
 * `rlx train --text` (gpt.cfg + the params rlx_trainer_save wrote as
 * DIR/<name>.npy). One compiled decode step (gpt_model.h) runs per token:
 * the KV caches stay on the device as device state, sampling happens on
 * the device (rlx_graph_add_sample), and only the chosen byte comes back.
 * The prompt goes through the same step first (prefill), one byte per
 * position. When the context is full, the window slides: the last half is
 * fed again from position 0 (the keep mask hides the stale rows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "gpt_model.h"
#include "train_util.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx generate CHECKPOINT_DIR --prompt \"...\" [--tokens N] [--temperature X]\n"
          "                   [--top-k K] [--seed S] [--device D]\n"
          "\n"
          "Writes text with the GPT saved by `rlx train --text ... --save DIR`: the\n"
          "prompt's bytes, then --tokens sampled bytes, streamed to stdout as they\n"
          "come; the KV cache and the sampling stay on the device. Timing on stderr.\n"
          "\n"
          "options:\n"
          "  --prompt TEXT       the start (default \"\\n\")\n"
          "  --tokens N          bytes to generate (default 200)\n"
          "  --temperature X     softmax temperature (default 0.8; 0: greedy)\n"
          "  --top-k K           sample among the K likeliest bytes (default 0: all)\n"
          "  --seed S            sampling seed (default 0)\n"
          "  --device D          cpu, cuda, vulkan, webgpu or best (default best)\n");
}

typedef struct gpt_gen_args {
  const char* dir;
  const char* prompt;
  const char* device;
  int64_t tokens, top_k;
  double temperature;
  uint64_t seed;
} gpt_gen_args;

static int parse_args(const char* cmd, int argc, char** argv, gpt_gen_args* a, int* help) {
  for (int i = 1; i < argc; i++) {
    const char* v = NULL;
    int m, rc = CLI_OK;
    if (cli_is_help(argv[i])) {
      *help = 1;
      return CLI_OK;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--prompt", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : CLI_OK;
      a->prompt = v;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--device", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : CLI_OK;
      a->device = v;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--tokens", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--tokens", v, 0, 1 << 24, &a->tokens);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--top-k", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--top-k", v, 0, 1 << 24, &a->top_k);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--temperature", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_f64(cmd, "--temperature", v, &a->temperature);
      if (rc == CLI_OK && !(a->temperature >= 0 && isfinite(a->temperature))) {
        cli_error(cmd, "--temperature must be >= 0");
        rc = CLI_USAGE;
      }
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--seed", &v)) != 0) {
      int64_t s = 0;
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--seed", v, 0, INT64_MAX, &s);
      a->seed = (uint64_t)s;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' for a checkpoint (see rlx generate DIR --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (a->dir) {
      cli_error(cmd, "more than one CHECKPOINT_DIR ('%s' and '%s')", a->dir, argv[i]);
      rc = CLI_USAGE;
    } else {
      a->dir = argv[i];
    }
    if (rc != CLI_OK) return rc;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ setup */

typedef struct gpt_gen {
  const char* cmd;
  gpt_config c;
  rlx_graph* g;
  rlx_exec* e;
  int32_t n_states;
  uint64_t runs; /* the sampling seed advances per run */
  uint64_t seed;
} gpt_gen;

static int compile_decode(gpt_gen* s, const gpt_gen_args* a, const char* device) {
  char names[128][32];
  const char* ptrs[128];
  int32_t outs[128];
  rlx_status st = rlx_graph_create(&s->g);
  if (st == RLX_OK) st = gpt_build_decode(s->g, &s->c, (int32_t)a->top_k, (float)a->temperature);
  s->n_states = gpt_decode_states(&s->c, names, ptrs, outs, 128);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.state_inputs = ptrs;
  o.state_outputs = outs;
  o.n_states = s->n_states;
  int quiet = cli_quiet_begin();
  if (st == RLX_OK) st = rlx_compile(s->g, device, &o, &s->e);
  cli_quiet_end(quiet);
  if (st != RLX_OK) {
    cli_error(s->cmd, "the decode step on %s: %s (%s)", device,
              s->g ? rlx_graph_last_error(s->g) : "", rlx_status_name(st));
    return CLI_FAIL;
  }
  /* only the next token comes back from a run */
  int32_t first = 0;
  if (rlx_exec_select_outputs(s->e, &first, 1) != RLX_OK) {
    cli_error(s->cmd, "%s", rlx_exec_last_error(s->e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* DIR/<name>.npy for every param, checked against the config's shapes. */
static int load_params(gpt_gen* s, const char* dir) {
  for (int32_t i = 0; i < gpt_param_count(&s->c); i++) {
    gpt_param p;
    gpt_param_get(&s->c, i, &p);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, p.name);
    rlx_dtype dt;
    int32_t rank;
    int64_t shape[RLX_MAX_RANK];
    void* data = NULL;
    size_t bytes = 0;
    char* err = NULL;
    if (rlx_npy_load(path, &dt, &rank, shape, &data, &bytes, &err) != RLX_OK) {
      cli_error(s->cmd, "checkpoint %s: %s", dir, err ? err : path);
      rlx_free(err);
      return CLI_FAIL;
    }
    int ok = dt == RLX_F32 && rank == p.rank && shape[0] == p.shape[0] &&
             (rank == 1 || shape[1] == p.shape[1]);
    if (!ok) cli_error(s->cmd, "%s does not match gpt.cfg (param %s)", path, p.name);
    if (ok && rlx_exec_set_param(s->e, p.name, RLX_F32, data, bytes) != RLX_OK) {
      cli_error(s->cmd, "param %s: %s", p.name, rlx_exec_last_error(s->e));
      ok = 0;
    }
    rlx_free(data);
    if (!ok) return CLI_FAIL;
  }
  return CLI_OK;
}

/* Empty caches: the keep mask only ever shows rows already written, but
 * the state needs a value before the first run. */
static int zero_caches(gpt_gen* s) {
  int64_t H = s->c.heads, D = s->c.dim / H, n = s->c.ctx * H * D;
  float* zeros = calloc((size_t)n, sizeof(float));
  if (!zeros) return CLI_FAIL;
  rlx_dim cs[4] = {1, s->c.ctx, H, D};
  int rc = CLI_OK;
  for (int32_t l = 0; l < s->n_states && rc == CLI_OK; l++) {
    char name[32];
    snprintf(name, sizeof name, "%s_cache%d", l % 2 ? "v" : "k", (int)(l / 2));
    if (rlx_exec_set_input(s->e, name, RLX_F32, cs, 4, zeros, sizeof(float) * (size_t)n) !=
        RLX_OK) {
      cli_error(s->cmd, "cache %s: %s", name, rlx_exec_last_error(s->e));
      rc = CLI_FAIL;
    }
  }
  free(zeros);
  return rc;
}

/* ------------------------------------------------------------ decoding */

/* Runs the step on byte `id` at position pos; *next is the sampled byte. */
static int step(gpt_gen* s, int32_t id, int32_t pos, int64_t* next) {
  rlx_dim one2[2] = {1, 1}, one1[1] = {1};
  if (rlx_exec_set_input(s->e, "ids", RLX_I32, one2, 2, &id, sizeof id) != RLX_OK ||
      rlx_exec_set_input(s->e, "pos", RLX_I32, one1, 1, &pos, sizeof pos) != RLX_OK ||
      rlx_exec_set_seed(s->e, s->seed * 0x9e3779b97f4a7c15ull + s->runs++) != RLX_OK ||
      rlx_exec_run(s->e) != RLX_OK ||
      rlx_exec_read_output(s->e, 0, RLX_I64, next, sizeof *next) != RLX_OK) {
    cli_error(s->cmd, "decode step at position %d: %s", (int)pos, rlx_exec_last_error(s->e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* Feeds window[0..n) at positions 0..n-1; *next follows the last. */
static int prefill(gpt_gen* s, const unsigned char* window, int64_t n, int64_t* next) {
  for (int64_t p = 0; p < n; p++)
    if (step(s, window[p], (int32_t)p, next) != CLI_OK) return CLI_FAIL;
  return CLI_OK;
}

static int generate(gpt_gen* s, const gpt_gen_args* a, double* prefill_ms, int64_t* made) {
  int64_t T = s->c.ctx, total = (int64_t)strlen(a->prompt) + a->tokens;
  unsigned char* text = malloc((size_t)total + 1);
  if (!text) return CLI_FAIL;
  int64_t n = (int64_t)strlen(a->prompt), next = 0;
  memcpy(text, a->prompt, (size_t)n);
  /* a prompt longer than the context: its last T - 1 bytes */
  int64_t start = n > T - 1 ? n - (T - 1) : 0, pos = n - start;
  fwrite(text, 1, (size_t)n, stdout);
  fflush(stdout);
  double t0 = cli_now_ms();
  int rc = prefill(s, text + start, pos, &next);
  *prefill_ms = cli_now_ms() - t0;
  for (*made = 0; rc == CLI_OK && *made < a->tokens; (*made)++) {
    text[n++] = (unsigned char)next;
    fputc((int)next, stdout);
    fflush(stdout);
    if (*made + 1 == a->tokens) break;
    if (pos == T) { /* full: slide to the last half */
      pos = T / 2;
      rc = prefill(s, text + n - pos, pos, &next);
    } else {
      rc = step(s, (int32_t)next, (int32_t)pos, &next);
      pos++;
    }
  }
  if (rc == CLI_OK && *made < a->tokens) (*made)++;
  fputc('\n', stdout);
  fflush(stdout); /* before the timing line on stderr */
  free(text);
  return rc;
}

int cmd_generate_gpt(int argc, char** argv) {
  const char* cmd = "generate";
  gpt_gen_args a = {NULL, "\n", "best", 200, 0, 0.8, 0};
  int help = 0;
  /* --help anywhere, even where an option's value would go (--text --help) */
  for (int i = 1; i < argc; i++) help |= cli_is_help(argv[i]);
  int rc = help ? CLI_OK : parse_args(cmd, argc, argv, &a, &help);
  if (help) {
    usage(stdout);
    return CLI_OK;
  }
  if (rc != CLI_OK) return rc;
  if (a.prompt[0] == '\0') {
    cli_error(cmd, "--prompt is empty (the model needs at least one byte to start from)");
    return CLI_USAGE;
  }
  gpt_gen s;
  memset(&s, 0, sizeof s);
  s.cmd = cmd;
  s.seed = a.seed;
  char path[4096], err[512];
  const char* device = NULL;
  snprintf(path, sizeof path, "%s/gpt.cfg", a.dir);
  if (gpt_config_load(path, &s.c, err, sizeof err) != 0) {
    cli_error(cmd, "%s (is %s a checkpoint of `rlx train --text`?)", err, a.dir);
    return CLI_FAIL;
  }
  rc = train_resolve_device(cmd, a.device, &device);
  if (rc == CLI_OK) rc = compile_decode(&s, &a, device);
  if (rc == CLI_OK) rc = load_params(&s, a.dir);
  if (rc == CLI_OK) rc = zero_caches(&s);
  double t0 = cli_now_ms(), prefill_ms = 0;
  int64_t made = 0;
  if (rc == CLI_OK) rc = generate(&s, &a, &prefill_ms, &made);
  double ms = cli_now_ms() - t0;
  if (rc == CLI_OK)
    fprintf(stderr,
            "generated %lld bytes on %s in %.0f ms (%.1f tokens/s after a %.1f ms prefill)\n",
            (long long)made, device, ms,
            made > 0 ? (double)made / ((ms - prefill_ms) / 1000.0) : 0.0, prefill_ms);
  rlx_exec_destroy(s.e);
  rlx_graph_destroy(s.g);
  return rc;
}
