/* CUDA backend specifics (op-by-op numerics are test_parity's job; what
 * every device promises, test_contract's): graph capture + replay across
 * runs, eager vs graph, multi-stream ordering, TF32 opt-in, the fast kernel
 * variants (register-resident rows, GEMV, flash attention at real sizes,
 * half matmul, GEMMs on padded operands) and a KV cache kept as state at size, against the CPU
 * backend on the same inputs.
 *
 * Exit 77 (ctest SKIP, "SKIP cuda (...)") when the backend is not built or
 * cannot start; then it first checks that compiling for cuda fails cleanly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ------------------------------------------------------------ helpers */

typedef struct gcase {
  rlx_graph* g;
  int n_in;
  rlx_tensor in[8];
} gcase;

static rlx_tensor add_in(gcase* c, const rlx_dim* shape, int rank) {
  char name[16];
  snprintf(name, sizeof name, "in%d", c->n_in);
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_input(c->g, name, RLX_F32, shape, rank, &t);
  c->in[c->n_in++] = t;
  return t;
}

/* Sets every input to fresh random data (same seed -> same data). */
static rlx_status set_inputs(const gcase* c, rlx_exec* e, uint64_t seed) {
  for (int i = 0; i < c->n_in; i++) {
    char name[16];
    snprintf(name, sizeof name, "in%d", i);
    rlx_dtype dt;
    int32_t rank;
    rlx_dim shape[RLX_MAX_RANK];
    rlx_graph_tensor_type(c->g, c->in[i], &dt, &rank, shape);
    int64_t n = 1;
    for (int32_t d = 0; d < rank; d++) n *= shape[d];
    float* x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    test_seed(seed * 977 + (uint64_t)i);
    test_fill_f32(x, n, -2, 2);
    rlx_status s = rlx_exec_set_input(e, name, RLX_F32, shape, rank, x, sizeof(float) * (size_t)n);
    free(x);
    if (s) return s;
  }
  return RLX_OK;
}

static double* read_out(rlx_exec* e, int32_t i, int64_t* n_out) {
  int32_t rank;
  int64_t shape[RLX_MAX_RANK], n = 1;
  if (rlx_exec_output_type(e, i, NULL, &rank, shape) != RLX_OK) return NULL;
  for (int32_t d = 0; d < rank; d++) n *= shape[d];
  double* v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (rlx_exec_read_output(e, i, RLX_F64, v, sizeof(double) * (size_t)n) != RLX_OK) {
    free(v);
    return NULL;
  }
  *n_out = n;
  return v;
}

/* Compares every output of a and b; prints the error of the first that differs. */
static int same_outputs(rlx_exec* a, rlx_exec* b, double tol, const char* what) {
  for (int32_t i = 0; i < rlx_exec_output_count(a); i++) {
    int64_t na = 0, nb = 0;
    double *x = read_out(a, i, &na), *y = read_out(b, i, &nb);
    double err = x && y && na == nb ? test_rel_l2(x, y, na) : INFINITY;
    free(x);
    free(y);
    if (!(err <= tol)) {
      fprintf(stderr, "%s: output %d rel L2 %g > %g (%s)\n", what, i, err, tol,
              rlx_exec_last_error(a));
      return 0;
    }
  }
  return 1;
}

/* Runs case c on cuda and cpu with the same inputs; 1 if outputs agree. */
static int agree(gcase* c, const rlx_compile_options* o, double tol, const char* what) {
  rlx_exec* gpu = test_compile_on(c->g, "cuda", o);
  rlx_exec* cpu = test_compile_on(c->g, "cpu", NULL);
  int ok = gpu && cpu && set_inputs(c, gpu, 7) == RLX_OK && set_inputs(c, cpu, 7) == RLX_OK &&
           rlx_exec_run(gpu) == RLX_OK && rlx_exec_run(cpu) == RLX_OK &&
           same_outputs(gpu, cpu, tol, what);
  if (!ok && gpu) fprintf(stderr, "%s: %s\n", what, rlx_exec_last_error(gpu));
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(cpu);
  return ok;
}

static gcase new_case(void) {
  gcase c;
  memset(&c, 0, sizeof c);
  rlx_graph_create(&c.g);
  return c;
}

/* A small transformer-ish block: x@W+b -> gelu -> layernorm -> softmax; plus
 * causal attention. Exercises cuBLASLt, epilogues, norms, rows, flash. */
static gcase block_case(void) {
  gcase c = new_case();
  rlx_dim xs[3] = {2, 37, 96}, ws[2] = {96, 96}, bs[1] = {96}, qs[4] = {2, 37, 4, 24};
  rlx_tensor x = add_in(&c, xs, 3), w = add_in(&c, ws, 2), b = add_in(&c, bs, 1);
  rlx_tensor h, n, s, q = add_in(&c, qs, 4), k = add_in(&c, qs, 4), v = add_in(&c, qs, 4), a;
  rlx_graph_add_fused_matmul_bias_act(c.g, x, w, b, 0, 0, RLX_ACT_GELU, &h);
  rlx_graph_add_layer_norm(c.g, h, b, b, -1, 1e-5f, &n);
  rlx_graph_add_softmax(c.g, n, -1, &s);
  rlx_attention_desc d = {4, 2, 24, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0};
  d.num_kv_heads = 4;
  rlx_graph_add_attention(c.g, q, k, v, RLX_NONE, &d, &a);
  rlx_tensor outs[2] = {s, a};
  rlx_graph_set_outputs(c.g, outs, 2);
  return c;
}

/* ------------------------------------------------------------ tests */

/* Runs 1 (capture) and 2..3 (replay) with new inputs each time. */
TEST(graph_replay_matches_cpu) {
  gcase c = block_case();
  rlx_exec* gpu = test_compile_on(c.g, "cuda", NULL);
  rlx_exec* cpu = test_compile_on(c.g, "cpu", NULL);
  CHECK(gpu && cpu);
  for (uint64_t run = 0; run < 3; run++) {
    CHECK_OK_E(gpu, set_inputs(&c, gpu, 100 + run));
    CHECK_OK_E(cpu, set_inputs(&c, cpu, 100 + run));
    CHECK_OK_E(gpu, rlx_exec_run(gpu));
    CHECK_OK_E(cpu, rlx_exec_run(cpu));
    CHECK(same_outputs(gpu, cpu, 1e-5, "graph replay"));
  }
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(c.g);
}

