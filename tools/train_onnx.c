/* rlx train MODEL.onnx: fine-tunes an exported model. Every floating-point
 * initializer is trained unless frozen; each step runs the whole batch
 * given with --input (no shuffling, so a run is deterministic); the loss
 * compares output --output with --target. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "train_util.h"

#define MAX_FROZEN 64

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx train MODEL.onnx --input NAME=F.npy ... --target F.npy\n"
          "                 --loss cross_entropy|mse --output NAME\n"
          "                 --optimizer sgd|adam|adamw [--lr X] [--weight-decay X]\n"
          "                 [--momentum X] [--freeze NAME]... --steps N [--device D]\n"
          "                 [--log FILE.csv] [--save DIR]\n"
          "\n"
          "Fine-tunes MODEL.onnx: every floating-point initializer is trained unless\n"
          "frozen; each step runs the whole batch given with --input. The loss compares\n"
          "output NAME with the targets: cross_entropy is the mean over all positions of\n"
          "the logits' last axis against integer targets (ignore index -100), mse the\n"
          "mean squared error. Optimizer defaults are PyTorch's (lr 1e-3, SGD 1e-2;\n"
          "betas 0.9/0.999, eps 1e-8; weight decay 0, AdamW 0.01).\n"
          "\n"
          "options:\n"
          "  --device D        cpu (default), cuda, vulkan, webgpu or best\n"
          "  --log FILE.csv    header step,loss; one row per step, the loss of that\n"
          "                    step's forward pass, before its update\n"
          "  --save DIR        each trained param as DIR/NAME.npy ('/' in NAME -> '_')\n"
          "  --freeze NAME     keep initializer NAME fixed (repeatable)\n");
}

typedef struct onnx_args {
  const char* model;
  const char* device;
  cli_inputs inputs;
  const char* target;
  const char* loss;
  const char* output;
  const char* optimizer;
  double lr, weight_decay, momentum; /* NAN: not given */
  const char* frozen[MAX_FROZEN];
  int32_t n_frozen;
  int64_t steps;
  const char* log;
  const char* save;
} onnx_args;

static int parse_value_opt(const char* cmd, int argc, char** argv, int* i, onnx_args* a) {
  const char* v = NULL;
  int m;
  const char** strings[] = {&a->target, &a->loss, &a->output, &a->optimizer,
                            &a->device, &a->log,  &a->save};
  const char* names[] = {"--target", "--loss", "--output", "--optimizer",
                         "--device", "--log",  "--save"};
  for (int k = 0; k < 7; k++)
    if ((m = cli_opt_value(cmd, argc, argv, i, names[k], &v)) != 0) {
      *strings[k] = v;
      return m < 0 ? CLI_USAGE : CLI_OK;
    }
  double* reals[] = {&a->lr, &a->weight_decay, &a->momentum};
  const char* real_names[] = {"--lr", "--weight-decay", "--momentum"};
  for (int k = 0; k < 3; k++)
    if ((m = cli_opt_value(cmd, argc, argv, i, real_names[k], &v)) != 0)
      return m < 0 ? CLI_USAGE : cli_parse_f64(cmd, real_names[k], v, reals[k]);
  if ((m = cli_opt_value(cmd, argc, argv, i, "--steps", &v)) != 0)
    return m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--steps", v, 1, INT64_C(1) << 40, &a->steps);
  if ((m = cli_opt_value(cmd, argc, argv, i, "--input", &v)) != 0)
    return m < 0 ? CLI_USAGE : cli_inputs_add(cmd, &a->inputs, v);
  if ((m = cli_opt_value(cmd, argc, argv, i, "--freeze", &v)) != 0) {
    if (m < 0) return CLI_USAGE;
    if (a->n_frozen == MAX_FROZEN) {
      cli_error(cmd, "too many --freeze (at most %d)", MAX_FROZEN);
      return CLI_USAGE;
    }
    a->frozen[a->n_frozen++] = v;
    return CLI_OK;
  }
  if (argv[*i][0] == '-' && argv[*i][1] != '\0') {
    cli_error(cmd, "unknown option '%s' (see rlx train MODEL.onnx --help)", argv[*i]);
    return CLI_USAGE;
  }
  if (a->model) {
    cli_error(cmd, "more than one MODEL ('%s' and '%s')", a->model, argv[*i]);
    return CLI_USAGE;
  }
  a->model = argv[*i];
  return CLI_OK;
}

