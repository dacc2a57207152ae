/* rlx run: compile a graph, feed it, run it once, print or save the outputs,
 * and optionally compare them with expected tensors (--expect). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

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

/* A tensor read from a file (data from rlx_npy_load / rlx_onnx_read_tensor,
 * or malloc'd: both are freed with rlx_free). */
typedef struct host_tensor {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} host_tensor;

static int64_t host_numel(const host_tensor* t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++) n *= t->shape[d];
  return n;
}

static int read_expected(const char* cmd, const char* path, host_tensor* t) {
  size_t n = strlen(path);
  memset(t, 0, sizeof *t);
  char* msg = NULL;
  rlx_status s;
  if (n > 4 && strcmp(path + n - 4, ".npy") == 0)
    s = rlx_npy_load(path, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes, &msg);
  else
    s = rlx_onnx_read_tensor(path, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes, &msg);
  if (s != RLX_OK) cli_error(cmd, "--expect %s: %s", path, msg ? msg : rlx_status_name(s));
  rlx_free(msg);
  return s == RLX_OK ? CLI_OK : CLI_FAIL;
}

/* Zeroed data for a tensor of that type (the output's shape is static). */
static int alloc_like(host_tensor* t, rlx_dtype dt, int32_t rank, const int64_t* shape) {
  t->dtype = dt;
  t->rank = rank;
  memcpy(t->shape, shape, sizeof(int64_t) * (size_t)rank);
  int64_t n = host_numel(t);
  t->bytes = (size_t)(n > 0 ? n : 0) * rlx_dtype_size(dt);
  t->data = calloc(t->bytes ? t->bytes : 1, 1);
  return t->data ? CLI_OK : CLI_FAIL;
}

