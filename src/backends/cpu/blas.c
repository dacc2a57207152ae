/* OpenBLAS (or any CBLAS) sgemm, loaded at run time so the library neither
 * links against nor requires it. The handle is opened once per process and
 * kept for its lifetime (dlclose would invalidate a pointer another executable
 * may be using). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>

#include "backends/cpu/cpu.h"

/* CBLAS enum values (cblas.h) and the LP64 integer type of Debian's build. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float* a, int lda, const float* b, int ldb,
                               float beta, float* c, int ldc);

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static cblas_sgemm_fn blas_sgemm; /* written once under blas_once, then read-only */

static void blas_load(void) {
  static const char* const names[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    /* dlsym returns void*; the cast through a union keeps -Wpedantic quiet. */
    union { void* p; cblas_sgemm_fn f; } sym;
    sym.p = dlsym(h, "cblas_sgemm");
    if (sym.p) {
      blas_sgemm = sym.f;
      return;
    }
    dlclose(h);
  }
}

int rlx_cpu_blas_available(void) {
  pthread_once(&blas_once, blas_load);
  return blas_sgemm != NULL;
}

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

void rlx_cpu_blas_sgemm(int a_trans, int b_trans, int64_t M, int64_t N, int64_t K,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                        int64_t ldc) {
  int ok = rlx_cpu_blas_available() && fits_int(M) && fits_int(N) && fits_int(K) &&
           fits_int(lda) && fits_int(ldb) && fits_int(ldc);
  if (!ok) {
    /* No BLAS, or sizes beyond its 32-bit ints: our own kernel handles it. */
    rlx_cpu_sgemm(NULL, a_trans, b_trans, M, N, K, A, lda, B, ldb, C, ldc);
    return;
  }
  if (M == 0 || N == 0) return;
  /* CBLAS requires ld >= max(1, cols) even where a dim is 0 or 1. */
  int64_t a_cols = a_trans ? M : K, b_cols = b_trans ? K : N;
  if (lda < a_cols || lda < 1 || ldb < b_cols || ldb < 1 || ldc < N) {
    rlx_cpu_sgemm(NULL, a_trans, b_trans, M, N, K, A, lda, B, ldb, C, ldc);
    return;
  }
  blas_sgemm(CBLAS_ROW_MAJOR, a_trans ? CBLAS_TRANS : CBLAS_NO_TRANS,
             b_trans ? CBLAS_TRANS : CBLAS_NO_TRANS, (int)M, (int)N, (int)K, 1.0f, A, (int)lda,
             B, (int)ldb, 0.0f, C, (int)ldc);
}
