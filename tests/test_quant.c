/* DequantMatMul and its schemes (src/ir/quant.h, include/rlx.h).
 *
 * Against tests/gen_quant.py (run here with Debian's python into a temp
 * dir): every GGUF type's random blocks dequantized by gguf-py (llama.cpp's
 * numpy reference) must equal ours bit for bit; the own schemes' numpy
 * quantizers must give the same codes, scales and zero points as
 * rlx_quantize_rows and the same dequantized values; DequantMatMul on the
 * CPU (fast paths and reference), with the weights set as raw u8 params,
 * must match x @ dequant(W).T in f64 (rel err < 1e-5). Without python,
 * numpy or third_party/llama.cpp those parts are reported as SKIP.
 * Always run: the shape rule's refusals and their messages, the scheme
 * table's queries, a text round trip, and the GEMV timing of a decode
 * shape (RLX_QUANT_BENCH=1: 4096 x 14336 for q8_0, q4_0, q4_k). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "ir/quant.h"

static char data_dir[64];
static int have_data;

/* ------------------------------------------------------------ data files */

typedef struct arr {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} arr;

static int load(const char* name, const char* part, arr* a) {
  char path[4096];
  char* err = NULL;
  snprintf(path, sizeof path, "%s/%s.%s.npy", data_dir, name, part);
  memset(a, 0, sizeof *a);
  if (rlx_npy_load(path, &a->dtype, &a->rank, a->shape, &a->data, &a->bytes, &err) != RLX_OK) {
    rlx_free(err);
    return 0;
  }
  return 1;
}

static void arr_free(arr* a) {
  rlx_free(a->data);
  a->data = NULL;
}

/* Runs the generator; 0 when it cannot (reported as SKIP). */
static int make_data(void) {
  FILE* probe = fopen("third_party/llama.cpp/gguf-py/gguf/quants.py", "r");
  if (!probe) {
    printf("SKIP reference data: third_party/llama.cpp is absent (scripts/setup_llama.sh)\n");
    return 0;
  }
  fclose(probe);
  snprintf(data_dir, sizeof data_dir, "/tmp/rlx_quant_XXXXXX");
  if (!mkdtemp(data_dir)) return 0;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/gen_quant.py %s", data_dir);
  int rc = system(cmd);
  if (rc != 0) {
    printf("SKIP reference data: tests/gen_quant.py exited with %d (numpy missing?)\n", rc);
    return 0;
  }
  return 1;
}

static void remove_data(void) {
  if (!have_data) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", data_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", data_dir);
}

typedef struct qcase {
  char name[64];
  rlx_quant_scheme scheme;
  int32_t group;
} qcase;

static int read_cases(qcase* out, int cap) {
  char path[4096], scheme[32];
  snprintf(path, sizeof path, "%s/cases.txt", data_dir);
  FILE* f = fopen(path, "r");
  int n = 0;
  while (f && n < cap && fscanf(f, "%63s %31s %d", out[n].name, scheme, &out[n].group) == 3)
    if (rlx_quant_scheme_from_name(scheme, &out[n].scheme) == RLX_OK) n++;
  if (f) fclose(f);
  return n;
}

/* ------------------------------------------------------------ dequantization */

/* Row n of w [N, row_bytes] through quant.h, with the case's scales. */
static void dequant_row(const qcase* c, const arr* w, const arr* scale, const arr* aux, int64_t K,
                        int64_t n, float* row) {
  int32_t g = rlx_quant_group(c->scheme, c->group);
  int64_t groups = K / g, gb = rlx_quant_group_bytes(c->scheme, g);
  const uint8_t* bytes = (const uint8_t*)w->data + n * w->shape[1];
  for (int64_t j = 0; j < groups; j++) {
    float s = 1.0f;
    int32_t z = 0;
    if (c->scheme == RLX_QUANT_NVFP4)
      s = rlx_quant_nvfp4_scale(((uint8_t*)scale->data)[n * groups + j], *(float*)aux->data);
    else if (scale->data)
      s = ((float*)scale->data)[n * groups + j];
    if (aux->data && c->scheme != RLX_QUANT_NVFP4) z = ((uint8_t*)aux->data)[n * groups + j];
    rlx_dequant_group(c->scheme, bytes + j * gb, g, s, z, row + j * g);
  }
}

