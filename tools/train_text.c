/* rlx train --text FILE: the built-in GPT (gpt_model.h) learns to continue
 * a text, byte by byte. Each step takes B random windows of T + 1 bytes
 * from the training part (the text minus a held-out tail); the validation
 * loss is the mean loss over fixed windows of the tail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "gpt_model.h"
#include "train_util.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx train --text FILE [--device D] [--steps N | --minutes M] [--batch B]\n"
          "                 [--context T] [--layers L] [--heads H] [--dim C] [--lr X]\n"
          "                 [--log FILE.csv] [--save DIR] [--plot FILE.png|.txt] [--seed S]\n"
          "\n"
          "Trains the built-in GPT (GPT-2's architecture, one token per byte) to\n"
          "continue FILE, with AdamW (weight decay 0.01), gradient clipping at norm 1\n"
          "and a learning rate that warms up, then decays along a cosine. The last\n"
          "10%% of the file is held out: its loss (\"val\") is measured every\n"
          "--eval-every steps and at the end. Then `rlx generate DIR --prompt ...`\n"
          "writes text with the model saved by --save.\n"
          "\n"
          "options:\n"
          "  --device D        cpu, cuda, vulkan, webgpu or best (default best)\n"
          "  --steps N         optimizer steps (default 500)\n"
          "  --minutes M       train for M minutes instead (the schedule follows time)\n"
          "  --batch B         windows per step (default 16)\n"
          "  --context T       bytes per window, the model's context (default 64)\n"
          "  --layers L        transformer blocks (default 2)\n"
          "  --heads H         attention heads (default 4)\n"
          "  --dim C           width, a multiple of heads (default 128)\n"
          "  --lr X            peak learning rate (default 0.003)\n"
          "  --eval-every N    steps between validation losses (default 100; 0: only at the end)\n"
          "  --log FILE.csv    the loss of every step: header step,loss\n"
          "  --save DIR        checkpoint: params, optimizer state, step count\n"
          "                    (rlx_trainer_save) and gpt.cfg for `rlx generate DIR`\n"
          "  --save-every N    also save the checkpoint every N steps (default 0: at the end)\n"
          "  --plot FILE       the loss curve: a PNG through gnuplot when FILE ends in\n"
          "                    .png and gnuplot is installed, else a text plot\n"
          "  --seed S          seed of the init and of the windows (default 0)\n"
          "  --threads N       CPU worker threads (default: all cores)\n");
}

typedef struct text_args {
  const char* text;
  const char* device;
  int64_t steps;
  double minutes;
  int64_t batch, eval_every, save_every, threads;
  gpt_config model;
  double lr;
  const char* log;
  const char* save;
  const char* plot;
  uint64_t seed;
} text_args;

typedef struct int_opt {
  const char* name;
  int64_t* dst;
  int64_t lo, hi;
} int_opt;

/* The integer options, with their ranges. */
static int parse_int_opts(const char* cmd, int argc, char** argv, int* i, text_args* a, int* rc) {
  int_opt opts[] = {
      {"--steps", &a->steps, 1, INT64_C(1) << 40},
      {"--batch", &a->batch, 1, 1 << 16},
      {"--context", &a->model.ctx, 2, 1 << 16},
      {"--layers", &a->model.layers, 1, 64},
      {"--heads", &a->model.heads, 1, 1024},
      {"--dim", &a->model.dim, 1, 1 << 16},
      {"--eval-every", &a->eval_every, 0, INT64_C(1) << 40},
      {"--threads", &a->threads, 0, 1024},
      {"--save-every", &a->save_every, 0, INT64_C(1) << 40},
  };
  for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
    const char* v = NULL;
    int m = cli_opt_value(cmd, argc, argv, i, opts[k].name, &v);
    if (m == 0) continue;
    *rc = m < 0 ? CLI_USAGE
                : cli_parse_i64(cmd, opts[k].name, v, opts[k].lo, opts[k].hi, opts[k].dst);
    return 1;
  }
  return 0;
}

