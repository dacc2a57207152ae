/* Independent reference fixtures: every case in tests/fixtures/MANIFEST is a
 * graph in the text format plus inputs and expected outputs computed by
 * PyTorch/NumPy (scripts/gen_fixtures.py). Each case runs on the CPU backend
 * twice: reference kernels only, and with the fast paths. Float outputs must
 * match within the case's relative L2 tolerance (with NaNs in the same
 * places), integer and bool outputs exactly. The test also fails when an op
 * of ops.def (other than the leaves) has no fixture.
 *
 * Usage: test_fixtures [substring...]   (runs only matching cases)
 * RLX_FIXTURES=dir overrides tests/fixtures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "io/npy.h"
#include "ir/dtype.h"
#include "ir/graph.h"

#define MAX_TENSORS 16

static const char* fixtures_dir(void) {
  const char* d = getenv("RLX_FIXTURES");
  return d && *d ? d : "tests/fixtures";
}

/* ------------------------------------------------------------------ files */

typedef struct npy_tensor {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} npy_tensor;

static char* read_text_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char* buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char* bigger = realloc(buf, cap * 2);
      if (!bigger) { free(buf); buf = NULL; break; }
      buf = bigger;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  return buf;
}

static int file_exists(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* Loads <dir>/<prefix>0.npy, <prefix>1.npy, ... until one is missing. */
static int load_tensors(const char* dir, const char* prefix, npy_tensor* out, int* out_n,
                        char* why, size_t cap) {
  *out_n = 0;
  for (int i = 0; i < MAX_TENSORS; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%d.npy", dir, prefix, i);
    if (!file_exists(path)) return 1;
    rlx_error err;
    npy_tensor* t = &out[i];
    if (rlx_npy_read(path, &err, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes) != RLX_OK) {
      snprintf(why, cap, "%s", err.msg);
      return 0;
    }
    (*out_n)++;
  }
  return 1;
}

static void free_tensors(npy_tensor* t, int n) {
  for (int i = 0; i < n; i++) free(t[i].data);
}

/* ------------------------------------------------------------------ comparison */

static int64_t numel_of(const npy_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->shape[i];
  return n;
}

static int is_float(rlx_dtype t) {
  return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64;
}

static int compare_exact(const npy_tensor* want, const void* got, char* why, size_t cap) {
  int64_t n = numel_of(want);
  for (int64_t i = 0; i < n; i++) {
    int equal;
    if (is_float(want->dtype)) {
      double w = rlx_load_f64(want->data, want->dtype, i), g = rlx_load_f64(got, want->dtype, i);
      equal = w == g || (isnan(w) && isnan(g));
    } else {
      equal = rlx_load_i64(want->data, want->dtype, i) == rlx_load_i64(got, want->dtype, i);
    }
    if (!equal) {
      snprintf(why, cap, "element %lld: got %.9g, want %.9g", (long long)i,
               rlx_load_f64(got, want->dtype, i), rlx_load_f64(want->data, want->dtype, i));
      return 0;
    }
  }
  return 1;
}

/* Relative L2 over the finite elements; NaN/Inf must sit in the same places. */
static int compare_float(const npy_tensor* want, const void* got, double tol, double* max_rel,
                         char* why, size_t cap) {
  int64_t n = numel_of(want), worst = -1;
  double num = 0, den = 0, worst_diff = -1;
  for (int64_t i = 0; i < n; i++) {
    double w = rlx_load_f64(want->data, want->dtype, i), g = rlx_load_f64(got, want->dtype, i);
    if (!isfinite(w) || !isfinite(g)) {
      if ((isnan(w) && isnan(g)) || w == g) continue;
      snprintf(why, cap, "element %lld: got %g, want %g (non-finite mismatch)", (long long)i,
               g, w);
      return 0;
    }
    double d = g - w;
    num += d * d;
    den += w * w;
    if (fabs(d) > worst_diff) worst_diff = fabs(d), worst = i;
  }
  double rel = num > 0 ? sqrt(num) / (den > 0 ? sqrt(den) : 1e-300) : 0;
  if (rel > *max_rel) *max_rel = rel;
  if (rel > tol) {
    snprintf(why, cap, "relative L2 %.3g > %.3g (worst element %lld: got %.9g, want %.9g)", rel,
             tol, (long long)worst, rlx_load_f64(got, want->dtype, worst),
             rlx_load_f64(want->data, want->dtype, worst));
    return 0;
  }
  return 1;
}

static int compare_output(const npy_tensor* want, const void* got, double tol, double* max_rel,
                          char* why, size_t cap) {
  if (!is_float(want->dtype) || tol <= 0) return compare_exact(want, got, why, cap);
  return compare_float(want, got, tol, max_rel, why, cap);
}

/* ------------------------------------------------------------------ running */

static int check_output_type(const rlx_exec* e, int32_t i, const npy_tensor* want, char* why,
                             size_t cap) {
  rlx_dtype dt;
  int32_t rank = -1;
  int64_t shape[RLX_MAX_RANK];
  if (rlx_exec_output_type(e, i, &dt, &rank, shape) != RLX_OK) {
    snprintf(why, cap, "output %d type: %s", (int)i, rlx_exec_last_error(e));
    return 0;
  }
  int same = dt == want->dtype && rank == want->rank;
  for (int32_t d = 0; same && d < rank; d++) same = shape[d] == want->shape[d];
  if (!same) {
    char got_s[128] = "", want_s[128] = "";
    size_t a = 0, b = 0;
    for (int32_t d = 0; d < rank && d < RLX_MAX_RANK; d++)
      a += (size_t)snprintf(got_s + a, sizeof got_s - a, d ? ",%lld" : "%lld",
                            (long long)shape[d]);
    for (int32_t d = 0; d < want->rank; d++)
      b += (size_t)snprintf(want_s + b, sizeof want_s - b, d ? ",%lld" : "%lld",
                            (long long)want->shape[d]);
    snprintf(why, cap, "output %d is %s[%s], want %s[%s]", (int)i, rlx_dtype_name(dt), got_s,
             rlx_dtype_name(want->dtype), want_s);
    return 0;
  }
  return 1;
}

/* Compiles g (reference kernels or fast paths), runs it on the inputs and
 * compares every output. */
static int run_once(rlx_graph* g, int reference, const npy_tensor* ins, int n_in,
                    const npy_tensor* outs, int n_out, double tol, double* max_rel, char* why,
                    size_t cap) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = reference;
  rlx_exec* e = NULL;
  if (rlx_compile(g, "cpu", &o, &e) != RLX_OK) {
    snprintf(why, cap, "compile: %s", rlx_graph_last_error(g));
    return 0;
  }
  int ok = 1;
  for (int i = 0; ok && i < n_in; i++) {
    char name[16];
    snprintf(name, sizeof name, "in%d", i);
    if (rlx_exec_set_input(e, name, ins[i].dtype, ins[i].shape, ins[i].rank, ins[i].data,
                           ins[i].bytes) != RLX_OK) {
      snprintf(why, cap, "set_input %s: %s", name, rlx_exec_last_error(e));
      ok = 0;
    }
  }
  if (ok && rlx_exec_run(e) != RLX_OK) {
    snprintf(why, cap, "run: %s", rlx_exec_last_error(e));
    ok = 0;
  }
  if (ok && rlx_exec_output_count(e) != n_out) {
    snprintf(why, cap, "graph has %d outputs, fixture has %d", (int)rlx_exec_output_count(e),
             n_out);
    ok = 0;
  }
  for (int i = 0; ok && i < n_out; i++) {
    ok = check_output_type(e, i, &outs[i], why, cap);
    if (!ok) break;
    void* got = malloc(outs[i].bytes ? outs[i].bytes : 1);
    /* poison, so an output the run never wrote cannot pass by luck */
    if (got) memset(got, 0xA5, outs[i].bytes);
    if (!got || rlx_exec_read_output(e, i, outs[i].dtype, got, outs[i].bytes) != RLX_OK) {
      snprintf(why, cap, "read_output %d: %s", i, got ? rlx_exec_last_error(e) : "no memory");
      ok = 0;
    } else {
      char detail[512];
      ok = compare_output(&outs[i], got, tol, max_rel, detail, sizeof detail);
      if (!ok) snprintf(why, cap, "output %d: %s", i, detail);
    }
    free(got);
  }
  rlx_exec_destroy(e);
  return ok;
}