static void load_side(const qcase* c, arr* scale, arr* aux) {
  memset(scale, 0, sizeof *scale);
  memset(aux, 0, sizeof *aux);
  if (rlx_quant_is_gguf(c->scheme)) return;
  load(c->name, "scale", scale);
  if (!load(c->name, "zero", aux)) load(c->name, "global", aux);
}

/* Bitwise: our dequantization of the stored rows equals the reference's. */
static int check_dequant(const qcase* c) {
  arr w, wdq, scale, aux;
  if (!load(c->name, "w", &w) || !load(c->name, "wdq", &wdq)) return 0;
  load_side(c, &scale, &aux);
  int64_t N = wdq.shape[0], K = wdq.shape[1], bad = 0;
  float* row = malloc(sizeof(float) * (size_t)K);
  for (int64_t n = 0; row && n < N; n++) {
    dequant_row(c, &w, &scale, &aux, K, n, row);
    for (int64_t k = 0; k < K; k++) {
      float want = ((float*)wdq.data)[n * K + k];
      if (memcmp(&row[k], &want, sizeof want) != 0 && bad++ < 3)
        fprintf(stderr, "  %s [%lld, %lld]: %.9g, reference %.9g\n", c->name, (long long)n,
                (long long)k, (double)row[k], (double)want);
    }
  }
  int ok = row && bad == 0;
  free(row);
  arr_free(&w), arr_free(&wdq), arr_free(&scale), arr_free(&aux);
  return ok;
}

TEST(dequantization_equals_the_references_bitwise) {
  if (!have_data) { printf("  SKIP (no reference data)\n"); return; }
  qcase cs[32];
  int n = read_cases(cs, 32);
  CHECK(n == RLX_QUANT_COUNT); /* one case per scheme */
  for (int i = 0; i < n; i++) {
    int ok = check_dequant(&cs[i]);
    printf("  %-8s %-14s %s\n", ok ? "ok" : "BAD", cs[i].name,
           rlx_quant_is_gguf(cs[i].scheme) ? "vs gguf-py" : "vs numpy");
    CHECK_MSG(ok, "%s", cs[i].name);
  }
}

static int bytes_equal(const void* a, const arr* b, size_t bytes, const char* what,
                       const char* name) {
  if (b->bytes == bytes && memcmp(a, b->data, bytes) == 0) return 1;
  fprintf(stderr, "  %s: %s differs from numpy's\n", name, what);
  return 0;
}

/* The own schemes' quantizer against the numpy definitions. */
TEST(quantizers_equal_the_numpy_reference) {
  if (!have_data) { printf("  SKIP (no reference data)\n"); return; }
  qcase cs[32];
  int n = read_cases(cs, 32);
  for (int i = 0; i < n; i++) {
    const qcase* c = &cs[i];
    if (rlx_quant_is_gguf(c->scheme)) continue;
    arr src, w, scale, aux;
    CHECK(load(c->name, "src", &src) && load(c->name, "w", &w));
    load_side(c, &scale, &aux);
    int64_t N = src.shape[0], K = src.shape[1];
    uint8_t* q = malloc(w.bytes);
    void* s = malloc(scale.bytes);
    uint8_t* z = aux.bytes ? malloc(aux.bytes) : NULL;
    float global = 0.0f;
    int nv = c->scheme == RLX_QUANT_NVFP4;
    rlx_status st = rlx_quantize_rows(c->scheme, c->group, src.data, N, K, q, s,
                                      nv ? NULL : z, nv ? &global : NULL);
    int ok = st == RLX_OK && bytes_equal(q, &w, w.bytes, "codes", c->name) &&
             bytes_equal(s, &scale, scale.bytes, "scales", c->name) &&
             (!aux.bytes || (nv ? bytes_equal(&global, &aux, sizeof global, "global", c->name)
                                : bytes_equal(z, &aux, aux.bytes, "zero points", c->name)));
    printf("  %-8s quantize %s\n", ok ? "ok" : "BAD", c->name);
    free(q), free(s), free(z);
    arr_free(&src), arr_free(&w), arr_free(&scale), arr_free(&aux);
    CHECK_MSG(ok, "%s", c->name);
  }
}