TEST(eager_equals_graph) {
  gcase c = block_case();
  setenv("RLX_CUDA_GRAPHS", "0", 1);
  rlx_exec* eager = test_compile_on(c.g, "cuda", NULL);
  unsetenv("RLX_CUDA_GRAPHS");
  rlx_exec* graph = test_compile_on(c.g, "cuda", NULL);
  CHECK(eager && graph);
  for (uint64_t run = 0; run < 2; run++) {
    CHECK_OK_E(eager, set_inputs(&c, eager, 5 + run));
    CHECK_OK_E(graph, set_inputs(&c, graph, 5 + run));
    CHECK_OK_E(eager, rlx_exec_run(eager));
    CHECK_OK_E(graph, rlx_exec_run(graph));
    CHECK(same_outputs(eager, graph, 0, "eager vs graph"));
  }
  rlx_exec_destroy(eager);
  rlx_exec_destroy(graph);
  rlx_graph_destroy(c.g);
}

/* Four independent branches joined at the end, and an in-place chain: with
 * four streams the byte-range ordering must still give the CPU's answer. */
TEST(multi_stream_ordering) {
  gcase c = new_case();
  rlx_dim xs[2] = {64, 128}, ws[2] = {128, 128};
  rlx_tensor x = add_in(&c, xs, 2), acc = RLX_NONE;
  for (int b = 0; b < 4; b++) {
    rlx_tensor w = add_in(&c, ws, 2), h, t;
    rlx_graph_add_matmul(c.g, x, w, 0, 0, &h);
    rlx_graph_add_activation(c.g, b % 2 ? RLX_ACT_TANH : RLX_ACT_SILU, h, &t);
    rlx_graph_add_activation(c.g, RLX_ACT_NEG, t, &t); /* in place over a dying value */
    if (acc == RLX_NONE) acc = t;
    else rlx_graph_add_binary(c.g, RLX_BIN_ADD, acc, t, &acc);
  }
  rlx_graph_set_outputs(c.g, &acc, 1);
  /* unfused, so the branches stay separate steps the streams spread */
  setenv("RLX_NO_FUSION", "1", 1);
  setenv("RLX_CUDA_STREAMS", "4", 1);
  int ok = agree(&c, NULL, 1e-5, "four streams");
  setenv("RLX_CUDA_GRAPHS", "0", 1);
  ok = ok && agree(&c, NULL, 1e-5, "four streams, eager");
  unsetenv("RLX_CUDA_GRAPHS");
  unsetenv("RLX_CUDA_STREAMS");
  unsetenv("RLX_NO_FUSION");
  CHECK(ok);
  rlx_graph_destroy(c.g);
}

/* Exact f32 by default; TF32 only when asked, and then within 5e-3. */
TEST(tf32_opt_in) {
  gcase c = new_case();
  rlx_dim s[2] = {256, 512};
  rlx_dim t[2] = {512, 256};
  rlx_tensor a = add_in(&c, s, 2), b = add_in(&c, t, 2), y;
  rlx_graph_add_matmul(c.g, a, b, 0, 0, &y);
  rlx_graph_set_outputs(c.g, &y, 1);
  CHECK(agree(&c, NULL, 1e-5, "exact f32 matmul"));
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.allow_tf32 = 1;
  CHECK(agree(&c, &o, 5e-3, "tf32 matmul"));
  rlx_graph_destroy(c.g);
}

/* The fast variants at real sizes: register rows, GEMV, flash tiles with
 * GQA and D = 128, half matmul on tensor cores, embedding gather. */
TEST(fast_paths_at_size) {
  {
    gcase c = new_case();
    rlx_dim s[2] = {96, 4096}, g1[1] = {4096};
    rlx_tensor x = add_in(&c, s, 2), gm = add_in(&c, g1, 1), r = add_in(&c, s, 2), o[4];
    rlx_graph_add_softmax(c.g, x, -1, &o[0]);
    rlx_graph_add_layer_norm(c.g, x, gm, gm, -1, 1e-5f, &o[1]);
    rlx_graph_add_fused_residual_rms_norm(c.g, x, r, RLX_NONE, gm, 1e-6f, &o[2], &o[3]);
    rlx_graph_set_outputs(c.g, o, 4);
    CHECK(agree(&c, NULL, 1e-5, "rows 96x4096"));
    rlx_graph_destroy(c.g);
  }
  {
    gcase c = new_case();
    rlx_dim xs[2] = {1, 4096}, ws[2] = {4096, 4100}, bs[1] = {4100};
    rlx_tensor x = add_in(&c, xs, 2), w = add_in(&c, ws, 2), b = add_in(&c, bs, 1), y;
    rlx_graph_add_fused_matmul_bias_act(c.g, x, w, b, 0, 0, RLX_ACT_GELU_APPROX, &y);
    rlx_graph_set_outputs(c.g, &y, 1);
    CHECK(agree(&c, NULL, 1e-5, "gemv 1x4096x4100"));
    rlx_graph_destroy(c.g);
  }
  {
    gcase c = new_case();
    rlx_dim qs[4] = {1, 8, 200, 128}, ks[4] = {1, 2, 203, 128};
    rlx_tensor q = add_in(&c, qs, 4), k = add_in(&c, ks, 4), v = add_in(&c, ks, 4), y;
    rlx_attention_desc d = {8, 2, 128, RLX_LAYOUT_BHSD, RLX_MASK_SLIDING, 77, 0, 30.0f};
    rlx_graph_add_attention(c.g, q, k, v, RLX_NONE, &d, &y);
    rlx_graph_set_outputs(c.g, &y, 1);
    CHECK(agree(&c, NULL, 1e-5, "flash d128 gqa sliding"));
    rlx_graph_destroy(c.g);
  }
  { /* decode shapes: a few queries against a long cache take the split-K path */
    gcase c = new_case();
    rlx_dim qs[4] = {2, 3, 12, 64}, ks[4] = {2, 700, 12, 64}, ms[2] = {3, 700};
    rlx_tensor q = add_in(&c, qs, 4), k = add_in(&c, ks, 4), v = add_in(&c, ks, 4);
    rlx_tensor mk = add_in(&c, ms, 2), y[2];
    rlx_attention_desc d = {12, 12, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0};
    rlx_graph_add_attention(c.g, q, k, v, RLX_NONE, &d, &y[0]);
    d.mask = RLX_MASK_BIAS;
    rlx_graph_add_attention(c.g, q, k, v, mk, &d, &y[1]);
    rlx_graph_set_outputs(c.g, y, 2);
    CHECK(agree(&c, NULL, 1e-5, "split-K attention"));
    rlx_graph_destroy(c.g);
  }
  {
    gcase c = new_case();
    rlx_dim as[2] = {256, 320}, bs[2] = {320, 192};
    rlx_tensor a = add_in(&c, as, 2), b = add_in(&c, bs, 2), ah, bh, y, yf;
    rlx_graph_add_cast(c.g, a, RLX_BF16, &ah);
    rlx_graph_add_cast(c.g, b, RLX_BF16, &bh);
    rlx_graph_add_matmul(c.g, ah, bh, 0, 0, &y);
    rlx_graph_add_cast(c.g, y, RLX_F32, &yf);
    rlx_graph_set_outputs(c.g, &yf, 1);
    CHECK(agree(&c, NULL, 1e-2, "bf16 matmul"));
    rlx_graph_destroy(c.g);
  }
}

