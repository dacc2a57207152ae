// Elementwise kinds (copy/cast, binary, compare, where, unary): one
// invocation per output element; every operand view is aligned to the
// output's (coalesced) shape. Slots: 0 out, 2.. inputs.

fn int_binary(op: u32, a: vec2<u32>, b: vec2<u32>, narrow: bool) -> vec2<u32> {
  switch (op) {
    case RLX_BIN_ADD: { return i64_add(a, b); }
    case RLX_BIN_SUB: { return i64_sub(a, b); }
    case RLX_BIN_MUL: { return i64_mul(a, b); }
    case RLX_BIN_DIV: {
      // Only reached with 32-bit results (the host sends i64 div to the
      // CPU): int64 division truncated to 32 bits = i32 division, x/0 = 0.
      let x = i64_low_i32(a); let y = i64_low_i32(b);
      if (y == 0) { return vec2<u32>(0u, 0u); }
      if (y == -1) { return i64_neg(a); }
      return i64_from_i32(x / y);
    }
    case RLX_BIN_MAX: { return select(a, b, i64_lt(a, b)); }
    case RLX_BIN_MIN: { return select(a, b, i64_lt(b, a)); }
    case RLX_BIN_POW: {
      // 32-bit results only (see div): wrap-around power by squaring.
      let x = i64_low_i32(a); let y = i64_low_i32(b);
      if (y < 0) {
        if (x == 1) { return vec2<u32>(1u, 0u); }
        if (x == -1) { return select(vec2<u32>(1u, 0u), i64_from_i32(-1), (y & 1) != 0); }
        return vec2<u32>(0u, 0u);
      }
      var r = 1u; var base = bitcast<u32>(x); var e = u32(y);
      loop {
        if (e == 0u) { break; }
        if ((e & 1u) != 0u) { r = r * base; }
        base = base * base;
        e = e >> 1u;
      }
      return i64_from_i32(bitcast<i32>(r));
    }
    default: { return vec2<u32>(0u, 0u); }
  }
}

fn compare_f(op: u32, a: f32, b: f32) -> bool {
  if (is_nan(a) || is_nan(b)) { return op == RLX_CMP_NE; }
  switch (op) {
    case RLX_CMP_EQ: { return a == b; }
    case RLX_CMP_NE: { return a != b; }
    case RLX_CMP_LT: { return a < b; }
    case RLX_CMP_LE: { return a <= b; }
    case RLX_CMP_GT: { return a > b; }
    default: { return a >= b; }
  }
}

fn compare_i(op: u32, a: vec2<u32>, b: vec2<u32>) -> bool {
  let eq = all(a == b);
  let lt = i64_lt(a, b);
  switch (op) {
    case RLX_CMP_EQ: { return eq; }
    case RLX_CMP_NE: { return !eq; }
    case RLX_CMP_LT: { return lt; }
    case RLX_CMP_LE: { return lt || eq; }
    case RLX_CMP_GT: { return !lt && !eq; }
    default: { return !lt; }
  }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = group_linear(wid) * 64u + lid;
  if (i >= P[R_COUNT]) { return; }
  let kind = P[R_KIND];
  let op = P[R_OP];
  let odt = v_dt(0u);
  let ooff = v_off(0u);
  let oi = view_elem(0u, 0u, i);
  let adt = v_dt(2u);
  let ai = view_elem(0u, 2u, i);
  let ints = is_intlike(adt);
  switch (kind) {
    case K_COPY: { copy_elem(odt, ooff, oi, adt, v_off(2u), ai); }
    case K_BINARY: {
      let bi = view_elem(0u, 3u, i);
      if (ints) {
        st_i(odt, ooff, oi, int_binary(op, ld_i(adt, v_off(2u), ai), ld_i(v_dt(3u), v_off(3u), bi), true));
      } else {
        st_f(odt, ooff, oi, binary_f(op, ld_f(adt, v_off(2u), ai), ld_f(v_dt(3u), v_off(3u), bi)));
      }
    }
    case K_COMPARE: {
      let bi = view_elem(0u, 3u, i);
      var r: bool;
      if (ints) { r = compare_i(op, ld_i(adt, v_off(2u), ai), ld_i(v_dt(3u), v_off(3u), bi)); }
      else { r = compare_f(op, ld_f(adt, v_off(2u), ai), ld_f(v_dt(3u), v_off(3u), bi)); }
      st_i(odt, ooff, oi, vec2<u32>(select(0u, 1u, r), 0u));
    }
    case K_WHERE: {
      let c = ld_i(adt, v_off(2u), ai);
      if ((c.x | c.y) != 0u) {
        copy_elem(odt, ooff, oi, v_dt(3u), v_off(3u), view_elem(0u, 3u, i));
      } else {
        copy_elem(odt, ooff, oi, v_dt(4u), v_off(4u), view_elem(0u, 4u, i));
      }
    }
    default: { // K_UNARY
      if (ints && (op == RLX_ACT_NEG || op == RLX_ACT_ABS || op == RLX_ACT_RELU || op == RLX_ACT_ROUND)) {
        let x = ld_i(adt, v_off(2u), ai);
        var y = x;
        if (op == RLX_ACT_NEG || (op == RLX_ACT_ABS && i64_is_neg(x))) { y = i64_neg(x); }
        if (op == RLX_ACT_RELU && i64_is_neg(x)) { y = vec2<u32>(0u, 0u); }
        st_i(odt, ooff, oi, y);
      } else {
        st_f(odt, ooff, oi, activation(op, ld_f(adt, v_off(2u), ai)));
      }
    }
  }
}
