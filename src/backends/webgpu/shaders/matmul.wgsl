// C = act(A·B + bias), batched: one 16x16 output tile per workgroup of
// 16x16 invocations, K walked in 16-wide slabs staged in workgroup memory.
// A, B, bias and C are read/written through their dtypes; the accumulator is
// f32 (exact f32 products and sums, no reduced precision).

var<workgroup> ta: array<array<f32, 17>, 16>;
var<workgroup> tb: array<array<f32, 17>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let M = pxu(MM_M); let N = pxu(MM_N); let K = pxu(MM_K);
  let tiles_m = (M + 15u) / 16u;
  let tiles_n = (N + 15u) / 16u;
  let g = group_linear(wid);
  let per_batch = tiles_m * tiles_n;
  let b = g / per_batch;
  if (b >= pxu(MM_BATCH)) { return; } // uniform per workgroup
  let t = g - b * per_batch;
  let m0 = (t / tiles_n) * 16u;
  let n0 = (t % tiles_n) * 16u;
  // batch offsets of A, B, C (last batch dim fastest)
  var rem = b;
  var ao = 0; var bo = 0; var co = 0;
  for (var d = px(MM_BRANK) - 1; d >= 0; d = d - 1) {
    let n = pxu(MM_BSHAPE + u32(d));
    let idx = rem % n;
    rem = rem / n;
    ao = ao + i32(idx) * px(MM_ABS + u32(d));
    bo = bo + i32(idx) * px(MM_BBS + u32(d));
    co = co + i32(idx) * px(MM_CBS + u32(d));
  }
  let ars = px(MM_ARS); let acs = px(MM_ACS); let brs = px(MM_BRS); let bcs = px(MM_BCS);
  let adt = v_dt(2u); let aoff = v_off(2u);
  let bdt = v_dt(3u); let boff = v_off(3u);
  let r = lid.y; let c = lid.x;
  let m = m0 + r; let n = n0 + c;
  var acc = 0.0;
  for (var k0 = 0u; k0 < K; k0 = k0 + 16u) {
    // ta[r][c] = A[m0 + r, k0 + c]; tb[r][c] = B[k0 + r, n0 + c]
    var av = 0.0;
    if (m0 + r < M && k0 + c < K) { av = ld_f(adt, aoff, ao + i32(m0 + r) * ars + i32(k0 + c) * acs); }
    ta[r][c] = av;
    var bv = 0.0;
    if (k0 + r < K && n0 + c < N) { bv = ld_f(bdt, boff, bo + i32(k0 + r) * brs + i32(n0 + c) * bcs); }
    tb[r][c] = bv;
    workgroupBarrier();
    let kn = min(16u, K - k0);
    for (var kk = 0u; kk < kn; kk = kk + 1u) { acc = fma(ta[r][kk], tb[kk][c], acc); }
    workgroupBarrier();
  }
  if (m >= M || n >= N) { return; }
  if (px(MM_HAS_BIAS) != 0) { acc = acc + ld_f(v_dt(4u), v_off(4u), i32(n)); }
  acc = activation(pxu(MM_ACT), acc);
  st_f(v_dt(0u), v_off(0u), co + i32(m) * px(MM_CRS) + i32(n), acc);
}