/* Products whose operands have a leading dimension that is not a multiple
 * of 16 bytes (ld 1001, like GPT-2's vocab 50257): the LM head, its input
 * gradient and its weight gradient. The sizes make cuda_matmul.c copy the
 * weight gradient's half operand to a padded layout (>= 1 MB, >= 64 flops
 * per byte copied, N and K multiples of 8); the other two keep theirs. */
static int padded_gemm_case(rlx_dtype t) {
  gcase c = new_case();
  rlx_dim xs[2] = {600, 512}, ws[2] = {1001, 512}, ds[2] = {600, 1001};
  rlx_tensor in[3] = {add_in(&c, xs, 2), add_in(&c, ws, 2), add_in(&c, ds, 2)}, h[3], y[3];
  for (int i = 0; i < 3; i++) {
    h[i] = in[i];
    if (t != RLX_F32) rlx_graph_add_cast(c.g, in[i], t, &h[i]);
  }
  rlx_graph_add_matmul(c.g, h[0], h[1], 0, 1, &y[0]); /* x @ w^T: output ld 1001 */
  rlx_graph_add_matmul(c.g, h[2], h[1], 0, 0, &y[1]); /* d @ w: input ld 1001 */
  rlx_graph_add_matmul(c.g, h[2], h[0], 1, 0, &y[2]); /* d^T @ x: transposed input ld 1001 */
  for (int i = 0; i < 3; i++)
    if (t != RLX_F32) rlx_graph_add_cast(c.g, y[i], RLX_F32, &y[i]);
  rlx_graph_set_outputs(c.g, y, 3);
  int ok = agree(&c, NULL, t == RLX_F32 ? 1e-5 : 1e-2, t == RLX_F32 ? "padded gemm f32" : "padded gemm half");
  rlx_graph_destroy(c.g);
  return ok;
}

TEST(gemm_padding) {
  CHECK(padded_gemm_case(RLX_F32));
  CHECK(padded_gemm_case(RLX_BF16));
  CHECK(padded_gemm_case(RLX_F16));
}

/* One attention case against the CPU: q [B,Sq,H,D] (BSHD) or [B,H,Sq,D];
 * mask input [Sq, Sk] for custom (0/1 values from the random data) and bias. */
static int attn_case(const char* what, rlx_dtype t, int64_t B, int64_t H, int64_t Hkv, int64_t Sq,
                     int64_t Sk, int64_t D, rlx_layout layout, rlx_mask_kind mask, int32_t window,
                     float scale, float softcap) {
  gcase c = new_case();
  rlx_dim qs[4] = {B, Sq, H, D}, ks[4] = {B, Sk, Hkv, D}, ms[2] = {Sq, Sk};
  if (layout == RLX_LAYOUT_BHSD) {
    qs[1] = H, qs[2] = Sq;
    ks[1] = Hkv, ks[2] = Sk;
  }
  rlx_tensor in[3], h[3], m = RLX_NONE, y, yf, zero;
  for (int i = 0; i < 3; i++) in[i] = add_in(&c, i ? ks : qs, 4);
  if (mask == RLX_MASK_CUSTOM || mask == RLX_MASK_BIAS) {
    m = add_in(&c, ms, 2);
    if (mask == RLX_MASK_CUSTOM) { /* keep where the random value is > -1 (3/4 of keys) */
      float minus1 = -1.0f;
      rlx_dim one[1] = {1};
      rlx_graph_add_constant(c.g, RLX_F32, one, 1, &minus1, 4, &zero);
      rlx_graph_add_compare(c.g, RLX_CMP_GT, m, zero, &m);
    }
  }
  for (int i = 0; i < 3; i++) {
    h[i] = in[i];
    if (t != RLX_F32) rlx_graph_add_cast(c.g, in[i], t, &h[i]);
  }
  rlx_attention_desc d = {(int32_t)H, (int32_t)Hkv, (int32_t)D, layout, mask, window, scale, softcap};
  rlx_graph_add_attention(c.g, h[0], h[1], h[2], m, &d, &y);
  yf = y;
  if (t != RLX_F32) rlx_graph_add_cast(c.g, y, RLX_F32, &yf);
  rlx_graph_set_outputs(c.g, &yf, 1);
  int ok = agree(&c, NULL, t == RLX_F32 ? 1e-5 : 2e-2, what);
  rlx_graph_destroy(c.g);
  return ok;
}

static int gemv_case(int64_t K, int64_t N, int bias, rlx_activation act) {
  gcase c = new_case();
  rlx_dim xs[2] = {1, K}, ws[2] = {K, N}, bs[1] = {N};
  rlx_tensor x = add_in(&c, xs, 2), w = add_in(&c, ws, 2), b = bias ? add_in(&c, bs, 1) : RLX_NONE, y;
  rlx_graph_add_fused_matmul_bias_act(c.g, x, w, b, 0, 0, act, &y);
  rlx_graph_set_outputs(c.g, &y, 1);
  char what[64];
  snprintf(what, sizeof what, "gemv 1x%lldx%lld", (long long)K, (long long)N);
  int ok = agree(&c, NULL, 1e-5, what);
  rlx_graph_destroy(c.g);
  return ok;
}

