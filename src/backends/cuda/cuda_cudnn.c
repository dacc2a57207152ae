/* cuDNN plans for convolution steps, made once when the executable is
 * created: tensor / filter / convolution descriptors and the algorithm
 * (cuDNN's heuristic ranking for tensor-core math, cudnnFind* plus our own
 * timing for exact f32: see use_heuristic and pick). A run issues one cuDNN call (plus cudnnAddTensor for
 * a bias the fused call cannot take), which CUDA-graph capture records
 * like any other stream work.
 *
 * Math: f32 is exact (CUDNN_FMA_MATH: no TF32) unless the compile options
 * allow TF32; f16 / bf16 use tensor cores with f32 accumulation (compute
 * type float). Forward convolution with a bias and ReLU (or no activation,
 * where cuDNN allows it) and an optional residual runs as one
 * cudnnConvolutionBiasActivationForward: y = act(conv(x) + residual + bias).
 * Otherwise y gets the residual copied in first (cuda_launch.c), the
 * convolution accumulates onto it (beta = 1), cudnnAddTensor adds the bias,
 * and other activations run as a unary kernel afterwards.
 *
 * Every plan is tried at creation on a temporary output (reading only x, w
 * and bias): a configuration cuDNN rejects then falls back (fused ->
 * unfused -> host step) instead of failing a run on the GPU machine, and
 * the first few candidates are timed as issued, the fastest kept (pick).
 *
 * The weight gradient of a Conv (RLX_K_CONV_WGRAD) is a plan of the same
 * kind: cudnnConvolutionBackwardFilter from x and dy into d_w, algorithms
 * chosen the same way but only deterministic ones, so a training step
 * gives the same bits on every run. */
#ifdef RLX_HAVE_CUDA

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "ir/dtype.h"

#define MAX_DIMS 5 /* N, C and up to three spatial dims */
#define MAX_ALGOS 16
#define TIMED_CANDIDATES 6 /* Find's algorithms timed as issued (pick) */
#define TIMED_REPS 3

struct rlx_cuda_conv_plan {
  rlx_dnn_tensor xd, yd, bd;
  rlx_dnn_tensor w_src, w_dst; /* channels-last: KCRS -> KRSC into the workspace */
  size_t w_bytes;              /* workspace bytes the reordered filter takes (256-aligned) */
  rlx_dnn_filter wd;
  rlx_dnn_conv cd;
  rlx_dnn_act ad;
  int transpose, algo, math, fused, add_bias, applies_act, residual_copy, has_residual;
  int wgrad; /* backward filter: reads x and y (= dy), writes w (= d_w) */
  int filter_ohwi; /* channels-last filter read in place (no reorder) */
  size_t ws; /* w_bytes + the algorithm's own workspace */
  CUdeviceptr x, w, bias, res, y;
  float one, zero; /* scaling factors: float for f32, f16 and bf16 data */
};

static int dnn_type(rlx_dtype t, int* out) {
  switch (t) {
    case RLX_F32: *out = RLX_DNN_FLOAT; return 1;
    case RLX_F16: *out = RLX_DNN_HALF; return 1;
    case RLX_BF16: *out = RLX_DNN_BFLOAT16; return 1;
    default: return 0;
  }
}

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* cuDNN wants at least 4-D tensors: a 1-D convolution becomes a 2-D one
 * with a leading spatial dim of 1. */
static int nb_dims(const rlx_cuda_conv* c) { return c->spatial == 1 ? 4 : c->spatial + 2; }

/* dims / strides of (N, ch, spatial...) in cuDNN's order. */
static void tensor_shape(const rlx_cuda_conv* c, int64_t ch, const int64_t* sp,
                         const int64_t* stride, int* dims, int* strides) {
  dims[0] = (int)c->N;
  dims[1] = (int)ch;
  strides[0] = (int)stride[0];
  strides[1] = (int)stride[1];
  if (c->spatial == 1) {
    dims[2] = 1;
    strides[2] = (int)(stride[2] * sp[0]);
    dims[3] = (int)sp[0];
    strides[3] = (int)stride[2];
    return;
  }
  for (int d = 0; d < c->spatial; d++) {
    dims[2 + d] = (int)sp[d];
    strides[2 + d] = (int)stride[2 + d];
  }
}

