/* Minimal test harness shared by tests/test_*.c.
 *   TEST(name) { CHECK(cond); CHECK_OK(status_expr); ... }
 *   int main(void) { RUN(name); ...; return test_summary(); }
 * A failed CHECK records the failure and returns from the test function.
 * RLX_TEST_ONLY=<substring> runs only the tests whose names contain it. */
#ifndef RLX_TESTS_HARNESS_H
#define RLX_TESTS_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rlx.h"

extern int test_failures, test_checks;
extern const char* test_current;

#define TEST(name) static void name(void)
#define RUN(name)                                   \
  do {                                              \
    const char* only_ = getenv("RLX_TEST_ONLY");    \
    if (only_ && !strstr(#name, only_)) break;      \
    int before_ = test_failures;                    \
    test_current = #name;                           \
    name();                                         \
    printf("%s %s\n", test_failures == before_ ? "PASS" : "FAIL", #name); \
    fflush(stdout);                                 \
  } while (0)

#define CHECK(cond)                                                              \
  do {                                                                           \
    test_checks++;                                                               \
    if (!(cond)) {                                                               \
      test_failures++;                                                           \
      fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__,       \
              test_current, #cond);                                              \
      return;                                                                    \
    }                                                                            \
  } while (0)

#define CHECK_MSG(cond, ...)                                                     \
  do {                                                                           \
    test_checks++;                                                               \
    if (!(cond)) {                                                               \
      test_failures++;                                                           \
      fprintf(stderr, "%s:%d: %s: CHECK(%s) failed: ", __FILE__, __LINE__,       \
              test_current, #cond);                                              \
      fprintf(stderr, __VA_ARGS__);                                              \
      fprintf(stderr, "\n");                                                     \
      return;                                                                    \
    }                                                                            \
  } while (0)

/* Checks a status-returning call succeeded; prints the graph/exec error. */
#define CHECK_OK_G(g, expr) CHECK_MSG((expr) == RLX_OK, "%s", rlx_graph_last_error(g))
#define CHECK_OK_E(e, expr) CHECK_MSG((expr) == RLX_OK, "%s", rlx_exec_last_error(e))

int test_summary(void);

/* Deterministic random numbers (xorshift) for test data. */
void test_seed(uint64_t s);
uint64_t test_rand_u64(void);
double test_rand_uniform(double lo, double hi); /* never exactly 0 unless lo==hi==0 */
int64_t test_rand_int(int64_t lo, int64_t hi);   /* inclusive */
void test_fill_f32(float* x, int64_t n, double lo, double hi);

/* N stored rows of K elements in quantization scheme `scheme` (group as
 * rlx_graph_dequant_matmul's), random but valid: random bytes, with each
 * GGUF block's f16 scale fields set to small finite values (|d| ~ 2^-4)
 * and no FP8 NaN codes. malloc'd; *row_bytes gets a row's bytes. NULL
 * when the scheme does not fit K / group or memory runs out. */
uint8_t* test_quant_rows(rlx_quant_scheme scheme, int64_t N, int64_t K, int32_t group,
                         int64_t* row_bytes);

/* W [N, K] of a DequantMatMul as graph constants, seeded by seed: a GGUF
 * scheme's random valid rows (test_quant_rows; *scale and *zero
 * RLX_NONE), or for INT8_ASYM random values in [-1, 1] quantized per 32
 * by rlx_quantize_rows, with f32 scales and u8 zero points [N, K / 32]. */
rlx_status test_quant_const(rlx_graph* g, rlx_quant_scheme scheme, int64_t N, int64_t K,
                            uint64_t seed, rlx_tensor* w, rlx_tensor* scale, rlx_tensor* zero);

/* Relative L2 error ||a-b|| / max(||b||, tiny) over n doubles. */
double test_rel_l2(const double* a, const double* b, int64_t n);
/* Compiles g for device; prints the graph's error and returns NULL on failure. */
rlx_exec* test_compile_on(rlx_graph* g, const char* device, const rlx_compile_options* o);
/* y = relu(x + b): x an f32[2,3] input named "x", b an f32[3] param named "b". */
rlx_graph* test_bias_relu_graph(void);
/* Output i of e as doubles in a malloc'd array (*n_out elements), or NULL. */
double* test_read_output_f64(rlx_exec* e, int32_t i, int64_t* n_out);
/* Output i of a and b agree to relative L2 tol (prints the error if not). */
int test_outputs_match(rlx_exec* a, rlx_exec* b, int32_t i, double tol);
/* Max absolute difference. */
double test_max_abs(const double* a, const double* b, int64_t n);

#endif