/* ------------------------------------------------------------ the op */

/* x @ W^T with w (and scales) as params set from the files; 1 if every
 * device / mode matched the f64 reference. */
static int check_matmul(const qcase* c, int reference) {
  arr x, w, y, scale, aux;
  if (!load(c->name, "x", &x) || !load(c->name, "w", &w) || !load(c->name, "y", &y)) return 0;
  load_side(c, &scale, &aux);
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_tensor xt, wt, st = RLX_NONE, at = RLX_NONE, out = RLX_NONE;
  rlx_graph_add_input(g, "x", RLX_F32, x.shape, 2, &xt);
  rlx_graph_add_param(g, "w", RLX_U8, w.shape, 2, &wt);
  if (scale.data) rlx_graph_add_param(g, "scale", scale.dtype, scale.shape, scale.rank, &st);
  if (aux.data) rlx_graph_add_param(g, "aux", aux.dtype, aux.shape, aux.rank, &at);
  rlx_status s = rlx_graph_dequant_matmul(g, xt, wt, st, at, c->scheme, c->group, &out);
  if (s == RLX_OK) s = rlx_graph_set_outputs(g, &out, 1);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = reference;
  rlx_exec* e = s == RLX_OK ? test_compile_on(g, "cpu", &o) : NULL;
  double err = INFINITY;
  if (e && rlx_exec_set_param(e, "w", RLX_U8, w.data, w.bytes) == RLX_OK &&
      (!scale.data ||
       rlx_exec_set_param(e, "scale", scale.dtype, scale.data, scale.bytes) == RLX_OK) &&
      (!aux.data || rlx_exec_set_param(e, "aux", aux.dtype, aux.data, aux.bytes) == RLX_OK) &&
      rlx_exec_set_input(e, "x", RLX_F32, x.shape, 2, x.data, x.bytes) == RLX_OK &&
      rlx_exec_run(e) == RLX_OK) {
    int64_t n = 0;
    double* got = test_read_output_f64(e, 0, &n);
    if (got && n * (int64_t)sizeof(double) == (int64_t)y.bytes) err = test_rel_l2(got, y.data, n);
    free(got);
  } else {
    fprintf(stderr, "  %s: %s\n", c->name, e ? rlx_exec_last_error(e) : rlx_graph_last_error(g));
  }
  printf("  %-8s %-14s %-9s rel err %.2e\n", err < 1e-5 ? "ok" : "BAD", c->name,
         reference ? "reference" : "fast", err);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  arr_free(&x), arr_free(&w), arr_free(&y), arr_free(&scale), arr_free(&aux);
  return err < 1e-5;
}

TEST(dequant_matmul_matches_numpy_on_the_cpu) {
  if (!have_data) { printf("  SKIP (no reference data)\n"); return; }
  qcase cs[32];
  int n = read_cases(cs, 32);
  for (int i = 0; i < n; i++)
    for (int ref = 0; ref < 2; ref++) CHECK_MSG(check_matmul(&cs[i], ref), "%s", cs[i].name);
}

/* ------------------------------------------------------------ refusals */

/* Builds dequant_matmul over x [2, K] and w u8 [N, row_bytes]; returns the
 * status and leaves the message in msg. */
static rlx_status try_build(rlx_quant_scheme scheme, int32_t group, int64_t K, int64_t N,
                            int64_t row_bytes, int with_scale, rlx_dtype scale_dt, int with_aux,
                            char* msg, size_t cap) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {2, K}, ws[2] = {N, row_bytes}, ss[2] = {N, group ? K / group : 1};
  rlx_tensor x, w, s = RLX_NONE, a = RLX_NONE, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", RLX_U8, ws, 2, &w);
  if (with_scale) rlx_graph_add_param(g, "s", scale_dt, ss, 2, &s);
  if (with_aux) rlx_graph_add_param(g, "a", RLX_U8, ss, 2, &a);
  rlx_status st = rlx_graph_dequant_matmul(g, x, w, s, a, scheme, group, &y);
  snprintf(msg, cap, "%s", rlx_graph_last_error(g));
  rlx_graph_destroy(g);
  return st;
}