/* Whether strides describe a packed tensor in NCHW order or channels-last. */
static int packed(const rlx_cuda_conv* c, int64_t ch, const int64_t* sp, const int64_t* st) {
  int64_t expect = 1, ok_first = 1;
  for (int d = c->spatial - 1; d >= 0; d--) { /* NCHW order: spatial innermost */
    if (sp[d] != 1 && st[2 + d] != expect) ok_first = 0;
    expect *= sp[d];
  }
  if (ch != 1 && st[1] != expect) ok_first = 0;
  if (c->N != 1 && st[0] != expect * ch) ok_first = 0;
  if (ok_first) return 1;
  expect = ch; /* channels-last: C innermost */
  if (ch != 1 && st[1] != 1) return 0;
  for (int d = c->spatial - 1; d >= 0; d--) {
    if (sp[d] != 1 && st[2 + d] != expect) return 0;
    expect *= sp[d];
  }
  return c->N == 1 || st[0] == expect;
}

/* Elements from the first to one past the last element of a strided tensor. */
static int64_t extent(const rlx_cuda_conv* c, int64_t ch, const int64_t* sp, const int64_t* st) {
  int64_t e = 1 + (c->N - 1) * st[0] + (ch - 1) * st[1];
  for (int d = 0; d < c->spatial; d++) e += (sp[d] - 1) * st[2 + d];
  return e;
}

int rlx_cuda_conv_kind_native(const rlx_cuda_dev* d, const rlx_cuda_conv* c) {
  int t;
  if (!d->have_dnn || !dnn_type(c->dtype, &t)) return 0;
  /* d_w is written where it lives: channels-last with OIHW weights would
   * need a reorder after the call (decomposed instead) */
  if (c->wgrad && (!d->dnn.backward_filter || (c->channels_last && !c->filter_ohwi))) return 0;
  if (c->spatial < 1 || c->spatial > 3 || c->groups < 1) return 0;
  for (int s = 0; s < c->spatial; s++)
    if (c->pad[s] != c->pad_end[s]) return 0;
  if (c->has_bias && c->bias_dtype != c->dtype) return 0;
  return !c->has_residual || c->res_dtype == c->dtype;
}

int rlx_cuda_conv_native(const rlx_cuda_dev* d, const rlx_cuda_conv* c) {
  if (!rlx_cuda_conv_kind_native(d, c)) return 0;
  if (c->N < 1 || c->C < 1 || c->OC < 1 || c->C % c->groups || c->OC % c->groups) return 0;
  if (!fits_int(c->N) || !fits_int(c->C) || !fits_int(c->OC) || !fits_int(c->groups)) return 0;
  for (int s = 0; s < c->spatial; s++) {
    if (c->in[s] < 1 || c->out[s] < 1) return 0;
    if (c->kernel[s] < 1 || c->stride[s] < 1 || c->dilation[s] < 1 || c->pad[s] < 0) return 0;
    if (!fits_int(c->in[s]) || !fits_int(c->out[s]) || !fits_int(c->kernel[s]) ||
        !fits_int(c->pad[s]) || !fits_int(c->stride[s]) || !fits_int(c->dilation[s]))
      return 0;
    /* cuDNN derives the smaller side from the larger: ConvTranspose's
     * output_padding must vanish in the floor (it is < stride). */
    int64_t big = c->transpose ? c->out[s] : c->in[s], small = c->transpose ? c->in[s] : c->out[s];
    int64_t span = big + 2 * c->pad[s] - c->dilation[s] * (c->kernel[s] - 1) - 1;
    if (span < 0 || span / c->stride[s] + 1 != small) return 0;
  }
  if (!packed(c, c->C, c->in, c->x_stride) || !packed(c, c->OC, c->out, c->y_stride)) return 0;
  if (extent(c, c->C, c->in, c->x_stride) > INT_MAX || extent(c, c->OC, c->out, c->y_stride) > INT_MAX)
    return 0;
  if (c->has_residual) /* blended into y: the same layout */
    for (int k = 0; k < c->spatial + 2; k++)
      if (c->res_stride[k] != c->y_stride[k]) return 0;
  return 1;
}