static int check_args(const char* cmd, const onnx_args* a) {
  const char* missing = !a->target      ? "--target"
                        : !a->loss      ? "--loss"
                        : !a->output    ? "--output"
                        : !a->optimizer ? "--optimizer"
                        : a->steps <= 0 ? "--steps"
                                        : NULL;
  if (missing) {
    cli_error(cmd, "missing %s (see rlx train MODEL.onnx --help)", missing);
    return CLI_USAGE;
  }
  if (strcmp(a->loss, "cross_entropy") != 0 && strcmp(a->loss, "mse") != 0) {
    cli_error(cmd, "--loss %s: expected cross_entropy or mse", a->loss);
    return CLI_USAGE;
  }
  if (strcmp(a->optimizer, "sgd") != 0 && strcmp(a->optimizer, "adam") != 0 &&
      strcmp(a->optimizer, "adamw") != 0) {
    cli_error(cmd, "--optimizer %s: expected sgd, adam or adamw", a->optimizer);
    return CLI_USAGE;
  }
  if (!isnan(a->momentum) && strcmp(a->optimizer, "sgd") != 0) {
    cli_error(cmd, "--momentum is an SGD option (Adam's betas are PyTorch's defaults)");
    return CLI_USAGE;
  }
  if ((!isnan(a->lr) && !(a->lr > 0)) || (!isnan(a->weight_decay) && !(a->weight_decay >= 0)) ||
      (!isnan(a->momentum) && !(a->momentum >= 0))) {
    cli_error(cmd, "--lr must be > 0, --weight-decay and --momentum >= 0");
    return CLI_USAGE;
  }
  return CLI_OK;
}

static int parse_args(const char* cmd, int argc, char** argv, onnx_args* a, int* help) {
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      *help = 1;
      return CLI_OK;
    }
    int rc = parse_value_opt(cmd, argc, argv, &i, a);
    if (rc != CLI_OK) return rc;
  }
  if (!a->model) {
    cli_error(cmd, "missing MODEL.onnx");
    return CLI_USAGE;
  }
  return check_args(cmd, a);
}

/* ------------------------------------------------------------ the graph */

/* The graph output whose name is `name`, or an error listing them. */
static int find_output(const char* cmd, const rlx_graph* g, const char* name, rlx_tensor* out) {
  char names[1024] = "";
  size_t used = 0;
  for (int32_t i = 0; i < rlx_graph_output_count(g); i++) {
    rlx_value_info info;
    if (rlx_graph_get_output(g, i, &info) != RLX_OK) continue;
    const char* n = info.name ? info.name : "?";
    if (strcmp(n, name) == 0) {
      *out = info.tensor;
      return CLI_OK;
    }
    int w = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", n);
    if (w > 0 && used + (size_t)w < sizeof names) used += (size_t)w;
  }
  cli_error(cmd, "--output %s: the model has no such output (outputs: %s)", name, names);
  return CLI_FAIL;
}

/* The target input (named so it cannot clash with a model input) and the
 * loss on top of the chosen output. The target file's values are returned
 * in *target, converted to what the loss reads. */