static int parse_other_opt(const char* cmd, int argc, char** argv, int* i, text_args* a) {
  const char* v = NULL;
  int m;
  const char** strings[] = {&a->text, &a->device, &a->log, &a->save, &a->plot};
  const char* names[] = {"--text", "--device", "--log", "--save", "--plot"};
  for (int k = 0; k < 5; k++)
    if ((m = cli_opt_value(cmd, argc, argv, i, names[k], &v)) != 0) {
      *strings[k] = v;
      return m < 0 ? CLI_USAGE : CLI_OK;
    }
  if ((m = cli_opt_value(cmd, argc, argv, i, "--minutes", &v)) != 0)
    return m < 0 ? CLI_USAGE : cli_parse_f64(cmd, "--minutes", v, &a->minutes);
  if ((m = cli_opt_value(cmd, argc, argv, i, "--lr", &v)) != 0)
    return m < 0 ? CLI_USAGE : cli_parse_f64(cmd, "--lr", v, &a->lr);
  if ((m = cli_opt_value(cmd, argc, argv, i, "--seed", &v)) != 0) {
    int64_t s = 0;
    int rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--seed", v, 0, INT64_MAX, &s);
    a->seed = (uint64_t)s;
    return rc;
  }
  cli_error(cmd, "unknown argument '%s' (see rlx train --text --help)", argv[*i]);
  return CLI_USAGE;
}

static int parse_args(const char* cmd, int argc, char** argv, text_args* a, int* help) {
  int steps_given = 0;
  for (int i = 1; i < argc; i++) {
    int rc = CLI_OK;
    if (cli_is_help(argv[i])) {
      *help = 1;
      return CLI_OK;
    }
    if (strcmp(argv[i], "--steps") == 0 || strncmp(argv[i], "--steps=", 8) == 0) steps_given = 1;
    if (!parse_int_opts(cmd, argc, argv, &i, a, &rc)) rc = parse_other_opt(cmd, argc, argv, &i, a);
    if (rc != CLI_OK) return rc;
  }
  char msg[256];
  if (!a->text) {
    cli_error(cmd, "--text needs a FILE");
    return CLI_USAGE;
  }
  if (steps_given && a->minutes > 0) {
    cli_error(cmd, "give --steps or --minutes, not both");
    return CLI_USAGE;
  }
  if (a->minutes < 0 || !isfinite(a->minutes) || !(a->lr > 0) || !isfinite(a->lr)) {
    cli_error(cmd, "--minutes must be >= 0 and --lr > 0");
    return CLI_USAGE;
  }
  if (gpt_config_check(&a->model, msg, sizeof msg) != 0) {
    cli_error(cmd, "model: %s", msg);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ data */

typedef struct text_data {
  unsigned char* bytes;
  int64_t n, n_train; /* bytes [n_train, n) are held out */
} text_data;

static int read_text(const char* cmd, const char* path, int64_t T, text_data* d) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    cli_error(cmd, "--text %s: cannot open it", path);
    return CLI_FAIL;
  }
  size_t cap = 1 << 20, n = 0;
  unsigned char* buf = malloc(cap);
  while (buf) {
    if (n == cap) {
      unsigned char* bigger = realloc(buf, cap * 2);
      if (!bigger) break;
      buf = bigger;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  int err = ferror(f) || !buf;
  fclose(f);
  if (err) {
    free(buf);
    cli_error(cmd, "--text %s: read error", path);
    return CLI_FAIL;
  }
  /* the held-out tail: 10%, and at least one window */
  int64_t tail = (int64_t)n / 10 > T + 1 ? (int64_t)n / 10 : T + 1;
  if ((int64_t)n - tail < 2 * (T + 1)) {
    free(buf);
    cli_error(cmd, "--text %s: %zu bytes is too short for --context %lld (need %lld)", path, n,
              (long long)T, (long long)(tail + 2 * (T + 1)));
    return CLI_FAIL;
  }
  d->bytes = buf;
  d->n = (int64_t)n;
  d->n_train = (int64_t)n - tail;
  return CLI_OK;
}

/* ids / targets [B,T] from windows starting at starts[b]. */
static void fill_batch(const text_data* d, const int64_t* starts, int64_t B, int64_t T,
                       int32_t* ids, int32_t* targets) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      ids[b * T + t] = d->bytes[starts[b] + t];
      targets[b * T + t] = d->bytes[starts[b] + t + 1];
    }
}

/* ------------------------------------------------------------ the run */

typedef struct text_run {
  const char* cmd;
  text_args* a;
  text_data data;
  const char* device;
  rlx_graph* g; /* the training graph */
  rlx_trainer* t;
  rlx_graph* geval; /* the same graph again (the trainer may extend g) */
  rlx_exec* eval;   /* geval, forward only, for the validation loss */
  int32_t *ids, *targets;
  int64_t* starts;
  uint64_t rng;
  train_curve curve;
  FILE* log;
  float val;
} text_run;

