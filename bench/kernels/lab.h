/* Shared bits of the kernel lab programs (C and CUDA C++): random data,
 * timing, the error measure and the one-line report per variant.
 *
 * Error: max_i |y_i - ref_i| / max_i |ref_i| (relative to the largest
 * reference value, so entries near zero do not blow it up). The reference is
 * computed in double on the host. */
#ifndef RLX_BENCH_KERNELS_LAB_H
#define RLX_BENCH_KERNELS_LAB_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double lab_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* Uniform in [-1, 1), never exactly zero (xorshift; fixed seed per call). */
static inline void lab_fill(float* x, int64_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double u = (double)(s >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0;
    x[i] = (float)(u == 0.0 ? 0.5 : u);
  }
}

static inline double lab_max_rel_err(const float* y, const double* ref, int64_t n) {
  double worst = 0.0, scale = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)y[i] - ref[i]);
    if (d != d) return d; /* NaN: an unwritten (poisoned) or broken output */
    if (d > worst) worst = d;
    if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
  }
  return worst / (scale > 0.0 ? scale : 1.0);
}

static inline int lab_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Median of n samples (sorts them). */
static inline double lab_median(double* ms, int n) {
  qsort(ms, (size_t)n, sizeof(double), lab_cmp_double);
  return ms[n / 2];
}

static inline void lab_header(const char* rate_unit) {
  printf("%-3s %-58s %12s %10s %10s\n", "#", "variant", "max_rel_err", "ms", rate_unit);
}

/* One line per variant: number, description, error, median ms, rate
 * (GFLOP/s or GB/s, from `work` units per run). */
static inline void lab_report(int num, const char* what, double err, double ms, double work) {
  printf("%-3d %-58s %12.3e %10.4f %10.2f\n", num, what, err, ms, work / (ms * 1e-3) / 1e9);
  fflush(stdout);
}

static inline void lab_skip(int num, const char* what, const char* why) {
  printf("%-3d %-58s skipped: %s\n", num, what, why);
  fflush(stdout);
}

#endif
