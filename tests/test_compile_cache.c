/* Shared compiled code: rlx_exec_clone reuses the original's compiled parts,
 * and the process-wide compile cache hands them to later compiles of an
 * identical graph. Checked on every available device (or the one named on
 * the command line): results equal to a host computation, independence of
 * the executables (params, destroy order), hits and misses of the cache
 * (constant value, option, device, state pairs), symbolic bindings, the
 * RLX_COMPILE_CACHE switch and its bound, and two threads compiling at once. */
#include <math.h>
#include <pthread.h>

#include "harness.h"
#include "runtime/compile_cache.h"
#include "runtime/executable.h"

enum { M = 4, K = 8, N = 16 };

static const char* dev = "cpu";

/* y = relu(x @ w + b + c): x f32[rows, K] ("x"; rows < 0: symbol "n"),
 * params w f32[K, N] and b f32[N], constant c f32[N] filled with c_value. */
static rlx_graph* mlp_graph(int64_t rows, float c_value) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim n_dim = rows;
  if (rows < 0 && rlx_graph_symbol(g, "n", &n_dim) != RLX_OK) goto fail;
  rlx_dim xs[2] = {n_dim, K}, ws[2] = {K, N}, bs[1] = {N};
  float c[N];
  for (int i = 0; i < N; i++) c[i] = c_value;
  rlx_tensor x, w, b, ct, y, z, zc, out;
  if (rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x) || rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w) ||
      rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b) ||
      rlx_graph_add_constant(g, RLX_F32, bs, 1, c, sizeof c, &ct) ||
      rlx_graph_add_matmul(g, x, w, 0, 0, &y) || rlx_graph_add_binary(g, RLX_BIN_ADD, y, b, &z) ||
      rlx_graph_add_binary(g, RLX_BIN_ADD, z, ct, &zc) ||
      rlx_graph_add_activation(g, RLX_ACT_RELU, zc, &out) || rlx_graph_set_outputs(g, &out, 1))
    goto fail;
  return g;
fail:
  fprintf(stderr, "mlp_graph: %s\n", rlx_graph_last_error(g));
  rlx_graph_destroy(g);
  return NULL;
}

/* Host reference of mlp_graph. */
static void mlp_ref(const float* x, int64_t rows, const float* w, const float* b, float c,
                    float* y) {
  for (int64_t i = 0; i < rows; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)x[i * K + k] * w[k * N + j];
      double v = acc + b[j] + c;
      y[i * N + j] = v > 0 ? (float)v : 0.0f;
    }
}

typedef struct mlp_data {
  float x[64 * K], w[K * N], b[N];
} mlp_data;

static void mlp_fill(mlp_data* d, uint64_t seed) {
  test_seed(seed);
  test_fill_f32(d->x, 64 * K, -1, 1);
  test_fill_f32(d->w, K * N, -1, 1);
  test_fill_f32(d->b, N, -0.5, 0.5);
}

static rlx_status set_params(rlx_exec* e, const mlp_data* d) {
  rlx_status s = rlx_exec_set_param(e, "w", RLX_F32, d->w, sizeof d->w);
  return s ? s : rlx_exec_set_param(e, "b", RLX_F32, d->b, sizeof d->b);
}

/* Runs e on the first `rows` rows of d->x; checks its output against the
 * host reference with d's params and constant c. 1 on success. */
static int run_and_check(rlx_exec* e, const mlp_data* d, const mlp_data* params, int64_t rows,
                         float c) {
  rlx_dim xs[2] = {rows, K};
  float got[64 * N], want[64 * N];
  size_t xb = sizeof(float) * (size_t)(rows * K), yb = sizeof(float) * (size_t)(rows * N);
  if (rlx_exec_set_input(e, "x", RLX_F32, xs, 2, d->x, xb) || rlx_exec_run(e) ||
      rlx_exec_read_output(e, 0, RLX_F32, got, yb)) {
    fprintf(stderr, "run_and_check on %s: %s\n", dev, rlx_exec_last_error(e));
    return 0;
  }
  mlp_ref(d->x, rows, params->w, params->b, c, want);
  for (int64_t i = 0; i < rows * N; i++)
    if (fabsf(got[i] - want[i]) > 1e-4f * (1 + fabsf(want[i]))) {
      fprintf(stderr, "run_and_check on %s: element %lld is %g, expected %g\n", dev, (long long)i,
              got[i], want[i]);
      return 0;
    }
  return 1;
}

