/* GridSample's and RoiAlign's gradients, by differentiating a
 * decomposition: the rule rebuilds the forward from ops that have rules
 * (bilinear taps as gathers from x viewed as [N*H*W, C], weights from the
 * coordinates, masks for taps outside the input) on fresh views of the
 * node's inputs, and runs rlx_graph_grad on that with dy as the seed. The
 * views stop the inner sweep where the node's inputs begin.
 * GridSample: every mode and padding. RoiAlign: average and max with a fixed
 * sampling_ratio (the adaptive one counts samples from the rois' values);
 * the rois get a gradient too. */
#include <stdlib.h>

#include "autodiff/grad.h"

#define TRY RLX_RETURN_IF_ERROR

typedef struct sampler {
  rlx_graph* g;
  rlx_dtype dt;
  int64_t N, C, H, W, Ho, Wo;
  int align, border, reflect; /* reflect: reflection padding (border set too: clamps after) */
  rlx_tensor table; /* x as [N*H*W, C] */
  rlx_tensor base;  /* n * H * W per sample, [N, 1, 1] */
} sampler;

static rlx_status scalar_op(sampler* s, rlx_binary_op op, rlx_tensor a, double v, rlx_tensor* o) {
  return rlx_grad_bin_scalar(s->g, op, a, v, o);
}

/* floor(v) from round (no floor op): round(v) - 1 where it rounded up. */
static rlx_status floor_of(sampler* s, rlx_tensor v, rlx_tensor* out) {
  rlx_tensor r, up, r1;
  TRY(rlx_graph_add_activation(s->g, RLX_ACT_ROUND, v, &r));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_GT, r, v, &up));
  TRY(scalar_op(s, RLX_BIN_SUB, r, 1.0, &r1));
  return rlx_graph_add_where(s->g, up, r1, r, out);
}

/* Reflection padding of coordinate c along a dim of n (the kernel's
 * rlx_grid_reflect): mirrored about the bounds, period twice the span. */
static rlx_status reflect_coord(sampler* s, rlx_tensor c, int64_t n, rlx_tensor* out) {
  double lo2 = s->align ? 0.0 : -1.0, hi2 = s->align ? 2.0 * (double)(n - 1) : 2.0 * (double)n - 1.0;
  if (lo2 == hi2) return scalar_op(s, RLX_BIN_MUL, c, 0.0, out);
  double lo = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
  rlx_tensor d, q, extra, half, odd, even, z, a, b;
  TRY(scalar_op(s, RLX_BIN_SUB, c, lo, &d));
  TRY(rlx_graph_add_activation(s->g, RLX_ACT_ABS, d, &d));
  TRY(scalar_op(s, RLX_BIN_MUL, d, 1.0 / span, &q));
  TRY(floor_of(s, q, &q)); /* flips */
  TRY(scalar_op(s, RLX_BIN_MUL, q, span, &extra));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, d, extra, &extra));
  TRY(scalar_op(s, RLX_BIN_MUL, q, 0.5, &half));
  TRY(floor_of(s, half, &half));
  TRY(scalar_op(s, RLX_BIN_MUL, half, 2.0, &half));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, q, half, &odd));
  TRY(rlx_grad_scalar(s->g, s->dt, 0.0, &z));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_EQ, odd, z, &even));
  TRY(scalar_op(s, RLX_BIN_ADD, extra, lo, &a));
  TRY(rlx_graph_add_activation(s->g, RLX_ACT_NEG, extra, &b));
  TRY(scalar_op(s, RLX_BIN_ADD, b, span + lo, &b));
  return rlx_graph_add_where(s->g, even, a, b, out);
}

/* Border / reflection padding of a coordinate: reflected, then clamped. */
static rlx_status pad_coord(sampler* s, rlx_tensor c, int64_t n, rlx_tensor* out) {
  *out = c;
  if (s->reflect) TRY(reflect_coord(s, c, n, out));
  if (!s->border) return RLX_OK;
  TRY(scalar_op(s, RLX_BIN_MAX, *out, 0.0, out));
  return scalar_op(s, RLX_BIN_MIN, *out, (double)(n - 1), out);
}

/* Pixel coordinate of grid coordinate g along a dim of n (border: clamped,
 * but for cubic, whose taps are padded one by one). */
