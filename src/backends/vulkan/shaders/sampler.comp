#version 450
// GridSample (RLXVK_OP 0) and RoiAlign (1): one invocation per output
// element (rlx_sampler_params in src/passes/lower.h; the CPU reference in
// ref_nn.c is the definition, computed here in f32). Slots: 0 out, 2 x
// [N, C, H, W], 3 grid [N, Ho, Wo, 2] or rois [R, 4], 4 batch indices [R].
#include "common.glsl"
layout(local_size_x = 64) in;

const int O = RLXVK_SLOT_OUT0, X = RLXVK_SLOT_IN0, G = RLXVK_SLOT_IN0 + 1,
          B = RLXVK_SLOT_IN0 + 2;

// Grid coordinate g in [-1, 1] -> pixel coordinate along a dim of n.
float unnormalize(float g, int n, bool align) {
  return align ? (g + 1.0) / 2.0 * float(n - 1) : ((g + 1.0) * float(n) - 1.0) / 2.0;
}

// Mirror of c into [lo2 / 2, hi2 / 2] (bounds doubled, as PyTorch).
float reflect_coord(float c, float lo2, float hi2) {
  if (lo2 == hi2) return 0.0;
  float lo = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
  c = abs(c - lo);
  float flips = floor(c / span), extra = c - flips * span;
  return mod(flips, 2.0) == 0.0 ? extra + lo : span - extra + lo;
}

float pad_coord(float c, int n, int padding, bool align) {
  if (padding == SP_ZEROS) return c;
  if (padding == SP_REFLECTION)
    c = align ? reflect_coord(c, 0.0, 2.0 * float(n - 1)) : reflect_coord(c, -1.0, 2.0 * float(n) - 1.0);
  return clamp(c, 0.0, float(n - 1));
}

float tap(int plane, int iy, int ix) {
  int H = v_shape(X, 2), W = v_shape(X, 3);
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) return 0.0;
  return ld_f(v_dt(X), v_off(X), (plane * H + iy) * W + ix);
}

float cubic_weight(float t) {
  const float a = -0.75;
  t = abs(t);
  if (t <= 1.0) return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
  if (t < 2.0) return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
  return 0.0;
}

float grid_sample(int plane, float gx, float gy) {
  int H = v_shape(X, 2), W = v_shape(X, 3), mode = PX(SP_MODE), padding = PX(SP_PADDING);
  bool align = PX(SP_ALIGN) != 0;
  float ix = unnormalize(gx, W, align), iy = unnormalize(gy, H, align);
  if (mode == SP_CUBIC) { // padding per tap of the raw coordinate
    float fx = floor(ix), fy = floor(iy), acc = 0.0;
    for (int j = 0; j < 4; j++) {
      float ty = fy - 1.0 + float(j), wy = cubic_weight(iy - ty);
      int py = int(pad_coord(ty, H, padding, align));
      for (int i = 0; i < 4; i++) {
        float tx = fx - 1.0 + float(i);
        acc += wy * cubic_weight(ix - tx) * tap(plane, py, int(pad_coord(tx, W, padding, align)));
      }
    }
    return acc;
  }
  ix = pad_coord(ix, W, padding, align);
  iy = pad_coord(iy, H, padding, align);
  if (mode == SP_NEAREST) return tap(plane, int(roundEven(iy)), int(roundEven(ix)));
  float x0 = floor(ix), y0 = floor(iy), lx = ix - x0, ly = iy - y0;
  int a = int(x0), b = int(y0);
  return (1.0 - ly) * ((1.0 - lx) * tap(plane, b, a) + lx * tap(plane, b, a + 1)) +
         ly * ((1.0 - lx) * tap(plane, b + 1, a) + lx * tap(plane, b + 1, a + 1));
}

// RoiAlign's bilinear sample (the ONNX / Caffe2 rule): the four weighted
// corners, 0 outside [-1, n].
vec4 roi_sample(int plane, float yy, float xx) {
  int H = v_shape(X, 2), W = v_shape(X, 3);
  if (yy < -1.0 || yy > float(H) || xx < -1.0 || xx > float(W)) return vec4(0.0);
  yy = max(yy, 0.0);
  xx = max(xx, 0.0);
  int y0 = int(yy), x0 = int(xx), y1, x1;
  if (y0 >= H - 1) { y0 = y1 = H - 1; yy = float(y0); } else y1 = y0 + 1;
  if (x0 >= W - 1) { x0 = x1 = W - 1; xx = float(x0); } else x1 = x0 + 1;
  float ly = yy - float(y0), lx = xx - float(x0), hy = 1.0 - ly, hx = 1.0 - lx;
  return vec4(hy * hx * tap(plane, y0, x0), hy * lx * tap(plane, y0, x1),
              ly * hx * tap(plane, y1, x0), ly * lx * tap(plane, y1, x1));
}

float roi_bin(int r, int c, int ph, int pw) {
  uint gdt = v_dt(G), goff = v_off(G);
  bool half_px = PX(SP_ALIGN) != 0, is_max = PX(SP_MODE) == SP_POOL_MAX;
  float off = half_px ? 0.5 : 0.0, sc = PF(RLXVK_X + SP_SCALE);
  float x1 = ld_f(gdt, goff, r * 4) * sc - off, y1 = ld_f(gdt, goff, r * 4 + 1) * sc - off;
  float rw = ld_f(gdt, goff, r * 4 + 2) * sc - off - x1, rh = ld_f(gdt, goff, r * 4 + 3) * sc - off - y1;
  if (!half_px) {
    rw = max(rw, 1.0);
    rh = max(rh, 1.0);
  }
  int oh = v_shape(O, 2), ow = v_shape(O, 3), ratio = PX(SP_RATIO);
  float bh = rh / float(oh), bw = rw / float(ow);
  int gh = ratio > 0 ? ratio : int(ceil(rh / float(oh)));
  int gw = ratio > 0 ? ratio : int(ceil(rw / float(ow)));
  int64_t b = ld_i(v_dt(B), v_off(B), r);
  // The reference refuses a batch index outside x; a kernel cannot, so it
  // writes NaN instead of reading outside x.
  if (b < 0L || b >= int64_t(v_shape(X, 0))) return NAN_F;
  int plane = int(b) * v_shape(X, 1) + c;
  float acc = is_max ? -INF_F : 0.0;
  for (int iy = 0; iy < gh; iy++) {
    float yy = y1 + float(ph) * bh + (float(iy) + 0.5) * bh / float(gh);
    for (int ix = 0; ix < gw; ix++) {
      vec4 v = roi_sample(plane, yy, x1 + float(pw) * bw + (float(ix) + 0.5) * bw / float(gw));
      if (is_max) acc = max(acc, max(max(v.x, v.y), max(v.z, v.w)));
      else acc += v.x + v.y + v.z + v.w;
    }
  }
  if (is_max) return gh * gw > 0 ? acc : 0.0;
  return acc / float(max(gh * gw, 1));
}

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int C = v_shape(O, 1), Ho = v_shape(O, 2), Wo = v_shape(O, 3), o = int(gid);
  int w = o % Wo, h = (o / Wo) % Ho, nc = o / (Wo * Ho);
  float v;
  if (P(RLXVK_OP) == SP_ROI_ALIGN) {
    v = roi_bin(nc / C, nc % C, h, w);
  } else {
    int gi = (((nc / C) * Ho + h) * Wo + w) * 2;
    v = grid_sample(nc, ld_f(v_dt(G), v_off(G), gi), ld_f(v_dt(G), v_off(G), gi + 1));
  }
  st_f(v_dt(O), v_off(O), o, v);
}
