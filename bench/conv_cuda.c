/* Convolution benchmark through the public API (issue 14, item 6): conv2d
 * 3x3, stride 1, pad 1, B32 C256 -> 256, 56x56, in exact f32, TF32 (opt-in)
 * and bf16, channels first (NCHW) and channels last (NHWC), plain and with
 * bias + ReLU fused. One JSON line per case with the median device time
 * (CUDA events, RLX_CUDA_TIMING=1; Vulkan: RLX_VK_TIMING=1 also prints the
 * GPU time at exit; wall time elsewhere), TFLOP/s, the
 * relative L2 error of a small shape of the same graph against the CPU
 * backend, and the backend's conv line of the dispatch report (cuDNN or the
 * decomposition). bench/conv_torch.py times the same cases in PyTorch.
 *
 *   conv_cuda [device] [filter]   device default cuda; filter: substring */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

#define WARMUP 5
#define ITERS 30

typedef struct conv_case {
  const char* name;
  rlx_dtype dtype;
  int tf32;
  rlx_conv_layout layout;
  int bias_relu;
} conv_case;

static const conv_case CASES[] = {
    {"conv3x3 f32 nchw", RLX_F32, 0, RLX_CONV_CHANNELS_FIRST, 0},
    {"conv3x3 f32-tf32 nchw", RLX_F32, 1, RLX_CONV_CHANNELS_FIRST, 0},
    {"conv3x3 bf16 nchw", RLX_BF16, 0, RLX_CONV_CHANNELS_FIRST, 0},
    {"conv3x3 f32 nhwc", RLX_F32, 0, RLX_CONV_CHANNELS_LAST, 0},
    {"conv3x3 f32-tf32 nhwc", RLX_F32, 1, RLX_CONV_CHANNELS_LAST, 0},
    {"conv3x3 bf16 nhwc", RLX_BF16, 0, RLX_CONV_CHANNELS_LAST, 0},
    {"conv3x3+bias+relu f32 nchw", RLX_F32, 0, RLX_CONV_CHANNELS_FIRST, 1},
    {"conv3x3+bias+relu bf16 nhwc", RLX_BF16, 0, RLX_CONV_CHANNELS_LAST, 1},
    /* f16: Vulkan's cooperative-matrix conv kernel (conv_coop.comp) */
    {"conv3x3 f16 nchw", RLX_F16, 0, RLX_CONV_CHANNELS_FIRST, 0},
    {"conv3x3 f16 nhwc", RLX_F16, 0, RLX_CONV_CHANNELS_LAST, 0},
    {"conv3x3+bias+relu f16 nhwc", RLX_F16, 0, RLX_CONV_CHANNELS_LAST, 1},
    /* the weight already [OC, 3, 3, C]: cuDNN reads it without the per-run reorder */
    {"conv3x3 f32-tf32 nhwc ohwi", RLX_F32, 1, RLX_CONV_CHANNELS_LAST_OHWI, 0},
    {"conv3x3 bf16 nhwc ohwi", RLX_BF16, 0, RLX_CONV_CHANNELS_LAST_OHWI, 0},
};

