/* GridSample (op 0) and RoiAlign (op 1): one thread per output element,
 * grid-strided; the CPU reference's rules (ref_nn.c) in double. */
#include "common.cuh"

RLXK_DEV double sp_tap(const rlxk_sampler& p, const char* x, int64_t plane, int64_t iy, int64_t ix) {
  if (iy < 0 || iy >= p.H || ix < 0 || ix >= p.W) return 0.0;
  return ld_f64(x, p.xdt, (plane * p.H + iy) * p.W + ix);
}

RLXK_DEV double sp_grid(const rlxk_sampler& p, const char* x, int64_t plane, double gx, double gy) {
  double ix = rlx_grid_unnormalize(gx, p.W, p.align), iy = rlx_grid_unnormalize(gy, p.H, p.align);
  if (p.mode == RLX_RESIZE_CUBIC) { /* padding per tap of the raw coordinate */
    double fx = floor(ix), fy = floor(iy), acc = 0.0;
    for (int j = 0; j < 4; j++) {
      double ty = fy - 1.0 + j, wy = rlx_cubic_weight(-0.75, iy - ty);
      double py = rlx_grid_pad_coord(ty, p.H, p.padding, p.align);
      for (int i = 0; i < 4; i++) {
        double tx = fx - 1.0 + i, wx = rlx_cubic_weight(-0.75, ix - tx);
        acc += wy * wx * sp_tap(p, x, plane, (int64_t)py, (int64_t)rlx_grid_pad_coord(tx, p.W, p.padding, p.align));
      }
    }
    return acc;
  }
  ix = rlx_grid_pad_coord(ix, p.W, p.padding, p.align);
  iy = rlx_grid_pad_coord(iy, p.H, p.padding, p.align);
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
  int64_t at[4];
  double w[4];
  v[0] = v[1] = v[2] = v[3] = 0.0;
  if (!rlx_roi_corners(yy, xx, p.H, p.W, at, w)) return;
  for (int k = 0; k < 4; k++) v[k] = w[k] * ld_f64(x, p.xdt, plane * p.H * p.W + at[k]);
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