void rlx_cuda_conv_plan_destroy(const rlx_cuda_dev* d, rlx_cuda_conv_plan* p) {
  if (!p) return;
  const rlx_dnn_api* a = &d->dnn;
  if (p->xd) a->destroy_tensor(p->xd);
  if (p->yd) a->destroy_tensor(p->yd);
  if (p->bd) a->destroy_tensor(p->bd);
  if (p->w_src) a->destroy_tensor(p->w_src);
  if (p->w_dst) a->destroy_tensor(p->w_dst);
  if (p->wd) a->destroy_filter(p->wd);
  if (p->cd) a->destroy_conv(p->cd);
  if (p->ad) a->destroy_act(p->ad);
  free(p);
}

size_t rlx_cuda_conv_plan_workspace(const rlx_cuda_conv_plan* p) { return p->ws; }
int rlx_cuda_conv_plan_applies_act(const rlx_cuda_conv_plan* p) { return p->applies_act; }
int rlx_cuda_conv_plan_needs_residual_copy(const rlx_cuda_conv_plan* p) { return p->residual_copy; }

void rlx_cuda_conv_plan_describe(const rlx_cuda_conv_plan* p, char* buf, size_t cap) {
  snprintf(buf, cap, "%s algo %d%s%s", p->wgrad ? "bwd-filter" : p->transpose ? "bwd-data" : "fwd", p->algo,
           p->fused ? " fused" : "", p->w_dst ? " nhwc" : p->filter_ohwi ? " nhwc ohwi" : "");
}

static rlx_status dnn_fail(const rlx_cuda_dev* d, rlx_error* err, rlx_dnn_status s,
                           const char* call) {
  const char* text = d->dnn.get_error_string ? d->dnn.get_error_string(s) : NULL;
  return rlx_fail(err, RLX_INTERNAL, "cuda: %s failed: %s (cudnnStatus %d)", call,
                  text ? text : "?", (int)s);
}

#define DNN(d, err, call, expr)                                        \
  do {                                                                 \
    rlx_dnn_status rlx_dnn_s_ = (expr);                                \
    if (rlx_dnn_s_ != RLX_DNN_SUCCESS) return dnn_fail((d), (err), rlx_dnn_s_, (call)); \
  } while (0)

/* The filter as two tensors of the same dims (K, C/g, k..): packed KCRS
 * as stored, and packed KRSC (channels innermost) in the workspace. */
static rlx_status filter_reorder(const rlx_cuda_dev* d, int type, int nb, const int* dims,
                                 rlx_cuda_conv_plan* p, rlx_error* err) {
  const rlx_dnn_api* a = &d->dnn;
  int src[MAX_DIMS], dst[MAX_DIMS];
  int64_t run = 1;
  for (int k = nb - 1; k >= 0; k--) {
    src[k] = (int)run;
    run *= dims[k];
  }
  int64_t total = run;
  dst[1] = 1;
  run = dims[1];
  for (int k = nb - 1; k >= 2; k--) {
    dst[k] = (int)run;
    run *= dims[k];
  }
  dst[0] = (int)run;
  size_t es = type == RLX_DNN_FLOAT ? 4 : 2;
  p->w_bytes = ((size_t)total * es + 255u) & ~(size_t)255u;
  DNN(d, err, "cudnnCreateTensorDescriptor", a->create_tensor(&p->w_src));
  DNN(d, err, "cudnnSetTensorNdDescriptor(w)", a->set_tensor_nd(p->w_src, type, nb, dims, src));
  DNN(d, err, "cudnnCreateTensorDescriptor", a->create_tensor(&p->w_dst));
  DNN(d, err, "cudnnSetTensorNdDescriptor(w nhwc)", a->set_tensor_nd(p->w_dst, type, nb, dims, dst));
  return RLX_OK;
}

