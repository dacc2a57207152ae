/* Vision gradients through the public API (issue 15): ResNet-50's conv
 * weight gradients (ConvBackwardWeight: cuDNN's backward filter on CUDA,
 * the Im2Col + MatMul + Reduce decomposition elsewhere), one input
 * gradient (ConvTranspose of dy: cuDNN's backward data) and the stem's
 * max-pool backward, B32, exact f32 and bf16. One JSON line per case with
 * the median wall time of a synchronous run (inputs uploaded once: only
 * the kernels and the sync are timed) and TFLOP/s for the convolutions.
 *
 *   vision_backward [device] [filter]   device default cuda; filter: substring
 *
 * On the GPU machine:  build-cuda/vision_backward cuda
 * and with cuDNN switched off (the decomposition): RLX_CUDNN_LIB=none ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

#define WARMUP 3
#define ITERS 15

typedef enum { CONV_WGRAD, CONV_DGRAD, MAXPOOL_BWD } bench_kind;

typedef struct bench_case {
  const char* name;
  bench_kind kind;
  rlx_dtype dtype;
  int64_t N, C, OC, H, k, stride, pad;
} bench_case;

static const bench_case CASES[] = {
    {"wgrad 3x3 c64 56x56 f32", CONV_WGRAD, RLX_F32, 32, 64, 64, 56, 3, 1, 1},
    {"wgrad 3x3 c64 56x56 bf16", CONV_WGRAD, RLX_BF16, 32, 64, 64, 56, 3, 1, 1},
    {"wgrad 1x1 c256->1024 14x14 f32", CONV_WGRAD, RLX_F32, 32, 256, 1024, 14, 1, 1, 0},
    {"wgrad 7x7/2 stem 224x224 f32", CONV_WGRAD, RLX_F32, 32, 3, 64, 224, 7, 2, 3},
    {"dgrad 3x3 c64 56x56 f32", CONV_DGRAD, RLX_F32, 32, 64, 64, 56, 3, 1, 1},
    {"dgrad 3x3 c64 56x56 bf16", CONV_DGRAD, RLX_BF16, 32, 64, 64, 56, 3, 1, 1},
    {"maxpool 3x3/2 bwd c64 112x112 f32", MAXPOOL_BWD, RLX_F32, 32, 64, 64, 112, 3, 2, 1},
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Sets input `name` of e to uniform random values converted to dtype. */
static rlx_status random_input(rlx_exec* e, const char* name, rlx_dtype dtype, const rlx_dim* s,
                               int32_t rank) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) n *= s[d];
  float* f = malloc(sizeof(float) * (size_t)n);
  void* buf = malloc(sizeof(float) * (size_t)n);
  rlx_status st = f && buf ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; st == RLX_OK && i < n; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    f[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  if (st == RLX_OK) st = rlx_dtype_convert(buf, dtype, f, RLX_F32, n);
  size_t bytes = (size_t)n * (dtype == RLX_F32 ? 4u : 2u);
  if (st == RLX_OK) st = rlx_exec_set_input(e, name, dtype, s, rank, buf, bytes);
  free(f);
  free(buf);
  return st;
}

/* The graph of one case: inputs x (or dy for dgrad), dy / w; one output. */
static rlx_status build(rlx_graph* g, const bench_case* c, rlx_dim* xs, rlx_dim* ys,
                        rlx_dim* ws) {
  int64_t st[2] = {c->stride, c->stride}, pads[4] = {c->pad, c->pad, c->pad, c->pad};
  int64_t out = (c->H + 2 * c->pad - c->k) / c->stride + 1, k[2] = {c->k, c->k};
  rlx_dim x4[4] = {c->N, c->C, c->H, c->H}, y4[4] = {c->N, c->OC, out, out};
  rlx_dim w4[4] = {c->OC, c->C, c->k, c->k};
  memcpy(xs, x4, sizeof x4), memcpy(ys, y4, sizeof y4), memcpy(ws, w4, sizeof w4);
  rlx_tensor x, dy, w, r;
  rlx_status s = rlx_graph_add_input(g, "x", c->dtype, xs, 4, &x);
  if (s == RLX_OK) s = rlx_graph_add_input(g, "dy", c->dtype, ys, 4, &dy);
  if (s == RLX_OK) s = rlx_graph_add_input(g, "w", c->dtype, ws, 4, &w);
  if (s != RLX_OK) return s;
  if (c->kind == CONV_WGRAD)
    s = rlx_graph_add_conv_backward_weight(g, x, dy, w, 2, st, pads, NULL, 1,
                                           RLX_CONV_CHANNELS_FIRST, &r);
  else if (c->kind == CONV_DGRAD) /* stride 1: no output_padding */
    s = rlx_graph_add_conv_transpose(g, dy, w, RLX_NONE, RLX_NONE, 2, st, pads, NULL, NULL, 1,
                                     RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &r);
  else
    s = rlx_graph_add_pool_backward(g, x, dy, RLX_POOL_MAX, 2, k, st, pads, NULL, 0, 0, &r);
  return s == RLX_OK ? rlx_graph_set_outputs(g, &r, 1) : s;
}

static void run_case(const bench_case* c, const char* device) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  rlx_dim xs[4], ys[4], ws[4];
  double t[ITERS];
  rlx_status s = rlx_graph_create(&g);
  if (s == RLX_OK) s = build(g, c, xs, ys, ws);
  if (s == RLX_OK) s = rlx_compile(g, device, NULL, &e);
  const char* why = s == RLX_OK ? "" : rlx_graph_last_error(g);
  if (s == RLX_OK) s = random_input(e, "x", c->dtype, xs, 4);
  if (s == RLX_OK) s = random_input(e, "dy", c->dtype, ys, 4);
  if (s == RLX_OK) s = random_input(e, "w", c->dtype, ws, 4);
  for (int i = 0; s == RLX_OK && i < WARMUP; i++) s = rlx_exec_run(e);
  for (int i = 0; s == RLX_OK && i < ITERS; i++) {
    double t0 = now_ms();
    s = rlx_exec_run(e);
    t[i] = now_ms() - t0;
  }
  if (s != RLX_OK) {
    printf("{\"case\": \"%s\", \"device\": \"%s\", \"error\": \"%s\"}\n", c->name, device,
           e ? rlx_exec_last_error(e) : why);
  } else {
    qsort(t, ITERS, sizeof t[0], cmp_double);
    double flops = 2.0 * (double)(ys[0] * ys[1] * ys[2] * ys[3]) * (double)(c->C * c->k * c->k);
    printf("{\"case\": \"%s\", \"device\": \"%s\", \"ms\": %.4f", c->name, device, t[ITERS / 2]);
    if (c->kind != MAXPOOL_BWD) printf(", \"tflops\": %.2f", flops / (t[ITERS / 2] * 1e9));
    printf("}\n");
  }
  fflush(stdout);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cuda";
  const char* filter = argc > 2 ? argv[2] : NULL;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    if (!filter || strstr(CASES[i].name, filter)) run_case(&CASES[i], device);
  return 0;
}