#define REFUSES(needle, ...)                                                           \
  do {                                                                                 \
    char m_[512];                                                                      \
    rlx_status st_ = try_build(__VA_ARGS__, m_, sizeof m_);                            \
    CHECK_MSG(st_ != RLX_OK && strstr(m_, needle), "expected '%s', got %s: %s", needle, \
              rlx_status_name(st_), m_);                                               \
  } while (0)

TEST(shape_rule_refuses_with_messages) {
  char m[512];
  CHECK_MSG(try_build(RLX_QUANT_Q4_0, 0, 64, 3, 36, 0, RLX_F32, 0, m, sizeof m) == RLX_OK, "%s", m);
  REFUSES("needs 36", RLX_QUANT_Q4_0, 0, 64, 3, 35, 0, RLX_F32, 0);          /* row bytes */
  REFUSES("multiple of q4_k's group of 256", RLX_QUANT_Q4_K, 0, 128, 3, 72, 0, RLX_F32, 0);
  REFUSES("q8_0 has groups of 32", RLX_QUANT_Q8_0, 64, 64, 3, 68, 0, RLX_F32, 0);
  REFUSES("q4_0 takes no scale", RLX_QUANT_Q4_0, 32, 64, 3, 36, 1, RLX_F32, 0);
  REFUSES("int8_sym needs scale", RLX_QUANT_INT8_SYM, 32, 64, 3, 64, 0, RLX_F32, 0);
  REFUSES("needs zero points", RLX_QUANT_INT8_ASYM, 32, 64, 3, 64, 1, RLX_F32, 0);
  REFUSES("must be f32, f16 or bf16", RLX_QUANT_INT8_SYM, 32, 64, 3, 64, 1, RLX_I32, 0);
  REFUSES("(even: two codes per byte)", RLX_QUANT_INT4_SYM, 3, 63, 3, 32, 1, RLX_F32, 0);
  REFUSES("not a positive multiple", RLX_QUANT_INT8_SYM, 32, 48, 3, 48, 1, RLX_F32, 0);
  REFUSES("not a quantization scheme", (rlx_quant_scheme)99, 32, 64, 3, 64, 0, RLX_F32, 0);
  CHECK_MSG(try_build(RLX_QUANT_INT4_ASYM, 16, 64, 3, 32, 1, RLX_F16, 1, m, sizeof m) == RLX_OK,
            "%s", m);
}

TEST(scheme_queries) {
  int64_t rb = 0;
  char msg[160];
  CHECK(rlx_quant_row_bytes(RLX_QUANT_Q4_K, 4096, 0, &rb, msg, sizeof msg) == RLX_OK && rb == 2304);
  CHECK(rlx_quant_row_bytes(RLX_QUANT_Q6_K, 512, 0, &rb, NULL, 0) == RLX_OK && rb == 420);
  CHECK(rlx_quant_row_bytes(RLX_QUANT_NVFP4, 64, 0, &rb, NULL, 0) == RLX_OK && rb == 32);
  CHECK(rlx_quant_row_bytes(RLX_QUANT_Q8_0, 33, 0, &rb, msg, sizeof msg) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(msg, "K = 33"));
  rlx_quant_scheme s;
  for (int i = 0; i < RLX_QUANT_COUNT; i++)
    CHECK(rlx_quant_scheme_from_name(rlx_quant_scheme_name((rlx_quant_scheme)i), &s) == RLX_OK &&
          s == (rlx_quant_scheme)i);
  CHECK(rlx_quant_scheme_from_name("q7_k", &s) == RLX_NOT_FOUND);
  CHECK(rlx_quant_scheme_name(RLX_QUANT_COUNT) == NULL);
}