/* Prefill flash kernels at sizes that fill the GPU without split-K: the
 * exact-f32 SIMT kernel (attention_f32.cu, d64 and d128) and
 * the tensor-core kernel (attention_mma.cu): lengths not a multiple of the
 * tiles, Sq != Sk, GQA, every mask kind, softcap and scale. */
TEST(flash_attention_prefill) {
  CHECK(attn_case("f32 d64 causal", RLX_F32, 2, 8, 8, 600, 600, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0));
  CHECK(attn_case("f32 d128 gqa sliding Sq<Sk", RLX_F32, 2, 8, 2, 520, 700, 128, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING, 150, 0, 0));
  CHECK(attn_case("f32 d64 custom Sq>Sk", RLX_F32, 2, 8, 8, 550, 333, 64, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0));
  CHECK(attn_case("f32 d128 bias softcap scale", RLX_F32, 1, 16, 16, 530, 530, 128, RLX_LAYOUT_BHSD, RLX_MASK_BIAS, 0, 0.2f, 15.0f));
  CHECK(attn_case("f32 d128 causal", RLX_F32, 2, 8, 8, 600, 640, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0));
  CHECK(attn_case("bf16 d64 causal Sq<Sk", RLX_BF16, 2, 8, 8, 600, 650, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0));
  CHECK(attn_case("f16 d128 gqa sliding", RLX_F16, 2, 8, 4, 530, 530, 128, RLX_LAYOUT_BHSD, RLX_MASK_SLIDING, 200, 0, 0));
  CHECK(attn_case("bf16 d128 none softcap Sq>Sk", RLX_BF16, 2, 8, 8, 520, 300, 128, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 10.0f));
  CHECK(attn_case("bf16 d64 custom", RLX_BF16, 2, 8, 8, 600, 600, 64, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 0));
  CHECK(attn_case("f16 d64 bias scale", RLX_F16, 2, 8, 8, 600, 555, 64, RLX_LAYOUT_BSHD, RLX_MASK_BIAS, 0, 0.3f, 0));
}

/* Decode kernels: flash-decoding attention (every mask kind, GQA, both
 * layouts, head dims 40..256 on the vector and generic paths, half types),
 * the fused GEMV (one launch, arrival counts) replayed several times. */
TEST(decode_attention_and_gemv) {
  CHECK(attn_case("dec f32 d64 custom Sk1024", RLX_F32, 1, 12, 12, 1, 1024, 64, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0));
  CHECK(attn_case("dec f32 d128 gqa causal softcap", RLX_F32, 2, 8, 2, 3, 333, 128, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 20.0f));
  CHECK(attn_case("dec f32 d96 sliding", RLX_F32, 1, 4, 4, 2, 500, 96, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING, 100, 0, 0));
  CHECK(attn_case("dec f32 d40 none scale", RLX_F32, 3, 2, 1, 4, 77, 40, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0.3f, 0));
  CHECK(attn_case("dec f32 d50 bias (generic)", RLX_F32, 1, 3, 3, 1, 260, 50, RLX_LAYOUT_BHSD, RLX_MASK_BIAS, 0, 0, 0));
  CHECK(attn_case("dec f32 d256", RLX_F32, 1, 2, 2, 1, 400, 256, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0));
  CHECK(attn_case("dec f32 Sk 5 (one slice)", RLX_F32, 1, 2, 2, 4, 5, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0));
  CHECK(attn_case("dec bf16 d64 causal", RLX_BF16, 1, 4, 4, 1, 600, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0));
  CHECK(attn_case("dec f16 d128 gqa custom", RLX_F16, 1, 4, 1, 2, 300, 128, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 0));
  CHECK(gemv_case(768, 2304, 1, RLX_ACT_NONE));
  CHECK(gemv_case(3072, 768, 1, RLX_ACT_GELU_APPROX));
  CHECK(gemv_case(100, 37, 0, RLX_ACT_RELU));
  CHECK(gemv_case(64, 1, 1, RLX_ACT_NONE));
  { /* replays: the arrival counts must come back to zero every run */
    gcase c = new_case();
    rlx_dim xs[2] = {1, 2048}, ws[2] = {2048, 1024};
    rlx_tensor x = add_in(&c, xs, 2), w = add_in(&c, ws, 2), y;
    rlx_graph_add_matmul(c.g, x, w, 0, 0, &y);
    rlx_graph_set_outputs(c.g, &y, 1);
    rlx_exec* gpu = test_compile_on(c.g, "cuda", NULL);
    rlx_exec* cpu = test_compile_on(c.g, "cpu", NULL);
    for (uint64_t run = 0; run < 4 && gpu && cpu; run++) {
      CHECK(set_inputs(&c, gpu, 30 + run) == RLX_OK && set_inputs(&c, cpu, 30 + run) == RLX_OK);
      CHECK_OK_E(gpu, rlx_exec_run(gpu));
      CHECK_OK_E(cpu, rlx_exec_run(cpu));
      CHECK(same_outputs(gpu, cpu, 1e-5, "gemv replay"));
    }
    CHECK(gpu && cpu);
    rlx_exec_destroy(gpu);
    rlx_exec_destroy(cpu);
    rlx_graph_destroy(c.g);
  }
}

/* A KV cache as device state on cuda (updated in place, rows written by
 * rlx_where_rows) against the CPU keeping it with feeds, over 6 steps. */
