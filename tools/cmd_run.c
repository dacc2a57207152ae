/* rlx run: compile a graph, feed it, run it once, print or save the outputs,
 * and optionally compare them with expected tensors (--expect). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "io/npy.h"
#include "io/onnx.h"
#include "ir/dtype.h"

#define EXPECT_RTOL 1e-3
#define EXPECT_ATOL 1e-5
#define MAX_EXPECT 64

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx run FILE [options]\n"
          "\n"
          "Compiles FILE (a graph in the rlx text format, or an ONNX model .onnx whose\n"
          "initializers become the params), feeds every input (from --input or random),\n"
          "runs it once and prints each output: index, name, dtype, shape, the first\n"
          "values and checksums (sum and sum of absolute values).\n"
          "\n"
          "options:\n");
  cli_model_opts_help(f, CLI_OPT_ALL);
  fprintf(f,
          "  --expect FILE       compare the next output (in order) with FILE (.pb ONNX\n"
          "                      TensorProto or .npy): same dtype and shape, floats within\n"
          "                      |got - want| <= 1e-5 + 1e-3 |want|, integers exactly; a\n"
          "                      mismatch exits with status 1\n"
          "  --save DIR          also write output i to DIR/out<i>.npy (bf16/f16 as f32)\n"
          "  --report            print the dispatch report (native / fused / decomposed /\n"
          "                      host fallback per op kind, arena bytes, launches)\n");
}

/* ------------------------------------------------------------ --expect */

static int read_expected(const char* cmd, const char* path, rlx_host_tensor* t) {
  size_t n = strlen(path);
  memset(t, 0, sizeof *t);
  if (n > 4 && strcmp(path + n - 4, ".npy") == 0) {
    rlx_error err = {{0}};
    if (rlx_npy_read(path, &err, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes) == RLX_OK)
      return CLI_OK;
    cli_error(cmd, "--expect %s: %s", path, err.msg);
    return CLI_FAIL;
  }
  char* msg = NULL;
  rlx_status s = rlx_onnx_read_tensor(path, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes,
                                      &msg);
  if (s != RLX_OK) cli_error(cmd, "--expect %s: %s", path, msg ? msg : rlx_status_name(s));
  rlx_free(msg);
  return s == RLX_OK ? CLI_OK : CLI_FAIL;
}

/* Compares output k with the tensor in path; prints one line either way. */
static int expect_output(const char* cmd, const rlx_exec* e, int32_t k, const char* path) {
  rlx_host_tensor want, got;
  rlx_error err = {{0}};
  if (read_expected(cmd, path, &want) != CLI_OK) return CLI_FAIL;
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  int rc = CLI_FAIL;
  if (k >= rlx_exec_output_count(e)) {
    cli_error(cmd, "--expect %s: the graph has no output %d", path, (int)k);
  } else if (rlx_exec_output_type(e, k, &dt, &rank, shape) != RLX_OK ||
             rlx_host_alloc(&got, dt, rank, shape, &err) != RLX_OK) {
    cli_error(cmd, "output %d: %s", (int)k, err.msg[0] ? err.msg : rlx_exec_last_error(e));
  } else {
    int same = dt == want.dtype && rank == want.rank;
    for (int32_t i = 0; same && i < rank; i++) same = shape[i] == want.shape[i];
    if (!same) {
      printf("expect output %d (%s): MISMATCH: got %s rank %d, want %s rank %d\n", (int)k, path,
             rlx_dtype_name(dt), (int)rank, rlx_dtype_name(want.dtype), (int)want.rank);
    } else if (got.bytes && rlx_exec_read_output(e, k, dt, got.data, got.bytes) != RLX_OK) {
      cli_error(cmd, "output %d: %s", (int)k, rlx_exec_last_error(e));
    } else {
      int64_t n = rlx_host_numel(&got), bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < n; i++) {
        double a = rlx_load_f64(got.data, dt, i), b = rlx_load_f64(want.data, dt, i);
        int ok = rlx_dtype_is_float(dt)
                     ? (isnan(a) && isnan(b)) || a == b ||
                           fabs(a - b) <= EXPECT_ATOL + EXPECT_RTOL * fabs(b)
                     : rlx_load_i64(got.data, dt, i) == rlx_load_i64(want.data, dt, i);
        if (!ok) bad++;
        if (!isnan(a - b) && fabs(a - b) > worst) worst = fabs(a - b);
      }
      printf("expect output %d (%s): %s: %lld of %lld elements off, max abs err %.3g "
             "(rtol %g, atol %g)\n", (int)k, path, bad ? "MISMATCH" : "ok", (long long)bad,
             (long long)n, worst, EXPECT_RTOL, EXPECT_ATOL);
      rc = bad ? CLI_FAIL : CLI_OK;
    }
    rlx_host_free(&got);
  }
  free(want.data);
  return rc;
}

