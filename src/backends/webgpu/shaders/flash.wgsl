// Attention, flash-style: a workgroup of 64 invocations takes 64 query rows
// of one (batch, head), one row per invocation (q and the output
// accumulator in registers, FL_D4 vec4 each: head dims up to 4 * FL_D4).
// Keys and values come in tiles of FL_KT staged in workgroup memory, read by
// every row. Scores use masked_score (attention.wgsl's rules: scale,
// softcap, every mask kind); the running max / sum fold in tile by tile as
// in the one-row kernel; a row with no visible key outputs zeros. Causal and
// sliding masks stop at the last key any row of the block can see.
// AT_FAST_KV = 1: k and v rows start at aligned quads (quad4 tile loads:
// f32, f16, bf16). AT_PAIR_OUT = 1: a 2-byte output whose rows start on whole words
// (each invocation writes whole words).

const FL_KT: u32 = 512u / FL_D4; // keys per tile: 8 KiB of K and of V
const FL_ROWS: u32 = 64u;

var<workgroup> Ks: array<vec4<f32>, 512>;
var<workgroup> Vs: array<vec4<f32>, 512>;

// Four elements d..d+3 (zeros past `len`) of the row at element index e.
fn kv_quad(slot: u32, e: i32, d: u32, len: u32) -> vec4<f32> {
  if (d + 4u <= len && px(AT_FAST_KV) != 0) {
    return quad4(slot, bitcast<u32>(e + i32(d)));
  }
  var r = vec4<f32>(0.0);
  for (var t = 0u; t < 4u; t = t + 1u) {
    if (d + t < len) { r[t] = ld_f(v_dt(slot), v_off(slot), e + i32(d + t)); }
  }
  return r;
}

fn at_store(e: i32, Dv: u32, o: array<vec4<f32>, FL_D4>, l: f32, zero: bool) {
  let dt = v_dt(0u); let off = v_off(0u);
  if (px(AT_PAIR_OUT) != 0) {
    let w0 = (off >> 2u) + (bitcast<u32>(e) >> 1u);
    let bf = dt == DT_BF16;
    for (var d4 = 0u; d4 < FL_D4; d4 = d4 + 1u) {
      for (var t = 0u; t < 4u; t = t + 2u) {
        let d = d4 * 4u + t;
        if (d < Dv) {
          let a = select(o[d4][t] / l, 0.0, zero);
          let b = select(o[d4][t + 1u] / l, 0.0, zero);
          let lo = select(f32_to_f16(a), f32_to_bf16(a), bf);
          let hi = select(f32_to_f16(b), f32_to_bf16(b), bf);
          sw(w0 + d / 2u, (lo & 0xffffu) | (hi << 16u));
        }
      }
    }
    return;
  }
  for (var d4 = 0u; d4 < FL_D4; d4 = d4 + 1u) {
    for (var t = 0u; t < 4u; t = t + 1u) {
      let d = d4 * 4u + t;
      if (d < Dv) { st_f(dt, off, e + i32(d), select(o[d4][t] / l, 0.0, zero)); }
    }
  }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, ids: Ids) {
  let H = pxu(AT_H); let Sq = pxu(AT_SQ); let Sk = pxu(AT_SK);
  let blocks = (Sq + FL_ROWS - 1u) / FL_ROWS;
  let g = group_linear(wid);
  if (g >= pxu(AT_B) * H * blocks) { return; } // uniform per workgroup
  let blk = g % blocks;
  let h = (g / blocks) % H;
  let b = g / (blocks * H);
  let kvh = h / (H / pxu(AT_HKV));
  let D = pxu(AT_D); let Dv = pxu(AT_DV);
  let i0 = blk * FL_ROWS;
  let i = i0 + ids.lid;
  let live = i < Sq;
  // keys any row of the block may see
  var kend = Sk;
  let mask = px(AT_MASK);
  if (mask == MASK_CAUSAL || mask == MASK_SLIDING) {
    let last = i32(min(i0 + FL_ROWS, Sq)) - 1 + i32(Sk) - i32(Sq);
    kend = u32(clamp(last + 1, 0, i32(Sk)));
  }
  var q: array<vec4<f32>, FL_D4>;
  var o: array<vec4<f32>, FL_D4>;
  let qo = i32(b) * px(AT_Q) + i32(i) * px(AT_Q + 1u) + i32(h) * px(AT_Q + 2u);
  for (var d4 = 0u; d4 < FL_D4; d4 = d4 + 1u) {
    o[d4] = vec4<f32>(0.0);
    q[d4] = vec4<f32>(0.0);
    if (live) {
      for (var t = 0u; t < 4u; t = t + 1u) {
        let d = d4 * 4u + t;
        if (d < D) { q[d4][t] = ld_f(v_dt(2u), v_off(2u), qo + i32(d)); }
      }
    }
  }
  var m = -inf_f();
  var l = 0.0;
  var s: array<f32, FL_KT>;
  for (var j0 = 0u; j0 < kend; j0 = j0 + FL_KT) {
    workgroupBarrier();
    for (var e = ids.lid; e < FL_KT * FL_D4; e = e + FL_ROWS) {
      let j = j0 + e / FL_D4;
      let d = (e % FL_D4) * 4u;
      var kq = vec4<f32>(0.0);
      var vq = vec4<f32>(0.0);
      if (j < Sk) {
        kq = kv_quad(3u, i32(b) * px(AT_K) + i32(j) * px(AT_K + 1u) + i32(kvh) * px(AT_K + 2u), d, D);
        vq = kv_quad(4u, i32(b) * px(AT_V) + i32(j) * px(AT_V + 1u) + i32(kvh) * px(AT_V + 2u), d, Dv);
      }
      Ks[e] = kq;
      Vs[e] = vq;
    }
    workgroupBarrier();
    if (live) { // (no early exit: every invocation reaches the barriers)
      var cm = m;
      for (var jj = 0u; jj < FL_KT; jj = jj + 1u) {
        var sc = -inf_f();
        if (j0 + jj < Sk) {
          var dot = 0.0;
          for (var d4 = 0u; d4 < FL_D4; d4 = d4 + 1u) {
            let kv = Ks[jj * FL_D4 + d4];
            dot = fma(q[d4].x, kv.x, dot);
            dot = fma(q[d4].y, kv.y, dot);
            dot = fma(q[d4].z, kv.z, dot);
            dot = fma(q[d4].w, kv.w, dot);
          }
          sc = masked_score(dot, b, h, i, j0 + jj);
        }
        s[jj] = sc;
        cm = max(cm, sc);
      }
      if (cm != -inf_f()) { // else nothing visible yet
        let corr = select(exp_f(m - cm), 0.0, m == -inf_f());
        l = l * corr;
        for (var d4 = 0u; d4 < FL_D4; d4 = d4 + 1u) { o[d4] = o[d4] * corr; }
        for (var jj = 0u; jj < FL_KT; jj = jj + 1u) {
          if (s[jj] != -inf_f()) {
            let w = exp_f(s[jj] - cm);
            l = l + w;
            for (var d4 = 0u; d4 < FL_D4; d4 = d4 + 1u) { o[d4] = fma(vec4<f32>(w), Vs[jj * FL_D4 + d4], o[d4]); }
          }
        }
        m = cm;
      }
    }
  }
  if (!live) { return; }
  let oo = i32(b) * px(AT_O) + i32(i) * px(AT_O + 1u) + i32(h) * px(AT_O + 2u);
  at_store(oo, Dv, o, l, !(l > 0.0));
}
