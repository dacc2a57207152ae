#version 450
// PoolBackward (max / average): one invocation per dx (input) element
// (rlx_pool_params in src/passes/lower.h, the forward's windows). Each
// lane sums, in tap order, dy of every window that reads its element:
// max only where it is the window's first maximum (as the forward's
// argmax picks it), average divided by the window's count. No atomics, so
// a run is deterministic. Slots: 0 dx (dense), 2 x, 3 dy (dense, same
// rank). Mode = RLXVK_OP. Dims the window does not move along (kernel 1,
// stride 1: N and C of a 2-D pool) skip their divisions, which were most
// of the work (every tap divided per dim, per covering window).
#include "common.glsl"
layout(local_size_x = 64) in;

const int O = RLXVK_SLOT_OUT0, X = RLXVK_SLOT_IN0, DY = RLXVK_SLOT_IN0 + 1;

// x offset of the first maximum of window oc (-1: no tap inside x).
int window_argmax(int oc[8], int rank) {
  uint xdt = v_dt(X), xoff = v_off(X);
  float best = -INF_F;
  int at = -1, taps = PX(PL_TAPS);
  for (int t = 0; t < taps; t++) {
    int rem = t, off = 0;
    bool in_x = true;
    for (int d = rank - 1; d >= 0; d--) {
      int kd = PX(PL_KERNEL + d), k = 0;
      if (kd != 1) {
        k = rem % kd;
        rem /= kd;
      }
      int i = oc[d] * PX(PL_STRIDE + d) - PX(PL_PAD + d) + k * PX(PL_DIL + d);
      if (i < 0 || i >= v_shape(X, d)) in_x = false;
      off += i * v_stride(X, d);
    }
    if (!in_x) continue;
    float v = ld_f(xdt, xoff, off);
    if (at < 0 || ((v > best || isnan(v)) && !isnan(best))) { best = v; at = off; }
  }
  return at;
}

// The taps an average window divided by (inside x, or inside x + pads).
int window_count(int oc[8], int rank) {
  bool cip = PX(PL_CIP) != 0;
  int count = 1;
  for (int d = 0; d < rank; d++) {
    int pad = PX(PL_PAD + d), n = v_shape(X, d);
    int lo = cip ? -pad : 0, hi = n + (cip ? PX(PL_PAD_END + d) : 0), c = 0;
    for (int k = 0; k < PX(PL_KERNEL + d); k++) {
      int i = oc[d] * PX(PL_STRIDE + d) - pad + k * PX(PL_DIL + d);
      if (i >= lo && i < hi) c++;
    }
    count *= c;
  }
  return count;
}

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int rank = PX(PL_RANK), mode = P(RLXVK_OP), taps = PX(PL_TAPS);
  int ic[8];
  uint rem = gid;
  int self = 0;
  for (int d = rank - 1; d >= 0; d--) {
    uint n = uint(v_shape(O, d));
    ic[d] = int(rem % n);
    rem /= n;
    self += ic[d] * v_stride(X, d);
  }
  uint gdt = v_dt(DY), goff = v_off(DY);
  float acc = 0.0;
  for (int t = 0; t < taps; t++) {
    int r = t, oc[8], at = 0;
    bool hit = true;
    for (int d = rank - 1; d >= 0 && hit; d--) {
      int kd = PX(PL_KERNEL + d), k = 0;
      if (kd != 1) {
        k = r % kd;
        r /= kd;
      }
      // num >= 0 before %: GLSL leaves % of a negative operand undefined
      int num = ic[d] + PX(PL_PAD + d) - k * PX(PL_DIL + d), s = PX(PL_STRIDE + d);
      int o = (s == 1 || num < 0) ? num : num / s;
      hit = num >= 0 && (s == 1 || num % s == 0) && o < v_shape(DY, d);
      oc[d] = hit ? o : 0;
      at += oc[d] * v_stride(DY, d);
    }
    if (!hit) continue;
    float g = ld_f(gdt, goff, at);
    if (mode == PL_MAX) {
      if (window_argmax(oc, rank) == self) acc += g;
    } else {
      acc += g / float(window_count(oc, rank));
    }
  }
  st_f(v_dt(O), v_off(O), int(gid), acc);
}