/* ------------------------------------------------------------ ONNX with frozen inputs */

static const cli_input* find_input(const cli_inputs* in, const char* name) {
  for (int32_t i = 0; i < in->n; i++)
    if (strcmp(in->items[i].name, name) == 0) return &in->items[i];
  return NULL;
}

/* Imports an .onnx model whose import needs some inputs' values (a Reshape
 * target fed as a graph input, as in the ONNX node tests): those given with
 * --input become constants, the rest stay inputs. Then the usual flow. */
static int prepare_frozen_onnx(const char* cmd, cli_model_opts* o, rlx_graph** out_graph,
                               rlx_exec** out_exec) {
  const char* names[CLI_MAX_INPUTS];
  rlx_host_tensor values[CLI_MAX_INPUTS];
  char needs[256];
  rlx_onnx_options opt;
  memset(&opt, 0, sizeof opt);
  opt.frozen_names = names;
  opt.frozen_values = values;
  opt.needs_input = needs;
  opt.needs_input_cap = sizeof needs;
  rlx_onnx_model* m = NULL;
  for (;;) {
    rlx_error err = {{0}};
    rlx_status s = rlx_onnx_import_file(o->file, &opt, &m, &err);
    if (s == RLX_OK) break;
    const cli_input* it = s == RLX_FAILED_PRECONDITION && needs[0] ? find_input(&o->inputs, needs)
                                                                  : NULL;
    if (!it || opt.n_frozen >= CLI_MAX_INPUTS) {
      cli_error(cmd, "%s: %s%s", o->file, err.msg,
                s == RLX_FAILED_PRECONDITION ? " (give it with --input NAME=FILE)" : "");
      return CLI_FAIL;
    }
    rlx_host_tensor* v = &values[opt.n_frozen];
    memset(v, 0, sizeof *v);
    v->dtype = it->dtype;
    v->rank = it->rank;
    memcpy(v->shape, it->shape, sizeof(int64_t) * (size_t)it->rank);
    v->data = it->data;
    v->bytes = it->bytes;
    names[opt.n_frozen++] = it->name;
  }
  cli_inputs rest; /* shallow: the items stay owned by o->inputs */
  rest.n = 0;
  for (int32_t i = 0; i < o->inputs.n; i++) {
    int frozen = 0;
    for (int32_t j = 0; j < opt.n_frozen; j++) frozen |= strcmp(names[j], o->inputs.items[i].name) == 0;
    if (!frozen) rest.items[rest.n++] = o->inputs.items[i];
  }
  rlx_graph* g = m->graph;
  m->graph = NULL;
  rlx_exec* e = NULL;
  rlx_error err = {{0}};
  int rc = CLI_OK;
  if (cli_bind_from_inputs(cmd, g, &rest, &o->bindings) != CLI_OK ||
      cli_compile(cmd, g, o->device, o->strict, &o->bindings, &e) != CLI_OK ||
      cli_set_params(cmd, g, e, &o->bindings, o->init_seed, o->params_dir, NULL) != CLI_OK) {
    rc = CLI_FAIL;
  } else if (rlx_onnx_model_set_params(m, e, &err) != RLX_OK) {
    cli_error(cmd, "%s: initializers: %s", o->file, err.msg);
    rc = CLI_FAIL;
  } else if (cli_set_inputs(cmd, g, e, &o->bindings, &rest, o->seed) != CLI_OK) {
    rc = CLI_FAIL;
  }
  rlx_onnx_model_destroy(m);
  if (rc != CLI_OK) {
    rlx_exec_destroy(e);
    rlx_graph_destroy(g);
    return rc;
  }
  fprintf(stderr, "rlx %s: %d input(s) given a value at import time:", cmd, (int)opt.n_frozen);
  for (int32_t j = 0; j < opt.n_frozen; j++) fprintf(stderr, " %s", names[j]);
  fprintf(stderr, "\n");
  *out_graph = g;
  *out_exec = e;
  return CLI_OK;
}