static rlx_status unnormalize(sampler* s, rlx_tensor gc, int64_t n, int cubic, rlx_tensor* out) {
  double half = (double)(n - 1) / 2.0, scale = s->align ? half : (double)n / 2.0;
  TRY(scalar_op(s, RLX_BIN_MUL, gc, scale, out));
  TRY(scalar_op(s, RLX_BIN_ADD, *out, half, out));
  if (cubic) return RLX_OK;
  return pad_coord(s, *out, n, out);
}

/* 1.0 where 0 <= c <= n - 1, else 0.0 (as c's dtype). */
static rlx_status inside(sampler* s, rlx_tensor c, int64_t n, rlx_tensor* out) {
  rlx_tensor lo, hi, z, top;
  TRY(rlx_grad_scalar(s->g, s->dt, 0.0, &z));
  TRY(rlx_grad_scalar(s->g, s->dt, (double)(n - 1), &top));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_GE, c, z, &lo));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_LE, c, top, &hi));
  TRY(rlx_graph_add_cast(s->g, lo, s->dt, &lo));
  TRY(rlx_graph_add_cast(s->g, hi, s->dt, &hi));
  return rlx_graph_add_binary(s->g, RLX_BIN_MUL, lo, hi, out);
}

/* weight * x[n, :, yi, xi] for integer-valued coordinates yi, xi [N, Ho,
 * Wo] (the weight zeroed outside the input) -> [N, Ho, Wo, C]. */
static rlx_status tap(sampler* s, rlx_tensor yi, rlx_tensor xi, rlx_tensor w, rlx_tensor* out) {
  rlx_tensor vy, vx, cy, cx, flat, idx, v;
  TRY(inside(s, yi, s->H, &vy));
  TRY(inside(s, xi, s->W, &vx));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, w, vy, &w));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, w, vx, &w));
  TRY(scalar_op(s, RLX_BIN_MAX, yi, 0.0, &cy));
  TRY(scalar_op(s, RLX_BIN_MIN, cy, (double)(s->H - 1), &cy));
  TRY(scalar_op(s, RLX_BIN_MAX, xi, 0.0, &cx));
  TRY(scalar_op(s, RLX_BIN_MIN, cx, (double)(s->W - 1), &cx));
  TRY(scalar_op(s, RLX_BIN_MUL, cy, (double)s->W, &flat));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_ADD, flat, cx, &flat));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_ADD, flat, s->base, &flat));
  TRY(rlx_graph_add_cast(s->g, flat, RLX_I64, &idx));
  TRY(rlx_graph_add_gather(s->g, s->table, idx, 0, &v));
  rlx_dim ws[4] = {s->N, s->Ho, s->Wo, 1};
  TRY(rlx_graph_add_reshape(s->g, w, ws, 4, &w));
  return rlx_graph_add_binary(s->g, RLX_BIN_MUL, v, w, out);
}

/* Keys cubic weight (a = -0.75, as the kernel) of distance t, for t in
 * [0, 1] (near) or [1, 2] (far). */
static rlx_status cubic_weight(sampler* s, rlx_tensor t, int far, rlx_tensor* out) {
  const double a = -0.75;
  rlx_tensor p;
  if (!far) { /* ((a + 2) t - (a + 3)) t^2 + 1 */
    TRY(scalar_op(s, RLX_BIN_MUL, t, a + 2.0, &p));
    TRY(scalar_op(s, RLX_BIN_SUB, p, a + 3.0, &p));
    TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, p, t, &p));
    TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, p, t, &p));
    return scalar_op(s, RLX_BIN_ADD, p, 1.0, out);
  }
  /* ((a t - 5 a) t + 8 a) t - 4 a */
  TRY(scalar_op(s, RLX_BIN_MUL, t, a, &p));
  TRY(scalar_op(s, RLX_BIN_SUB, p, 5.0 * a, &p));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, p, t, &p));
  TRY(scalar_op(s, RLX_BIN_ADD, p, 8.0 * a, &p));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, p, t, &p));
  return scalar_op(s, RLX_BIN_SUB, p, 4.0 * a, out);
}

/* The four cubic taps of coordinate c along a dim of n: coordinates
 * floor(c) - 1 .. floor(c) + 2 (each padded, as the kernel pads each tap)
 * and their weights. */