TEST(kv_state_in_place) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  int64_t T = 40, H = 3, D = 32;
  rlx_dim cs[4] = {1, T, H, D}, rs[4] = {1, 1, H, D}, ps[1] = {1}, ts[1] = {T}, ats[4] = {1, T, 1, 1};
  int64_t ar[40];
  for (int64_t i = 0; i < T; i++) ar[i] = i;
  rlx_tensor cache, row, q, pos, arange, eq, keep, at, upd, y;
  rlx_graph_add_input(g, "cache", RLX_F32, cs, 4, &cache);
  rlx_graph_add_input(g, "row", RLX_F32, rs, 4, &row);
  rlx_graph_add_input(g, "q", RLX_F32, rs, 4, &q);
  rlx_graph_add_input(g, "pos", RLX_I64, ps, 1, &pos);
  rlx_graph_add_constant(g, RLX_I64, ts, 1, ar, sizeof ar, &arange);
  rlx_graph_add_compare(g, RLX_CMP_EQ, arange, pos, &eq);
  rlx_graph_add_compare(g, RLX_CMP_LE, arange, pos, &keep);
  rlx_graph_add_reshape(g, eq, ats, 4, &at);
  rlx_graph_add_where(g, at, row, cache, &upd);
  rlx_attention_desc d = {(int32_t)H, (int32_t)H, (int32_t)D, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0};
  rlx_graph_add_attention(g, q, upd, upd, keep, &d, &y);
  rlx_tensor outs[2] = {y, upd};
  rlx_graph_set_outputs(g, outs, 2);
  const char* names[1] = {"cache"};
  int32_t which[1] = {1};
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.state_inputs = names;
  o.state_outputs = which;
  o.n_states = 1;
  rlx_exec* gpu = test_compile_on(g, "cuda", &o);
  rlx_exec* cpu = test_compile_on(g, "cpu", NULL);
  CHECK(gpu && cpu);
  if (gpu && cpu) {
    int64_t n = T * H * D;
    float* init = malloc(sizeof(float) * (size_t)n);
    float r[96], qq[96];
    test_seed(91);
    test_fill_f32(init, n, -1, 1);
    CHECK_OK_E(gpu, rlx_exec_set_input(gpu, "cache", RLX_F32, cs, 4, init, sizeof(float) * (size_t)n));
    CHECK_OK_E(cpu, rlx_exec_set_input(cpu, "cache", RLX_F32, cs, 4, init, sizeof(float) * (size_t)n));
    CHECK_OK_E(cpu, rlx_exec_feed(cpu, "cache", 1, -1));
    for (int64_t p = 7; p < 13; p++) {
      test_fill_f32(r, 96, -1, 1);
      test_fill_f32(qq, 96, -1, 1);
      rlx_exec* both[2] = {gpu, cpu};
      for (int k = 0; k < 2; k++) {
        CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "row", RLX_F32, rs, 4, r, sizeof r));
        CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "q", RLX_F32, rs, 4, qq, sizeof qq));
        CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "pos", RLX_I64, ps, 1, &p, sizeof p));
        CHECK_OK_E(both[k], rlx_exec_run(both[k]));
      }
      CHECK(same_outputs(gpu, cpu, 1e-5, "kv state step"));
    }
    rlx_memory_stats with_state, plain;
    rlx_exec* gpu_plain = test_compile_on(g, "cuda", NULL);
    CHECK(gpu_plain != NULL);
    CHECK_OK_E(gpu, rlx_exec_memory_stats(gpu, &with_state));
    if (gpu_plain) CHECK_OK_E(gpu_plain, rlx_exec_memory_stats(gpu_plain, &plain));
    /* the update has no bytes of its own */
    CHECK(gpu_plain && with_state.arena_bytes < plain.arena_bytes);
    rlx_exec_destroy(gpu_plain);
    free(init);
  }
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(g);
}

/* Not built or no device: compiling for cuda fails with a reason. */
static int cuda_available(void) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    rlx_device_get(i, &info);
    if (strcmp(info.name, "cuda") != 0) continue;
    if (info.available) return 1;
    printf("SKIP cuda (%s)\n", info.detail);
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim s[1] = {4};
    rlx_tensor x, y;
    rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
    rlx_graph_add_activation(g, RLX_ACT_EXP, x, &y);
    rlx_graph_set_outputs(g, &y, 1);
    rlx_exec* e = NULL;
    rlx_status st = rlx_compile(g, "cuda", NULL, &e);
    int clean = st != RLX_OK && e == NULL && strlen(rlx_graph_last_error(g)) > 0;
    rlx_graph_destroy(g);
    if (!clean) {
      printf("FAIL compiling for an unavailable cuda did not fail cleanly\n");
      return -1;
    }
    return 0;
  }
  return 0;
}

/* BatchNorm statistics and ReLU's gradient at a size where the middle-axis
 * reduction splits each channel into chunks (their partials and a counter
 * per channel in scratch, the last block finishing): graph replays with
 * new inputs must keep matching the CPU (the counters rearm), and a rerun
 * of the same inputs must give the same bits (the order is fixed). */
TEST(batchnorm_statistics_replay) {
  gcase c = new_case();
  rlx_dim xs[4] = {16, 3, 56, 56}, one[1] = {1};
  rlx_tensor x = add_in(&c, xs, 4), zero = add_in(&c, one, 1), xb, m, r, o[3];
  int32_t axes[3] = {0, 2, 3};
  rlx_graph_add_reduce(c.g, RLX_RED_MEAN, x, axes, 3, 1, &o[0]);
  rlx_graph_add_compare(c.g, RLX_CMP_GT, x, zero, &m);
  rlx_graph_add_where(c.g, m, x, zero, &r);
  rlx_graph_add_reduce(c.g, RLX_RED_SUM, r, axes, 3, 0, &o[1]);
  rlx_graph_add_cast(c.g, x, RLX_BF16, &xb);
  rlx_graph_add_reduce(c.g, RLX_RED_SUM, xb, axes, 3, 0, &o[2]);
  rlx_graph_add_cast(c.g, o[2], RLX_F32, &o[2]);
  rlx_graph_set_outputs(c.g, o, 3);
  rlx_exec* gpu = test_compile_on(c.g, "cuda", NULL);
  rlx_exec* again = test_compile_on(c.g, "cuda", NULL);
  rlx_exec* cpu = test_compile_on(c.g, "cpu", NULL);
  CHECK(gpu && again && cpu);
  for (uint64_t run = 0; run < 3; run++) {
    CHECK_OK_E(gpu, set_inputs(&c, gpu, 40 + run));
    CHECK_OK_E(cpu, set_inputs(&c, cpu, 40 + run));
    CHECK_OK_E(gpu, rlx_exec_run(gpu));
    CHECK_OK_E(cpu, rlx_exec_run(cpu));
    /* f32 outputs to 1e-5; the bf16 sum may round one ulp apart (1e-2) */
    for (int32_t i = 0; i < 3; i++) {
      int64_t na = 0, nb = 0;
      double *a = read_out(gpu, i, &na), *b = read_out(cpu, i, &nb);
      double err = a && b && na == nb ? test_rel_l2(a, b, na) : INFINITY;
      free(a);
      free(b);
      CHECK(err <= (i == 2 ? 1e-2 : 1e-5));
    }
  }
  CHECK_OK_E(again, set_inputs(&c, again, 42));
  CHECK_OK_E(again, rlx_exec_run(again));
  CHECK(same_outputs(gpu, again, 0, "batchnorm statistics rerun"));
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(again);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(c.g);
}