/* The usual flow, unless an .onnx model needs input values at import time. */
static int prepare(const char* cmd, cli_model_opts* o, rlx_graph** out_graph,
                   rlx_exec** out_exec) {
  if (cli_is_onnx(o->file)) {
    char needs[256];
    rlx_onnx_options opt;
    memset(&opt, 0, sizeof opt);
    opt.needs_input = needs;
    opt.needs_input_cap = sizeof needs;
    rlx_onnx_model* m = NULL;
    rlx_error err = {{0}};
    rlx_status s = rlx_onnx_import_file(o->file, &opt, &m, &err);
    rlx_onnx_model_destroy(m);
    if (s == RLX_FAILED_PRECONDITION && needs[0])
      return prepare_frozen_onnx(cmd, o, out_graph, out_exec);
  }
  return cli_prepare(cmd, o, 1, out_graph, out_exec);
}

int cmd_run(int argc, char** argv) {
  const char* cmd = "run";
  cli_model_opts o;
  cli_model_opts_init(&o);
  const char* save_dir = NULL;
  const char* expect[MAX_EXPECT];
  int n_expect = 0, report = 0, rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK; i++) {
    const char* v = NULL;
    int m = cli_model_opt(cmd, argc, argv, &i, CLI_OPT_ALL, &o);
    if (m < 0) {
      rc = -m;
    } else if (m > 0) {
      continue;
    } else if (cli_is_help(argv[i])) {
      usage(stdout);
      cli_model_opts_free(&o);
      return CLI_OK;
    } else if (strcmp(argv[i], "--report") == 0) {
      report = 1;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--save", &v)) != 0) {
      if (m < 0) rc = CLI_USAGE;
      save_dir = v;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--expect", &v)) != 0) {
      if (m < 0) rc = CLI_USAGE;
      else if (n_expect == MAX_EXPECT) {
        cli_error(cmd, "too many --expect options (at most %d)", MAX_EXPECT);
        rc = CLI_USAGE;
      } else {
        expect[n_expect++] = v;
      }
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx run --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (o.file) {
      cli_error(cmd, "more than one FILE ('%s' and '%s')", o.file, argv[i]);
      rc = CLI_USAGE;
    } else {
      o.file = argv[i];
    }
  }
  if (rc == CLI_OK && !o.file) {
    cli_error(cmd, "missing FILE");
    usage(stderr);
    rc = CLI_USAGE;
  }
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  if (rc == CLI_OK) rc = prepare(cmd, &o, &g, &e);
  if (rc == CLI_OK && rlx_exec_run(e) != RLX_OK) {
    cli_error(cmd, "%s: run failed: %s", o.file, rlx_exec_last_error(e));
    rc = CLI_FAIL;
  }
  if (rc == CLI_OK) rc = cli_print_outputs(cmd, g, e);
  if (rc == CLI_OK && save_dir) rc = cli_save_outputs(cmd, e, save_dir);
  if (rc == CLI_OK && report) rc = cli_print_report(cmd, e);
  int mismatch = 0; /* every --expect is checked and reported before failing */
  for (int k = 0; rc == CLI_OK && k < n_expect; k++)
    mismatch |= expect_output(cmd, e, k, expect[k]) != CLI_OK;
  if (rc == CLI_OK && mismatch) rc = CLI_FAIL;
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  cli_model_opts_free(&o);
  return rc;
}