/* Descriptors of x, y, w, bias and the convolution. */
static rlx_status make_descriptors(const rlx_cuda_build* b, const rlx_cuda_conv* c,
                                   rlx_cuda_conv_plan* p, rlx_error* err) {
  const rlx_cuda_dev* d = b->d;
  const rlx_dnn_api* a = &d->dnn;
  int type = RLX_DNN_FLOAT, nb = nb_dims(c), dims[MAX_DIMS], strides[MAX_DIMS];
  dnn_type(c->dtype, &type);
  DNN(d, err, "cudnnCreateTensorDescriptor", a->create_tensor(&p->xd));
  tensor_shape(c, c->C, c->in, c->x_stride, dims, strides);
  DNN(d, err, "cudnnSetTensorNdDescriptor(x)", a->set_tensor_nd(p->xd, type, nb, dims, strides));
  DNN(d, err, "cudnnCreateTensorDescriptor", a->create_tensor(&p->yd));
  tensor_shape(c, c->OC, c->out, c->y_stride, dims, strides);
  DNN(d, err, "cudnnSetTensorNdDescriptor(y)", a->set_tensor_nd(p->yd, type, nb, dims, strides));
  if (c->has_bias) { /* [1, OC, 1, ..]: broadcast over batch and space */
    for (int k = 0; k < nb; k++) dims[k] = strides[k] = 1;
    dims[1] = (int)c->OC;
    strides[0] = (int)c->OC;
    DNN(d, err, "cudnnCreateTensorDescriptor", a->create_tensor(&p->bd));
    DNN(d, err, "cudnnSetTensorNdDescriptor(bias)", a->set_tensor_nd(p->bd, type, nb, dims, strides));
  }
  /* Filter: forward [OC, C/g, k..]; transpose (as cuDNN's forward from y to
   * x) [C, OC/g, k..]. The format names the memory order; dims stay KCRS. */
  int64_t fk = c->transpose ? c->C : c->OC, fc = (c->transpose ? c->OC : c->C) / c->groups;
  dims[0] = (int)fk;
  dims[1] = (int)fc;
  int pad[3], stride[3], dil[3], nsp = nb - 2;
  if (c->spatial == 1) {
    dims[2] = 1;
    dims[3] = (int)c->kernel[0];
    pad[0] = 0, stride[0] = 1, dil[0] = 1;
    pad[1] = (int)c->pad[0], stride[1] = (int)c->stride[0], dil[1] = (int)c->dilation[0];
  } else {
    for (int s = 0; s < c->spatial; s++) {
      dims[2 + s] = (int)c->kernel[s];
      pad[s] = (int)c->pad[s], stride[s] = (int)c->stride[s], dil[s] = (int)c->dilation[s];
    }
  }
  DNN(d, err, "cudnnCreateFilterDescriptor", a->create_filter(&p->wd));
  DNN(d, err, "cudnnSetFilterNdDescriptor",
      a->set_filter_nd(p->wd, type, c->channels_last ? RLX_DNN_NHWC : RLX_DNN_NCHW, nb, dims));
  p->filter_ohwi = c->channels_last && c->filter_ohwi;
  if (c->channels_last && !c->filter_ohwi)
    RLX_RETURN_IF_ERROR(filter_reorder(d, type, nb, dims, p, err));
  DNN(d, err, "cudnnCreateConvolutionDescriptor", a->create_conv(&p->cd));
  DNN(d, err, "cudnnSetConvolutionNdDescriptor",
      a->set_conv_nd(p->cd, nsp, pad, stride, dil, RLX_DNN_CROSS_CORRELATION, RLX_DNN_FLOAT));
  DNN(d, err, "cudnnSetConvolutionGroupCount", a->set_conv_groups(p->cd, (int)c->groups));
  p->math = c->dtype != RLX_F32 ? RLX_DNN_TENSOR_OP_MATH
            : b->allow_tf32     ? RLX_DNN_DEFAULT_MATH
                                : RLX_DNN_FMA_MATH;
  DNN(d, err, "cudnnSetConvolutionMathType", a->set_conv_math(p->cd, p->math));
  if (c->act == RLX_ACT_RELU || c->act == RLX_ACT_NONE) {
    DNN(d, err, "cudnnCreateActivationDescriptor", a->create_act(&p->ad));
    DNN(d, err, "cudnnSetActivationDescriptor",
        a->set_act(p->ad, c->act == RLX_ACT_RELU ? RLX_DNN_ACT_RELU : RLX_DNN_ACT_IDENTITY,
                   RLX_DNN_PROPAGATE_NAN, 0.0));
  }
  return RLX_OK;
}

