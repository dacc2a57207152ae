/* ONNX conformance runner over Debian's libonnx-testdata (data/node,
 * pytorch-converted, pytorch-operator, simple).
 *
 * Each case (model.onnx + test_data_set_N/{input,output}_K.pb) is imported,
 * compiled for a backend, run and compared, in a forked child so a crash or
 * hang is one "error" and not the end of the run. Outcomes:
 *   pass         every output matches (floats: |got - want| <= atol + rtol |want|,
 *                NaN matches NaN; integers and bools exactly)
 *   fail         it ran and some number, shape or dtype is wrong
 *   unsupported  the importer refused the model (RLX_UNIMPLEMENTED)
 *   error        anything else (malformed by our reading, compile/run error, crash)
 * Inputs that the importer needs as constants (a Reshape target fed as a
 * graph input, as many node tests do) are frozen to the test data's value
 * and the case is marked "frozen".
 *
 * Without arguments (ctest): runs the CPU backend and compares with the
 * committed table tests/onnx_results/cpu.txt: the run fails when the pass
 * count drops below the table's or a case that passed there does not pass.
 *   --backend NAME   backend (default cpu); --expect FILE table to compare
 *   --write FILE     write the table (scripts/onnx_conformance.sh)
 *   --data DIR       test data root (default $RLX_ONNX_TESTDATA or
 *                    /usr/share/libonnx-testdata/data)
 *   --filter TEXT    only cases whose name contains TEXT; -v prints each case
 * Exits 77 (ctest: skipped) when the test data or the backend is missing. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/onnx.h"
#include "ir/dtype.h"
#include "rlx.h"

#define RTOL 1e-3
#define ATOL 1e-5
#define CASE_TIMEOUT_S 60
#define MAX_IO 64

static const char* const suites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

/* /work/shared/spec/onnx_tier1_ops.txt: the ONNX op types that map onto
 * rlx Tier 1. A node case whose ops all lie here is "in scope". */
static const char* const tier1_ops[] = {
    "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Relu",
    "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Erf", "Gelu", "Sin",
    "Cos", "Tan", "Atan", "Round", "Floor", "Ceil", "Sign", "Clip", "HardSigmoid", "LeakyRelu",
    "Elu", "Selu", "Softplus", "Softsign", "HardSwish", "Mish", "PRelu", "Softmax", "LogSoftmax",
    "LayerNormalization", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ArgMax", "ArgMin", "CumSum", "TopK", "Gather", "GatherElements", "Concat", "Split", "Slice",
    "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Where", "Equal", "Less",
    "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Cast", "CastLike",
    "Constant", "ConstantOfShape", "Shape", "Size", "Range", "Trilu", "Identity", "Dropout"};

enum { R_PASS, R_FAIL, R_UNSUPPORTED, R_ERROR, R_COUNT };
static const char* const result_names[R_COUNT] = {"pass", "fail", "unsupported", "error"};

typedef struct case_result {
  char name[160];   /* suite/case */
  int result;
  int in_scope;     /* node case with Tier 1 ops only */
  int frozen;       /* some inputs were frozen */
  char ops[512];    /* space-separated op types */
  char reason[512];
} case_result;

/* ------------------------------------------------------------------ small helpers */