static rlx_compile_cache_stats stats_now(void) {
  rlx_compile_cache_stats s;
  rlx_compile_cache_get_stats(&s);
  return s;
}

/* The dispatch report of e names `what` (where its compiled code came from). */
static int report_says(const rlx_exec* e, const char* what) {
  char* text = NULL;
  if (rlx_exec_report(e, &text) != RLX_OK) return 0;
  int found = strstr(text, what) != NULL;
  if (!found) fprintf(stderr, "report lacks '%s':\n%s", what, text);
  rlx_free(text);
  return found;
}

/* A constant value no other test (or earlier run in this process) used, so
 * the first compile of its graph is a miss. */
static float fresh_constant(void) {
  static int n = 0;
  return 0.125f * (float)++n;
}

/* ------------------------------------------------------------ clone */

/* A clone computes what the original does; afterwards each takes its own
 * params and neither sees the other's. */
TEST(clone_matches_and_is_independent) {
  float c = fresh_constant();
  rlx_graph* g = mlp_graph(M, c);
  CHECK(g != NULL);
  rlx_exec *e = test_compile_on(g, dev, NULL), *k = NULL;
  CHECK(e != NULL);
  mlp_data d, d2;
  mlp_fill(&d, 1);
  mlp_fill(&d2, 2);
  CHECK_OK_E(e, set_params(e, &d));
  CHECK_OK_E(e, rlx_exec_clone(e, &k));
  CHECK(run_and_check(e, &d, &d, M, c));
  CHECK(run_and_check(k, &d, &d, M, c)); /* params were copied */
  CHECK_OK_E(k, set_params(k, &d2));
  CHECK(run_and_check(k, &d, &d2, M, c));
  CHECK(run_and_check(e, &d, &d, M, c)); /* the original keeps its params */
  rlx_exec_destroy(k);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* The clone owns everything it runs with: the original may change its
 * params or go first. */
TEST(clone_outlives_original) {
  float c = fresh_constant();
  rlx_graph* g = mlp_graph(M, c);
  CHECK(g != NULL);
  rlx_exec *e = test_compile_on(g, dev, NULL), *k = NULL;
  rlx_graph_destroy(g);
  CHECK(e != NULL);
  mlp_data d;
  mlp_fill(&d, 3);
  CHECK_OK_E(e, set_params(e, &d));
  CHECK_OK_E(e, rlx_exec_clone(e, &k));
  mlp_data d2;
  mlp_fill(&d2, 30);
  CHECK_OK_E(e, set_params(e, &d2)); /* the clone keeps the values it was made with */
  CHECK(run_and_check(e, &d, &d2, M, c));
  rlx_exec_destroy(e);
  rlx_compile_cache_clear(); /* the clone's reference is the last one now */
  CHECK(run_and_check(k, &d, &d, M, c));
  rlx_exec_destroy(k);
}

/* Cloning does not compile: no cache lookups, and the clone's steps are the
 * original's own (same memory), while the arenas differ. */
TEST(clone_shares_compiled_steps) {
  rlx_graph* g = mlp_graph(M, fresh_constant());
  CHECK(g != NULL);
  rlx_exec *e = test_compile_on(g, dev, NULL), *k = NULL;
  rlx_graph_destroy(g);
  CHECK(e != NULL);
  rlx_compile_cache_stats before = stats_now();
  CHECK_OK_E(e, rlx_exec_clone(e, &k));
  rlx_compile_cache_stats after = stats_now();
  CHECK(after.hits == before.hits && after.misses == before.misses);
  const rlx_step_list *se = NULL, *sk = NULL;
  CHECK(rlx_exec_steps(e, &se, NULL) == RLX_OK && rlx_exec_steps(k, &sk, NULL) == RLX_OK);
  CHECK(se == sk);
  CHECK(report_says(k, "cloned from"));
  rlx_exec_destroy(k);
  rlx_exec_destroy(e);
}

/* A symbolic graph: the clone carries every binding compiled so far and
 * compiles new ones on its own. */
TEST(clone_of_symbolic_graph) {
  float c = fresh_constant();
  rlx_graph* g = mlp_graph(-1, c);
  CHECK(g != NULL);
  rlx_exec *e = test_compile_on(g, dev, NULL), *k = NULL;
  rlx_graph_destroy(g);
  CHECK(e != NULL);
  mlp_data d, d2;
  mlp_fill(&d, 4);
  mlp_fill(&d2, 5);
  CHECK_OK_E(e, set_params(e, &d));
  CHECK(run_and_check(e, &d, &d, 2, c));
  CHECK(run_and_check(e, &d, &d, 5, c));
  CHECK_OK_E(e, rlx_exec_clone(e, &k));
  CHECK_OK_E(k, set_params(k, &d2));
  CHECK(run_and_check(k, &d, &d2, 5, c)); /* the current binding */
  CHECK(run_and_check(k, &d, &d2, 2, c)); /* an earlier one, its arena made now */
  CHECK(run_and_check(k, &d, &d2, 7, c)); /* a new one */
  CHECK(run_and_check(e, &d, &d, 7, c));
  CHECK(run_and_check(e, &d, &d, 2, c));
  rlx_exec_destroy(e);
  CHECK(run_and_check(k, &d, &d2, 3, c));
  rlx_exec_destroy(k);
}

/* ------------------------------------------------------------ the cache */

/* Compiles a fresh mlp_graph(rows, c) on device with options o; returns
 * the executable (NULL on failure). */
static rlx_exec* compile_mlp(const char* device, int64_t rows, float c, const rlx_compile_options* o) {
  rlx_graph* g = mlp_graph(rows, c);
  if (!g) return NULL;
  rlx_exec* e = test_compile_on(g, device, o);
  rlx_graph_destroy(g);
  return e;
}

/* The same graph built twice hits; the two executables still run apart. */
TEST(same_graph_hits) {
  float c = fresh_constant();
  rlx_compile_cache_stats s0 = stats_now();
  rlx_exec* a = compile_mlp(dev, M, c, NULL);
  rlx_compile_cache_stats s1 = stats_now();
  rlx_exec* b = compile_mlp(dev, M, c, NULL);
  rlx_compile_cache_stats s2 = stats_now();
  CHECK(a != NULL && b != NULL);
  CHECK_MSG(s1.misses == s0.misses + 1 && s1.hits == s0.hits, "first compile: %llu misses",
            (unsigned long long)(s1.misses - s0.misses));
  CHECK_MSG(s2.hits == s1.hits + 1 && s2.misses == s1.misses, "second compile: %llu hits",
            (unsigned long long)(s2.hits - s1.hits));
  CHECK(report_says(a, "compiled by this executable") && report_says(b, "reused from the compile cache"));
  mlp_data d, d2;
  mlp_fill(&d, 6);
  mlp_fill(&d2, 7);
  CHECK_OK_E(a, set_params(a, &d));
  CHECK_OK_E(b, set_params(b, &d2));
  CHECK(run_and_check(a, &d, &d, M, c));
  CHECK(run_and_check(b, &d, &d2, M, c));
  rlx_exec_destroy(a);
  CHECK(run_and_check(b, &d2, &d2, M, c));
  rlx_exec_destroy(b);
}

/* Anything that changes the compiled result misses: a constant's value,
 * strict mode, a shape, device-state pairs, another device. Options that
 * only the backend exec reads (threads) still hit. */
TEST(different_inputs_miss) {
  float c = fresh_constant();
  rlx_exec* base = compile_mlp(dev, M, c, NULL);
  CHECK(base != NULL);
  rlx_compile_cache_stats s = stats_now();
  rlx_exec* other_const = compile_mlp(dev, M, c + 1, NULL);
  CHECK(other_const != NULL && stats_now().hits == s.hits);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.strict = 1;
  rlx_exec* strict = compile_mlp(dev, M, c, &o);
  CHECK(strict != NULL && stats_now().hits == s.hits);
  rlx_exec* other_shape = compile_mlp(dev, M + 1, c, NULL);
  CHECK(other_shape != NULL && stats_now().hits == s.hits);
  rlx_compile_options_init(&o);
  o.threads = 1;
  rlx_exec* threads = compile_mlp(dev, M, c, &o);
  CHECK(threads != NULL && stats_now().hits == s.hits + 1);
  mlp_data d;
  mlp_fill(&d, 8);
  CHECK_OK_E(other_const, set_params(other_const, &d));
  CHECK(run_and_check(other_const, &d, &d, M, c + 1));
  rlx_exec_destroy(base);
  rlx_exec_destroy(other_const);
  rlx_exec_destroy(strict);
  rlx_exec_destroy(other_shape);
  rlx_exec_destroy(threads);
  if (strcmp(dev, "cpu") != 0) { /* the same graph on the CPU is another entry */
    rlx_compile_cache_stats t = stats_now();
    rlx_exec* on_cpu = compile_mlp("cpu", M, c, NULL);
    CHECK(on_cpu != NULL && stats_now().hits == t.hits && stats_now().misses == t.misses + 1);
    rlx_exec_destroy(on_cpu);
  }
}

/* Device-state pairs change the memory plan: they are part of the key. */
TEST(state_pairs_miss) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim s4[1] = {4};
  float one[4] = {1, 1, 1, fresh_constant()};
  rlx_tensor acc, k, sum;
  CHECK_OK_G(g, rlx_graph_add_input(g, "acc", RLX_F32, s4, 1, &acc));
  CHECK_OK_G(g, rlx_graph_add_constant(g, RLX_F32, s4, 1, one, sizeof one, &k));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, acc, k, &sum));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &sum, 1));
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  const char* names[1] = {"acc"};
  int32_t outs[1] = {0};
  o.state_inputs = names;
  o.state_outputs = outs;
  o.n_states = 1;
  rlx_exec* plain = test_compile_on(g, dev, NULL);
  rlx_compile_cache_stats s = stats_now();
  rlx_exec* st = test_compile_on(g, dev, &o);
  CHECK(plain != NULL && st != NULL && stats_now().hits == s.hits);
  rlx_exec* st2 = test_compile_on(g, dev, &o);
  CHECK(st2 != NULL && stats_now().hits == s.hits + 1);
  /* Each state executable accumulates in its own arena. */
  float zero[4] = {0}, got[4];
  CHECK_OK_E(st, rlx_exec_set_input(st, "acc", RLX_F32, s4, 1, zero, sizeof zero));
  CHECK_OK_E(st2, rlx_exec_set_input(st2, "acc", RLX_F32, s4, 1, zero, sizeof zero));
  for (int r = 0; r < 3; r++) CHECK_OK_E(st, rlx_exec_run(st));
  CHECK_OK_E(st2, rlx_exec_run(st2));
  CHECK_OK_E(st, rlx_exec_read_output(st, 0, RLX_F32, got, sizeof got));
  CHECK(got[0] == 3 && got[3] == 3 * one[3]);
  CHECK_OK_E(st2, rlx_exec_read_output(st2, 0, RLX_F32, got, sizeof got));
  CHECK(got[0] == 1 && got[3] == one[3]);
  rlx_exec_destroy(plain);
  rlx_exec_destroy(st);
  rlx_exec_destroy(st2);
  rlx_graph_destroy(g);
}

