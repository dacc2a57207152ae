/* The ResNet-50 training step of PERF.md (issue 15 item 7): torchvision's
 * resnet50() (Bottleneck v1.5: the stride on the 3x3 conv; 1000 classes),
 * built through the public graph API in NCHW, cross-entropy over random
 * labels, SGD momentum 0.9 weight decay 1e-4 (PyTorch's ImageNet recipe),
 * forward + backward + update in one rlx_train_compile executable.
 *
 * BatchNorm runs in TRAINING mode, as torch.nn.BatchNorm2d in train():
 * each channel is normalised with the biased mean and variance of the
 * batch over N, H, W. It is built from ordinary ops (Reduce mean, the
 * centred square's mean, rsqrt, the affine) so rlx_graph_grad
 * differentiates the statistics too; the library's BatchNorm op takes the
 * statistics as inputs (inference). The running mean / variance updates
 * that PyTorch also makes are left out (they do not change the step's
 * outputs; PyTorch's row includes them, a few small kernels).
 *
 * Prints one JSON line, the fields of train_gpt2: step ms (median of the
 * timed steps, each ending with the loss read back), compile ms, first and
 * last loss (every step trains on the same batch, so the loss falls),
 * arena bytes (params, grads, momentum, activations) and launches.
 *
 *   train_resnet50 [--device cuda] [--precision f32|tf32|bf16] [--batch 32]
 *                  [--image 224] [--classes 1000] [--steps 10] [--warmup 3]
 *                  [--lr 0.1] [--channels-last 0|1] [--check-falling 0|1]
 *                  [--dtype f32|f64] [--dump DIR]
 *
 * --channels-last 1 sets the compile option (the layout pass turns the
 * conv chains NHWC, cuDNN's fast path); --check-falling 1 exits 1 unless
 * the last loss is below the first (the ctest's tiny config). For the
 * PyTorch check (tests/resnet50_torch.py): --dtype f64 builds the graph in
 * f64 (params and images; the CPU reference computes it), --dump DIR
 * writes DIR/params.bin (the initial params, f32, in declaration order,
 * which is torchvision's named_parameters order), DIR/batch.bin (images
 * f32, then labels i32), DIR/losses.txt (every step's loss) and
 * DIR/grads.bin (the last step's gradients, f64, same order).
 * Peer: bench/train_torch.py's resnet50 rows (scripts/device_train.sh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

#define TRY(expr)                        \
  do {                                   \
    rlx_status try_s_ = (expr);          \
    if (try_s_ != RLX_OK) return try_s_; \
  } while (0)

typedef struct bench_args {
  const char* device;
  const char* precision;
  int64_t batch, image, classes;
  int steps, warmup, channels_last, check_falling;
  float lr;
  rlx_dtype dtype; /* of params, images and the whole forward */
  const char* dump;
} bench_args;