/* Problem size: the benchmark's, or a small one for the CPU check. */
typedef struct dims {
  int64_t B, C, OC, H, W;
} dims;
static const dims FULL = {32, 256, 256, 56, 56};
static const dims SMALL = {2, 16, 24, 9, 7};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + 1e-6 * (double)t.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rand_float(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  double u = (double)(rng >> 11) * (1.0 / 9007199254740992.0);
  return (float)(u * 2.0 - 1.0);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static void x_shape(const conv_case* c, dims d, rlx_dim* s) {
  int last = c->layout != RLX_CONV_CHANNELS_FIRST;
  s[0] = d.B;
  s[1] = last ? d.H : d.C;
  s[2] = last ? d.W : d.H;
  s[3] = last ? d.C : d.W;
}

static void w_shape(const conv_case* c, dims d, rlx_dim* s) {
  int ohwi = c->layout == RLX_CONV_CHANNELS_LAST_OHWI;
  s[0] = d.OC;
  s[1] = ohwi ? 3 : d.C;
  s[2] = 3;
  s[3] = ohwi ? d.C : 3;
}

/* x [B, C, H, W] (or [B, H, W, C]), w [OC, C, 3, 3] (or [OC, 3, 3, C]), bias [OC]. */
static rlx_graph* build(const conv_case* c, dims d) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[4], ws[4], bs[1] = {d.OC};
  x_shape(c, d, xs);
  w_shape(c, d, ws);
  rlx_tensor x, w, b = RLX_NONE, y;
  int64_t strides[2] = {1, 1}, pads[4] = {1, 1, 1, 1}, dil[2] = {1, 1};
  int ok = rlx_graph_add_input(g, "x", c->dtype, xs, 4, &x) == RLX_OK &&
           rlx_graph_add_input(g, "w", c->dtype, ws, 4, &w) == RLX_OK;
  if (ok && c->bias_relu) ok = rlx_graph_add_input(g, "b", c->dtype, bs, 1, &b) == RLX_OK;
  ok = ok && rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, strides, pads, dil, 1,
                                c->bias_relu ? RLX_ACT_RELU : RLX_ACT_NONE, c->layout,
                                &y) == RLX_OK;
  ok = ok && rlx_graph_set_outputs(g, &y, 1) == RLX_OK;
  if (!ok) {
    fprintf(stderr, "%s: building the graph failed: %s\n", c->name, rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

static int set_random(rlx_exec* e, const char* name, rlx_dtype t, const rlx_dim* shape,
                      int32_t rank, float scale) {
  int64_t n = 1;
  for (int32_t k = 0; k < rank; k++) n *= shape[k];
  size_t es = rlx_dtype_size(t);
  void* buf = malloc(es * (size_t)n);
  if (!buf) return 0;
  for (int64_t j = 0; j < n; j++) {
    float f = rand_float() * scale;
    rlx_dtype_convert((char*)buf + (size_t)j * es, t, &f, RLX_F32, 1);
  }
  rlx_status s = rlx_exec_set_input(e, name, t, shape, rank, buf, es * (size_t)n);
  free(buf);
  return s == RLX_OK;
}

static int set_inputs(const conv_case* c, dims d, rlx_exec* e) {
  rlx_dim xs[4], ws[4], bs[1] = {d.OC};
  x_shape(c, d, xs);
  w_shape(c, d, ws);
  float wscale = 1.0f / sqrtf((float)(d.C * 9)); /* keeps outputs O(1) */
  return set_random(e, "x", c->dtype, xs, 4, 1.0f) &&
         set_random(e, "w", c->dtype, ws, 4, wscale) &&
         (!c->bias_relu || set_random(e, "b", c->dtype, bs, 1, 1.0f));
}

static rlx_exec* compile(rlx_graph* g, const char* device, int tf32) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.allow_tf32 = tf32;
  rlx_exec* e = NULL;
  return rlx_compile(g, device, &o, &e) == RLX_OK ? e : NULL;
}

static double out_numel(dims d) { return (double)(d.B * d.OC * d.H * d.W); }

/* Relative L2 of the small shape between device and the CPU backend. */
static double check(const conv_case* c, const char* device) {
  rlx_graph* g = build(c, SMALL);
  if (!g) return -1;
  rlx_exec* a = compile(g, device, c->tf32);
  rlx_exec* b = compile(g, "cpu", 0);
  size_t n = (size_t)out_numel(SMALL);
  float* ya = malloc(n * sizeof(float));
  float* yb = malloc(n * sizeof(float));
  double err = -1;
  uint64_t saved = rng;
  if (a && b && ya && yb && set_inputs(c, SMALL, a) && (rng = saved, set_inputs(c, SMALL, b)) &&
      rlx_exec_run(a) == RLX_OK && rlx_exec_run(b) == RLX_OK &&
      rlx_exec_read_output(a, 0, RLX_F32, ya, n * sizeof(float)) == RLX_OK &&
      rlx_exec_read_output(b, 0, RLX_F32, yb, n * sizeof(float)) == RLX_OK) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
      num += ((double)ya[i] - yb[i]) * ((double)ya[i] - yb[i]);
      den += (double)yb[i] * yb[i];
    }
    err = sqrt(num / (den > 0 ? den : 1));
  }
  free(ya);
  free(yb);
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
  rlx_graph_destroy(g);
  return err;
}