static int is_dir(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* Sorted subfolder names of dir (malloc'd array of malloc'd strings). */
static char** list_dirs(const char* dir, int* out_n) {
  *out_n = 0;
  DIR* d = opendir(dir);
  if (!d) return NULL;
  char** names = NULL;
  int n = 0, cap = 0;
  struct dirent* e;
  char path[1024];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (!is_dir(path)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char** p = realloc(names, sizeof(char*) * (size_t)cap);
      if (!p) break;
      names = p;
    }
    names[n] = strdup(e->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  if (n) qsort(names, (size_t)n, sizeof(char*), cmp_str);
  *out_n = n;
  return names;
}

static void free_list(char** names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

static void clean_reason(char* s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\t' || *s == '\r') *s = ' ';
}

/* ------------------------------------------------------------------ one case (child) */

typedef struct data_set {
  int n_in, n_out;
  rlx_host_tensor in[MAX_IO], out[MAX_IO];
} data_set;

static void free_set(data_set* s) {
  for (int i = 0; i < s->n_in; i++) rlx_host_free(&s->in[i]);
  for (int i = 0; i < s->n_out; i++) rlx_host_free(&s->out[i]);
  s->n_in = s->n_out = 0;
}

static rlx_status read_pb(const char* path, rlx_host_tensor* t, char* reason, size_t cap) {
  void* buf = NULL;
  size_t n = 0;
  rlx_error err = {{0}};
  rlx_status s = rlx_onnx_read_file(path, &buf, &n, &err);
  if (s == RLX_OK) s = rlx_onnx_decode_tensor(buf, n, t, NULL, 0, &err);
  free(buf);
  if (s != RLX_OK) snprintf(reason, cap, "%s: %s", path, err.msg);
  return s;
}

/* Reads input_K.pb / output_K.pb until one is missing. */
static rlx_status read_set(const char* dir, data_set* s, char* reason, size_t cap) {
  char path[1200];
  memset(s, 0, sizeof *s);
  for (int k = 0; k < MAX_IO; k++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", dir, k);
    if (!is_file(path)) break;
    RLX_RETURN_IF_ERROR(read_pb(path, &s->in[k], reason, cap));
    s->n_in++;
  }
  for (int k = 0; k < MAX_IO; k++) {
    snprintf(path, sizeof path, "%s/output_%d.pb", dir, k);
    if (!is_file(path)) break;
    RLX_RETURN_IF_ERROR(read_pb(path, &s->out[k], reason, cap));
    s->n_out++;
  }
  return RLX_OK;
}

/* Imports the model, freezing each input the importer asks for (its value
 * from the data set), until the import succeeds or fails otherwise. */
static rlx_status import_case(const char* model_path, const data_set* ds, char* const* in_names,
                              int n_in_names, rlx_onnx_model** out, int* frozen, char* reason,
                              size_t cap) {
  const char* names[MAX_IO];
  rlx_host_tensor values[MAX_IO];
  char needs[256];
  rlx_onnx_options o;
  memset(&o, 0, sizeof o);
  o.frozen_names = names;
  o.frozen_values = values;
  o.needs_input = needs;
  o.needs_input_cap = sizeof needs;
  *frozen = 0;
  for (;;) {
    rlx_error err = {{0}};
    rlx_status s = rlx_onnx_import_file(model_path, &o, out, &err);
    if (s == RLX_OK) return s;
    snprintf(reason, cap, "%s", err.msg);
    if (s != RLX_FAILED_PRECONDITION || !needs[0] || o.n_frozen >= MAX_IO) return s;
    int k = -1;
    for (int i = 0; i < n_in_names; i++)
      if (strcmp(in_names[i], needs) == 0) k = i;
    if (k < 0 || k >= ds->n_in) return s;
    names[o.n_frozen] = in_names[k];
    values[o.n_frozen] = ds->in[k];
    o.n_frozen++;
    *frozen = 1;
  }
}

static int compare_output(const rlx_host_tensor* want, rlx_dtype dt, int32_t rank,
                          const int64_t* shape, const void* got, int k, char* reason,
                          size_t cap) {
  if (dt != want->dtype) {
    snprintf(reason, cap, "output %d: dtype %s, expected %s", k, rlx_dtype_name(dt),
             rlx_dtype_name(want->dtype));
    return 0;
  }
  int same = rank == want->rank;
  for (int32_t i = 0; same && i < rank; i++) same = shape[i] == want->shape[i];
  if (!same) {
    snprintf(reason, cap, "output %d: shape differs (rank %d vs %d)", k, (int)rank,
             (int)want->rank);
    return 0;
  }
  int64_t n = rlx_host_numel(want), bad = 0, first = -1;
  double worst = 0;
  int is_float = rlx_dtype_is_float(dt);
  for (int64_t i = 0; i < n; i++) {
    int ok;
    if (is_float) {
      double a = rlx_load_f64(got, dt, i), b = rlx_load_f64(want->data, dt, i);
      ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= ATOL + RTOL * fabs(b);
      if (!ok && !(fabs(a - b) <= worst)) worst = fabs(a - b);
    } else {
      ok = rlx_load_i64(got, dt, i) == rlx_load_i64(want->data, dt, i);
    }
    if (!ok && first < 0) first = i;
    bad += !ok;
  }
  if (bad) {
    if (is_float)
      snprintf(reason, cap, "output %d: %lld of %lld elements off (max abs err %.3g; first at %lld: "
               "got %.6g want %.6g)", k, (long long)bad, (long long)n, worst, (long long)first,
               rlx_load_f64(got, dt, first), rlx_load_f64(want->data, dt, first));
    else
      snprintf(reason, cap, "output %d: %lld of %lld elements differ (first at %lld: got %lld "
               "want %lld)", k, (long long)bad, (long long)n, (long long)first,
               (long long)rlx_load_i64(got, dt, first),
               (long long)rlx_load_i64(want->data, dt, first));
  }
  return bad == 0;
}

/* Compiles, feeds, runs and compares one data set. */
static int run_set(rlx_onnx_model* m, const data_set* ds, const char* backend, char* reason,
                   size_t cap) {
  rlx_exec* e = NULL;
  if (rlx_compile(m->graph, backend, NULL, &e) != RLX_OK) {
    snprintf(reason, cap, "compile: %s", rlx_graph_last_error(m->graph));
    return R_ERROR;
  }
  rlx_error err = {{0}};
  int result = R_PASS;
  if (rlx_onnx_model_set_params(m, e, &err) != RLX_OK) {
    snprintf(reason, cap, "params: %s", err.msg);
    result = R_ERROR;
  }
  for (int32_t i = 0; result == R_PASS && i < m->n_inputs; i++) {
    if (m->input_frozen[i]) continue;
    if (i >= ds->n_in) {
      snprintf(reason, cap, "no data for input %d '%s'", (int)i, m->inputs[i]);
      result = R_ERROR;
      break;
    }
    const rlx_host_tensor* t = &ds->in[i];
    if (rlx_exec_set_input(e, m->inputs[i], t->dtype, t->shape, t->rank, t->data, t->bytes) !=
        RLX_OK) {
      snprintf(reason, cap, "input '%s': %s", m->inputs[i], rlx_exec_last_error(e));
      result = R_ERROR;
    }
  }
  if (result == R_PASS && rlx_exec_run(e) != RLX_OK) {
    snprintf(reason, cap, "run: %s", rlx_exec_last_error(e));
    result = R_ERROR;
  }
  int32_t n_out = rlx_exec_output_count(e);
  if (result == R_PASS && n_out != ds->n_out) {
    snprintf(reason, cap, "%d outputs, the test data has %d", (int)n_out, ds->n_out);
    result = R_FAIL;
  }
  for (int32_t k = 0; result == R_PASS && k < n_out; k++) {
    rlx_dtype dt;
    int32_t rank;
    int64_t shape[RLX_MAX_RANK];
    rlx_host_tensor got;
    if (rlx_exec_output_type(e, k, &dt, &rank, shape) != RLX_OK ||
        rlx_host_alloc(&got, dt, rank, shape, &err) != RLX_OK) {
      snprintf(reason, cap, "output %d: %s", (int)k, rlx_exec_last_error(e));
      result = R_ERROR;
      break;
    }
    if (got.bytes && rlx_exec_read_output(e, k, dt, got.data, got.bytes) != RLX_OK) {
      snprintf(reason, cap, "read output %d: %s", (int)k, rlx_exec_last_error(e));
      result = R_ERROR;
    } else if (!compare_output(&ds->out[k], dt, rank, shape, got.data, k, reason, cap)) {
      result = R_FAIL;
    }
    rlx_host_free(&got);
  }
  rlx_exec_destroy(e);
  return result;
}

/* Op types and graph input names (initializers excluded), by a plain import
 * attempt's view of the file: parsed here with the generated protobuf code. */
#include "onnx.pb-c.h"

static int model_info(const char* path, case_result* r, char*** in_names, int* n_in) {
  void* buf = NULL;
  size_t n = 0;
  rlx_error err = {{0}};
  *in_names = NULL;
  *n_in = 0;
  if (rlx_onnx_read_file(path, &buf, &n, &err) != RLX_OK) return 0;
  Onnx__ModelProto* mp = onnx__model_proto__unpack(NULL, n, buf);
  free(buf);
  if (!mp || !mp->graph) {
    if (mp) onnx__model_proto__free_unpacked(mp, NULL);
    return 0;
  }
  const Onnx__GraphProto* g = mp->graph;
  r->in_scope = strncmp(r->name, "node/", 5) == 0;
  for (size_t i = 0; i < g->n_node; i++) {
    const char* op = g->node[i]->op_type ? g->node[i]->op_type : "?";
    char key[80];
    snprintf(key, sizeof key, " %s ", op);
    char padded[sizeof r->ops + 2];
    snprintf(padded, sizeof padded, " %s ", r->ops);
    if (!strstr(padded, key) && strlen(r->ops) + strlen(op) + 2 < sizeof r->ops)
      snprintf(r->ops + strlen(r->ops), sizeof r->ops - strlen(r->ops), "%s%s",
               r->ops[0] ? " " : "", op);
    int t1 = 0;
    for (size_t j = 0; j < sizeof tier1_ops / sizeof tier1_ops[0]; j++)
      t1 |= strcmp(tier1_ops[j], op) == 0;
    if (!t1 || (g->node[i]->domain && g->node[i]->domain[0])) r->in_scope = 0;
  }
  char** names = calloc(g->n_input + 1, sizeof(char*));
  for (size_t i = 0; names && i < g->n_input; i++) {
    const char* nm = g->input[i]->name ? g->input[i]->name : "";
    int init = 0;
    for (size_t j = 0; j < g->n_initializer; j++)
      init |= g->initializer[j]->name && strcmp(g->initializer[j]->name, nm) == 0;
    if (!init) names[(*n_in)++] = strdup(nm);
  }
  *in_names = names;
  onnx__model_proto__free_unpacked(mp, NULL);
  return 1;
}

static void run_case(const char* dir, const char* backend, case_result* r) {
  char model[1100], set_dir[1200];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  char** in_names = NULL;
  int n_in = 0;
  model_info(model, r, &in_names, &n_in);
  r->result = R_PASS;
  int sets = 0;
  for (int k = 0; r->result == R_PASS; k++) {
    snprintf(set_dir, sizeof set_dir, "%s/test_data_set_%d", dir, k);
    if (!is_dir(set_dir)) break;
    sets++;
    data_set ds;
    if (read_set(set_dir, &ds, r->reason, sizeof r->reason) != RLX_OK) {
      r->result = R_ERROR;
      free_set(&ds);
      break;
    }
    rlx_onnx_model* m = NULL;
    int frozen = 0;
    rlx_status s = import_case(model, &ds, in_names, n_in, &m, &frozen, r->reason,
                               sizeof r->reason);
    r->frozen |= frozen;
    if (s != RLX_OK) r->result = s == RLX_UNIMPLEMENTED ? R_UNSUPPORTED : R_ERROR;
    else r->result = run_set(m, &ds, backend, r->reason, sizeof r->reason);
    rlx_onnx_model_destroy(m);
    free_set(&ds);
  }
  if (sets == 0 && r->result == R_PASS) {
    r->result = R_ERROR;
    snprintf(r->reason, sizeof r->reason, "no test_data_set_0");
  }
  if (r->result == R_PASS) r->reason[0] = '\0';
  free_list(in_names, n_in);
  clean_reason(r->reason);
}

/* Runs one case in a child process with a time limit. */
static void run_isolated(const char* dir, const char* backend, case_result* r) {
  int fd[2];
  if (pipe(fd) != 0) {
    run_case(dir, backend, r);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    alarm(CASE_TIMEOUT_S);
    run_case(dir, backend, r);
    ssize_t w = write(fd[1], r, sizeof *r);
    _exit(w == (ssize_t)sizeof *r ? 0 : 1);
  }
  close(fd[1]);
  case_result got;
  size_t have = 0;
  while (pid > 0 && have < sizeof got) {
    ssize_t n = read(fd[0], (char*)&got + have, sizeof got - have);
    if (n <= 0 && errno != EINTR) break;
    if (n > 0) have += (size_t)n;
  }
  close(fd[0]);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  if (have == sizeof got) {
    *r = got;
    return;
  }
  char ops[sizeof r->ops];
  snprintf(ops, sizeof ops, "%s", r->ops);
  r->result = R_ERROR;
  if (pid < 0) snprintf(r->reason, sizeof r->reason, "fork failed");
  else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    snprintf(r->reason, sizeof r->reason, "timeout after %d s", CASE_TIMEOUT_S);
  else if (WIFSIGNALED(status))
    snprintf(r->reason, sizeof r->reason, "crashed (signal %d)", WTERMSIG(status));
  else snprintf(r->reason, sizeof r->reason, "child exited with %d", WEXITSTATUS(status));
  /* the parent still knows the ops and scope */
  char** names;
  int n;
  char model[1100];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  r->ops[0] = '\0';
  model_info(model, r, &names, &n);
  free_list(names, n);
}

/* ------------------------------------------------------------------ the table */

typedef struct op_count {
  char op[64];
  int n[R_COUNT];
} op_count;

typedef struct totals {
  int n[R_COUNT], frozen_pass;
} totals;

static void tally(totals* t, const case_result* r) {
  t->n[r->result]++;
  t->frozen_pass += r->result == R_PASS && r->frozen;
}

static void print_totals(FILE* f, const char* label, const totals* t) {
  int total = t->n[0] + t->n[1] + t->n[2] + t->n[3];
  fprintf(f, "summary %-18s total %4d pass %4d fail %4d unsupported %4d error %4d  (pass with "
          "frozen inputs %d)\n", label, total, t->n[R_PASS], t->n[R_FAIL], t->n[R_UNSUPPORTED],
          t->n[R_ERROR], t->frozen_pass);
}

static int count_ops(const case_result* rs, int n, op_count** out) {
  op_count* ops = NULL;
  int n_ops = 0, cap = 0;
  for (int i = 0; i < n; i++) {
    char buf[sizeof rs[i].ops];
    snprintf(buf, sizeof buf, "%s", rs[i].ops);
    for (char* tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
      int j = 0;
      while (j < n_ops && strcmp(ops[j].op, tok) != 0) j++;
      if (j == n_ops) {
        if (n_ops == cap) {
          cap = cap ? cap * 2 : 128;
          op_count* p = realloc(ops, sizeof(op_count) * (size_t)cap);
          if (!p) break;
          ops = p;
        }
        memset(&ops[n_ops], 0, sizeof ops[n_ops]);
        snprintf(ops[n_ops].op, sizeof ops[n_ops].op, "%s", tok);
        n_ops++;
      }
      ops[j].n[rs[i].result]++;
    }
  }
  *out = ops;
  return n_ops;
}

static int cmp_op(const void* a, const void* b) {
  return strcmp(((const op_count*)a)->op, ((const op_count*)b)->op);
}

static void write_table(FILE* f, const char* backend, const char* data, const case_result* rs,
                        int n) {
  totals all = {{0}, 0}, scope = {{0}, 0}, per_suite[4];
  memset(per_suite, 0, sizeof per_suite);
  for (int i = 0; i < n; i++) {
    tally(&all, &rs[i]);
    if (rs[i].in_scope) tally(&scope, &rs[i]);
    for (int s = 0; s < 4; s++)
      if (strncmp(rs[i].name, suites[s], strlen(suites[s])) == 0 &&
          rs[i].name[strlen(suites[s])] == '/')
        tally(&per_suite[s], &rs[i]);
  }
  fprintf(f, "# rlx ONNX conformance: backend %s, test data %s\n", backend, data);
  fprintf(f, "# tolerance: float outputs |got - want| <= %g + %g * |want| per element (NaN "
          "matches NaN), integer and bool outputs exact\n", ATOL, RTOL);
  fprintf(f, "# pass / fail (wrong numbers, shape or dtype) / unsupported (import refused) / "
          "error (anything else)\n");
  fprintf(f, "# frozen: inputs the importer needs as constants were given the test data's "
          "value at import time\n");
  fprintf(f, "# regenerate: scripts/onnx_conformance.sh; CI (ctest test_onnx_conformance) fails "
          "if the pass count drops or a passing case stops passing\n");
  print_totals(f, "all", &all);
  print_totals(f, "node-tier1-scope", &scope);
  for (int s = 0; s < 4; s++) print_totals(f, suites[s], &per_suite[s]);
  op_count* ops = NULL;
  int n_ops = count_ops(rs, n, &ops);
  if (n_ops) qsort(ops, (size_t)n_ops, sizeof *ops, cmp_op);
  fprintf(f, "# per op type: outcomes of the cases that use it\n");
  for (int i = 0; i < n_ops; i++)
    fprintf(f, "op %-24s pass %4d fail %4d unsupported %4d error %4d\n", ops[i].op,
            ops[i].n[0], ops[i].n[1], ops[i].n[2], ops[i].n[3]);
  free(ops);
  fprintf(f, "# per case: name result [frozen] [tier1] -- reason\n");
  for (int i = 0; i < n; i++)
    fprintf(f, "case %s %s%s%s%s%s\n", rs[i].name, result_names[rs[i].result],
            rs[i].frozen ? " frozen" : "", rs[i].in_scope ? " tier1" : "",
            rs[i].reason[0] ? " -- " : "", rs[i].reason);
}

/* Compares with a committed table: returns the number of regressions. */
static int compare_table(const char* path, const case_result* rs, int n) {
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "cannot open the committed table '%s'\n", path);
    return 1;
  }
  char line[2048];
  int regressions = 0, want_pass = -1, have_pass = 0;
  for (int i = 0; i < n; i++) have_pass += rs[i].result == R_PASS;
  while (fgets(line, sizeof line, f)) {
    char name[200], res[32];
    if (sscanf(line, "summary all total %*d pass %d", &want_pass) == 1) continue;
    if (sscanf(line, "case %199s %31s", name, res) != 2 || strcmp(res, "pass") != 0) continue;
    int found = 0;
    for (int i = 0; i < n; i++) {
      if (strcmp(rs[i].name, name) != 0) continue;
      found = 1;
      if (rs[i].result != R_PASS) {
        fprintf(stderr, "REGRESSION %s: was pass, now %s -- %s\n", name,
                result_names[rs[i].result], rs[i].reason);
        regressions++;
      }
    }
    if (!found) {
      fprintf(stderr, "REGRESSION %s: passed in the table, not run now\n", name);
      regressions++;
    }
  }
  fclose(f);
  if (want_pass < 0) {
    fprintf(stderr, "table '%s' has no 'summary all' line\n", path);
    return regressions + 1;
  }
  printf("pass count %d (table: %d)\n", have_pass, want_pass);
  if (have_pass < want_pass) {
    fprintf(stderr, "REGRESSION: %d cases pass, the table has %d\n", have_pass, want_pass);
    regressions++;
  }
  return regressions;
}

int main(int argc, char** argv) {
  const char* backend = "cpu";
  const char* data = getenv("RLX_ONNX_TESTDATA");
  const char* write_path = NULL;
  const char* expect_path = NULL;
  const char* filter = NULL;
  int verbose = 0;
  if (!data) data = "/usr/share/libonnx-testdata/data";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) backend = argv[++i];
    else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) data = argv[++i];
    else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) write_path = argv[++i];
    else if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc) expect_path = argv[++i];
    else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
    else if (strcmp(argv[i], "-v") == 0) verbose = 1;
    else {
      fprintf(stderr, "usage: %s [--backend NAME] [--data DIR] [--write FILE] [--expect FILE] "
              "[--filter TEXT] [-v]\n", argv[0]);
      return 2;
    }
  }
  rlx_graph* probe = NULL;
  char* perr = NULL;
  if (rlx_onnx_load("/nonexistent.onnx", &probe, &perr) == RLX_UNIMPLEMENTED) {
    printf("skipped: %s\n", perr ? perr : "ONNX import not built");
    rlx_free(perr);
    return 77;
  }
  rlx_free(perr);
  char node_dir[1024];
  snprintf(node_dir, sizeof node_dir, "%s/node", data);
  if (!is_dir(node_dir)) {
    printf("skipped: no ONNX test data at %s (Debian package libonnx-testdata)\n", data);
    return 77;
  }
  const char* resolved = NULL;
  rlx_status ds = rlx_device_resolve(backend, &resolved);
  if (ds != RLX_OK) {
    printf("skipped: backend %s is not available (%s)\n", backend, rlx_status_name(ds));
    return 77;
  }
  char default_expect[256];
  snprintf(default_expect, sizeof default_expect, "tests/onnx_results/%s.txt", backend);
  if (!write_path && !expect_path) expect_path = default_expect;

  case_result* rs = NULL;
  int n = 0, cap = 0;
  time_t t0 = time(NULL);
  for (int s = 0; s < 4; s++) {
    char suite_dir[1024];
    snprintf(suite_dir, sizeof suite_dir, "%s/%s", data, suites[s]);
    int n_cases = 0;
    char** cases = list_dirs(suite_dir, &n_cases);
    for (int i = 0; i < n_cases; i++) {
      char name[160], dir[1200];
      snprintf(name, sizeof name, "%s/%s", suites[s], cases[i]);
      if (filter && !strstr(name, filter)) continue;
      snprintf(dir, sizeof dir, "%s/%s", suite_dir, cases[i]);
      if (n == cap) {
        cap = cap ? cap * 2 : 1024;
        case_result* p = realloc(rs, sizeof(case_result) * (size_t)cap);
        if (!p) return 1;
        rs = p;
      }
      case_result* r = &rs[n++];
      memset(r, 0, sizeof *r);
      snprintf(r->name, sizeof r->name, "%s", name);
      run_isolated(dir, backend, r);
      if (verbose)
        printf("%-60s %s%s%s%s\n", r->name, result_names[r->result], r->frozen ? " (frozen)" : "",
               r->reason[0] ? " -- " : "", r->reason);
    }
    free_list(cases, n_cases);
  }
  write_table(stdout, backend, data, rs, n);
  printf("# %d cases in %ld s\n", n, (long)(time(NULL) - t0));
  int status = 0;
  if (write_path) {
    FILE* f = fopen(write_path, "w");
    if (!f) {
      fprintf(stderr, "cannot write %s\n", write_path);
      status = 1;
    } else {
      write_table(f, backend, "libonnx-testdata 1.12 (Debian)", rs, n);
      fclose(f);
    }
  }
  if (expect_path && !filter) {
    int reg = compare_table(expect_path, rs, n);
    if (reg) {
      fprintf(stderr, "%d regression(s) against %s\n", reg, expect_path);
      status = 1;
    }
  }
  free(rs);
  return status;
}