/* Column sums (bias and LayerNorm-weight gradients: [rows, cols] over the
 * rows) long enough to split into row chunks: the last block of each
 * column tile adds the chunks' partials (a counter per tile in scratch,
 * no finishing launch). f32 (16-byte loads), bf16 (8 halves per load), an
 * odd width (one column per lane) and a mean, each replayed with new
 * inputs against the CPU (the counters rearm) and rerun for the same bits. */
TEST(column_sums_one_launch) {
  gcase c = new_case();
  rlx_dim xs[2] = {4096, 768}, os[2] = {1000, 37};
  rlx_tensor x = add_in(&c, xs, 2), odd = add_in(&c, os, 2), xb, o[4];
  int32_t rows[1] = {0};
  rlx_graph_add_reduce(c.g, RLX_RED_SUM, x, rows, 1, 0, &o[0]);
  rlx_graph_add_cast(c.g, x, RLX_BF16, &xb);
  rlx_graph_add_reduce(c.g, RLX_RED_SUM, xb, rows, 1, 0, &o[1]);
  rlx_graph_add_cast(c.g, o[1], RLX_F32, &o[1]);
  rlx_graph_add_reduce(c.g, RLX_RED_SUM, odd, rows, 1, 0, &o[2]);
  rlx_graph_add_reduce(c.g, RLX_RED_MEAN, x, rows, 1, 1, &o[3]);
  rlx_graph_set_outputs(c.g, o, 4);
  rlx_exec* gpu = test_compile_on(c.g, "cuda", NULL);
  rlx_exec* again = test_compile_on(c.g, "cuda", NULL);
  rlx_exec* cpu = test_compile_on(c.g, "cpu", NULL);
  CHECK(gpu && again && cpu);
  for (uint64_t run = 0; gpu && again && cpu && run < 3; run++) {
    CHECK_OK_E(gpu, set_inputs(&c, gpu, 70 + run));
    CHECK_OK_E(cpu, set_inputs(&c, cpu, 70 + run));
    CHECK_OK_E(gpu, rlx_exec_run(gpu));
    CHECK_OK_E(cpu, rlx_exec_run(cpu));
    for (int32_t i = 0; i < 4; i++) {
      int64_t na = 0, nb = 0;
      double *a = read_out(gpu, i, &na), *b = read_out(cpu, i, &nb);
      double err = a && b && na == nb ? test_rel_l2(a, b, na) : INFINITY;
      free(a);
      free(b);
      CHECK(err <= (i == 1 ? 1e-2 : 1e-5)); /* the bf16 sum may round one ulp apart */
    }
  }
  if (gpu && again) {
    CHECK_OK_E(again, set_inputs(&c, again, 72));
    CHECK_OK_E(again, rlx_exec_run(again));
    CHECK(same_outputs(gpu, again, 0, "column sums rerun"));
  }
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(again);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(c.g);
}

/* One DequantMatMul y [M, N] = x . W^T (x cast to t, y back to f32),
 * compiled three ways: on cuda as the test asks (env `set` = `set_val`
 * while compiling, when given), on cuda with `other` set (the path it is
 * checked against) and on the cpu. The first must hold at least `extra`
 * more backend bytes than the second (its own buffer, so the test fails
 * if the step did not take the path under test) and both must agree with
 * the cpu: f32 to 1e-5; f16 / bf16 x makes y f16 / bf16, where summation
 * order may move an element by one unit in the last place. */
typedef struct dqmm_ab {
  const char *set, *set_val, *other, *buffer; /* buffer: its name in messages */
  uint64_t extra, seed;
  double tol_bf16;
} dqmm_ab;

static int dqmm_ab_case(rlx_quant_scheme scheme, rlx_dtype t, int64_t M, int64_t N, int64_t K, const dqmm_ab* ab,
                        const char* what) {
  const int asym = scheme == RLX_QUANT_INT8_ASYM; /* scale and zero inputs; the GGUF ones none */
  gcase c = new_case();
  rlx_dim xs[2] = {M, K};
  rlx_tensor x = add_in(&c, xs, 2), w = RLX_NONE, s, z, y;
  rlx_status qs = test_quant_const(c.g, scheme, N, K, ab->seed + (uint64_t)scheme, &w, &s, &z);
  if (t != RLX_F32) rlx_graph_add_cast(c.g, x, t, &x);
  rlx_graph_dequant_matmul(c.g, x, w, s, z, scheme, asym ? 32 : 0, &y);
  if (t != RLX_F32) rlx_graph_add_cast(c.g, y, RLX_F32, &y);
  rlx_graph_set_outputs(c.g, &y, 1);
  if (ab->set) setenv(ab->set, ab->set_val, 1);
  rlx_exec* gpu = qs == RLX_OK ? test_compile_on(c.g, "cuda", NULL) : NULL;
  if (ab->set) unsetenv(ab->set);
  setenv(ab->other, "1", 1);
  rlx_exec* other = qs == RLX_OK ? test_compile_on(c.g, "cuda", NULL) : NULL;
  unsetenv(ab->other);
  rlx_exec* cpu = qs == RLX_OK ? test_compile_on(c.g, "cpu", NULL) : NULL;
  rlx_memory_stats ms = {0}, ms_other = {0};
  int ok = gpu && other && cpu && rlx_exec_memory_stats(gpu, &ms) == RLX_OK &&
           rlx_exec_memory_stats(other, &ms_other) == RLX_OK;
  if (ok && ms.backend_bytes < ms_other.backend_bytes + ab->extra) {
    fprintf(stderr, "%s: backend bytes %llu, with %s %llu: no %s\n", what, (unsigned long long)ms.backend_bytes,
            ab->other, (unsigned long long)ms_other.backend_bytes, ab->buffer);
    ok = 0;
  }
  double tol = t == RLX_F32 ? 1e-5 : t == RLX_F16 ? 2e-3 : ab->tol_bf16;
  for (uint64_t run = 0; ok && run < 2; run++) {
    ok = set_inputs(&c, gpu, ab->seed + run) == RLX_OK && set_inputs(&c, other, ab->seed + run) == RLX_OK &&
         set_inputs(&c, cpu, ab->seed + run) == RLX_OK && rlx_exec_run(gpu) == RLX_OK &&
         rlx_exec_run(other) == RLX_OK && rlx_exec_run(cpu) == RLX_OK && same_outputs(gpu, cpu, tol, what) &&
         same_outputs(other, cpu, tol, what);
  }
  if (!ok && gpu) fprintf(stderr, "%s: %s\n", what, rlx_exec_last_error(gpu));
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(other);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(c.g);
  return ok;
}