TEST(text_round_trip) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {2, 64}, ws[2] = {3, 32}, ss[2] = {3, 4};
  rlx_tensor x, w, s, z, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", RLX_U8, ws, 2, &w);
  rlx_graph_add_param(g, "s", RLX_BF16, ss, 2, &s);
  rlx_graph_add_param(g, "z", RLX_U8, ss, 2, &z);
  CHECK_OK_G(g, rlx_graph_dequant_matmul(g, x, w, s, z, RLX_QUANT_INT4_ASYM, 16, &y));
  rlx_graph_set_outputs(g, &y, 1);
  char *t1 = NULL, *t2 = NULL;
  rlx_graph* h = NULL;
  CHECK_OK_G(g, rlx_graph_print(g, &t1));
  CHECK_MSG(strstr(t1, "dequant_matmul(") && strstr(t1, "scheme=int4_asym") &&
                strstr(t1, "block=16"),
            "%s", t1);
  char* err = NULL;
  CHECK_MSG(rlx_graph_parse(t1, &h, &err) == RLX_OK, "%s", err ? err : "");
  CHECK_OK_G(h, rlx_graph_print(h, &t2));
  CHECK_MSG(strcmp(t1, t2) == 0, "%s\n---\n%s", t1, t2);
  rlx_free(t1), rlx_free(t2);
  rlx_graph_destroy(g);
  rlx_graph_destroy(h);
}

/* ------------------------------------------------------------ decode timing */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Random blocks with a small finite f16 scale at each scale field. */
static void fill_blocks(rlx_quant_scheme scheme, uint8_t* w, int64_t bytes) {
  const rlx_quant_info* q = &rlx_quant_table[scheme];
  for (int64_t i = 0; i < bytes; i++) w[i] = (uint8_t)test_rand_int(0, 255);
  for (int64_t b = 0; b + q->block_bytes <= bytes; b += q->block_bytes)
    for (int f = 0; f < 2; f++)
      if (q->f16[f] >= 0) w[b + q->f16[f]] = 0, w[b + q->f16[f] + 1] = 0x20; /* 2^-7 */
}

/* ms per x [1, K] . W^T for W [N, K] in scheme on the CPU fast path
 * (scheme -1: an f32 W through MatMul, for comparison). */