/* A symbolic graph: each binding is its own entry, shared by a second
 * executable of the same graph. */
TEST(symbolic_bindings_hit) {
  float c = fresh_constant();
  rlx_exec* a = compile_mlp(dev, -1, c, NULL);
  rlx_exec* b = compile_mlp(dev, -1, c, NULL);
  CHECK(a != NULL && b != NULL);
  mlp_data d;
  mlp_fill(&d, 9);
  CHECK_OK_E(a, set_params(a, &d));
  CHECK_OK_E(b, set_params(b, &d));
  CHECK(run_and_check(a, &d, &d, 3, c));
  rlx_compile_cache_stats s = stats_now();
  CHECK(run_and_check(b, &d, &d, 3, c));
  CHECK(stats_now().hits == s.hits + 1);
  CHECK(run_and_check(b, &d, &d, 6, c));
  CHECK(stats_now().hits == s.hits + 1 && stats_now().misses == s.misses + 1);
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

/* RLX_COMPILE_CACHE=0: no lookups, no entries; =1: one entry, evicting
 * the older, whose executables keep running; RLX_COMPILE_CACHE_BYTES below
 * one entry: nothing kept. */
TEST(switch_and_bound) {
  float c = fresh_constant();
  setenv("RLX_COMPILE_CACHE", "0", 1);
  rlx_compile_cache_stats s = stats_now();
  rlx_exec* a = compile_mlp(dev, M, c, NULL);
  rlx_exec* b = compile_mlp(dev, M, c, NULL);
  rlx_compile_cache_stats t = stats_now();
  CHECK(a != NULL && b != NULL);
  CHECK(t.hits == s.hits && t.misses == s.misses && t.inserts == s.inserts);
  rlx_exec_destroy(b);
  setenv("RLX_COMPILE_CACHE", "1", 1);
  rlx_compile_cache_clear();
  b = compile_mlp(dev, M, c + 1, NULL);
  rlx_exec* d1 = compile_mlp(dev, M, c + 2, NULL);
  unsetenv("RLX_COMPILE_CACHE");
  CHECK(b != NULL && d1 != NULL);
  t = stats_now();
  CHECK_MSG(t.entries == 1 && t.evictions >= s.evictions + 1, "%d entries", (int)t.entries);
  mlp_data d;
  mlp_fill(&d, 10);
  CHECK_OK_E(b, set_params(b, &d));
  CHECK(run_and_check(b, &d, &d, M, c + 1)); /* its entry was evicted */
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
  rlx_exec_destroy(d1);
  rlx_compile_cache_clear();
  CHECK(stats_now().entries == 0 && stats_now().bytes == 0);
  /* A byte bound below one entry: nothing is kept, nothing hits. */
  setenv("RLX_COMPILE_CACHE_BYTES", "100", 1);
  s = stats_now();
  a = compile_mlp(dev, M, c, NULL);
  b = compile_mlp(dev, M, c, NULL);
  unsetenv("RLX_COMPILE_CACHE_BYTES");
  CHECK(a != NULL && b != NULL);
  CHECK(stats_now().hits == s.hits && stats_now().entries == 0);
  CHECK_OK_E(b, set_params(b, &d));
  CHECK(run_and_check(b, &d, &d, M, c));
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

/* ------------------------------------------------------------ threads */

typedef struct worker {
  float c;
  mlp_data d;
  int ok;
} worker;

static void* compile_and_run(void* arg) {
  worker* w = arg;
  for (int r = 0; r < 4; r++) {
    rlx_exec* e = compile_mlp(dev, M, w->c, NULL);
    w->ok = e && set_params(e, &w->d) == RLX_OK && run_and_check(e, &w->d, &w->d, M, w->c);
    rlx_exec* k = NULL;
    if (w->ok) w->ok = rlx_exec_clone(e, &k) == RLX_OK && run_and_check(k, &w->d, &w->d, M, w->c);
    rlx_exec_destroy(k);
    rlx_exec_destroy(e);
    if (!w->ok) break;
  }
  return NULL;
}

/* Two threads compile, clone and run the same graph at once: both get
 * right results and the cache keeps one entry for it. */
TEST(two_threads_same_graph) {
  rlx_compile_cache_clear();
  float c = fresh_constant();
  worker w[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    w[i].c = c;
    w[i].ok = 0;
    mlp_fill(&w[i].d, 20 + (uint64_t)i);
  }
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, compile_and_run, &w[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(w[0].ok && w[1].ok);
  CHECK_MSG(stats_now().entries == 1, "%d entries", (int)stats_now().entries);
}

/* ------------------------------------------------------------ main */

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && strcmp(info.name, name) == 0) return info.available;
  }
  return 0;
}

static void run_all(void) {
  printf("-- device %s\n", dev);
  RUN(clone_matches_and_is_independent);
  RUN(clone_outlives_original);
  RUN(clone_shares_compiled_steps);
  RUN(clone_of_symbolic_graph);
  RUN(same_graph_hits);
  RUN(different_inputs_miss);
  RUN(state_pairs_miss);
  RUN(symbolic_bindings_hit);
  RUN(switch_and_bound);
  RUN(two_threads_same_graph);
}

/* argv[1]: one device (77 = skipped when it is unavailable); none: every
 * available device but CUDA (tested on its own machines with an argument). */
int main(int argc, char** argv) {
  unsetenv("RLX_COMPILE_CACHE");
  unsetenv("RLX_COMPILE_CACHE_BYTES");
  if (argc > 1) {
    dev = argv[1];
    if (!device_available(dev)) {
      printf("SKIP: device %s unavailable\n", dev);
      return 77;
    }
    run_all();
    return test_summary();
  }
  static const char* const devices[] = {"cpu", "vulkan", "webgpu"};
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
    if (!device_available(devices[i])) continue;
    dev = devices[i];
    run_all();
  }
  return test_summary();
}