/* How a param starts, as torchvision's ResNet.__init__ sets it. */
typedef enum init_kind {
  INIT_CONV,    /* kaiming normal, mode fan_out, relu gain: std sqrt(2 / (OC k k)) */
  INIT_ONE,     /* BatchNorm weight */
  INIT_ZERO,    /* BatchNorm bias */
  INIT_UNIFORM, /* nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
} init_kind;

typedef struct net_param {
  char name[48];
  int64_t numel, fan;
  init_kind init;
} net_param;

/* The graph being built and the params it declared, for their init. */
typedef struct net {
  rlx_graph* g;
  rlx_dtype dtype;
  net_param* params;
  int32_t n_params, cap;
  rlx_tensor eps; /* BatchNorm's 1e-5, one scalar constant shared by every layer */
} net;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ building */

static rlx_status add_param(net* n, const char* name, const rlx_dim* shape, int32_t rank,
                            init_kind init, int64_t fan, rlx_tensor* out) {
  if (n->n_params == n->cap) {
    int32_t cap = n->cap ? 2 * n->cap : 64;
    net_param* p = realloc(n->params, (size_t)cap * sizeof *p);
    if (!p) return RLX_RESOURCE_EXHAUSTED;
    n->params = p, n->cap = cap;
  }
  net_param* p = &n->params[n->n_params++];
  snprintf(p->name, sizeof p->name, "%s", name);
  p->numel = 1;
  for (int32_t d = 0; d < rank; d++) p->numel *= shape[d];
  p->init = init, p->fan = fan;
  return rlx_graph_add_param(n->g, name, n->dtype, shape, rank, out);
}

static rlx_status binary(net* n, rlx_binary_op op, rlx_tensor a, rlx_tensor b, rlx_tensor* out) {
  return rlx_graph_add_binary(n->g, op, a, b, out);
}

/* A [C] param seen as [1, C, 1, 1], so it broadcasts over NCHW. */
static rlx_status channel_param(net* n, const char* name, int64_t c, init_kind init,
                                rlx_tensor* out) {
  rlx_dim shape[1] = {c}, bshape[4] = {1, c, 1, 1};
  rlx_tensor p;
  TRY(add_param(n, name, shape, 1, init, 0, &p));
  return rlx_graph_add_reshape(n->g, p, bshape, 4, out);
}

/* BatchNorm2d in training mode: y = (x - mean) * rsqrt(var + eps) * gamma
 * + beta with the batch's per-channel mean and biased variance over
 * N, H, W. Written as ops so the gradient flows through the statistics. */
static rlx_status batch_norm_train(net* n, rlx_tensor x, const char* name, int64_t c,
                                   rlx_tensor* y) {
  static const int32_t axes[3] = {0, 2, 3};
  char pname[48];
  rlx_tensor mean, xc, sq, var, rstd, gamma, beta, scale, t;
  TRY(rlx_graph_add_reduce(n->g, RLX_RED_MEAN, x, axes, 3, 1, &mean));
  TRY(binary(n, RLX_BIN_SUB, x, mean, &xc));
  TRY(binary(n, RLX_BIN_MUL, xc, xc, &sq));
  TRY(rlx_graph_add_reduce(n->g, RLX_RED_MEAN, sq, axes, 3, 1, &var));
  TRY(binary(n, RLX_BIN_ADD, var, n->eps, &var));
  TRY(rlx_graph_add_activation(n->g, RLX_ACT_RSQRT, var, &rstd));
  snprintf(pname, sizeof pname, "%s.weight", name);
  TRY(channel_param(n, pname, c, INIT_ONE, &gamma));
  snprintf(pname, sizeof pname, "%s.bias", name);
  TRY(channel_param(n, pname, c, INIT_ZERO, &beta));
  /* the per-channel factor first: one [C] multiply instead of a full one */
  TRY(binary(n, RLX_BIN_MUL, gamma, rstd, &scale));
  TRY(binary(n, RLX_BIN_MUL, xc, scale, &t));
  return binary(n, RLX_BIN_ADD, t, beta, y);
}

/* conv (no bias, as torchvision's) -> BatchNorm -> optional ReLU. */
typedef struct conv_spec {
  const char *conv, *bn; /* param name prefixes */
  int64_t in, out, k, stride;
  int relu;
} conv_spec;

static rlx_status conv_bn(net* n, rlx_tensor x, const conv_spec* s, rlx_tensor* y) {
  rlx_dim wshape[4] = {s->out, s->in, s->k, s->k};
  int64_t strides[2] = {s->stride, s->stride}, p = s->k / 2, pads[4] = {p, p, p, p};
  char pname[48];
  rlx_tensor w, c;
  snprintf(pname, sizeof pname, "%s.weight", s->conv);
  TRY(add_param(n, pname, wshape, 4, INIT_CONV, s->out * s->k * s->k, &w));
  TRY(rlx_graph_add_conv(n->g, x, w, RLX_NONE, RLX_NONE, 2, strides, pads, NULL, 1,
                         RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &c));
  TRY(batch_norm_train(n, c, s->bn, s->out, y));
  return s->relu ? rlx_graph_add_activation(n->g, RLX_ACT_RELU, *y, y) : RLX_OK;
}

/* torchvision's Bottleneck: 1x1 -> 3x3 (stride here, v1.5) -> 1x1 (x4),
 * plus the identity or, in a stage's first block, the 1x1 downsample. */
static rlx_status bottleneck(net* n, rlx_tensor x, const char* prefix, int64_t in, int64_t planes,
                             int64_t stride, int downsample, rlx_tensor* y) {
  char c1[48], b1[48], c2[48], b2[48], c3[48], b3[48], cd[48], bd[48];
  snprintf(c1, sizeof c1, "%s.conv1", prefix), snprintf(b1, sizeof b1, "%s.bn1", prefix);
  snprintf(c2, sizeof c2, "%s.conv2", prefix), snprintf(b2, sizeof b2, "%s.bn2", prefix);
  snprintf(c3, sizeof c3, "%s.conv3", prefix), snprintf(b3, sizeof b3, "%s.bn3", prefix);
  snprintf(cd, sizeof cd, "%s.downsample.0", prefix);
  snprintf(bd, sizeof bd, "%s.downsample.1", prefix);
  conv_spec s1 = {c1, b1, in, planes, 1, 1, 1}, s2 = {c2, b2, planes, planes, 3, stride, 1};
  conv_spec s3 = {c3, b3, planes, planes * 4, 1, 1, 0}, sd = {cd, bd, in, planes * 4, 1, stride, 0};
  rlx_tensor h, identity = x;
  TRY(conv_bn(n, x, &s1, &h));
  TRY(conv_bn(n, h, &s2, &h));
  TRY(conv_bn(n, h, &s3, &h));
  if (downsample) TRY(conv_bn(n, x, &sd, &identity));
  TRY(binary(n, RLX_BIN_ADD, h, identity, &h));
  return rlx_graph_add_activation(n->g, RLX_ACT_RELU, h, y);
}

/* Stem: 7x7/2 conv, BN, ReLU, 3x3/2 max pool (pad 1). */
static rlx_status stem(net* n, rlx_tensor x, rlx_tensor* y) {
  static const int64_t k[2] = {3, 3}, s[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
  conv_spec c = {"conv1", "bn1", 3, 64, 7, 2, 1};
  TRY(conv_bn(n, x, &c, y));
  return rlx_graph_add_pool(n->g, *y, RLX_POOL_MAX, 2, k, s, pads, NULL, 0, 0, y);
}

/* Global average pool, then fc (weight [classes, 2048], PyTorch's layout). */
static rlx_status head(net* n, rlx_tensor x, int64_t classes, rlx_tensor* logits) {
  static const int32_t spatial[2] = {2, 3};
  rlx_dim ws[2] = {classes, 2048}, bs[1] = {classes};
  rlx_tensor pooled, w, b;
  TRY(rlx_graph_add_reduce(n->g, RLX_RED_MEAN, x, spatial, 2, 0, &pooled));
  TRY(add_param(n, "fc.weight", ws, 2, INIT_UNIFORM, 2048, &w));
  TRY(add_param(n, "fc.bias", bs, 1, INIT_UNIFORM, 2048, &b));
  TRY(rlx_graph_add_matmul(n->g, pooled, w, 0, 1, logits));
  return binary(n, RLX_BIN_ADD, *logits, b, logits);
}

/* The whole training graph: images [B, 3, S, S] and labels [B] in, the
 * mean cross-entropy out. */
static rlx_status build_resnet50(net* n, const bench_args* a, rlx_tensor* loss) {
  static const int64_t blocks[4] = {3, 4, 6, 3}, planes[4] = {64, 128, 256, 512};
  rlx_dim xs[4] = {a->batch, 3, a->image, a->image}, ts[1] = {a->batch};
  double eps = 1e-5;
  float eps32 = (float)eps;
  int f64 = n->dtype == RLX_F64;
  rlx_tensor x, targets, logits;
  TRY(rlx_graph_add_input(n->g, "images", n->dtype, xs, 4, &x));
  TRY(rlx_graph_add_input(n->g, "labels", RLX_I32, ts, 1, &targets));
  TRY(rlx_graph_add_constant(n->g, n->dtype, NULL, 0, f64 ? (const void*)&eps : &eps32,
                             f64 ? sizeof eps : sizeof eps32, &n->eps));
  TRY(stem(n, x, &x));
  int64_t in = 64;
  for (int stage = 0; stage < 4; stage++)
    for (int64_t b = 0; b < blocks[stage]; b++) {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "layer%d.%lld", stage + 1, (long long)b);
      int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      TRY(bottleneck(n, x, prefix, in, planes[stage], stride, b == 0, &x));
      in = planes[stage] * 4;
    }
  TRY(head(n, x, a->classes, &logits));
  TRY(rlx_graph_add_cross_entropy(n->g, logits, targets, -100, 0.0f, loss));
  return rlx_graph_set_outputs(n->g, loss, 1);
}

/* ------------------------------------------------------------------ data */

/* xorshift64 and Box-Muller: a fixed stream, so every run sees the same
 * weights and batch. */
static uint64_t next_u64(uint64_t* s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static double next_uniform(uint64_t* s) { return (double)(next_u64(s) >> 11) / 9007199254740992.0; }

static double next_normal(uint64_t* s) {
  double u = next_uniform(s), v = next_uniform(s);
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static void fill_param(const net_param* p, uint64_t* seed, float* v) {
  double std = p->init == INIT_CONV ? sqrt(2.0 / (double)p->fan) : 0.0;
  double bound = p->init == INIT_UNIFORM ? 1.0 / sqrt((double)p->fan) : 0.0;
  for (int64_t i = 0; i < p->numel; i++) switch (p->init) {
      case INIT_CONV: v[i] = (float)(std * next_normal(seed)); break;
      case INIT_ONE: v[i] = 1.0f; break;
      case INIT_ZERO: v[i] = 0.0f; break;
      case INIT_UNIFORM: v[i] = (float)((2.0 * next_uniform(seed) - 1.0) * bound); break;
    }
}

/* Appends n elements of `size` bytes to DIR/name (dump == NULL: nothing). */
static rlx_status dump_append(const char* dump, const char* name, const void* data, size_t size,
                              int64_t n, int first) {
  if (!dump) return RLX_OK;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dump, name);
  FILE* f = fopen(path, first ? "wb" : "ab");
  if (!f) return fprintf(stderr, "cannot write %s\n", path), RLX_INVALID_ARGUMENT;
  size_t wrote = fwrite(data, size, (size_t)n, f);
  return fclose(f) == 0 && wrote == (size_t)n ? RLX_OK : RLX_INVALID_ARGUMENT;
}

/* The initial params (f32, converted to the net's dtype by the trainer). */
static rlx_status init_params(rlx_trainer* t, const net* n, const char* dump) {
  uint64_t seed = 1234567;
  for (int32_t i = 0; i < n->n_params; i++) {
    const net_param* p = &n->params[i];
    float* v = malloc((size_t)p->numel * sizeof *v);
    if (!v) return RLX_RESOURCE_EXHAUSTED;
    fill_param(p, &seed, v);
    rlx_status s = rlx_trainer_set_param(t, p->name, RLX_F32, v, (size_t)p->numel * sizeof *v);
    if (s == RLX_OK) s = dump_append(dump, "params.bin", v, sizeof *v, p->numel, i == 0);
    free(v);
    if (s != RLX_OK) return s;
  }
  return RLX_OK;
}

/* The last step's gradients, f64, in declaration order (needs keep_grads). */
static rlx_status dump_grads(rlx_trainer* t, const net* n, const char* dump) {
  for (int32_t i = 0; i < n->n_params; i++) {
    const net_param* p = &n->params[i];
    double* g = malloc((size_t)p->numel * sizeof *g);
    if (!g) return RLX_RESOURCE_EXHAUSTED;
    rlx_status s = rlx_trainer_read_grad(t, p->name, RLX_F64, g, (size_t)p->numel * sizeof *g);
    if (s == RLX_OK) s = dump_append(dump, "grads.bin", g, sizeof *g, p->numel, i == 0);
    free(g);
    if (s != RLX_OK) return s;
  }
  return RLX_OK;
}

/* The images in the net's dtype. */
static rlx_status set_images(rlx_trainer* t, const bench_args* a, const float* x, int64_t n) {
  rlx_dim xs[4] = {a->batch, 3, a->image, a->image};
  if (a->dtype == RLX_F32)
    return rlx_trainer_set_input(t, "images", RLX_F32, xs, 4, x, (size_t)n * sizeof *x);
  double* xd = malloc((size_t)n * sizeof *xd);
  if (!xd) return RLX_RESOURCE_EXHAUSTED;
  for (int64_t i = 0; i < n; i++) xd[i] = x[i];
  rlx_status s = rlx_trainer_set_input(t, "images", RLX_F64, xs, 4, xd, (size_t)n * sizeof *xd);
  free(xd);
  return s;
}

/* Standard-normal images (as normalised ImageNet pixels roughly are) and
 * uniform labels. */
static rlx_status set_batch(rlx_trainer* t, const bench_args* a) {
  int64_t n = a->batch * 3 * a->image * a->image;
  float* x = malloc((size_t)n * sizeof *x);
  int32_t* labels = malloc((size_t)a->batch * sizeof *labels);
  rlx_status s = RLX_RESOURCE_EXHAUSTED;
  if (x && labels) {
    uint64_t seed = 88172645463325252ull;
    for (int64_t i = 0; i < n; i++) x[i] = (float)next_normal(&seed);
    for (int64_t i = 0; i < a->batch; i++)
      labels[i] = (int32_t)(next_u64(&seed) % (uint64_t)a->classes);
    rlx_dim ls[1] = {a->batch};
    s = set_images(t, a, x, n);
    if (s == RLX_OK)
      s = rlx_trainer_set_input(t, "labels", RLX_I32, ls, 1, labels,
                                (size_t)a->batch * sizeof *labels);
    if (s == RLX_OK) s = dump_append(a->dump, "batch.bin", x, sizeof *x, n, 1);
    if (s == RLX_OK) s = dump_append(a->dump, "batch.bin", labels, sizeof *labels, a->batch, 0);
  }
  free(x);
  free(labels);
  return s;
}

/* ------------------------------------------------------------------ the run */

static int parse_args(int argc, char** argv, bench_args* a) {
  *a = (bench_args){"best", "f32", 32, 224, 1000, 10, 3, 0, 0, 0.1f, RLX_F32, NULL};
  if (argc % 2 == 0) return 1; /* every option takes a value */
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--device")) a->device = v;
    else if (!strcmp(k, "--precision")) a->precision = v;
    else if (!strcmp(k, "--batch")) a->batch = atoll(v);
    else if (!strcmp(k, "--image")) a->image = atoll(v);
    else if (!strcmp(k, "--classes")) a->classes = atoll(v);
    else if (!strcmp(k, "--steps")) a->steps = atoi(v);
    else if (!strcmp(k, "--warmup")) a->warmup = atoi(v);
    else if (!strcmp(k, "--lr")) a->lr = strtof(v, NULL);
    else if (!strcmp(k, "--channels-last")) a->channels_last = atoi(v);
    else if (!strcmp(k, "--check-falling")) a->check_falling = atoi(v);
    else if (!strcmp(k, "--dtype")) a->dtype = !strcmp(v, "f64") ? RLX_F64 : RLX_DTYPE_COUNT;
    else if (!strcmp(k, "--dump")) a->dump = v;
    else return fprintf(stderr, "unknown option %s\n", k), 1;
  }
  if (a->dtype == RLX_DTYPE_COUNT) return fprintf(stderr, "--dtype is f32 or f64\n"), 1;
  /* 32x downsampling must leave at least one position */
  if (a->image < 32) return fprintf(stderr, "--image must be >= 32\n"), 1;
  return a->steps < 1 || a->warmup < 0 || a->batch < 1 || a->classes < 1 || !(a->lr > 0);
}

static int set_precision(const char* p, rlx_compile_options* o) {
  if (!strcmp(p, "tf32")) o->allow_tf32 = 1;
  else if (!strcmp(p, "bf16")) o->precision = RLX_PRECISION_BF16;
  else if (strcmp(p, "f32") != 0) return 1;
  return 0;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static rlx_status compile_step(net* n, const bench_args* a, double* compile_ms, rlx_trainer** t) {
  rlx_tensor loss;
  TRY(build_resnet50(n, a, &loss));
  rlx_compile_options co;
  rlx_compile_options_init(&co);
  if (set_precision(a->precision, &co)) return RLX_INVALID_ARGUMENT;
  co.channels_last = a->channels_last;
  rlx_train_options to;
  rlx_train_options_init(&to, RLX_OPTIMIZER_SGD);
  to.lr = a->lr;
  to.sgd.momentum = 0.9f;
  to.sgd.weight_decay = 1e-4f;
  to.keep_grads = a->dump != NULL;
  double t0 = now_ms();
  TRY(rlx_train_compile(n->g, loss, a->device, &co, &to, t));
  *compile_ms = now_ms() - t0;
  return RLX_OK;
}

/* Runs warmup + steps steps; ms[] gets the timed ones, sorted. */
static int train(rlx_trainer* t, const bench_args* a, double* ms, float* first, float* last) {
  for (int i = 0; i < a->warmup + a->steps; i++) {
    double s0 = now_ms();
    if (rlx_trainer_step(t, last) != RLX_OK)
      return fprintf(stderr, "step %d: %s\n", i, rlx_trainer_last_error(t)), 1;
    if (i == 0) *first = *last;
    char line[32];
    snprintf(line, sizeof line, "%.9g\n", *last);
    if (dump_append(a->dump, "losses.txt", line, 1, (int64_t)strlen(line), i == 0) != RLX_OK)
      return 1;
    if (i >= a->warmup) ms[i - a->warmup] = now_ms() - s0;
  }
  qsort(ms, (size_t)a->steps, sizeof *ms, cmp_double);
  return 0;
}

static void report(const bench_args* a, rlx_trainer* t, const double* ms, double compile_ms,
                   float first, float last) {
  rlx_memory_stats st = {0};
  rlx_exec_memory_stats(rlx_trainer_exec(t), &st);
  printf("{\"name\": \"rlx resnet50 train-step %s%s B%lld %lldx%lld\", \"device\": \"%s\", "
         "\"ms\": %.3f, \"min_ms\": %.3f, \"compile_ms\": %.1f, \"loss_first\": %.5f, "
         "\"loss_last\": %.5f, \"arena_bytes\": %llu, \"backend_bytes\": %llu, \"launches\": %d}\n",
         a->dtype == RLX_F64 ? "f64" : a->precision, a->channels_last ? " channels_last" : "",
         (long long)a->batch,
         (long long)a->image, (long long)a->image, a->device, ms[a->steps / 2], ms[0],
         compile_ms, first, last, (unsigned long long)st.arena_bytes,
         (unsigned long long)st.backend_bytes, st.launches);
}

static int run(const bench_args* a) {
  net n = {0};
  rlx_trainer* t = NULL;
  double compile_ms = 0, *ms = calloc((size_t)a->steps, sizeof *ms);
  float first = 0, last = 0;
  int rc = 1;
  n.dtype = a->dtype;
  if (!ms || rlx_graph_create(&n.g) != RLX_OK) goto done;
  if (compile_step(&n, a, &compile_ms, &t) != RLX_OK) {
    fprintf(stderr, "compile: %s\n", rlx_graph_last_error(n.g));
    goto done;
  }
  if (init_params(t, &n, a->dump) != RLX_OK || set_batch(t, a) != RLX_OK) {
    fprintf(stderr, "setup: %s\n", rlx_trainer_last_error(t));
    goto done;
  }
  if (train(t, a, ms, &first, &last)) goto done;
  if (a->dump && dump_grads(t, &n, a->dump) != RLX_OK) {
    fprintf(stderr, "dump: %s\n", rlx_trainer_last_error(t));
    goto done;
  }
  report(a, t, ms, compile_ms, first, last);
  rc = 0;
  if (a->check_falling && !(last < first)) {
    fprintf(stderr, "the loss did not fall on a fixed batch: %g -> %g\n", first, last);
    rc = 1;
  }
done:
  rlx_trainer_destroy(t);
  rlx_graph_destroy(n.g);
  free(n.params);
  free(ms);
  return rc;
}

int main(int argc, char** argv) {
  bench_args a;
  if (parse_args(argc, argv, &a)) {
    fprintf(stderr, "usage: train_resnet50 [--device D] [--precision f32|tf32|bf16] [--batch B] "
                    "[--image S] [--classes K] [--steps N] [--warmup N] [--lr X] "
                    "[--channels-last 0|1] [--check-falling 0|1] [--dtype f32|f64] "
                    "[--dump DIR]\n");
    return 2;
  }
  return run(&a);
}