static rlx_status cubic_taps(sampler* s, rlx_tensor c, int64_t n, rlx_tensor* at, rlx_tensor* w) {
  rlx_tensor f, l, one, t;
  TRY(floor_of(s, c, &f));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, c, f, &l));
  TRY(rlx_grad_scalar(s->g, s->dt, 1.0, &one));
  for (int k = 0; k < 4; k++) {
    TRY(scalar_op(s, RLX_BIN_ADD, f, (double)(k - 1), &at[k]));
    TRY(pad_coord(s, at[k], n, &at[k]));
    /* distances 1 + l, l, 1 - l, 2 - l */
    if (k < 2) TRY(scalar_op(s, RLX_BIN_ADD, l, (double)(1 - k), &t));
    else TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, one, l, &t));
    if (k == 3) TRY(scalar_op(s, RLX_BIN_ADD, t, 1.0, &t));
    TRY(cubic_weight(s, t, k == 0 || k == 3, &w[k]));
  }
  return RLX_OK;
}

/* Bicubic: the 16 taps of (iy, ix). */
static rlx_status sample_cubic(sampler* s, rlx_tensor iy, rlx_tensor ix, rlx_tensor* out) {
  rlx_tensor ys[4], xs[4], wy[4], wx[4], acc = RLX_NONE;
  TRY(cubic_taps(s, iy, s->H, ys, wy));
  TRY(cubic_taps(s, ix, s->W, xs, wx));
  for (int j = 0; j < 16; j++) {
    rlx_tensor w, v;
    TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, wy[j / 4], wx[j % 4], &w));
    TRY(tap(s, ys[j / 4], xs[j % 4], w, &v));
    if (acc == RLX_NONE) acc = v;
    else TRY(rlx_graph_add_binary(s->g, RLX_BIN_ADD, acc, v, &acc));
  }
  *out = acc;
  return RLX_OK;
}

/* The sampled values [N, Ho, Wo, C] at pixel coordinates (iy, ix). */
static rlx_status sample(sampler* s, int nearest, rlx_tensor iy, rlx_tensor ix, rlx_tensor* out) {
  rlx_tensor one;
  TRY(rlx_grad_scalar(s->g, s->dt, 1.0, &one));
  if (nearest) {
    rlx_tensor ry, rx;
    TRY(rlx_graph_add_activation(s->g, RLX_ACT_ROUND, iy, &ry)); /* half to even, as the kernel */
    TRY(rlx_graph_add_activation(s->g, RLX_ACT_ROUND, ix, &rx));
    rlx_tensor w;
    TRY(rlx_graph_add_expand(s->g, one, rlx_tensor_type(s->g, ix)->shape, 3, &w));
    return tap(s, ry, rx, w, out);
  }
  rlx_tensor y0, x0, ly, lx, hy, hx, y1, x1, acc = RLX_NONE;
  TRY(floor_of(s, iy, &y0));
  TRY(floor_of(s, ix, &x0));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, iy, y0, &ly));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, ix, x0, &lx));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, one, ly, &hy));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, one, lx, &hx));
  TRY(scalar_op(s, RLX_BIN_ADD, y0, 1.0, &y1));
  TRY(scalar_op(s, RLX_BIN_ADD, x0, 1.0, &x1));
  const rlx_tensor ys[2] = {y0, y1}, xs[2] = {x0, x1}, wy[2] = {hy, ly}, wx[2] = {hx, lx};
  for (int j = 0; j < 4; j++) {
    rlx_tensor w, v;
    TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, wy[j / 2], wx[j % 2], &w));
    TRY(tap(s, ys[j / 2], xs[j % 2], w, &v));
    if (acc == RLX_NONE) acc = v;
    else TRY(rlx_graph_add_binary(s->g, RLX_BIN_ADD, acc, v, &acc));
  }
  *out = acc;
  return RLX_OK;
}