/* DequantMatMul prefill (more than 8 rows of x): W dequantized panel by
 * panel into the per-stream buffer and multiplied by cuBLASLt. A small
 * RLX_CUDA_DQMM_PANEL_BYTES makes 5 panels of 64 rows (the last 44) and
 * the default one; x f32 (exact SGEMM: f32 rounding only), f16 and bf16
 * (W rounded to x's type in the panel). The panel buffer must be there;
 * the own kernels (RLX_CUDA_DQMM_NO_PANEL) agree too. */
static int dqmm_prefill_case(rlx_quant_scheme scheme, rlx_dtype t, const char* panel_bytes,
                             const char* what) {
  const int64_t M = 40, N = 300, K = 512;
  /* the panel (64 or 300 rows of K in x's type) beside what the own kernels hold */
  dqmm_ab ab = {panel_bytes ? "RLX_CUDA_DQMM_PANEL_BYTES" : NULL, panel_bytes, "RLX_CUDA_DQMM_NO_PANEL",
                "panel buffer", (uint64_t)(panel_bytes ? 64 : N) * (uint64_t)K * rlx_dtype_size(t), 31, 1.5e-2};
  return dqmm_ab_case(scheme, t, M, N, K, &ab, what);
}

TEST(dequant_prefill_panels) {
  static const rlx_quant_scheme schemes[] = {RLX_QUANT_Q4_K, RLX_QUANT_Q8_0, RLX_QUANT_Q6_K,
                                             RLX_QUANT_Q4_0, RLX_QUANT_INT8_ASYM};
  static const rlx_dtype types[] = {RLX_F32, RLX_F16, RLX_BF16};
  char small[32];
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
    for (size_t j = 0; j < 3; j++) {
      char what[64];
      snprintf(small, sizeof small, "%d", (int)(64 * 512 * rlx_dtype_size(types[j])));
      snprintf(what, sizeof what, "%s x %s, 5 panels", rlx_quant_scheme_name(schemes[i]),
               rlx_dtype_name(types[j]));
      CHECK(dqmm_prefill_case(schemes[i], types[j], small, what));
      snprintf(what, sizeof what, "%s x %s, one panel", rlx_quant_scheme_name(schemes[i]),
               rlx_dtype_name(types[j]));
      CHECK(dqmm_prefill_case(schemes[i], types[j], NULL, what));
    }
}

/* DequantMatMul decode (one row of x, GGUF schemes): the split-K limb GEMV
 * _s1 (x written as limbs into the per-stream buffer by XLIMBS, then each
 * block's warps split K) against the CPU and against _m1 (the f32 decode,
 * RLX_CUDA_DQMM_F32_GEMV). K with a partial last chunk (1280), 14 chunks
 * (7 warps of 2) and 33 (7 warps of 4-5, the last chunk partial); N not a
 * multiple of the block's rows. The limbs buffer (K's chunks x 3584
 * bytes) must be there. */
static int dqmm_decode_case(rlx_quant_scheme scheme, rlx_dtype t, int64_t K, int64_t N, const char* what) {
  dqmm_ab ab = {NULL, NULL, "RLX_CUDA_DQMM_F32_GEMV", "limbs buffer", (uint64_t)((K + 1023) / 1024) * 3584u, 57, 1e-2};
  return dqmm_ab_case(scheme, t, 1, N, K, &ab, what);
}

TEST(dequant_decode_gemv) {
  static const rlx_quant_scheme schemes[] = {RLX_QUANT_Q4_0, RLX_QUANT_Q4_1, RLX_QUANT_Q5_0, RLX_QUANT_Q5_1,
                                             RLX_QUANT_Q8_0, RLX_QUANT_Q2_K, RLX_QUANT_Q3_K, RLX_QUANT_Q4_K,
                                             RLX_QUANT_Q5_K, RLX_QUANT_Q6_K};
  static const int64_t shapes[][2] = {{1280, 37}, {14336, 67}, {33792, 6}};
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
    for (size_t j = 0; j < 3; j++) {
      rlx_dtype t = j == 0 ? RLX_F32 : i % 2 ? RLX_BF16 : RLX_F16; /* the long ones with half x */
      char what[96];
      snprintf(what, sizeof what, "%s x %s, K %lld N %lld", rlx_quant_scheme_name(schemes[i]),
               rlx_dtype_name(t), (long long)shapes[j][0], (long long)shapes[j][1]);
      CHECK(dqmm_decode_case(schemes[i], t, shapes[j][0], shapes[j][1], what));
    }
}

/* Decode projections that read one x (Q / K / V): on one stream the first
 * DequantMatMul's limbs serve the next ones (rlx_cuda_share_limbs drops
 * their XLIMBS); a DequantMatMul on another x between them converts its
 * own. Four GEMVs (q4_K, q6_K, q8_0 on x; q4_0 on x2, then q5_K on x
 * again) against the CPU and against RLX_CUDA_NO_LIMB_SHARE. */
