/* A program that uses an installed (or embedded) rlx the way a user would:
 * only <rlx.h>, linked through pkg-config, find_package(rlx) or
 * add_subdirectory. Builds y = relu(x @ w), runs it on the CPU and checks
 * the numbers against a loop here; prints the library's version, which must
 * be the header's. With CONSUMER_NO_MAIN it is a library (consumer_check) for
 * the shared-object link test. Exit 0 on success. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <rlx.h>

enum { M = 3, K = 4, N = 5 };

static int fail(const char* what, rlx_graph* g, rlx_exec* e) {
  fprintf(stderr, "consumer: %s: %s\n", what,
          e ? rlx_exec_last_error(e) : g ? rlx_graph_last_error(g) : "");
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return 1;
}

/* y = relu(x @ w) with rlx, written to y. */
static int run_graph(const float* x, const float* w, float* y) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  rlx_dim xs[2] = {M, K}, ws[2] = {K, N};
  rlx_tensor tx, tw, mm, out;
  if (rlx_graph_create(&g) != RLX_OK) return fail("graph", NULL, NULL);
  if (rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &tx) != RLX_OK ||
      rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &tw) != RLX_OK ||
      rlx_graph_add_matmul(g, tx, tw, 0, 0, &mm) != RLX_OK ||
      rlx_graph_add_activation(g, RLX_ACT_RELU, mm, &out) != RLX_OK ||
      rlx_graph_set_outputs(g, &out, 1) != RLX_OK)
    return fail("building the graph", g, NULL);
  if (rlx_compile(g, "cpu", NULL, &e) != RLX_OK) return fail("compile", g, NULL);
  if (rlx_exec_set_param(e, "w", RLX_F32, w, sizeof(float) * K * N) != RLX_OK ||
      rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof(float) * M * K) != RLX_OK ||
      rlx_exec_run(e) != RLX_OK ||
      rlx_exec_read_output(e, 0, RLX_F32, y, sizeof(float) * M * N) != RLX_OK)
    return fail("run", g, e);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return 0;
}

int consumer_check(void) {
  printf("rlx %s (header %s)\n", rlx_version(), RLX_VERSION_STRING);
  if (strcmp(rlx_version(), RLX_VERSION_STRING) != 0) {
    fprintf(stderr, "consumer: library %s, header %s\n", rlx_version(), RLX_VERSION_STRING);
    return 1;
  }
  float x[M * K], w[K * N], y[M * N];
  for (int i = 0; i < M * K; i++) x[i] = (float)(i % 7) - 3.0f;
  for (int i = 0; i < K * N; i++) w[i] = 0.25f * (float)(i % 5) - 0.5f;
  if (run_graph(x, w, y)) return 1;
  int positives = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      float want = 0;
      for (int k = 0; k < K; k++) want += x[m * K + k] * w[k * N + n];
      want = want > 0 ? want : 0;
      positives += want > 0;
      if (fabsf(y[m * N + n] - want) > 1e-5f) {
        fprintf(stderr, "consumer: y[%d][%d] = %g, want %g\n", m, n, y[m * N + n], want);
        return 1;
      }
    }
  if (positives == 0 || positives == M * N) {
    fprintf(stderr, "consumer: the data does not exercise relu\n");
    return 1;
  }
  printf("relu(x @ w) on cpu: %d values match\n", M * N);
  return 0;
}

#ifndef CONSUMER_NO_MAIN
int main(void) { return consumer_check(); }
#endif