/* The forward rebuilt on views xv, gv of x and grid: [N, C, Ho, Wo]. */
static rlx_status rebuild(sampler* s, const rlx_node* n, rlx_tensor xv, rlx_tensor gv,
                          rlx_tensor* y) {
  static const int32_t nhwc[4] = {0, 2, 3, 1}, nchw[4] = {0, 3, 1, 2};
  rlx_dim ts[2] = {s->N * s->H * s->W, s->C}, gs[3] = {s->N, s->Ho, s->Wo};
  rlx_tensor gx, gy, ix, iy, v;
  TRY(rlx_graph_add_transpose(s->g, xv, nhwc, 4, &s->table));
  TRY(rlx_graph_add_reshape(s->g, s->table, ts, 2, &s->table));
  double* base = malloc(sizeof(double) * (size_t)s->N);
  RLX_CHECK_ALLOC(&s->g->err, base);
  for (int64_t i = 0; i < s->N; i++) base[i] = (double)(i * s->H * s->W);
  void* bytes = malloc(rlx_dtype_size(s->dt) * (size_t)s->N);
  rlx_dim bs[3] = {s->N, 1, 1};
  rlx_status st = bytes ? rlx_dtype_convert(bytes, s->dt, base, RLX_F64, s->N)
                        : rlx_fail(&s->g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  if (st == RLX_OK)
    st = rlx_graph_add_constant(s->g, s->dt, bs, 3, bytes, rlx_dtype_size(s->dt) * (size_t)s->N,
                                &s->base);
  free(base);
  free(bytes);
  TRY(st);
  TRY(rlx_graph_add_narrow(s->g, gv, 3, 0, 1, &gx));
  TRY(rlx_graph_add_narrow(s->g, gv, 3, 1, 1, &gy));
  TRY(rlx_graph_add_reshape(s->g, gx, gs, 3, &gx));
  TRY(rlx_graph_add_reshape(s->g, gy, gs, 3, &gy));
  int cubic = n->a.resize_mode == RLX_RESIZE_CUBIC;
  TRY(unnormalize(s, gx, s->W, cubic, &ix));
  TRY(unnormalize(s, gy, s->H, cubic, &iy));
  if (cubic) TRY(sample_cubic(s, iy, ix, &v));
  else TRY(sample(s, n->a.resize_mode == RLX_RESIZE_NEAREST, iy, ix, &v));
  return rlx_graph_add_transpose(s->g, v, nchw, 4, y);
}

RLX_GRAD_RULE(rlx_grad_grid_sample) {
  rlx_graph* g = c->g;
  rlx_type xt = *rlx_tensor_type(g, n->in[0]), gt = *rlx_tensor_type(g, n->in[1]);
  sampler s = {g, xt.dtype, xt.shape[0], xt.shape[1], xt.shape[2], xt.shape[3],
               gt.shape[1], gt.shape[2], n->a.align_corners,
               n->a.grid_padding != RLX_GRID_ZEROS, n->a.grid_padding == RLX_GRID_REFLECTION,
               RLX_NONE, RLX_NONE};
  if (s.N < 0 || s.C < 0 || s.H < 0 || s.W < 0 || s.Ho < 0 || s.Wo < 0)
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "grid_sample's gradient needs static dims");
  rlx_tensor views[2], y, grads[2];
  TRY(rlx_graph_add_reshape(g, n->in[0], xt.shape, xt.rank, &views[0]));
  TRY(rlx_graph_add_reshape(g, n->in[1], gt.shape, gt.rank, &views[1]));
  TRY(rebuild(&s, n, views[0], views[1], &y));
  TRY(rlx_graph_grad(g, y, views, 2, dy[0], grads));
  if (rlx_grad_wants(c, n, 0)) dx[0] = grads[0];
  if (rlx_grad_wants(c, n, 1)) dx[1] = grads[1];
  return RLX_OK;
}

/* ------------------------------------------------------------------ RoiAlign */

/* A constant of dtype dt and shape [1, a, b, 1, 1] (or [1, 1, 1, a, b]):
 * bin + (sample + 0.5) / samples, the sample offsets in bins. */
static rlx_status bin_offsets(rlx_graph* g, rlx_dtype dt, int64_t bins, int64_t samples, int rows,
                              rlx_tensor* out) {
  int64_t n = bins * samples;
  double* v = malloc(sizeof(double) * (size_t)n);
  void* bytes = malloc(rlx_dtype_size(dt) * (size_t)n);
  rlx_status st = RLX_OK;
  if (!v || !bytes) st = rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int64_t i = 0; st == RLX_OK && i < n; i++)
    v[i] = (double)(i / samples) + ((double)(i % samples) + 0.5) / (double)samples;
  if (st == RLX_OK) st = rlx_dtype_convert(bytes, dt, v, RLX_F64, n);
  rlx_dim shape[5] = {1, 1, 1, 1, 1};
  shape[rows ? 1 : 3] = bins;
  shape[rows ? 2 : 4] = samples;
  if (st == RLX_OK)
    st = rlx_graph_add_constant(g, dt, shape, 5, bytes, rlx_dtype_size(dt) * (size_t)n, out);
  free(v);
  free(bytes);
  return st;
}