/* Candidates, best first: timed (cudnnFind*, which allocates its own
 * buffers and runs on the handle's stream) or the heuristic's order. */
/* cuDNN's ranked algorithms for p: the heuristic's (heuristic) or
 * cudnnFind's (timed on the bare convolution). */
static int ranked(const rlx_cuda_build* b, const rlx_cuda_conv_plan* p, int heuristic,
                  rlx_dnn_algo_perf* out, int cap) {
  const rlx_dnn_api* a = &b->d->dnn;
  int n = 0;
  rlx_dnn_status s;
  if (p->wgrad)
    s = heuristic ? a->heur_bwd_filter(b->dnn, p->xd, p->yd, p->cd, p->wd, cap, &n, out)
                  : a->find_bwd_filter(b->dnn, p->xd, p->yd, p->cd, p->wd, cap, &n, out);
  else if (p->transpose)
    s = heuristic ? a->heur_bwd_data(b->dnn, p->wd, p->xd, p->cd, p->yd, cap, &n, out)
                  : a->find_bwd_data(b->dnn, p->wd, p->xd, p->cd, p->yd, cap, &n, out);
  else
    s = heuristic ? a->heur_fwd(b->dnn, p->xd, p->wd, p->cd, p->yd, cap, &n, out)
                  : a->find_fwd(b->dnn, p->xd, p->wd, p->cd, p->yd, cap, &n, out);
  return s == RLX_DNN_SUCCESS ? n : 0; /* not a problem cuDNN takes: the caller falls back */
}

/* Which ranking a plan follows. Tensor-core math (bf16 / f16 data, or f32
 * with TF32 allowed) takes the heuristic's order: measured on an H200,
 * ResNet-50 B32 channels-last bf16 ran in 1.94 ms with it against 2.67 with
 * Find's first choice and 2.7-5.2 with candidates timed one by one (short
 * tensor-core calls time unreliably in isolation); TF32 2.57 either way.
 * Exact f32 takes Find's list, whose first candidates pick() times as
 * issued (ResNet-50 exact f32: 8.3 ms against 10.0 with Find's first). */
static int use_heuristic(const rlx_cuda_build* b, const rlx_cuda_conv_plan* p) {
  return b->dnn_heuristic || p->math != RLX_DNN_FMA_MATH;
}

static rlx_status candidates(const rlx_cuda_build* b, const rlx_cuda_conv_plan* p,
                             rlx_dnn_algo_perf* out, int* n, rlx_error* err) {
  (void)err;
  *n = ranked(b, p, use_heuristic(b, p), out, MAX_ALGOS);
  return RLX_OK;
}

