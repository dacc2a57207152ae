#version 450
// Gather backward (RLX_K_GATHER_BACKWARD): dy [outer, n_idx, inner], idx
// [n_idx] -> dx [outer, axis_len, inner]. One 64-wide workgroup per dx row
// (o, a): its invocations own columns j, j + 64, ... and add the dy rows
// whose index is a in position order (deterministic, no atomics). The
// indices pass through workgroup memory 64 at a time. A bad index is
// reported to the host.
#include "common.glsl"
layout(local_size_x = 64) in;

shared int gb_idx[64];

void main() {
  const int DY = RLXVK_SLOT_IN0, I = RLXVK_SLOT_IN0 + 1, O = RLXVK_SLOT_OUT0;
  uint item = group_linear();
  if (item >= PU(RLXVK_COUNT)) return;
  int len = PX(GA_AXIS_LEN), inner = PX(GA_INNER), nidx = PX(GA_NIDX);
  int a = int(item % uint(len)), o = int(item / uint(len));
  int lid = int(gl_LocalInvocationID.x);
  for (int j0 = 0; j0 < inner; j0 += 64) {
    int j = j0 + lid;
    float acc = 0.0;
    for (int q0 = 0; q0 < nidx; q0 += 64) {
      barrier();
      if (q0 + lid < nidx) {
        int64_t raw = ld_i(v_dt(I), v_off(I), q0 + lid);
        int64_t v = raw < 0L ? raw + int64_t(len) : raw;
        bool bad = v < 0L || v >= int64_t(len);
        if (bad && item == 0u && j0 == 0) report_bad_index(raw, int64_t(len));
        gb_idx[lid] = bad ? -1 : int(v);
      }
      barrier();
      int n = min(64, nidx - q0);
      for (int k = 0; k < n; k++)
        if (gb_idx[k] == a && j < inner)
          acc += ld_f(v_dt(DY), v_off(DY), (o * nidx + q0 + k) * inner + j);
    }
    if (j < inner) st_f(v_dt(O), v_off(O), (o * len + a) * inner + j, acc);
  }
}