/* ------------------------------------------------------------------ coverage */

typedef struct coverage {
  int op[RLX_OP_COUNT];
  int binary[RLX_BIN_COUNT], compare[RLX_CMP_COUNT], act[RLX_ACT_COUNT], reduce[RLX_RED_COUNT];
} coverage;

static void mark_member(int* counts, int n, int32_t kind) {
  if (kind >= 0 && kind < n) counts[kind]++;
}

static void record_coverage(coverage* cov, const rlx_graph* g) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* nd = &g->nodes[i];
    if ((int)nd->op < 0 || nd->op >= RLX_OP_COUNT) continue;
    cov->op[nd->op]++;
    if (nd->op == RLX_OP_BINARY) mark_member(cov->binary, RLX_BIN_COUNT, nd->a.kind);
    if (nd->op == RLX_OP_COMPARE) mark_member(cov->compare, RLX_CMP_COUNT, nd->a.kind);
    if (nd->op == RLX_OP_ACTIVATION) mark_member(cov->act, RLX_ACT_COUNT, nd->a.kind);
    if (nd->op == RLX_OP_REDUCE) mark_member(cov->reduce, RLX_RED_COUNT, nd->a.kind);
  }
}

/* Member names as the text format spells them (enum order of rlx.h). */
static const char* const binary_names[] = {"add", "sub", "mul", "div", "max", "min", "pow"};
static const char* const compare_names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
static const char* const act_names[] = {
    "none", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg", "abs",
    "gelu", "gelu_approx", "silu", "round", "sin", "cos", "tan", "atan"};