static int acceptable(const rlx_cuda_build* b, const rlx_cuda_conv_plan* p,
                      const rlx_dnn_algo_perf* r) {
  if (r->status != RLX_DNN_SUCCESS || r->memory > b->dnn_ws_cap) return 0;
  if (p->math == RLX_DNN_FMA_MATH && r->math_type == RLX_DNN_TENSOR_OP_MATH) return 0;
  if (p->wgrad && r->determinism != RLX_DNN_DETERMINISTIC) return 0; /* same bits every run */
  return 1;
}

/* Issues the call writing `y` (d_w for the weight gradient). */
static rlx_dnn_status issue(const rlx_cuda_dev* d, const rlx_cuda_conv_plan* p, rlx_dnn_handle h,
                            CUdeviceptr y, CUdeviceptr res, CUdeviceptr ws, size_t ws_bytes) {
  const rlx_dnn_api* a = &d->dnn;
  const void* x = (const void*)(uintptr_t)p->x;
  if (p->wgrad)
    return a->backward_filter(h, &p->one, p->xd, x, p->yd, (const void*)(uintptr_t)p->y, p->cd,
                              p->algo, (void*)(uintptr_t)ws, ws_bytes, &p->zero, p->wd,
                              (void*)(uintptr_t)y);
  const void* w = (const void*)(uintptr_t)p->w;
  void* yp = (void*)(uintptr_t)y;
  const void* blend = p->has_residual ? &p->one : &p->zero;
  rlx_dnn_status s;
  if (p->w_dst) { /* the reordered filter heads the workspace */
    void* wr = (void*)(uintptr_t)ws;
    s = a->transform(h, &p->one, p->w_src, w, &p->zero, p->w_dst, wr);
    if (s != RLX_DNN_SUCCESS) return s;
    w = wr;
    ws += p->w_bytes;
    ws_bytes -= p->w_bytes;
  }
  void* wsp = (void*)(uintptr_t)ws;
  if (p->fused) /* no residual: z is y itself, scaled by 0 */
    return a->forward_fused(h, &p->one, p->xd, x, p->wd, w, p->cd, p->algo, wsp, ws_bytes, blend,
                            p->yd, p->has_residual ? (const void*)(uintptr_t)res : yp, p->bd,
                            (const void*)(uintptr_t)p->bias, p->ad, p->yd, yp);
  if (p->transpose)
    s = a->backward_data(h, &p->one, p->wd, w, p->xd, x, p->cd, p->algo, wsp, ws_bytes, blend,
                         p->yd, yp);
  else
    s = a->forward(h, &p->one, p->xd, x, p->wd, w, p->cd, p->algo, wsp, ws_bytes, blend, p->yd, yp);
  if (s == RLX_DNN_SUCCESS && p->add_bias)
    s = a->add_tensor(h, &p->one, p->bd, (const void*)(uintptr_t)p->bias, &p->one, p->yd, yp);
  return s;
}

/* Elements of the filter [OC, C/g, k...]. */
static int64_t filter_elems(const rlx_cuda_conv* c) {
  int64_t n = c->OC * (c->C / c->groups);
  for (int s = 0; s < c->spatial; s++) n *= c->kernel[s];
  return n;
}

/* Runs the plan once into a temporary y (the residual, when blended, is
 * read from that same temporary): whether cuDNN accepts it; with ms, also
 * its time per call over TIMED_REPS more calls. */