/* Column k of rois [R, 4] scaled and shifted, as [R, 1, 1, 1, 1]. */
static rlx_status roi_column(sampler* s, rlx_tensor rois, int32_t k, double scale, double off,
                             rlx_tensor* out) {
  rlx_dim shape[5] = {rlx_tensor_type(s->g, rois)->shape[0], 1, 1, 1, 1};
  TRY(rlx_graph_add_narrow(s->g, rois, 1, k, 1, out));
  TRY(rlx_graph_add_reshape(s->g, *out, shape, 5, out));
  TRY(scalar_op(s, RLX_BIN_MUL, *out, scale, out));
  return scalar_op(s, RLX_BIN_SUB, *out, off, out);
}

/* Sample coordinates along one axis: start + extent / bins * offsets, where
 * extent = end - start (at least 1 without the half-pixel shift). */
static rlx_status roi_coords(sampler* s, const rlx_node* n, rlx_tensor rois, int32_t k,
                             int64_t bins, int rows, rlx_tensor* out) {
  double sc = n->a.spatial_scale, off = n->a.align_corners ? 0.5 : 0.0;
  rlx_tensor lo, hi, ext, offs;
  TRY(roi_column(s, rois, k, sc, off, &lo));
  TRY(roi_column(s, rois, k + 2, sc, off, &hi));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, hi, lo, &ext));
  if (!n->a.align_corners) TRY(scalar_op(s, RLX_BIN_MAX, ext, 1.0, &ext));
  TRY(scalar_op(s, RLX_BIN_MUL, ext, 1.0 / (double)bins, &ext));
  TRY(bin_offsets(s->g, s->dt, bins, n->a.sampling_ratio, rows, &offs));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, ext, offs, out));
  return rlx_graph_add_binary(s->g, RLX_BIN_ADD, *out, lo, out);
}

/* The Caffe2 corner rule along one axis of n: 0 outside [-1, n]; clamped
 * below at 0; from n - 1 on both corners are the last pixel. Gives the
 * two corner coordinates, their weights and the inside mask. */
static rlx_status roi_axis(sampler* s, rlx_tensor c, int64_t n, rlx_tensor* c0, rlx_tensor* c1,
                           rlx_tensor* w0, rlx_tensor* w1, rlx_tensor* in) {
  rlx_tensor lo, hi, z, top, last, edge, f;
  TRY(rlx_grad_scalar(s->g, s->dt, -1.0, &lo));
  TRY(rlx_grad_scalar(s->g, s->dt, (double)n, &hi));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_GE, c, lo, &lo));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_LE, c, hi, &hi));
  TRY(rlx_graph_add_cast(s->g, lo, s->dt, &lo));
  TRY(rlx_graph_add_cast(s->g, hi, s->dt, &hi));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_MUL, lo, hi, in));
  TRY(scalar_op(s, RLX_BIN_MAX, c, 0.0, &c));
  TRY(floor_of(s, c, &f));
  TRY(rlx_grad_scalar(s->g, s->dt, (double)(n - 1), &top));
  TRY(rlx_graph_add_compare(s->g, RLX_CMP_GE, f, top, &edge));
  TRY(rlx_grad_zeros(s->g, rlx_tensor_type(s->g, c), &z));
  TRY(rlx_graph_add_where(s->g, edge, top, f, c0));
  TRY(scalar_op(s, RLX_BIN_ADD, f, 1.0, &last));
  TRY(rlx_graph_add_where(s->g, edge, top, last, c1));
  TRY(rlx_graph_add_binary(s->g, RLX_BIN_SUB, c, f, w1));
  TRY(rlx_graph_add_where(s->g, edge, z, *w1, w1));
  TRY(rlx_grad_bin_scalar(s->g, RLX_BIN_SUB, *w1, 1.0, w0));
  return rlx_graph_add_activation(s->g, RLX_ACT_NEG, *w0, w0);
}

/* RoiAlign rebuilt on views of x and rois (batch indices as given):
 * [R, oh, gh, ow, gw] sample points, four weighted corners gathered from
 * x as [N*H*W, C] each, combined by mean or max. */
