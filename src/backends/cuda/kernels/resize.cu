/* Resize (nearest / linear / cubic): one thread per output element,
 * grid-strided. Coordinates and taps come from scalar_math.h in double,
 * the very functions the CPU reference calls, so every nearest rounding
 * and extrapolation edge matches it; the weighted sum accumulates in
 * double too (the output rounds once). */
#include "common.cuh"

/* The taps of resized dim k for output coordinate o: 0 when
 * tf_crop_and_resize falls outside the input (extrapolate). */
RLXK_DEV int resize_dim_taps(const rlxk_resize& p, int k, int64_t o, int64_t* idx, double* w) {
  double scale = p.scale[k] > 0.0f ? (double)p.scale[k]
                                   : (double)p.out_size[k] / (double)p.in_size[k];
  double x = rlx_resize_source(p.coord, o, scale, p.in_size[k], p.out_size[k],
                               (double)p.roi_start[k], (double)p.roi_end[k]);
  if (p.coord == RLX_COORD_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(p.in_size[k] - 1)))
    return 0;
  return rlx_resize_taps(p.mode, p.nearest, (double)p.cubic_a, p.exclude_outside, x,
                         p.in_size[k], idx, w);
}

RLXK_DEV void resize_element(const rlxk_resize& p, const char* x, char* o, int64_t t,
                             const int64_t* oc) {
  int64_t idx[RLXK_RESIZE_DIMS][4], base = 0, total = 1;
  double w[RLXK_RESIZE_DIMS][4];
  int n[RLXK_RESIZE_DIMS];
  bool moving[RLXK_MAX_RANK] = {false};
  for (int k = 0; k < p.n_dims; k++) {
    moving[p.dim[k]] = true;
    n[k] = resize_dim_taps(p, k, oc[p.dim[k]], idx[k], w[k]);
    if (!n[k]) {
      st_f32(o, p.odt, t, p.extrapolation);
      return;
    }
    total *= n[k];
  }
  for (int d = 0; d < p.rank; d++)
    if (!moving[d]) base += oc[d] * p.in_stride[d];
  if (p.mode == RLX_RESIZE_NEAREST) {
    for (int k = 0; k < p.n_dims; k++) base += idx[k][0] * p.in_stride[p.dim[k]];
    copy_elem(o, p.odt, t, x, p.xdt, base);
    return;
  }
  double acc = 0.0;
  for (int64_t j = 0; j < total; j++) {
    int64_t rem = j, off = base;
    double wt = 1.0;
    for (int k = p.n_dims - 1; k >= 0; k--) {
      int c = (int)(rem % n[k]);
      rem /= n[k];
      off += idx[k][c] * p.in_stride[p.dim[k]];
      wt *= w[k][c];
    }
    acc += wt * ld_f64(x, p.xdt, off);
  }
  st_f64(o, p.odt, t, acc);
}

extern "C" __global__ void rlx_resize(char* arena, rlxk_resize p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  char* o = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < p.n; t += grid_stride()) {
    int64_t oc[RLXK_MAX_RANK], rem = t;
    for (int d = p.rank - 1; d >= 0; d--) {
      oc[d] = rem % p.out_shape[d];
      rem /= p.out_shape[d];
    }
    resize_element(p, x, o, t, oc);
  }
}