static const char* const reduce_names[] = {"reduce_sum", "reduce_mean", "reduce_max",
                                           "reduce_min", "reduce_prod"};

/* Counts missing family members, printing each. */
static int missing_members(const char* family, const int* counts, int n,
                           const char* const* names, int n_names, int first) {
  int missing = 0;
  for (int k = first; k < n; k++)
    if (!counts[k]) {
      if (k < n_names) printf("  no fixture for %s '%s'\n", family, names[k]);
      else printf("  no fixture for %s member %d\n", family, k);
      missing++;
    }
  return missing;
}

#define MEMBERS(names) names, (int)(sizeof names / sizeof names[0])

/* Prints the coverage summary; returns the number of uncovered ops/members. */
static int report_coverage(const coverage* cov) {
  int covered = 0, required = 0, missing = 0;
  for (int op = 0; op < RLX_OP_COUNT; op++) {
    /* leaves, and Deferred (a body built per input value, no computation) */
    if (op == RLX_OP_INPUT || op == RLX_OP_PARAM || op == RLX_OP_CONSTANT ||
        op == RLX_OP_DEFERRED)
      continue;
    required++;
    if (cov->op[op]) covered++;
    else {
      printf("  no fixture for op '%s'\n", rlx_op_table[op].text);
      missing++;
    }
  }
  missing += missing_members("binary", cov->binary, RLX_BIN_COUNT, MEMBERS(binary_names), 0);
  missing += missing_members("compare", cov->compare, RLX_CMP_COUNT, MEMBERS(compare_names), 0);
  missing += missing_members("activation", cov->act, RLX_ACT_COUNT, MEMBERS(act_names),
                             RLX_ACT_NONE + 1);
  missing += missing_members("reduce", cov->reduce, RLX_RED_COUNT, MEMBERS(reduce_names), 0);
  printf("fixtures cover %d of %d op kinds (leaves excluded)\n", covered, required);
  return missing;
}

/* ------------------------------------------------------------------ cases */

static int wanted(const char* name, int argc, char** argv) {
  if (argc <= 1) return 1;
  for (int i = 1; i < argc; i++)
    if (strstr(name, argv[i])) return 1;
  return 0;
}