static rlx_status rebuild_roi(sampler* s, const rlx_node* n, rlx_tensor xv, rlx_tensor rv,
                              rlx_tensor* y) {
  static const int32_t nhwc[4] = {0, 2, 3, 1}, rchw[4] = {0, 3, 1, 2};
  rlx_graph* g = s->g;
  int64_t R = rlx_tensor_type(g, rv)->shape[0], oh = s->Ho, ow = s->Wo;
  int64_t gs = n->a.sampling_ratio;
  rlx_dim ts[2] = {s->N * s->H * s->W, s->C}, bs[5] = {R, 1, 1, 1, 1};
  rlx_tensor yy, xx, y0, y1, wy0, wy1, iny, x0, x1, wx0, wx1, inx, b, acc = RLX_NONE;
  TRY(rlx_graph_add_transpose(g, xv, nhwc, 4, &s->table));
  TRY(rlx_graph_add_reshape(g, s->table, ts, 2, &s->table));
  TRY(rlx_graph_add_cast(g, n->in[2], s->dt, &b));
  TRY(rlx_graph_add_reshape(g, b, bs, 5, &b));
  TRY(scalar_op(s, RLX_BIN_MUL, b, (double)(s->H * s->W), &s->base));
  TRY(roi_coords(s, n, rv, 1, oh, 1, &yy));
  TRY(roi_coords(s, n, rv, 0, ow, 0, &xx));
  TRY(roi_axis(s, yy, s->H, &y0, &y1, &wy0, &wy1, &iny));
  TRY(roi_axis(s, xx, s->W, &x0, &x1, &wx0, &wx1, &inx));
  const rlx_tensor ys[2] = {y0, y1}, xs[2] = {x0, x1}, wy[2] = {wy0, wy1}, wx[2] = {wx0, wx1};
  rlx_dim full[6] = {R, oh, gs, ow, gs, 1};
  for (int j = 0; j < 4; j++) {
    rlx_tensor w, flat, idx, v;
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, wy[j / 2], wx[j % 2], &w));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, w, iny, &w));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, w, inx, &w));
    TRY(scalar_op(s, RLX_BIN_MUL, ys[j / 2], (double)s->W, &flat));
    TRY(rlx_graph_add_binary(g, RLX_BIN_ADD, flat, xs[j % 2], &flat));
    TRY(rlx_graph_add_binary(g, RLX_BIN_ADD, flat, s->base, &flat));
    TRY(rlx_graph_add_cast(g, flat, RLX_I64, &idx));
    TRY(rlx_graph_add_gather(g, s->table, idx, 0, &v)); /* [R, oh, gs, ow, gs, C] */
    TRY(rlx_graph_add_reshape(g, w, full, 6, &w));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, v, w, &v));
    if (acc == RLX_NONE) acc = v;
    else TRY(rlx_graph_add_binary(g, n->a.pool == RLX_POOL_MAX ? RLX_BIN_MAX : RLX_BIN_ADD, acc,
                                  v, &acc));
  }
  int32_t axes[2] = {2, 4};
  rlx_reduce_op red = n->a.pool == RLX_POOL_MAX ? RLX_RED_MAX : RLX_RED_MEAN;
  TRY(rlx_graph_add_reduce(g, red, acc, axes, 2, 0, &acc)); /* [R, oh, ow, C] */
  return rlx_graph_add_transpose(g, acc, rchw, 4, y);
}

RLX_GRAD_RULE(rlx_grad_roi_align) {
  rlx_graph* g = c->g;
  if (n->a.sampling_ratio <= 0)
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED,
                    "roi_align's gradient needs sampling_ratio > 0 (the adaptive count depends "
                    "on the rois' values)");
  rlx_type xt = *rlx_tensor_type(g, n->in[0]), rt = *rlx_tensor_type(g, n->in[1]);
  rlx_type yt = *rlx_tensor_type(g, n->out[0]);
  sampler s = {g, xt.dtype, xt.shape[0], xt.shape[1], xt.shape[2], xt.shape[3],
               yt.shape[2], yt.shape[3], 0, 0, 0, RLX_NONE, RLX_NONE};
  if (s.N < 0 || s.C < 0 || s.H < 0 || s.W < 0 || rt.shape[0] < 0)
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "roi_align's gradient needs static dims");
  rlx_tensor views[2], y, grads[2];
  TRY(rlx_graph_add_reshape(g, n->in[0], xt.shape, xt.rank, &views[0]));
  TRY(rlx_graph_add_reshape(g, n->in[1], rt.shape, rt.rank, &views[1]));
  TRY(rebuild_roi(&s, n, views[0], views[1], &y));
  TRY(rlx_graph_grad(g, y, views, 2, dy[0], grads));
  if (rlx_grad_wants(c, n, 0)) dx[0] = grads[0];
  if (rlx_grad_wants(c, n, 1)) dx[1] = grads[1];
  return RLX_OK;
}