static int trial(const rlx_cuda_build* b, const rlx_cuda_conv* c, const rlx_cuda_conv_plan* p,
                 float* ms) {
  const rlx_cuda_dev* d = b->d;
  size_t ybytes = (size_t)extent(c, c->OC, c->out, c->y_stride) * rlx_dtype_size(c->dtype);
  if (p->wgrad) ybytes = (size_t)filter_elems(c) * rlx_dtype_size(c->dtype); /* d_w */
  CUdeviceptr y = 0, ws = 0;
  CUevent e0 = NULL, e1 = NULL;
  int ok = d->cu.mem_alloc(&y, ybytes) == CUDA_SUCCESS &&
           (p->ws == 0 || d->cu.mem_alloc(&ws, p->ws) == CUDA_SUCCESS);
  if (ok) ok = d->cu.memset_d8_async(y, 0, ybytes, b->dnn_stream) == CUDA_SUCCESS;
  if (ok) ok = d->dnn.set_stream(b->dnn, (void*)b->dnn_stream) == RLX_DNN_SUCCESS;
  if (ok) ok = issue(d, p, b->dnn, y, y, ws, p->ws) == RLX_DNN_SUCCESS;
  if (ok && ms) { /* the real call, TIMED_REPS times after the first */
    ok = d->cu.event_create(&e0, 0) == CUDA_SUCCESS && d->cu.event_create(&e1, 0) == CUDA_SUCCESS &&
         d->cu.event_record(e0, b->dnn_stream) == CUDA_SUCCESS;
    for (int r = 0; ok && r < TIMED_REPS; r++) ok = issue(d, p, b->dnn, y, y, ws, p->ws) == RLX_DNN_SUCCESS;
    if (ok) ok = d->cu.event_record(e1, b->dnn_stream) == CUDA_SUCCESS;
  }
  if (ok) ok = d->cu.stream_synchronize(b->dnn_stream) == CUDA_SUCCESS;
  if (ok && ms) ok = d->cu.event_elapsed_time(ms, e0, e1) == CUDA_SUCCESS;
  if (ok && ms) *ms /= TIMED_REPS;
  if (e0) d->cu.event_destroy(e0);
  if (e1) d->cu.event_destroy(e1);
  if (ws) d->cu.mem_free(ws);
  if (y) d->cu.mem_free(y);
  return ok;
}

/* Workspace of algo for this problem, plus the reordered filter's. */
static int workspace_of(const rlx_cuda_build* b, const rlx_cuda_conv_plan* p, int algo,
                        size_t* out) {
  const rlx_dnn_api* a = &b->d->dnn;
  *out = 0;
  rlx_dnn_status s = p->wgrad       ? a->bwd_filter_ws(b->dnn, p->xd, p->yd, p->cd, p->wd, algo, out)
                     : p->transpose ? a->bwd_data_ws(b->dnn, p->wd, p->xd, p->cd, p->yd, algo, out)
                                    : a->fwd_ws(b->dnn, p->xd, p->wd, p->cd, p->yd, algo, out);
  if (s != RLX_DNN_SUCCESS || *out > b->dnn_ws_cap) return 0;
  *out = (*out + 255u) & ~(size_t)255u;
  *out += p->w_bytes;
  return 1;
}

/* Sets p up for candidate r (algo, math, workspace, fused or not) and tries
 * it: fused where the epilogue allows it, else unfused. 1 when it runs;
 * *ms (NULL: not timed) receives its time per call. */
static int try_candidate(const rlx_cuda_build* b, const rlx_cuda_conv* c, rlx_cuda_conv_plan* p,
                         const rlx_dnn_algo_perf* r, float* ms) {
  int fusable = !c->transpose && c->has_bias && p->ad;
  p->algo = r->algo;
  if (p->math != RLX_DNN_FMA_MATH && b->d->dnn.set_conv_math(p->cd, r->math_type) != RLX_DNN_SUCCESS)
    return 0;
  if (!workspace_of(b, p, p->algo, &p->ws)) return 0;
  /* The fused call's identity activation exists only for this algorithm. */
  p->fused = fusable && (c->act == RLX_ACT_RELU || p->algo == RLX_DNN_FWD_IMPLICIT_PRECOMP_GEMM);
  p->add_bias = c->has_bias && !p->fused;
  if (p->fused && trial(b, c, p, ms)) return 1;
  p->fused = 0;
  p->add_bias = c->has_bias;
  return trial(b, c, p, ms);
}

