#version 450
// Gather along an axis: data [outer, axis_len, inner], out [outer, n_idx,
// inner]; one invocation per output element. A bad index is reported to the
// host (the run fails naming the node) and its element is left unwritten.
#include "common.glsl"
layout(local_size_x = 64) in;

void main() {
  const int D = RLXVK_SLOT_IN0, I = RLXVK_SLOT_IN0 + 1, O = RLXVK_SLOT_OUT0;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int len = PX(GA_AXIS_LEN), inner = PX(GA_INNER), nidx = PX(GA_NIDX);
  int j = int(gid % uint(inner));
  uint t = gid / uint(inner);
  int q = int(t % uint(nidx)), o = int(t / uint(nidx));
  int64_t raw = ld_i(v_dt(I), v_off(I), q);
  int64_t v = raw < 0L ? raw + int64_t(len) : raw;
  if (v < 0L || v >= int64_t(len)) { report_bad_index(raw, int64_t(len)); return; }
  copy_elem(v_dt(O), v_off(O), (o * nidx + q) * inner + j, v_dt(D), v_off(D),
            (o * len + int(v)) * inner + j);
}