/* Compares output k with the tensor in path; prints one line either way. */
static int expect_output(const char* cmd, const rlx_exec* e, int32_t k, const char* path) {
  host_tensor want, got;
  memset(&got, 0, sizeof got);
  if (read_expected(cmd, path, &want) != CLI_OK) return CLI_FAIL;
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  int rc = CLI_FAIL;
  if (k >= rlx_exec_output_count(e)) {
    cli_error(cmd, "--expect %s: the graph has no output %d", path, (int)k);
  } else if (rlx_exec_output_type(e, k, &dt, &rank, shape) != RLX_OK) {
    cli_error(cmd, "output %d: %s", (int)k, rlx_exec_last_error(e));
  } else if (alloc_like(&got, dt, rank, shape) != CLI_OK) {
    cli_error(cmd, "output %d: out of memory", (int)k);
  } else {
    int same = dt == want.dtype && rank == want.rank;
    for (int32_t i = 0; same && i < rank; i++) same = shape[i] == want.shape[i];
    if (!same) {
      printf("expect output %d (%s): MISMATCH: got %s rank %d, want %s rank %d\n", (int)k, path,
             rlx_dtype_name(dt), (int)rank, rlx_dtype_name(want.dtype), (int)want.rank);
    } else if (got.bytes && rlx_exec_read_output(e, k, dt, got.data, got.bytes) != RLX_OK) {
      cli_error(cmd, "output %d: %s", (int)k, rlx_exec_last_error(e));
    } else {
      int64_t n = host_numel(&got), bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < n; i++) {
        double a = cli_load_f64(got.data, dt, i), b = cli_load_f64(want.data, dt, i);
        int ok = rlx_dtype_is_float(dt)
                     ? (isnan(a) && isnan(b)) || a == b ||
                           fabs(a - b) <= EXPECT_ATOL + EXPECT_RTOL * fabs(b)
                     : cli_load_i64(got.data, dt, i) == cli_load_i64(want.data, dt, i);
        if (!ok) bad++;
        if (!isnan(a - b) && fabs(a - b) > worst) worst = fabs(a - b);
      }
      printf("expect output %d (%s): %s: %lld of %lld elements off, max abs err %.3g "
             "(rtol %g, atol %g)\n", (int)k, path, bad ? "MISMATCH" : "ok", (long long)bad,
             (long long)n, worst, EXPECT_RTOL, EXPECT_ATOL);
      rc = bad ? CLI_FAIL : CLI_OK;
    }
    rlx_free(got.data);
  }
  rlx_free(want.data);
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
  rlx_onnx_frozen_input frozen[CLI_MAX_INPUTS];
  int32_t n_frozen = 0;
  rlx_graph* g = NULL;
  for (;;) {
    char *needs = NULL, *msg = NULL;
    rlx_status s = rlx_onnx_load_frozen_ex(o->file, frozen, n_frozen, &g, &needs, &msg);
    if (s == RLX_OK) {
      rlx_free(msg);
      break;
    }
    const cli_input* it = s == RLX_FAILED_PRECONDITION && needs ? find_input(&o->inputs, needs)
                                                                : NULL;
    rlx_free(needs);
    if (!it || n_frozen >= CLI_MAX_INPUTS) {
      cli_error(cmd, "%s: %s%s", o->file, msg ? msg : rlx_status_name(s),
                s == RLX_FAILED_PRECONDITION ? " (give it with --input NAME=FILE)" : "");
      rlx_free(msg);
      return CLI_FAIL;
    }
    rlx_free(msg);
    rlx_onnx_frozen_input* f = &frozen[n_frozen++];
    f->name = it->name;
    f->dtype = it->dtype;
    f->rank = it->rank;
    f->shape = it->shape;
    f->data = it->data;
    f->bytes = it->bytes;
  }
  cli_inputs rest; /* shallow: the items stay owned by o->inputs */
  rest.n = 0;
  for (int32_t i = 0; i < o->inputs.n; i++) {
    int is_frozen = 0;
    for (int32_t j = 0; j < n_frozen; j++)
      is_frozen |= strcmp(frozen[j].name, o->inputs.items[i].name) == 0;
    if (!is_frozen) rest.items[rest.n++] = o->inputs.items[i];
  }
  rlx_exec* e = NULL;
  int rc = CLI_OK;
  if (cli_bind_from_inputs(cmd, g, &rest, &o->bindings) != CLI_OK ||
      cli_compile(cmd, g, o->device, o->strict, o->tf32, o->channels_last, o->threads,
                  &o->bindings, &e) != CLI_OK ||
      cli_set_params(cmd, g, e, o, o->file, frozen, n_frozen) != CLI_OK) {
    rc = CLI_FAIL;
  } else if (cli_set_inputs(cmd, g, e, &o->bindings, &rest, o->seed) != CLI_OK) {
    rc = CLI_FAIL;
  }
  if (rc != CLI_OK) {
    rlx_exec_destroy(e);
    rlx_graph_destroy(g);
    return rc;
  }
  fprintf(stderr, "rlx %s: %d input(s) given a value at import time:", cmd, (int)n_frozen);
  for (int32_t j = 0; j < n_frozen; j++) fprintf(stderr, " %s", frozen[j].name);
  fprintf(stderr, "\n");
  *out_graph = g;
  *out_exec = e;
  return CLI_OK;
}

/* The usual flow, unless an .onnx model needs input values at import time. */
static int prepare(const char* cmd, cli_model_opts* o, rlx_graph** out_graph,
                   rlx_exec** out_exec) {
  if (cli_is_onnx(o->file)) {
    char* needs = NULL;
    rlx_graph* g = NULL;
    rlx_status s = rlx_onnx_load_frozen_ex(o->file, NULL, 0, &g, &needs, NULL);
    rlx_graph_destroy(g);
    int needs_frozen = s == RLX_FAILED_PRECONDITION && needs;
    rlx_free(needs);
    if (needs_frozen) return prepare_frozen_onnx(cmd, o, out_graph, out_exec);
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
