#version 450
// Cross-entropy (RLX_K_XENT; rlx_xent_params, src/passes/lower.h), one
// 64-wide workgroup per row, every sum in a fixed order (deterministic):
//  op 0 rows: out0[r] = (loss of row r, 1) or (0, 0) when its target is
//     ignore_index: (1 - ls) * (lse - x[t]) + ls * (lse - mean(x));
//  op 1 mean: one workgroup sums the partials and divides (0/0 = NaN);
//  op 2 backward: d_loss / count * (softmax - smoothed one-hot), 0 on
//     ignored rows; each row's group counts the counted rows itself.
// A target outside [0, vocab) that is not ignored is reported to the host.
#include "common.glsl"
#include "wgreduce.glsl"
layout(local_size_x = 64) in;

const int SX = RLXVK_SLOT_IN0, ST = RLXVK_SLOT_IN0 + 1, SD = RLXVK_SLOT_IN0 + 2,
          SO = RLXVK_SLOT_OUT0;

int64_t ignore_index() {
  return int64_t(uint64_t(uint(PX(XE_IGNORE_LO))) | (uint64_t(uint(PX(XE_IGNORE_HI))) << 32));
}

// The row's target, -1 when ignored; reports one outside the vocabulary.
int row_target(int r, int V) {
  int64_t t = ld_i(v_dt(ST), v_off(ST), r);
  if (t == ignore_index()) return -1;
  if (t < 0L || t >= int64_t(V)) {
    if (gl_LocalInvocationID.x == 0u) report_bad_index(t, int64_t(V));
    return -1;
  }
  return int(t);
}

// log(sum(exp(x))) of row r and the row's sum.
float row_lse(int r, int V, out float total) {
  int lid = int(gl_LocalInvocationID.x);
  uint dt = v_dt(SX), off = v_off(SX);
  float mx = -INF_F, s = 0.0;
  total = 0.0; // an out parameter starts undefined (NVIDIA: garbage, lavapipe: 0)
  for (int j = lid; j < V; j += 64) mx = fmax_nan(mx, ld_f(dt, off, r * V + j));
  mx = wg_max_nan(mx);
  for (int j = lid; j < V; j += 64) {
    float x = ld_f(dt, off, r * V + j);
    s += exp(x - mx);
    total += x;
  }
  total = wg_sum(total);
  return mx + log(wg_sum(s));
}

void rows_main(int r, int V, float ls) {
  int t = row_target(r, V);
  if (t < 0) {
    if (gl_LocalInvocationID.x == 0u) {
      st_f(v_dt(SO), v_off(SO), 2 * r, 0.0);
      st_f(v_dt(SO), v_off(SO), 2 * r + 1, 0.0);
    }
    return;
  }
  float total = 0.0;
  float lse = row_lse(r, V, total);
  if (gl_LocalInvocationID.x != 0u) return;
  float picked = ld_f(v_dt(SX), v_off(SX), r * V + t);
  float loss = (1.0 - ls) * (lse - picked);
  if (ls != 0.0) loss += ls * (lse - total / float(V));
  st_f(v_dt(SO), v_off(SO), 2 * r, loss);
  st_f(v_dt(SO), v_off(SO), 2 * r + 1, 1.0);
}

void mean_main(int rows) {
  int lid = int(gl_LocalInvocationID.x);
  float loss = 0.0, count = 0.0;
  for (int r = lid; r < rows; r += 64) {
    loss += ld_f(v_dt(SX), v_off(SX), 2 * r);
    count += ld_f(v_dt(SX), v_off(SX), 2 * r + 1);
  }
  loss = wg_sum(loss);
  count = wg_sum(count);
  if (lid == 0) st_f(v_dt(SO), v_off(SO), 0, count == 0.0 ? NAN_F : loss / count);
}

void backward_main(int r, int rows, int V, float ls) {
  int lid = int(gl_LocalInvocationID.x);
  float count = 0.0;
  for (int q = lid; q < rows; q += 64)
    if (ld_i(v_dt(ST), v_off(ST), q) != ignore_index()) count += 1.0;
  count = wg_sum(count);
  int t = row_target(r, V);
  if (t < 0) {
    for (int j = lid; j < V; j += 64) st_f(v_dt(SO), v_off(SO), r * V + j, 0.0);
    return;
  }
  float total = 0.0;
  float lse = row_lse(r, V, total);
  float scale = ld_f(v_dt(SD), v_off(SD), 0) / count;
  // every logit is read (row_lse) before any gradient is written
  barrier();
  for (int j = lid; j < V; j += 64) {
    float soft = exp(ld_f(v_dt(SX), v_off(SX), r * V + j) - lse);
    float target = ls / float(V) + (j == t ? 1.0 - ls : 0.0);
    st_f(v_dt(SO), v_off(SO), r * V + j, scale * (soft - target));
  }
}

void main() {
  uint item = group_linear();
  if (item >= PU(RLXVK_COUNT)) return;
  int rows = PX(XE_ROWS), V = PX(XE_VOCAB);
  float ls = PF(RLXVK_X + XE_LS);
  if (P(RLXVK_OP) == XE_OP_MEAN) mean_main(rows);
  else if (P(RLXVK_OP) == XE_OP_BACKWARD) backward_main(int(item), rows, V, ls);
  else rows_main(int(item), V, ls);
}