static int build_and_compile(text_run* r) {
  text_args* a = r->a;
  rlx_tensor loss;
  rlx_status s = rlx_graph_create(&r->g);
  if (s == RLX_OK) s = gpt_build_train(r->g, &a->model, a->batch, a->model.ctx, &loss, NULL);
  if (s != RLX_OK) {
    cli_error(r->cmd, "building the model: %s (%s)", r->g ? rlx_graph_last_error(r->g) : "",
              rlx_status_name(s));
    return CLI_FAIL;
  }
  rlx_compile_options co;
  rlx_compile_options_init(&co);
  co.threads = (int32_t)a->threads;
  rlx_train_options to;
  rlx_train_options_init(&to, RLX_OPTIMIZER_ADAMW);
  to.lr = (float)a->lr;
  to.clip_norm = 1.0f;
  int quiet = cli_quiet_begin();
  s = rlx_train_compile(r->g, loss, r->device, &co, &to, &r->t);
  cli_quiet_end(quiet);
  if (s != RLX_OK) {
    cli_error(r->cmd, "compiling the training step on %s: %s (%s)", r->device,
              rlx_graph_last_error(r->g), rlx_status_name(s));
    return CLI_FAIL;
  }
  s = rlx_graph_create(&r->geval);
  if (s == RLX_OK) s = gpt_build_train(r->geval, &a->model, a->batch, a->model.ctx, &loss, NULL);
  quiet = cli_quiet_begin();
  if (s == RLX_OK) s = rlx_compile(r->geval, r->device, &co, &r->eval);
  cli_quiet_end(quiet);
  if (s != RLX_OK) {
    cli_error(r->cmd, "compiling the validation pass: %s",
              r->geval ? rlx_graph_last_error(r->geval) : "out of memory");
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* GPT-2's init from --seed, into the trainer. */
static int init_params(text_run* r) {
  const gpt_config* c = &r->a->model;
  int rc = CLI_OK;
  for (int32_t i = 0; i < gpt_param_count(c) && rc == CLI_OK; i++) {
    gpt_param p;
    gpt_param_get(c, i, &p);
    float* buf = malloc(sizeof(float) * (size_t)p.numel);
    if (!buf) return CLI_FAIL;
    gpt_param_init(c, &p, r->a->seed, buf);
    if (rlx_trainer_set_param(r->t, p.name, RLX_F32, buf, sizeof(float) * (size_t)p.numel) !=
        RLX_OK) {
      cli_error(r->cmd, "param %s: %s", p.name, rlx_trainer_last_error(r->t));
      rc = CLI_FAIL;
    }
    free(buf);
  }
  return rc;
}

/* Copies the trainer's current params into the validation executable. */
static int sync_eval_params(text_run* r) {
  const gpt_config* c = &r->a->model;
  int rc = CLI_OK;
  for (int32_t i = 0; i < gpt_param_count(c) && rc == CLI_OK; i++) {
    gpt_param p;
    gpt_param_get(c, i, &p);
    size_t bytes = sizeof(float) * (size_t)p.numel;
    float* buf = malloc(bytes);
    if (!buf) return CLI_FAIL;
    if (rlx_trainer_read_param(r->t, p.name, RLX_F32, buf, bytes) != RLX_OK) {
      cli_error(r->cmd, "reading param %s: %s", p.name, rlx_trainer_last_error(r->t));
      rc = CLI_FAIL;
    } else if (rlx_exec_set_param(r->eval, p.name, RLX_F32, buf, bytes) != RLX_OK) {
      cli_error(r->cmd, "param %s: %s", p.name, rlx_exec_last_error(r->eval));
      rc = CLI_FAIL;
    }
    free(buf);
  }
  return rc;
}

static int set_batch(text_run* r, rlx_exec* e) {
  int64_t B = r->a->batch, T = r->a->model.ctx;
  rlx_dim s[2] = {B, T};
  size_t bytes = sizeof(int32_t) * (size_t)(B * T);
  fill_batch(&r->data, r->starts, B, T, r->ids, r->targets);
  rlx_status st = e ? rlx_exec_set_input(e, "ids", RLX_I32, s, 2, r->ids, bytes)
                    : rlx_trainer_set_input(r->t, "ids", RLX_I32, s, 2, r->ids, bytes);
  if (st == RLX_OK)
    st = e ? rlx_exec_set_input(e, "targets", RLX_I32, s, 2, r->targets, bytes)
           : rlx_trainer_set_input(r->t, "targets", RLX_I32, s, 2, r->targets, bytes);
  if (st != RLX_OK) {
    cli_error(r->cmd, "setting the batch: %s",
              e ? rlx_exec_last_error(e) : rlx_trainer_last_error(r->t));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* The validation loss: the mean over up to 8 batches of windows spread
 * evenly over the held-out tail. */
static int validate(text_run* r) {
  int64_t B = r->a->batch, T = r->a->model.ctx;
  int64_t first = r->data.n_train, span = r->data.n - first - (T + 1);
  int64_t windows = span / (T / 2 > 0 ? T / 2 : 1) + 1, batches = (windows + B - 1) / B;
  if (batches > 8) batches = 8;
  if (sync_eval_params(r) != CLI_OK) return CLI_FAIL;
  double total = 0;
  for (int64_t k = 0; k < batches; k++) {
    for (int64_t b = 0; b < B; b++) {
      int64_t w = k * B + b, all = batches * B;
      r->starts[b] = first + (all > 1 ? span * w / (all - 1) : 0);
    }
    float loss = 0;
    if (set_batch(r, r->eval) != CLI_OK || rlx_exec_run(r->eval) != RLX_OK ||
        rlx_exec_read_output(r->eval, 0, RLX_F32, &loss, sizeof loss) != RLX_OK) {
      cli_error(r->cmd, "validation: %s", rlx_exec_last_error(r->eval));
      return CLI_FAIL;
    }
    total += loss;
  }
  r->val = (float)(total / (double)batches);
  return CLI_OK;
}

/* Warm up over the first 5% (at most 100 steps), then a cosine down to a
 * tenth of the peak, by steps or by elapsed time. */
static double schedule(double peak, double frac) {
  const double warm = 0.05;
  if (frac < warm) return peak * (0.1 + 0.9 * frac / warm);
  double x = (frac - warm) / (1 - warm);
  return peak * (0.1 + 0.9 * 0.5 * (1 + cos(3.141592653589793 * (x > 1 ? 1 : x))));
}

static int train_step(text_run* r, int64_t step, double frac) {
  int64_t B = r->a->batch, T = r->a->model.ctx, room = r->data.n_train - (T + 1);
  for (int64_t b = 0; b < B; b++)
    r->starts[b] = (int64_t)(cli_rng_next(&r->rng) % (uint64_t)(room + 1));
  float loss = 0;
  if (set_batch(r, NULL) != CLI_OK) return CLI_FAIL;
  if (rlx_trainer_set_lr(r->t, (float)schedule(r->a->lr, frac)) != RLX_OK ||
      rlx_trainer_step(r->t, &loss) != RLX_OK) {
    cli_error(r->cmd, "step %lld: %s", (long long)step, rlx_trainer_last_error(r->t));
    return CLI_FAIL;
  }
  train_log_row(r->log, step, loss);
  if (train_curve_add(&r->curve, step, loss) != CLI_OK) return CLI_FAIL;
  if (!isfinite(loss)) {
    cli_error(r->cmd, "step %lld: the loss is %g (try a smaller --lr)", (long long)step,
              (double)loss);
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int save_checkpoint(text_run* r, int quiet);

static int train_loop(text_run* r, double* out_ms, int64_t* out_steps) {
  text_args* a = r->a;
  double budget = a->minutes > 0 ? a->minutes * 60000.0 : 0;
  int64_t total = budget > 0 ? 0 : a->steps;
  train_progress bar;
  train_progress_init(&bar, total, budget, (double)(a->batch * a->model.ctx), "tok/s");
  int64_t step = 0;
  int rc = CLI_OK;
  while (rc == CLI_OK) {
    double elapsed = cli_now_ms() - bar.start_ms;
    double frac = total > 0 ? (double)step / (double)total : elapsed / budget;
    if (frac >= 1) break;
    rc = train_step(r, ++step, frac);
    int eval_now = a->eval_every > 0 && step % a->eval_every == 0;
    if (rc == CLI_OK && eval_now) rc = validate(r);
    if (rc == CLI_OK && a->save && a->save_every > 0 && step % a->save_every == 0)
      rc = save_checkpoint(r, 1);
    /* the last step's line comes after the final validation, below */
    if (rc == CLI_OK && step != total)
      train_progress_update(&bar, step, train_curve_tail_mean(&r->curve, 10), r->val);
  }
  *out_ms = cli_now_ms() - bar.start_ms;
  *out_steps = step;
  if (rc == CLI_OK) rc = validate(r);
  if (rc == CLI_OK) train_progress_update(&bar, step, train_curve_tail_mean(&r->curve, 10), r->val);
  train_progress_end(&bar);
  return rc;
}

static int save_checkpoint(text_run* r, int quiet) {
  char path[4096], err[512];
  if (train_make_dir(r->cmd, r->a->save) != CLI_OK) return CLI_FAIL;
  if (rlx_trainer_save(r->t, r->a->save) != RLX_OK) {
    cli_error(r->cmd, "--save %s: %s", r->a->save, rlx_trainer_last_error(r->t));
    return CLI_FAIL;
  }
  snprintf(path, sizeof path, "%s/gpt.cfg", r->a->save);
  if (gpt_config_save(path, &r->a->model, err, sizeof err) != 0) {
    cli_error(r->cmd, "--save: %s", err);
    return CLI_FAIL;
  }
  if (!quiet)
    fprintf(stderr, "checkpoint: %s (try: rlx generate %s --prompt \"...\")\n", r->a->save,
            r->a->save);
  return CLI_OK;
}

static void print_summary(text_run* r, double ms, int64_t steps) {
  text_args* a = r->a;
  char dur[32];
  float first = r->curve.n ? r->curve.loss[0] : NAN;
  printf("trained %lld steps in %s on %s: %.0f tokens/s\n", (long long)steps,
         train_format_duration(ms, dur, sizeof dur), r->device,
         ms > 0 ? (double)(steps * a->batch * a->model.ctx) / (ms / 1000.0) : 0.0);
  printf("loss: first step %.3f, last 10 steps %.3f, held-out %.3f (uniform guess: %.3f)\n",
         (double)first, (double)train_curve_tail_mean(&r->curve, 10), (double)r->val,
         log((double)a->model.vocab));
}

static int run(text_run* r) {
  text_args* a = r->a;
  int64_t B = a->batch, T = a->model.ctx;
  if (read_text(r->cmd, a->text, T, &r->data) != CLI_OK) return CLI_FAIL;
  if (train_resolve_device(r->cmd, a->device, &r->device) != CLI_OK) return CLI_FAIL;
  r->ids = malloc(sizeof(int32_t) * (size_t)(B * T));
  r->targets = malloc(sizeof(int32_t) * (size_t)(B * T));
  r->starts = malloc(sizeof(int64_t) * (size_t)B);
  if (!r->ids || !r->targets || !r->starts) return CLI_FAIL;
  r->rng = a->seed ^ 0xd1b54a32d192ed03ull;
  r->val = -1;
  fprintf(stderr,
          "rlx train: GPT %lld layers, %lld heads, dim %lld, context %lld (%.2fM params) "
          "on %s; %lld bytes of text (%lld held out)\n",
          (long long)a->model.layers, (long long)a->model.heads, (long long)a->model.dim,
          (long long)T, (double)gpt_param_total(&a->model) / 1e6, r->device, (long long)r->data.n,
          (long long)(r->data.n - r->data.n_train));
  if (build_and_compile(r) != CLI_OK || init_params(r) != CLI_OK) return CLI_FAIL;
  if (a->log && !(r->log = train_log_open(r->cmd, a->log))) return CLI_FAIL;
  double ms = 0;
  int64_t steps = 0;
  int rc = train_loop(r, &ms, &steps);
  if (rc == CLI_OK) print_summary(r, ms, steps);
  if (rc == CLI_OK && a->save) rc = save_checkpoint(r, 0);
  if (rc == CLI_OK && a->plot) rc = train_write_plot(r->cmd, a->plot, &r->curve, 1);
  return rc;
}

int cmd_train_text(int argc, char** argv) {
  const char* cmd = "train";
  text_args a;
  memset(&a, 0, sizeof a);
  a.device = "best";
  a.steps = 500;
  a.batch = 16;
  a.eval_every = 100;
  a.lr = 3e-3;
  a.model = (gpt_config){256, 64, 2, 4, 128};
  int help = 0;
  /* --help anywhere, even where an option's value would go (--text --help) */
  for (int i = 1; i < argc; i++) help |= cli_is_help(argv[i]);
  int rc = help ? CLI_OK : parse_args(cmd, argc, argv, &a, &help);
  if (help) {
    usage(stdout);
    return CLI_OK;
  }
  if (rc != CLI_OK) return rc;
  text_run r;
  memset(&r, 0, sizeof r);
  r.cmd = cmd;
  r.a = &a;
  rc = run(&r);
  if (r.log) fclose(r.log);
  rlx_trainer_destroy(r.t);
  rlx_exec_destroy(r.eval);
  rlx_graph_destroy(r.g);
  rlx_graph_destroy(r.geval);
  free(r.data.bytes);
  free(r.ids);
  free(r.targets);
  free(r.starts);
  train_curve_free(&r.curve);
  return rc;
}