static double gemv_ms(int scheme, int64_t N, int64_t K, int runs) {
  int64_t rb = 4 * K;
  if (scheme >= 0 && rlx_quant_row_bytes((rlx_quant_scheme)scheme, K, 0, &rb, NULL, 0) != RLX_OK)
    return -1;
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {1, K}, ws[2] = {N, scheme >= 0 ? rb : K};
  rlx_tensor x, w, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", scheme >= 0 ? RLX_U8 : RLX_F32, ws, 2, &w);
  if (scheme >= 0)
    rlx_graph_dequant_matmul(g, x, w, RLX_NONE, RLX_NONE, (rlx_quant_scheme)scheme, 0, &y);
  else
    rlx_graph_add_matmul(g, x, w, 0, 1, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  uint8_t* wb = malloc((size_t)(N * rb));
  float* xb = malloc(sizeof(float) * (size_t)K);
  double best = -1;
  if (e && wb && xb) {
    if (scheme >= 0) fill_blocks((rlx_quant_scheme)scheme, wb, N * rb);
    else test_fill_f32((float*)wb, N * K, -1, 1);
    test_fill_f32(xb, K, -1, 1);
    rlx_exec_set_param(e, "w", scheme >= 0 ? RLX_U8 : RLX_F32, wb, (size_t)(N * rb));
    rlx_exec_set_input(e, "x", RLX_F32, xs, 2, xb, sizeof(float) * (size_t)K);
    rlx_exec_run(e); /* upload */
    for (int r = 0; r < runs; r++) {
      double t0 = now_ms();
      if (rlx_exec_run(e) != RLX_OK) break;
      double t = now_ms() - t0;
      if (best < 0 || t < best) best = t;
    }
  }
  free(wb), free(xb);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return best;
}

TEST(decode_gemv_timing) {
  int big = getenv("RLX_QUANT_BENCH") != NULL;
  int64_t N = big ? 14336 : 512, K = big ? 4096 : 1024;
  const int s[] = {-1, RLX_QUANT_Q8_0, RLX_QUANT_Q4_0, RLX_QUANT_Q4_K, RLX_QUANT_Q6_K};
  for (int i = 0; i < 5; i++) {
    double ms = gemv_ms(s[i], N, K, big ? 20 : 3);
    printf("  gemv %-5s W [%lld, %lld] x [1, %lld]: %.3f ms (best of %d)\n",
           s[i] < 0 ? "f32" : rlx_quant_scheme_name((rlx_quant_scheme)s[i]), (long long)N,
           (long long)K, (long long)K, ms, big ? 20 : 3);
    CHECK(ms >= 0);
  }
}

/* y of x [1, K] . W^T for Q4_0 bytes wb [N, rb] on exec e. */
static int q4_0_run(rlx_exec* e, const uint8_t* wb, int64_t N, int64_t rb, const float* xb,
                    int64_t K, float* y) {
  rlx_dim xs[2] = {1, K};
  return rlx_exec_set_param(e, "w", RLX_U8, wb, (size_t)(N * rb)) == RLX_OK &&
         rlx_exec_set_input(e, "x", RLX_F32, xs, 2, xb, sizeof(float) * (size_t)K) == RLX_OK &&
         rlx_exec_run(e) == RLX_OK &&
         rlx_exec_read_output(e, 0, RLX_F32, y, sizeof(float) * (size_t)N) == RLX_OK;
}

/* The CPU backend stores a Q4_0 DequantMatMul's W rows-interleaved in
 * place (repack.c) where its CPU has AVX-512 VNNI: a new W set after runs,
 * the same W set again, and a clone (params copied from the host) must all
 * give the reference's values, on N with a plain tail (N % 8). */
TEST(q4_0_weights_repacked_in_place_follow_param_changes) {
  int64_t N = 45, K = 256, rb = K / 32 * 18;
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {1, K}, ws[2] = {N, rb};
  rlx_tensor x, w, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", RLX_U8, ws, 2, &w);
  rlx_graph_dequant_matmul(g, x, w, RLX_NONE, RLX_NONE, RLX_QUANT_Q4_0, 0, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_compile_options ro;
  rlx_compile_options_init(&ro);
  ro.reference = 1;
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  rlx_exec* ref = test_compile_on(g, "cpu", &ro);
  uint8_t *w1 = malloc((size_t)(N * rb)), *w2 = malloc((size_t)(N * rb));
  float xb[256], got[45], want[45];
  CHECK(e && ref && w1 && w2);
  if (e && ref && w1 && w2) {
    fill_blocks(RLX_QUANT_Q4_0, w1, N * rb);
    fill_blocks(RLX_QUANT_Q4_0, w2, N * rb);
    test_fill_f32(xb, K, -1, 1);
    const uint8_t* ws_[4] = {w1, w2, w2, w1};
    for (int step = 0; step < 4; step++) {
      CHECK(q4_0_run(e, ws_[step], N, rb, xb, K, got));
      CHECK(q4_0_run(ref, ws_[step], N, rb, xb, K, want));
      double worst = 0, scale = 0;
      for (int64_t n = 0; n < N; n++) {
        worst = fmax(worst, fabs((double)got[n] - want[n]));
        scale = fmax(scale, fabs((double)want[n]));
      }
      CHECK_MSG(worst <= 1e-5 * scale, "W set %d: max error %g of %g", step, worst, scale);
    }
    rlx_exec* c = NULL;
    CHECK_OK_E(e, rlx_exec_clone(e, &c));
    if (c) {
      CHECK(q4_0_run(c, w2, N, rb, xb, K, got) && q4_0_run(ref, w2, N, rb, xb, K, want));
      for (int64_t n = 0; n < N; n++) CHECK_MSG(fabs((double)got[n] - want[n]) <= 1e-4 * fabs(want[n]) + 1e-6, "clone row %lld", (long long)n);
      rlx_exec_destroy(c);
    }
  }
  free(w1), free(w2);
  rlx_exec_destroy(e);
  rlx_exec_destroy(ref);
  rlx_graph_destroy(g);
}

int main(void) {
  test_seed(17);
  have_data = make_data();
  RUN(dequantization_equals_the_references_bitwise);
  RUN(quantizers_equal_the_numpy_reference);
  RUN(dequant_matmul_matches_numpy_on_the_cpu);
  RUN(shape_rule_refuses_with_messages);
  RUN(scheme_queries);
  RUN(text_round_trip);
  RUN(decode_gemv_timing);
  RUN(q4_0_weights_repacked_in_place_follow_param_changes);
  remove_data();
  return test_summary();
}