static int add_loss(const char* cmd, rlx_graph* g, const onnx_args* a, rlx_tensor out,
                    cli_input* target, rlx_tensor* loss) {
  rlx_dtype out_dt;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
  if (rlx_graph_tensor_type(g, out, &out_dt, &rank, shape) != RLX_OK) return CLI_FAIL;
  int ce = strcmp(a->loss, "cross_entropy") == 0;
  if (ce && rlx_dtype_is_float(target->dtype)) {
    cli_error(cmd, "--target %s: cross_entropy needs integer class ids, got %s", target->path,
              rlx_dtype_name(target->dtype));
    return CLI_FAIL;
  }
  if (!ce && !rlx_dtype_is_float(target->dtype)) {
    cli_error(cmd, "--target %s: mse needs float targets, got %s", target->path,
              rlx_dtype_name(target->dtype));
    return CLI_FAIL;
  }
  rlx_dtype want = ce ? (target->dtype == RLX_I64 ? RLX_I64 : RLX_I32) : out_dt;
  if (want != target->dtype) { /* e.g. f64 targets for an f32 output, u8 class ids */
    int64_t n = 1;
    for (int32_t d = 0; d < target->rank; d++) n *= target->shape[d];
    void* conv = malloc((size_t)n * rlx_dtype_size(want) + 1);
    if (!conv || rlx_dtype_convert(conv, want, target->data, target->dtype, n) != RLX_OK) {
      free(conv);
      cli_error(cmd, "--target %s: cannot convert to %s", target->path, rlx_dtype_name(want));
      return CLI_FAIL;
    }
    rlx_free(target->data);
    target->data = conv; /* freed by cli_inputs_free through rlx_free (free) */
    target->dtype = want;
    target->bytes = (size_t)n * rlx_dtype_size(want);
  }
  rlx_dim ts[RLX_MAX_RANK];
  for (int32_t d = 0; d < target->rank; d++) ts[d] = target->shape[d];
  rlx_tensor t;
  rlx_status s = rlx_graph_add_input(g, target->name, want, ts, target->rank, &t);
  if (s == RLX_OK)
    s = ce ? rlx_graph_add_cross_entropy(g, out, t, -100, 0.0f, loss)
           : rlx_graph_add_mse_loss(g, out, t, loss);
  if (s != RLX_OK) {
    cli_error(cmd, "the %s loss of output %s: %s", a->loss, a->output, rlx_graph_last_error(g));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ params */

typedef struct param_value {
  char* name;
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
  int trained;
} param_value;

typedef struct param_values {
  int32_t n;
  param_value* items;
} param_values;

static void param_values_free(param_values* p) {
  for (int32_t i = 0; i < p->n; i++) {
    free(p->items[i].name);
    free(p->items[i].data);
  }
  free(p->items);
  memset(p, 0, sizeof *p);
}

static int is_frozen(const onnx_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_frozen; i++)
    if (strcmp(a->frozen[i], name) == 0) return 1;
  return 0;
}

/* Fills out with every param's name, type and concrete shape, and makes
 * outs[i] a Reshape of param i to its own shape (so it can be an output). */
static int list_params(const char* cmd, rlx_graph* g, const onnx_args* a, const cli_bindings* b,
                       param_values* out, rlx_tensor* outs) {
  for (int32_t i = 0; i < rlx_graph_param_count(g); i++) {
    rlx_value_info info;
    if (rlx_graph_get_param(g, i, &info) != RLX_OK) return CLI_FAIL;
    param_value* p = &out->items[out->n++];
    p->name = strdup(info.name);
    p->dtype = info.dtype;
    p->rank = info.rank;
    p->trained = rlx_dtype_is_float(info.dtype) && !is_frozen(a, info.name);
    if (!p->name || cli_concrete_shape(cmd, b, &info, info.name, p->shape) != CLI_OK)
      return CLI_FAIL;
    if (rlx_graph_add_reshape(g, info.tensor, info.shape, info.rank, &outs[i]) != RLX_OK) {
      cli_error(cmd, "param %s: %s", info.name, rlx_graph_last_error(g));
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* Compiles g on the CPU, gives it the file's initializers and the inputs,
 * and runs it once. */
static int run_reader(const char* cmd, rlx_graph* g, const onnx_args* a, const cli_bindings* b,
                      rlx_exec** e) {
  cli_model_opts mo;
  cli_model_opts_init(&mo);
  mo.device = "cpu";
  if (cli_compile(cmd, g, &mo, e) != CLI_OK) return CLI_FAIL;
  char* err = NULL;
  if (rlx_onnx_set_params(*e, a->model, &err) != RLX_OK) {
    cli_error(cmd, "%s: %s", a->model, err ? err : "cannot read the initializers");
    rlx_free(err);
    return CLI_FAIL;
  }
  if (cli_set_inputs(cmd, g, *e, b, &a->inputs, 0) != CLI_OK) return CLI_FAIL;
  if (rlx_exec_run(*e) != RLX_OK) {
    cli_error(cmd, "reading the initializers: %s", rlx_exec_last_error(*e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int read_outputs(const char* cmd, const rlx_exec* e, param_values* out) {
  for (int32_t i = 0; i < out->n; i++) {
    param_value* p = &out->items[i];
    int64_t count = 1;
    for (int32_t d = 0; d < p->rank; d++) count *= p->shape[d];
    p->bytes = (size_t)count * rlx_dtype_size(p->dtype);
    p->data = malloc(p->bytes + 1);
    if (!p->data || rlx_exec_read_output(e, i, p->dtype, p->data, p->bytes) != RLX_OK) {
      cli_error(cmd, "reading initializer %s: %s", p->name, rlx_exec_last_error(e));
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* The initializers' values, read through the public API: a second copy of
 * the graph whose outputs are its params (each through a Reshape to its own
 * shape), compiled on the CPU, given the file's initializers and run. */
static int read_initializers(const char* cmd, const onnx_args* a, const cli_bindings* b,
                             param_values* out) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  int rc = cli_load_graph(cmd, a->model, &g);
  int32_t n = rc == CLI_OK ? rlx_graph_param_count(g) : 0;
  rlx_tensor* outs = calloc((size_t)(n ? n : 1), sizeof *outs);
  out->items = calloc((size_t)(n ? n : 1), sizeof *out->items);
  if (rc == CLI_OK && (!outs || !out->items)) rc = CLI_FAIL;
  if (rc == CLI_OK && n > 0) rc = list_params(cmd, g, a, b, out, outs);
  if (rc == CLI_OK && n > 0 && rlx_graph_set_outputs(g, outs, n) != RLX_OK) rc = CLI_FAIL;
  if (rc == CLI_OK && n > 0) rc = run_reader(cmd, g, a, b, &e);
  if (rc == CLI_OK) rc = read_outputs(cmd, e, out);
  free(outs);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return rc;
}

/* Every --freeze must name a float initializer. */
static int check_frozen(const char* cmd, const onnx_args* a, const param_values* p) {
  for (int32_t f = 0; f < a->n_frozen; f++) {
    int found = 0;
    for (int32_t i = 0; i < p->n && !found; i++)
      found = strcmp(p->items[i].name, a->frozen[f]) == 0;
    if (!found) {
      cli_error(cmd, "--freeze %s: the model has no initializer of that name", a->frozen[f]);
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ training */

static void train_options(const onnx_args* a, rlx_train_options* to) {
  rlx_optimizer opt = strcmp(a->optimizer, "sgd") == 0    ? RLX_OPTIMIZER_SGD
                      : strcmp(a->optimizer, "adam") == 0 ? RLX_OPTIMIZER_ADAM
                                                          : RLX_OPTIMIZER_ADAMW;
  rlx_train_options_init(to, opt);
  if (!isnan(a->lr)) to->lr = (float)a->lr;
  if (!isnan(a->weight_decay)) {
    to->sgd.weight_decay = (float)a->weight_decay;
    to->adam.weight_decay = (float)a->weight_decay;
  }
  if (!isnan(a->momentum)) to->sgd.momentum = (float)a->momentum;
  to->frozen = a->frozen;
  to->n_frozen = a->n_frozen;
}

static int set_values(const char* cmd, rlx_trainer* t, const param_values* p, const cli_inputs* in,
                      const cli_input* target) {
  for (int32_t i = 0; i < p->n; i++)
    if (rlx_trainer_set_param(t, p->items[i].name, p->items[i].dtype, p->items[i].data,
                              p->items[i].bytes) != RLX_OK) {
      cli_error(cmd, "param %s: %s", p->items[i].name, rlx_trainer_last_error(t));
      return CLI_FAIL;
    }
  for (int32_t i = 0; i <= in->n; i++) {
    const cli_input* it = i < in->n ? &in->items[i] : target;
    rlx_dim s[RLX_MAX_RANK];
    for (int32_t d = 0; d < it->rank; d++) s[d] = it->shape[d];
    if (rlx_trainer_set_input(t, it->name, it->dtype, s, it->rank, it->data, it->bytes) != RLX_OK) {
      cli_error(cmd, "input %s: %s", it->name, rlx_trainer_last_error(t));
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

static int save_params(const char* cmd, const char* dir, rlx_trainer* t, const param_values* p) {
  if (train_make_dir(cmd, dir) != CLI_OK) return CLI_FAIL;
  int rc = CLI_OK;
  for (int32_t i = 0; i < p->n && rc == CLI_OK; i++) {
    const param_value* v = &p->items[i];
    if (!v->trained) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, v->name);
    for (char* c = path + strlen(dir) + 1; *c; c++)
      if (*c == '/') *c = '_';
    void* buf = malloc(v->bytes + 1);
    char* err = NULL;
    if (!buf || rlx_trainer_read_param(t, v->name, v->dtype, buf, v->bytes) != RLX_OK) {
      cli_error(cmd, "reading param %s: %s", v->name, rlx_trainer_last_error(t));
      rc = CLI_FAIL;
    } else if (rlx_npy_save(path, v->dtype, v->rank, v->shape, buf, v->bytes, &err) != RLX_OK) {
      cli_error(cmd, "--save: %s", err ? err : path);
      rc = CLI_FAIL;
    }
    rlx_free(err);
    free(buf);
  }
  return rc;
}

static int train_steps(const char* cmd, const onnx_args* a, rlx_trainer* t, const char* device) {
  FILE* log = a->log ? train_log_open(cmd, a->log) : NULL;
  if (a->log && !log) return CLI_FAIL;
  double samples =
      a->inputs.n > 0 && a->inputs.items[0].rank > 0 ? (double)a->inputs.items[0].shape[0] : 1;
  train_progress bar;
  train_progress_init(&bar, a->steps, 0, samples, "samples/s");
  float loss = NAN, first = NAN;
  int rc = CLI_OK;
  for (int64_t step = 1; step <= a->steps && rc == CLI_OK; step++) {
    if (rlx_trainer_step(t, &loss) != RLX_OK) {
      cli_error(cmd, "step %lld: %s", (long long)step, rlx_trainer_last_error(t));
      rc = CLI_FAIL;
      break;
    }
    if (step == 1) first = loss;
    train_log_row(log, step, loss);
    train_progress_update(&bar, step, loss, -1);
  }
  train_progress_end(&bar);
  if (log) fclose(log);
  if (rc == CLI_OK)
    printf("trained %lld steps on %s: loss %.6g at step 1, %.6g at step %lld\n",
           (long long)a->steps, device, (double)first, (double)loss, (long long)a->steps);
  return rc;
}

static int run(const char* cmd, onnx_args* a, cli_input* target) {
  rlx_graph* g = NULL;
  rlx_trainer* t = NULL;
  cli_bindings b = {0};
  param_values params = {0};
  rlx_tensor out = RLX_NONE, loss = RLX_NONE;
  const char* device = NULL;
  int rc = cli_load_graph(cmd, a->model, &g);
  if (rc == CLI_OK) rc = cli_bind_from_inputs(cmd, g, &a->inputs, &b);
  if (rc == CLI_OK) rc = find_output(cmd, g, a->output, &out);
  if (rc == CLI_OK) rc = add_loss(cmd, g, a, out, target, &loss);
  if (rc == CLI_OK) rc = read_initializers(cmd, a, &b, &params);
  if (rc == CLI_OK) rc = check_frozen(cmd, a, &params);
  if (rc == CLI_OK) rc = train_resolve_device(cmd, a->device, &device);
  if (rc == CLI_OK) {
    rlx_compile_options co;
    rlx_compile_options_init(&co);
    co.symbol_names = (const char* const*)b.names;
    co.symbol_sizes = b.sizes;
    co.n_symbols = b.n;
    rlx_train_options to;
    train_options(a, &to);
    int quiet = cli_quiet_begin();
    rlx_status s = rlx_train_compile(g, loss, device, &co, &to, &t);
    cli_quiet_end(quiet);
    if (s != RLX_OK) {
      cli_error(cmd, "compiling the training step on %s: %s (%s)", device, rlx_graph_last_error(g),
                rlx_status_name(s));
      rc = CLI_FAIL;
    }
  }
  if (rc == CLI_OK) rc = set_values(cmd, t, &params, &a->inputs, target);
  if (rc == CLI_OK) rc = train_steps(cmd, a, t, device);
  if (rc == CLI_OK && a->save) rc = save_params(cmd, a->save, t, &params);
  param_values_free(&params);
  cli_bindings_free(&b);
  rlx_trainer_destroy(t);
  rlx_graph_destroy(g);
  return rc;
}

int cmd_train_onnx(int argc, char** argv) {
  const char* cmd = "train";
  onnx_args a;
  memset(&a, 0, sizeof a);
  a.device = "cpu";
  a.lr = a.weight_decay = a.momentum = NAN;
  int help = 0;
  /* --help anywhere, even where an option's value would go (--text --help) */
  for (int i = 1; i < argc; i++) help |= cli_is_help(argv[i]);
  int rc = help ? CLI_OK : parse_args(cmd, argc, argv, &a, &help);
  if (help) {
    usage(stdout);
    cli_inputs_free(&a.inputs);
    return CLI_OK;
  }
  /* the targets, loaded as an input named so it cannot clash with the model's */
  cli_inputs target = {0};
  if (rc == CLI_OK) {
    size_t len = strlen(a.target) + 32;
    char* spec = malloc(len);
    snprintf(spec, len, "rlx_train_target=%s", a.target);
    rc = cli_inputs_add(cmd, &target, spec);
    free(spec);
  }
  if (rc == CLI_OK) rc = run(cmd, &a, &target.items[0]);
  cli_inputs_free(&target);
  cli_inputs_free(&a.inputs);
  return rc;
}
