/* GridSample (op 0) and RoiAlign (op 1): one thread per output element,
 * grid-strided; the CPU reference's rules (ref_nn.c) in double. */
#include "common.cuh"

/* Grid coordinate g in [-1, 1] -> pixel coordinate along a dim of n. */
RLXK_DEV double sp_unnormalize(double g, int64_t n, int align) {
  return align ? (g + 1.0) / 2.0 * (double)(n - 1) : ((g + 1.0) * (double)n - 1.0) / 2.0;
}

/* Mirror of c into [lo2 / 2, hi2 / 2] (bounds doubled, as PyTorch). */
RLXK_DEV double sp_reflect(double c, double lo2, double hi2) {
  if (lo2 == hi2) return 0.0;
  double lo = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
  c = fabs(c - lo);
  double extra = fmod(c, span), flips = floor(c / span);
  return fmod(flips, 2.0) == 0.0 ? extra + lo : span - extra + lo;
}

RLXK_DEV double sp_pad(double c, int64_t n, int padding, int align) {
  if (padding == RLX_GRID_ZEROS) return c;
  if (padding == RLX_GRID_REFLECTION)
    c = align ? sp_reflect(c, 0.0, 2.0 * (double)(n - 1)) : sp_reflect(c, -1.0, 2.0 * (double)n - 1.0);
  return c < 0.0 ? 0.0 : (c > (double)(n - 1) ? (double)(n - 1) : c);
}

RLXK_DEV double sp_tap(const rlxk_sampler& p, const char* x, int64_t plane, int64_t iy, int64_t ix) {
  if (iy < 0 || iy >= p.H || ix < 0 || ix >= p.W) return 0.0;
  return ld_f64(x, p.xdt, (plane * p.H + iy) * p.W + ix);
}

RLXK_DEV double sp_grid(const rlxk_sampler& p, const char* x, int64_t plane, double gx, double gy) {
  double ix = sp_unnormalize(gx, p.W, p.align), iy = sp_unnormalize(gy, p.H, p.align);
  if (p.mode == RLX_RESIZE_CUBIC) { /* padding per tap of the raw coordinate */
    double fx = floor(ix), fy = floor(iy), acc = 0.0;
    for (int j = 0; j < 4; j++) {
      double ty = fy - 1.0 + j, wy = rlx_cubic_weight(-0.75, iy - ty);
      double py = sp_pad(ty, p.H, p.padding, p.align);
      for (int i = 0; i < 4; i++) {
        double tx = fx - 1.0 + i, wx = rlx_cubic_weight(-0.75, ix - tx);
        acc += wy * wx * sp_tap(p, x, plane, (int64_t)py, (int64_t)sp_pad(tx, p.W, p.padding, p.align));
      }
    }
    return acc;
  }
  ix = sp_pad(ix, p.W, p.padding, p.align);
  iy = sp_pad(iy, p.H, p.padding, p.align);
  if (p.mode == RLX_RESIZE_NEAREST)
    return sp_tap(p, x, plane, (int64_t)rlx_round_half_even(iy), (int64_t)rlx_round_half_even(ix));
  double x0 = floor(ix), y0 = floor(iy), lx = ix - x0, ly = iy - y0;
  int64_t a = (int64_t)x0, b = (int64_t)y0;
  return (1 - ly) * ((1 - lx) * sp_tap(p, x, plane, b, a) + lx * sp_tap(p, x, plane, b, a + 1)) +
         ly * ((1 - lx) * sp_tap(p, x, plane, b + 1, a) + lx * sp_tap(p, x, plane, b + 1, a + 1));
}

/* RoiAlign's bilinear sample (ONNX / Caffe2 rule): four weighted corners. */
RLXK_DEV void sp_roi_sample(const rlxk_sampler& p, const char* x, int64_t plane, double yy,
                            double xx, double* v) {
  v[0] = v[1] = v[2] = v[3] = 0.0;
  if (yy < -1.0 || yy > (double)p.H || xx < -1.0 || xx > (double)p.W) return;
  if (yy < 0) yy = 0;
  if (xx < 0) xx = 0;
  int64_t y0 = (int64_t)yy, x0 = (int64_t)xx, y1, x1;
  if (y0 >= p.H - 1) { y0 = y1 = p.H - 1; yy = (double)y0; } else y1 = y0 + 1;
  if (x0 >= p.W - 1) { x0 = x1 = p.W - 1; xx = (double)x0; } else x1 = x0 + 1;
  double ly = yy - (double)y0, lx = xx - (double)x0, hy = 1.0 - ly, hx = 1.0 - lx;
  v[0] = hy * hx * sp_tap(p, x, plane, y0, x0);
  v[1] = hy * lx * sp_tap(p, x, plane, y0, x1);
  v[2] = ly * hx * sp_tap(p, x, plane, y1, x0);
  v[3] = ly * lx * sp_tap(p, x, plane, y1, x1);
}

RLXK_DEV double sp_roi_bin(const rlxk_sampler& p, const char* x, const char* rois,
                           const char* bi, int64_t r, int64_t c, int64_t ph, int64_t pw) {
  int64_t b = ld_i64(bi, p.bdt, r);
  if (b < 0 || b >= p.N) return NAN; /* the reference refuses it; never read outside x */
  double off = p.align ? 0.5 : 0.0, sc = (double)p.spatial_scale;
  double x1 = ld_f64(rois, p.gdt, r * 4) * sc - off, y1 = ld_f64(rois, p.gdt, r * 4 + 1) * sc - off;
  double rw = ld_f64(rois, p.gdt, r * 4 + 2) * sc - off - x1;
  double rh = ld_f64(rois, p.gdt, r * 4 + 3) * sc - off - y1;
  if (!p.align) {
    rw = rw > 1.0 ? rw : 1.0;
    rh = rh > 1.0 ? rh : 1.0;
  }
  double bh = rh / (double)p.Ho, bw = rw / (double)p.Wo;
  int64_t gh = p.ratio > 0 ? p.ratio : (int64_t)ceil(rh / (double)p.Ho);
  int64_t gw = p.ratio > 0 ? p.ratio : (int64_t)ceil(rw / (double)p.Wo);
  int64_t plane = b * p.C + c;
  bool is_max = p.mode == RLX_POOL_MAX;
  double acc = is_max ? -INFINITY : 0.0, v[4];
  for (int64_t iy = 0; iy < gh; iy++) {
    double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
    for (int64_t ix = 0; ix < gw; ix++) {
      sp_roi_sample(p, x, plane, yy, x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw, v);
      if (is_max) {
        double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
        acc = m > acc ? m : acc;
      } else {
        acc += v[0] + v[1] + v[2] + v[3];
      }
    }
  }
  if (is_max) return gh * gw > 0 ? acc : 0.0;
  return acc / (double)(gh * gw > 1 ? gh * gw : 1);
}

extern "C" __global__ void rlx_sampler(char* arena, rlxk_sampler p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  const char* g = at(arena, p.goff);
  const char* bi = at(arena, p.boff);
  char* o = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < p.n; t += grid_stride()) {
    int64_t w = t % p.Wo, h = (t / p.Wo) % p.Ho, nc = t / (p.Wo * p.Ho);
    double v;
    if (p.op == 1) {
      v = sp_roi_bin(p, x, g, bi, nc / p.C, nc % p.C, h, w);
    } else {
      int64_t gi = ((nc / p.C * p.Ho + h) * p.Wo + w) * 2;
      v = sp_grid(p, x, nc, ld_f64(g, p.gdt, gi), ld_f64(g, p.gdt, gi + 1));
    }
    st_f64(o, p.odt, t, v);
  }
}
