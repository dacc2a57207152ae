#include "harness.h"

#include "ir/quant.h"

#include <math.h>
#include <stdlib.h>

int test_failures = 0, test_checks = 0;
const char* test_current = "";
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

int test_summary(void) {
  printf("%d checks, %d failures\n", test_checks, test_failures);
  return test_failures ? 1 : 0;
}

void test_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

uint64_t test_rand_u64(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  rng_state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

double test_rand_uniform(double lo, double hi) {
  double u = ((test_rand_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  return lo + (hi - lo) * u;
}

int64_t test_rand_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(test_rand_u64() % (uint64_t)(hi - lo + 1));
}

void test_fill_f32(float* x, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)test_rand_uniform(lo, hi);
}

double test_rel_l2(const double* a, const double* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(a[i]) != isnan(b[i])) return INFINITY;
    if (isnan(a[i])) continue;
    if (isinf(a[i]) || isinf(b[i])) {
      if (a[i] != b[i]) return INFINITY;
      continue;
    }
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return sqrt(num) / (den > 1e-300 ? sqrt(den) : 1e-150);
}

double test_max_abs(const double* a, const double* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(a[i] - b[i]);
    if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
  }
  return m;
}

rlx_exec* test_compile_on(rlx_graph* g, const char* device, const rlx_compile_options* o) {
  rlx_exec* e = NULL;
  if (rlx_compile(g, device, o, &e) != RLX_OK) {
    fprintf(stderr, "compile on %s: %s\n", device, rlx_graph_last_error(g));
    return NULL;
  }
  return e;
}

double* test_read_output_f64(rlx_exec* e, int32_t i, int64_t* n_out) {
  int32_t rank;
  int64_t shape[RLX_MAX_RANK], n = 1;
  if (rlx_exec_output_type(e, i, NULL, &rank, shape) != RLX_OK) return NULL;
  for (int32_t d = 0; d < rank; d++) n *= shape[d];
  double* out = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!out || rlx_exec_read_output(e, i, RLX_F64, out, sizeof(double) * (size_t)n) != RLX_OK) {
    free(out);
    return NULL;
  }
  *n_out = n;
  return out;
}

int test_outputs_match(rlx_exec* a, rlx_exec* b, int32_t i, double tol) {
  int64_t na = 0, nb = 0;
  double *x = test_read_output_f64(a, i, &na), *y = test_read_output_f64(b, i, &nb);
  int ok = x && y && na == nb && test_rel_l2(x, y, na) <= tol;
  if (!ok && x && y) fprintf(stderr, "output %d: rel L2 %g\n", i, test_rel_l2(x, y, na));
  free(x);
  free(y);
  return ok;
}

rlx_graph* test_bias_relu_graph(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {2, 3}, bs[1] = {3};
  rlx_tensor x, b, s, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b);
  rlx_graph_add_binary(g, RLX_BIN_ADD, x, b, &s);
  rlx_graph_add_activation(g, RLX_ACT_RELU, s, &y);
  rlx_graph_set_outputs(g, &y, 1);
  return g;
}


uint8_t* test_quant_rows(rlx_quant_scheme scheme, int64_t N, int64_t K, int32_t group,
                         int64_t* row_bytes) {
  int64_t rb = 0;
  if (rlx_quant_row_bytes(scheme, K, group, &rb, NULL, 0) != RLX_OK) return NULL;
  uint8_t* w = malloc((size_t)(N * rb > 0 ? N * rb : 1));
  for (int64_t i = 0; w && i < N * rb; i++) {
    uint8_t b = (uint8_t)test_rand_int(0, 255);
    if (scheme == RLX_QUANT_FP8_E4M3 && (b & 0x7F) == 0x7F) b ^= 1;
    if (scheme == RLX_QUANT_FP8_E5M2 && (b & 0x7C) == 0x7C) b &= 0xBF;
    w[i] = b;
  }
  const rlx_quant_info* q = &rlx_quant_table[scheme];
  for (int64_t b = 0; w && rlx_quant_is_gguf(scheme) && b < N * rb; b += q->block_bytes)
    for (int f = 0; f < 2; f++)
      if (q->f16[f] >= 0) {
        w[b + q->f16[f]] = (uint8_t)test_rand_int(0, 255);
        w[b + q->f16[f] + 1] = (uint8_t)(0x2c + test_rand_int(0, 3) + 0x80 * test_rand_int(0, 1));
      }
  *row_bytes = rb;
  return w;
}

rlx_status test_quant_const(rlx_graph* g, rlx_quant_scheme scheme, int64_t N, int64_t K,
                            uint64_t seed, rlx_tensor* w, rlx_tensor* scale, rlx_tensor* zero) {
  int64_t rb = 0, G = K / 32;
  int asym = scheme == RLX_QUANT_INT8_ASYM;
  test_seed(seed);
  uint8_t* q = asym ? NULL : test_quant_rows(scheme, N, K, 0, &rb);
  float* wf = asym ? malloc(sizeof(float) * (size_t)(N * K)) : NULL;
  float* sc = malloc(sizeof(float) * (size_t)(N * G));
  uint8_t* z = malloc((size_t)(N * G));
  if (asym && rlx_quant_row_bytes(scheme, K, 32, &rb, NULL, 0) == RLX_OK) q = malloc((size_t)(N * rb));
  rlx_status st = q && sc && z && (wf || !asym) ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  if (st == RLX_OK && asym) {
    test_fill_f32(wf, N * K, -1, 1);
    st = rlx_quantize_rows(scheme, 32, wf, N, K, q, sc, z, NULL);
  }
  rlx_dim ws[2] = {N, rb}, ss[2] = {N, G};
  *scale = *zero = RLX_NONE;
  if (st == RLX_OK) st = rlx_graph_add_constant(g, RLX_U8, ws, 2, q, (size_t)(N * rb), w);
  if (st == RLX_OK && asym)
    st = rlx_graph_add_constant(g, RLX_F32, ss, 2, sc, sizeof(float) * (size_t)(N * G), scale);
  if (st == RLX_OK && asym) st = rlx_graph_add_constant(g, RLX_U8, ss, 2, z, (size_t)(N * G), zero);
  free(wf);
  free(q);
  free(sc);
  free(z);
  return st;
}