/* Runs one case; prints PASS/FAIL. */
static int run_case(const char* name, double tol, coverage* cov) {
  char dir[1024], path[1100], why[1024] = "";
  snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), name);
  snprintf(path, sizeof path, "%s/graph.rlx", dir);
  char* text = read_text_file(path);
  if (!text) {
    printf("FAIL %s: cannot read %s\n", name, path);
    return 0;
  }
  rlx_graph* g = NULL;
  char* perr = NULL;
  rlx_status s = rlx_graph_parse(text, &g, &perr);
  free(text);
  if (s != RLX_OK) {
    printf("FAIL %s: parse %s: %s\n", name, path, perr ? perr : rlx_status_name(s));
    rlx_free(perr);
    rlx_graph_destroy(g);
    return 0;
  }
  record_coverage(cov, g);
  npy_tensor ins[MAX_TENSORS], outs[MAX_TENSORS];
  int n_in = 0, n_out = 0, ok = 0;
  double max_rel = 0;
  const char* mode = "load";
  if (load_tensors(dir, "in", ins, &n_in, why, sizeof why) &&
      load_tensors(dir, "out", outs, &n_out, why, sizeof why)) {
    mode = "reference";
    ok = run_once(g, 1, ins, n_in, outs, n_out, tol, &max_rel, why, sizeof why);
    if (ok) {
      mode = "fast";
      ok = run_once(g, 0, ins, n_in, outs, n_out, tol, &max_rel, why, sizeof why);
    }
  }
  if (ok) printf("PASS %s (worst relative L2 %.2g, tolerance %.2g)\n", name, max_rel, tol);
  else printf("FAIL %s [%s]: %s\n", name, mode, why);
  fflush(stdout);
  free_tensors(ins, n_in);
  free_tensors(outs, n_out);
  rlx_graph_destroy(g);
  return ok;
}

static int g_argc;
static char** g_argv;

TEST(fixtures_match_torch) {
  char path[1024];
  snprintf(path, sizeof path, "%s/MANIFEST", fixtures_dir());
  char* manifest = read_text_file(path);
  CHECK_MSG(manifest != NULL, "cannot read %s", path);
  coverage cov;
  memset(&cov, 0, sizeof cov);
  int passed = 0, failed = 0;
  /* split by hand: strtok's hidden state is not ours to hold across library calls */
  for (char *line = manifest, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    char name[256];
    double tol = 0;
    if (line[0] == '#' || sscanf(line, "%255s %lf", name, &tol) != 2) continue;
    if (!wanted(name, g_argc, g_argv)) continue;
    if (run_case(name, tol, &cov)) passed++;
    else failed++;
  }
  free(manifest);
  printf("fixtures: %d passed, %d failed\n", passed, failed);
  int missing = g_argc > 1 ? 0 : report_coverage(&cov);
  CHECK_MSG(passed + failed > 0, "no fixture ran");
  CHECK_MSG(failed == 0, "%d fixture case(s) failed", failed);
  CHECK_MSG(missing == 0, "%d op kind(s) or family member(s) without a fixture", missing);
}

/* ------------------------------------------------------------------ npy module */

static int temp_path(char* buf, size_t cap) {
  snprintf(buf, cap, "/tmp/rlx_npy_test_XXXXXX");
  int fd = mkstemp(buf);
  if (fd < 0) return 0;
  close(fd);
  return 1;
}