/* The dispatch report's conv row and the backend's own conv line, on one line. */
static void conv_dispatch(const rlx_exec* e, char* buf, size_t cap) {
  char* text = NULL;
  buf[0] = 0;
  if (rlx_exec_report(e, &text) != RLX_OK || !text) return;
  size_t used = 0;
  for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    while (*line == ' ') line++;
    if (strncmp(line, "conv", 4) != 0 && !strstr(line, "cuda conv")) continue;
    for (char* q = line; *q; q++)
      if (*q == '"') *q = '\'';
    int w = snprintf(buf + used, cap - used, "%s%s", used ? "; " : "", line);
    if (w < 0 || (size_t)w >= cap - used) break;
    used += (size_t)w;
  }
  rlx_free(text);
}

static void run_case(const conv_case* c, const char* device) {
  double rel = check(c, device);
  rlx_graph* g = build(c, FULL);
  if (!g) return;
  rlx_exec* e = compile(g, device, c->tf32);
  if (!e || !set_inputs(c, FULL, e)) {
    printf("{\"name\": \"%s\", \"device\": \"%s\", \"error\": \"%s\"}\n", c->name, device,
           e ? rlx_exec_last_error(e) : rlx_graph_last_error(g));
    rlx_exec_destroy(e);
    rlx_graph_destroy(g);
    return;
  }
  rlx_exec_select_outputs(e, NULL, 0); /* time the compute, not the readback */
  double wall[ITERS], dev[ITERS];
  int ok = 1;
  for (int i = 0; i < WARMUP && ok; i++) ok = rlx_exec_run(e) == RLX_OK;
  const char* warm_env = getenv("RLX_BENCH_WARMUP_MS");
  double warm_until = now_ms() + (warm_env ? atof(warm_env) : 0);
  while (ok && now_ms() < warm_until) ok = rlx_exec_run(e) == RLX_OK;
  for (int i = 0; i < ITERS && ok; i++) {
    double t = now_ms();
    ok = rlx_exec_run(e) == RLX_OK;
    wall[i] = now_ms() - t;
    dev[i] = -1;
    rlx_exec_last_device_ms(e, &dev[i]);
  }
  char dispatch[512];
  conv_dispatch(e, dispatch, sizeof dispatch);
  if (!ok) {
    printf("{\"name\": \"%s\", \"device\": \"%s\", \"error\": \"%s\"}\n", c->name, device,
           rlx_exec_last_error(e));
  } else {
    qsort(wall, ITERS, sizeof(double), cmp_double);
    qsort(dev, ITERS, sizeof(double), cmp_double);
    double med = dev[ITERS / 2] > 0 ? dev[ITERS / 2] : wall[ITERS / 2];
    double flops = 2.0 * out_numel(FULL) * (double)FULL.C * 9.0;
    printf("{\"name\": \"%s\", \"device\": \"%s\", \"ms\": %.4f, \"wall_ms\": %.4f, "
           "\"p10_ms\": %.4f, \"p90_ms\": %.4f, \"tflops\": %.2f, \"check_rel_l2\": %.3g, "
           "\"dispatch\": \"%s\"}\n",
           c->name, device, med, wall[ITERS / 2], dev[ITERS / 2] > 0 ? dev[ITERS / 10] : wall[ITERS / 10],
           dev[ITERS / 2] > 0 ? dev[ITERS * 9 / 10] : wall[ITERS * 9 / 10], flops / (med * 1e-3) / 1e12,
           rel, dispatch);
  }
  fflush(stdout);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cuda";
  const char* filter = argc > 2 ? argv[2] : NULL;
  setenv("RLX_CUDA_TIMING", "1", 0);
  setenv("RLX_VK_TIMING", "1", 0);
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    if (!filter || strstr(CASES[i].name, filter)) run_case(&CASES[i], device);
  return 0;
}
