#include "harness.h"

#include <math.h>

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