TEST(npy_roundtrip_every_dtype) {
  static const rlx_dtype dtypes[] = {RLX_F32, RLX_F16, RLX_F64, RLX_I8, RLX_U8,
                                     RLX_I32, RLX_I64, RLX_BOOL};
  char path[64];
  CHECK(temp_path(path, sizeof path));
  test_seed(7);
  for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
    for (int32_t rank = 0; rank <= 3; rank++) {
      int64_t shape[3] = {3, 1, 5};
      int64_t n = 1;
      for (int32_t d = 0; d < rank; d++) n *= shape[d];
      size_t bytes = (size_t)n * rlx_dtype_size(dtypes[k]);
      unsigned char* data = malloc(bytes);
      CHECK(data != NULL);
      for (int64_t i = 0; i < n; i++)
        rlx_store_f64(data, dtypes[k], i, (double)test_rand_int(-100, 100) + 0.5);
      rlx_error err;
      rlx_status s = rlx_npy_write(path, dtypes[k], rank, shape, data, &err);
      rlx_dtype t;
      int32_t r;
      int64_t sh[RLX_MAX_RANK];
      void* back = NULL;
      size_t back_bytes = 0;
      if (s == RLX_OK) s = rlx_npy_read(path, &err, &t, &r, sh, &back, &back_bytes);
      int same = s == RLX_OK && t == dtypes[k] && r == rank && back_bytes == bytes &&
                 memcmp(back, data, bytes) == 0;
      for (int32_t d = 0; same && d < rank; d++) same = sh[d] == shape[d];
      free(data);
      free(back);
      CHECK_MSG(same, "%s rank %d: %s", rlx_dtype_name(dtypes[k]), (int)rank,
                s == RLX_OK ? "data/shape differ" : err.msg);
    }
  }
  remove(path);
}

TEST(npy_write_rejects_bad_arguments) {
  char path[64];
  CHECK(temp_path(path, sizeof path));
  rlx_error err;
  int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  float x = 1;
  CHECK(rlx_npy_write(path, RLX_BF16, 1, shape, &x, &err) == RLX_UNIMPLEMENTED);
  CHECK(strstr(err.msg, path) != NULL);
  CHECK(rlx_npy_write(path, RLX_F32, 9, shape, &x, &err) == RLX_INVALID_ARGUMENT);
  int64_t sym[1] = {-1};
  CHECK(rlx_npy_write(path, RLX_F32, 1, sym, &x, &err) == RLX_INVALID_ARGUMENT);
  remove(path);
}

/* Every bad_* seed of the fuzz corpus is rejected, naming the file. */
TEST(npy_rejects_malformed_files) {
  static const char* bad[] = {"bad_bigendian", "bad_dimdigits", "bad_fortran", "bad_hdrlen",
                              "bad_magic",     "bad_overflow",  "bad_rank9",   "bad_truncated",
                              "bad_unterminated"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char path[256];
    snprintf(path, sizeof path, "tests/corpus/fuzz_npy/%s.npy", bad[i]);
    rlx_error err;
    err.msg[0] = '\0';
    rlx_dtype t;
    int32_t r;
    int64_t sh[RLX_MAX_RANK];
    void* data = NULL;
    size_t bytes = 0;
    rlx_status s = rlx_npy_read(path, &err, &t, &r, sh, &data, &bytes);
    CHECK_MSG(s != RLX_OK && s != RLX_NOT_FOUND, "%s: status %s", path, rlx_status_name(s));
    CHECK_MSG(strstr(err.msg, path) != NULL, "message does not name the file: %s", err.msg);
    CHECK(data == NULL);
  }
  /* every truncation of a good file is an error too */
  rlx_dtype t;
  int32_t r;
  int64_t sh[RLX_MAX_RANK];
  void* data = NULL;
  size_t bytes = 0;
  rlx_error err;
  FILE* f = fopen("tests/corpus/fuzz_npy/f32_2x3.npy", "rb");
  CHECK(f != NULL);
  unsigned char buf[512];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(rlx_npy_read_mem(buf, n, &err, &t, &r, sh, &data, &bytes) == RLX_OK);
  CHECK(t == RLX_F32 && r == 2 && sh[0] == 2 && sh[1] == 3 && bytes == 24);
  free(data);
  for (size_t cut = 0; cut < n; cut++) {
    data = NULL;
    CHECK_MSG(rlx_npy_read_mem(buf, cut, &err, &t, &r, sh, &data, &bytes) != RLX_OK,
              "truncated to %zu bytes accepted", cut);
  }
}

int main(int argc, char** argv) {
  g_argc = argc;
  g_argv = argv;
  RUN(npy_roundtrip_every_dtype);
  RUN(npy_write_rejects_bad_arguments);
  RUN(npy_rejects_malformed_files);
  RUN(fixtures_match_torch);
  return test_summary();
}
