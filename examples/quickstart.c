/* The README's C quick start: y = relu(x @ w) built, compiled and run on the
 * best available device, checked against a plain loop. ctest builds and runs
 * it (example_quickstart), so the README cannot drift from a working program.
 *
 *   cc quickstart.c $(pkg-config --cflags --libs rlx) && ./a.out [device] */
#include <math.h>
#include <stdio.h>

#include "rlx.h"

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "best";
  float x[2 * 3] = {1, -2, 3, 4, 5, 6};
  float w[3 * 2] = {0.5f, 1, 0.25f, -2, 0.75f, 1};
  float y[2 * 2];

  /* Build: shapes are inferred and checked as nodes are added. */
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  const int64_t xs[2] = {2, 3}, ws[2] = {3, 2};
  rlx_tensor tx, tw, xw, ty;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &tx);
  rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &tw);
  rlx_graph_add_matmul(g, tx, tw, 0, 0, &xw);
  rlx_graph_add_activation(g, RLX_ACT_RELU, xw, &ty);
  if (rlx_graph_set_outputs(g, &ty, 1) != RLX_OK) {
    fprintf(stderr, "graph: %s\n", rlx_graph_last_error(g));
    return 1;
  }

  /* Compile for a device, set the weight, run, read the result. */
  rlx_exec* e = NULL;
  if (rlx_compile(g, device, NULL, &e) != RLX_OK) {
    fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g));
    return 1;
  }
  if (rlx_exec_set_param(e, "w", RLX_F32, w, sizeof w) != RLX_OK ||
      rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x) != RLX_OK ||
      rlx_exec_run(e) != RLX_OK ||
      rlx_exec_read_output(e, 0, RLX_F32, y, sizeof y) != RLX_OK) {
    fprintf(stderr, "run: %s\n", rlx_exec_last_error(e));
    return 1;
  }

  /* The same product by hand. */
  int bad = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      float want = 0;
      for (int k = 0; k < 3; k++) want += x[i * 3 + k] * w[k * 2 + j];
      want = want > 0 ? want : 0;
      printf("y[%d][%d] = %g (want %g)\n", i, j, y[i * 2 + j], want);
      bad |= fabsf(y[i * 2 + j] - want) > 1e-5f;
    }
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return bad;
}