/* The candidate to run. cudnnFind ranks algorithms by the bare convolution,
 * but the call we issue may be the fused ConvBiasActivation, whose speed per
 * algorithm differs: so on Find's list the first TIMED_CANDIDATES acceptable
 * candidates are timed as issued and the fastest kept. On the heuristic's
 * list (use_heuristic) the first that runs. */
static int pick(const rlx_cuda_build* b, const rlx_cuda_conv* c, rlx_cuda_conv_plan* p,
                const rlx_dnn_algo_perf* r, int n) {
  int best = -1, timed = 0;
  float best_ms = 0.0f;
  for (int i = 0; i < n && timed < TIMED_CANDIDATES; i++) {
    if (!acceptable(b, p, &r[i])) continue;
    float ms = 0.0f;
    if (use_heuristic(b, p)) {
      if (try_candidate(b, c, p, &r[i], NULL)) return 1;
      continue;
    }
    if (!try_candidate(b, c, p, &r[i], &ms)) continue;
    timed++;
    if (best < 0 || ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  return best >= 0 && try_candidate(b, c, p, &r[best], NULL); /* re-applies its settings */
}

rlx_status rlx_cuda_conv_plan_create(const rlx_cuda_build* b, const rlx_cuda_conv* c,
                                     rlx_cuda_conv_plan** out, rlx_error* err) {
  const rlx_cuda_dev* d = b->d;
  *out = NULL;
  if (!b->dnn || !rlx_cuda_conv_native(d, c)) return RLX_OK;
  rlx_cuda_conv_plan* p = calloc(1, sizeof *p);
  RLX_CHECK_ALLOC(err, p);
  p->transpose = c->transpose;
  p->wgrad = c->wgrad;
  p->has_residual = c->has_residual;
  p->one = 1.0f;
  p->zero = 0.0f;
  p->x = b->arena + c->x_off;
  p->w = b->arena + c->w_off;
  p->bias = c->has_bias ? b->arena + c->bias_off : 0;
  p->res = c->has_residual ? b->arena + c->res_off : 0;
  p->y = b->arena + c->y_off;
  rlx_status st = make_descriptors(b, c, p, err);
  if (st == RLX_OK) st = d->dnn.set_stream(b->dnn, (void*)b->dnn_stream) == RLX_DNN_SUCCESS
                             ? RLX_OK
                             : rlx_fail(err, RLX_INTERNAL, "cuda: cudnnSetStream failed");
  rlx_dnn_algo_perf r[MAX_ALGOS];
  int n = 0;
  memset(r, 0, sizeof r);
  if (st == RLX_OK) st = candidates(b, p, r, &n, err);
  if (st != RLX_OK || !pick(b, c, p, r, n)) { /* error, or no algorithm: the host runs it */
    rlx_cuda_conv_plan_destroy(d, p);
    return st;
  }
  /* Unfused with a residual: y holds the residual before the convolution
   * accumulates onto it (nothing to copy when they share the bytes). */
  p->residual_copy = c->has_residual && !p->fused && c->res_off != c->y_off;
  p->applies_act = c->act == RLX_ACT_NONE || (p->fused && c->act == RLX_ACT_RELU);
  *out = p;
  return RLX_OK;
}

rlx_status rlx_cuda_conv_plan_run(const rlx_cuda_dev* d, const rlx_cuda_conv_plan* p,
                                  rlx_dnn_handle h, CUstream stream, CUdeviceptr workspace,
                                  size_t workspace_bytes, rlx_error* err) {
  DNN(d, err, "cudnnSetStream", d->dnn.set_stream(h, (void*)stream));
  DNN(d, err,
      p->wgrad       ? "cudnnConvolutionBackwardFilter"
      : p->transpose ? "cudnnConvolutionBackwardData"
                     : "cudnnConvolutionForward",
      issue(d, p, h, p->wgrad ? p->w : p->y, p->res, workspace, workspace_bytes));
  return RLX_OK;
}

#else
typedef int rlx_cuda_cudnn_unused_;
#endif