TEST(dequant_decode_shared_limbs) {
  static const rlx_quant_scheme schemes[] = {RLX_QUANT_Q4_K, RLX_QUANT_Q6_K, RLX_QUANT_Q8_0, RLX_QUANT_Q4_0,
                                             RLX_QUANT_Q5_K};
  static const int64_t rows[] = {37, 20, 50, 9, 33};
  const int64_t K = 4096;
  gcase c = new_case();
  rlx_dim xs[2] = {1, K};
  rlx_tensor x = add_in(&c, xs, 2), x2 = add_in(&c, xs, 2), y[5];
  rlx_status qs = RLX_OK;
  for (int i = 0; i < 5 && qs == RLX_OK; i++) {
    rlx_tensor w = RLX_NONE, s, z;
    qs = test_quant_const(c.g, schemes[i], rows[i], K, 90 + (uint64_t)i, &w, &s, &z);
    if (qs == RLX_OK) qs = rlx_graph_dequant_matmul(c.g, i == 3 ? x2 : x, w, s, z, schemes[i], 0, &y[i]);
  }
  CHECK(qs == RLX_OK);
  if (qs != RLX_OK) {
    rlx_graph_destroy(c.g);
    return;
  }
  rlx_graph_set_outputs(c.g, y, 5);
  rlx_exec* gpu = test_compile_on(c.g, "cuda", NULL);
  setenv("RLX_CUDA_NO_LIMB_SHARE", "1", 1);
  rlx_exec* own = test_compile_on(c.g, "cuda", NULL);
  unsetenv("RLX_CUDA_NO_LIMB_SHARE");
  rlx_exec* cpu = test_compile_on(c.g, "cpu", NULL);
  CHECK(gpu && own && cpu);
  for (uint64_t run = 0; gpu && own && cpu && run < 2; run++) {
    CHECK_OK_E(gpu, set_inputs(&c, gpu, 80 + run));
    CHECK_OK_E(own, set_inputs(&c, own, 80 + run));
    CHECK_OK_E(cpu, set_inputs(&c, cpu, 80 + run));
    CHECK_OK_E(gpu, rlx_exec_run(gpu));
    CHECK_OK_E(own, rlx_exec_run(own));
    CHECK_OK_E(cpu, rlx_exec_run(cpu));
    CHECK(same_outputs(gpu, cpu, 1e-5, "shared limbs"));
    CHECK(same_outputs(own, cpu, 1e-5, "own limbs"));
  }
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(own);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(c.g);
}

/* Greedy Sample (rlx_sample_greedy): the first index of the maximum, NaN
 * never winning, index 0 for a row of NaN; rows at a 16-byte offset (the
 * float4 path) and not (vocab odd: every other row), against the CPU. */
TEST(greedy_sample_ties_and_nan) {
  const int64_t R = 6, V = 128257;
  gcase c = new_case();
  rlx_dim xs[2] = {R, V};
  rlx_tensor x = add_in(&c, xs, 2), y;
  rlx_graph_add_sample(c.g, x, 0, 1.0f, 0.0f, &y);
  rlx_graph_set_outputs(c.g, &y, 1);
  float* v = malloc(sizeof(float) * (size_t)(R * V));
  test_seed(5);
  test_fill_f32(v, R * V, -3, 3);
  for (int64_t j = 0; j < V; j++) v[j] = 1.0f;                 /* row 0: all tied -> 0 */
  v[0] = NAN;                                                  /* ... but 0 is NaN -> 1 */
  for (int64_t j = 0; j < V; j++) v[V + j] = NAN;              /* row 1: all NaN -> 0 */
  v[2 * V + 77777] = 9.0f, v[2 * V + 100001] = 9.0f;           /* row 2: tie -> 77777 */
  v[3 * V + V - 1] = 50.0f;                                    /* row 3: the last -> V - 1 */
  v[4 * V + 5] = INFINITY, v[4 * V + 6] = NAN;                 /* row 4: inf -> 5 */
  rlx_exec* gpu = test_compile_on(c.g, "cuda", NULL);
  rlx_exec* cpu = test_compile_on(c.g, "cpu", NULL);
  int64_t got[6] = {-1}, want[6] = {-1};
  CHECK(gpu && cpu);
  if (gpu && cpu) {
    size_t bytes = sizeof(float) * (size_t)(R * V);
    CHECK_OK_E(gpu, rlx_exec_set_input(gpu, "in0", RLX_F32, xs, 2, v, bytes));
    CHECK_OK_E(cpu, rlx_exec_set_input(cpu, "in0", RLX_F32, xs, 2, v, bytes));
    CHECK_OK_E(gpu, rlx_exec_run(gpu));
    CHECK_OK_E(cpu, rlx_exec_run(cpu));
    CHECK_OK_E(gpu, rlx_exec_read_output(gpu, 0, RLX_I64, got, sizeof got));
    CHECK_OK_E(cpu, rlx_exec_read_output(cpu, 0, RLX_I64, want, sizeof want));
    static const int64_t expect[5] = {1, 0, 77777, 128256, 5};
    for (int r = 0; r < 5; r++) CHECK_MSG(got[r] == expect[r], "row %d: %lld", r, (long long)got[r]);
    for (int r = 0; r < 6; r++) CHECK_MSG(got[r] == want[r], "row %d: cuda %lld, cpu %lld", r,
                                          (long long)got[r], (long long)want[r]);
  }
  free(v);
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(c.g);
}

int main(void) {
  int avail = cuda_available();
  if (avail < 0) return 1;
  if (avail == 0) return 77;
  RUN(graph_replay_matches_cpu);
  RUN(eager_equals_graph);
  RUN(multi_stream_ordering);
  RUN(tf32_opt_in);
  RUN(fast_paths_at_size);
  RUN(decode_attention_and_gemv);
  RUN(flash_attention_prefill);
  RUN(kv_state_in_place);
  RUN(gemm_padding);
  RUN(batchnorm_statistics_replay);
  RUN(column_sums_one_launch);
  RUN(dequant_prefill_panels);
  RUN(dequant_decode_gemv);
  RUN(dequant_decode_shared_limbs);
  RUN(greedy_sample_ties_and_nan);
  return test_summary();
}
