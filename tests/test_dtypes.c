/* The dtypes added for ONNX (i16 u16 u32 u64 and the four float8 formats):
 * float8 codes computed by hand from each format's layout, the saturating
 * integer casts, the text format, .npy and the shape rules that keep float8
 * out of compute ops. Conversions go through the public rlx_dtype_convert,
 * which is the CPU reference's cast. */
#include <math.h>

#include "harness.h"

#define CHECK_OK(expr) CHECK((expr) == RLX_OK)

static uint8_t f8_of(rlx_dtype t, float v) {
  uint8_t b = 0xAA;
  if (rlx_dtype_convert(&b, t, &v, RLX_F32, 1) != RLX_OK) return 0xAA;
  return b;
}

static float f32_of(rlx_dtype t, uint8_t b) {
  float v = -12345.0f;
  rlx_dtype_convert(&v, RLX_F32, &b, t, 1);
  return v;
}

typedef struct f8_case {
  rlx_dtype t;
  float v;
  uint8_t code;
} f8_case;

/* Each code worked out from sign.exponent.mantissa and the bias. */
static const f8_case F8_CASES[] = {
    /* e4m3fn: bias 7, no inf, max 0x7E = 1.75 * 2^8 = 448 */
    {RLX_F8E4M3FN, 1.0f, 0x38}, {RLX_F8E4M3FN, 0.5f, 0x30}, {RLX_F8E4M3FN, 448.0f, 0x7E},
    {RLX_F8E4M3FN, -448.0f, 0xFE}, {RLX_F8E4M3FN, 464.0f, 0x7E} /* tie: even 448 */,
    {RLX_F8E4M3FN, 1e6f, 0x7E} /* saturates */, {RLX_F8E4M3FN, INFINITY, 0x7E},
    {RLX_F8E4M3FN, -INFINITY, 0xFE}, {RLX_F8E4M3FN, NAN, 0x7F}, {RLX_F8E4M3FN, -0.0f, 0x80},
    {RLX_F8E4M3FN, 17.0f, 0x58} /* 16 + half a step: even 16 */, {RLX_F8E4M3FN, 18.0f, 0x59},
    {RLX_F8E4M3FN, 0.001953125f, 0x01} /* 2^-9: smallest subnormal */,
    {RLX_F8E4M3FN, 0.0009765625f, 0x00} /* 2^-10: tie with 0, even 0 */,
    {RLX_F8E4M3FN, 0.0029296875f, 0x02} /* 1.5 quanta: even 2 */,
    {RLX_F8E4M3FN, 0.013671875f, 0x07} /* 7 * 2^-9: largest subnormal */,
    {RLX_F8E4M3FN, 0.015625f, 0x08} /* 2^-6: smallest normal */,
    /* e5m2: bias 15, inf 0x7C, max 0x7B = 57344 */
    {RLX_F8E5M2, 1.0f, 0x3C}, {RLX_F8E5M2, 448.0f, 0x5F}, {RLX_F8E5M2, 57344.0f, 0x7B},
    {RLX_F8E5M2, 1e6f, 0x7B}, {RLX_F8E5M2, INFINITY, 0x7C}, {RLX_F8E5M2, -INFINITY, 0xFC},
    {RLX_F8E5M2, NAN, 0x7F}, {RLX_F8E5M2, 1.52587890625e-05f, 0x01} /* 2^-16 */,
    {RLX_F8E5M2, 3.5f, 0x43}, {RLX_F8E5M2, 3.75f, 0x44} /* tie: even 4 */,
    /* e4m3fnuz: bias 8, NaN 0x80 only, no -0, max 0x7F = 1.875 * 2^7 = 240 */
    {RLX_F8E4M3FNUZ, 1.0f, 0x40}, {RLX_F8E4M3FNUZ, 240.0f, 0x7F}, {RLX_F8E4M3FNUZ, 448.0f, 0x7F},
    {RLX_F8E4M3FNUZ, -1e6f, 0xFF}, {RLX_F8E4M3FNUZ, NAN, 0x80}, {RLX_F8E4M3FNUZ, -0.0f, 0x00},
    {RLX_F8E4M3FNUZ, -0.0001f, 0x00} /* rounds to zero: no -0 */,
    {RLX_F8E4M3FNUZ, 0.0009765625f, 0x01} /* 2^-10 */, {RLX_F8E4M3FNUZ, INFINITY, 0x7F},
    /* e5m2fnuz: bias 16, NaN 0x80 only, max 0x7F = 57344 */
    {RLX_F8E5M2FNUZ, 1.0f, 0x40}, {RLX_F8E5M2FNUZ, 57344.0f, 0x7F},
    {RLX_F8E5M2FNUZ, 61440.0f, 0x7F}, {RLX_F8E5M2FNUZ, -INFINITY, 0xFF},
    {RLX_F8E5M2FNUZ, NAN, 0x80}, {RLX_F8E5M2FNUZ, -0.0f, 0x00},
    {RLX_F8E5M2FNUZ, 7.62939453125e-06f, 0x01} /* 2^-17 */,
};

TEST(float8_codes_by_hand) {
  for (size_t i = 0; i < sizeof F8_CASES / sizeof F8_CASES[0]; i++) {
    const f8_case* c = &F8_CASES[i];
    uint8_t got = f8_of(c->t, c->v);
    if (got != c->code)
      fprintf(stderr, "%s(%g): 0x%02X, want 0x%02X\n", rlx_dtype_name(c->t), (double)c->v, got,
              c->code);
    CHECK(got == c->code);
  }
}

TEST(float8_decode_specials) {
  CHECK(isnan(f32_of(RLX_F8E4M3FN, 0x7F)) && isnan(f32_of(RLX_F8E4M3FN, 0xFF)));
  CHECK(f32_of(RLX_F8E4M3FN, 0x7E) == 448.0f && f32_of(RLX_F8E4M3FN, 0x01) == 0.001953125f);
  CHECK(isinf(f32_of(RLX_F8E5M2, 0x7C)) && f32_of(RLX_F8E5M2, 0xFC) < 0);
  CHECK(isnan(f32_of(RLX_F8E5M2, 0x7D)));
  CHECK(isnan(f32_of(RLX_F8E4M3FNUZ, 0x80)) && isnan(f32_of(RLX_F8E5M2FNUZ, 0x80)));
  CHECK(f32_of(RLX_F8E4M3FNUZ, 0x7F) == 240.0f && f32_of(RLX_F8E5M2FNUZ, 0x7F) == 57344.0f);
  CHECK(f32_of(RLX_F8E4M3FNUZ, 0xFF) == -240.0f);
}

/* Every code decodes to a value that encodes back to the same code (NaN
 * codes: to the format's one NaN), and decoding is monotonic over the
 * positive codes: the encoder and decoder agree on every value. */
TEST(float8_every_code_round_trips) {
  const rlx_dtype types[4] = {RLX_F8E4M3FN, RLX_F8E5M2, RLX_F8E4M3FNUZ, RLX_F8E5M2FNUZ};
  for (int k = 0; k < 4; k++) {
    float prev = -1.0f;
    for (int code = 0; code < 256; code++) {
      float v = f32_of(types[k], (uint8_t)code);
      uint8_t back = f8_of(types[k], v);
      if (isnan(v)) {
        CHECK(isnan(f32_of(types[k], back)));
        continue;
      }
      if (back != code) fprintf(stderr, "%s code 0x%02X -> %g -> 0x%02X\n",
                                rlx_dtype_name(types[k]), code, (double)v, back);
      CHECK(back == code);
      if (code < 0x80 && !isinf(v)) {
        CHECK(v > prev || (code == 0 && v == 0));
        prev = v;
      }
    }
  }
}

TEST(float8_through_f64_and_f16) {
  double d = 300.0; /* e4m3fn: 288 and 320 are neighbours; 300 is nearer 288 */
  uint8_t b = 0;
  CHECK_OK(rlx_dtype_convert(&b, RLX_F8E4M3FN, &d, RLX_F64, 1));
  CHECK(f32_of(RLX_F8E4M3FN, b) == 288.0f);
  uint16_t h = 0;
  CHECK_OK(rlx_dtype_convert(&h, RLX_F16, &b, RLX_F8E4M3FN, 1));
  float back = 0;
  CHECK_OK(rlx_dtype_convert(&back, RLX_F32, &h, RLX_F16, 1));
  CHECK(back == 288.0f);
}

TEST(new_integer_casts) {
  double v[6] = {1.8e19, -1.0, 70000.0, -40000.0, NAN, 4294967296.5};
  uint64_t u64[6];
  int16_t i16[6];
  uint16_t u16[6];
  uint32_t u32[6];
  CHECK_OK(rlx_dtype_convert(u64, RLX_U64, v, RLX_F64, 6));
  CHECK(u64[0] == 18000000000000000000ull && u64[1] == 0 && u64[4] == 0);
  CHECK_OK(rlx_dtype_convert(i16, RLX_I16, v, RLX_F64, 6));
  CHECK(i16[2] == 32767 && i16[3] == -32768 && i16[1] == -1 && i16[4] == 0);
  CHECK_OK(rlx_dtype_convert(u16, RLX_U16, v, RLX_F64, 6));
  CHECK(u16[2] == 65535 && u16[1] == 0);
  CHECK_OK(rlx_dtype_convert(u32, RLX_U32, v, RLX_F64, 6));
  CHECK(u32[5] == 4294967295u && u32[2] == 70000u);
  double past = 1.9e19; /* above 2^64: saturates */
  CHECK_OK(rlx_dtype_convert(u64, RLX_U64, &past, RLX_F64, 1));
  CHECK(u64[0] == UINT64_MAX);
  /* integer -> integer keeps the low bits, as C and numpy astype */
  int64_t i64[2] = {-1, 65537};
  CHECK_OK(rlx_dtype_convert(u64, RLX_U64, i64, RLX_I64, 2));
  CHECK(u64[0] == UINT64_MAX && u64[1] == 65537);
  CHECK_OK(rlx_dtype_convert(u16, RLX_U16, i64, RLX_I64, 2));
  CHECK(u16[0] == 65535 && u16[1] == 1);
  /* u64 -> f64 reads the value unsigned */
  double back = 0;
  uint64_t big = UINT64_MAX;
  CHECK_OK(rlx_dtype_convert(&back, RLX_F64, &big, RLX_U64, 1));
  CHECK(back == 18446744073709551616.0);
}

TEST(names_sizes_and_text) {
  const char* names[] = {"i16", "u16", "u32", "u64", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz",
                         "f8e5m2fnuz"};
  const size_t sizes[] = {2, 2, 4, 8, 1, 1, 1, 1};
  for (int i = 0; i < 8; i++) {
    rlx_dtype t = (rlx_dtype)(RLX_BOOL + 1 + i);
    CHECK(strcmp(rlx_dtype_name(t), names[i]) == 0);
    CHECK(rlx_dtype_size(t) == sizes[i]);
    CHECK(rlx_dtype_is_float(t) == (i >= 4));
    char text[256];
    snprintf(text, sizeof text,
             "rlx 1\n%%0 = input name=\"x\" : %s[2,3]\n"
             "%%1 = transpose(%%0) perm=[1,0] : %s[3,2]\noutputs %%1\n",
             names[i], names[i]);
    rlx_graph* g = NULL;
    char* err = NULL;
    rlx_status s = rlx_graph_parse(text, &g, &err);
    if (s) fprintf(stderr, "%s\n", err ? err : "?");
    rlx_free(err);
    CHECK_OK(s);
    char* printed = NULL;
    CHECK_OK(rlx_graph_print(g, &printed));
    CHECK(strstr(printed, names[i]) != NULL);
    rlx_free(printed);
    rlx_graph_destroy(g);
  }
}

TEST(float8_is_refused_by_compute_ops) {
  rlx_graph* g = NULL;
  CHECK_OK(rlx_graph_create(&g));
  rlx_dim s[1] = {4};
  rlx_tensor x, y, z;
  CHECK_OK(rlx_graph_add_input(g, "x", RLX_F8E4M3FN, s, 1, &x));
  CHECK_OK(rlx_graph_add_cast(g, x, RLX_F32, &y)); /* cast: allowed */
  CHECK(rlx_graph_add_binary(g, RLX_BIN_ADD, x, x, &z) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "float8") != NULL);
  CHECK(rlx_graph_add_activation(g, RLX_ACT_RELU, x, &z) == RLX_INVALID_ARGUMENT);
  rlx_tensor u;
  CHECK_OK(rlx_graph_add_input(g, "u", RLX_U64, s, 1, &u));
  CHECK_OK(rlx_graph_add_binary(g, RLX_BIN_MAX, u, u, &z)); /* unsigned max exists */
  CHECK(rlx_graph_add_argmax(g, u, 0, 0, &z) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "u64") != NULL);
  rlx_graph_destroy(g);
}

/* u64 values from 2^63 up compare, divide and take max as unsigned. */
TEST(u64_order_runs_unsigned) {
  rlx_graph* g = NULL;
  CHECK_OK(rlx_graph_create(&g));
  rlx_dim s[1] = {3};
  rlx_tensor a, b, o[3];
  CHECK_OK(rlx_graph_add_input(g, "a", RLX_U64, s, 1, &a));
  CHECK_OK(rlx_graph_add_input(g, "b", RLX_U64, s, 1, &b));
  CHECK_OK(rlx_graph_add_compare(g, RLX_CMP_GT, a, b, &o[0]));
  CHECK_OK(rlx_graph_add_binary(g, RLX_BIN_MAX, a, b, &o[1]));
  CHECK_OK(rlx_graph_add_binary(g, RLX_BIN_DIV, a, b, &o[2]));
  CHECK_OK(rlx_graph_set_outputs(g, o, 3));
  rlx_compile_options opt;
  rlx_compile_options_init(&opt);
  opt.reference = 1;
  rlx_exec* e = NULL;
  CHECK_OK(rlx_compile(g, "cpu", &opt, &e));
  uint64_t av[3] = {UINT64_MAX, 1ull << 63, 5}, bv[3] = {1, 3, 1ull << 63};
  CHECK_OK(rlx_exec_set_input(e, "a", RLX_U64, s, 1, av, sizeof av));
  CHECK_OK(rlx_exec_set_input(e, "b", RLX_U64, s, 1, bv, sizeof bv));
  CHECK_OK(rlx_exec_run(e));
  uint8_t gt[3];
  uint64_t mx[3], dv[3];
  CHECK_OK(rlx_exec_read_output(e, 0, RLX_BOOL, gt, sizeof gt));
  CHECK_OK(rlx_exec_read_output(e, 1, RLX_U64, mx, sizeof mx));
  CHECK_OK(rlx_exec_read_output(e, 2, RLX_U64, dv, sizeof dv));
  CHECK(gt[0] == 1 && gt[1] == 1 && gt[2] == 0);
  CHECK(mx[0] == UINT64_MAX && mx[2] == 1ull << 63);
  CHECK(dv[0] == UINT64_MAX && dv[1] == (1ull << 63) / 3 && dv[2] == 0);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(npy_round_trip_new_integers) {
  char path[] = "/tmp/rlx_dtypes_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  fclose(fdopen(fd, "w"));
  const rlx_dtype types[4] = {RLX_I16, RLX_U16, RLX_U32, RLX_U64};
  uint64_t data[3] = {0x0123456789abcdefull, UINT64_MAX, 7};
  for (int k = 0; k < 4; k++) {
    int64_t shape[1] = {(int64_t)(sizeof data / rlx_dtype_size(types[k]))};
    CHECK_OK(rlx_npy_save(path, types[k], 1, shape, data, sizeof data, NULL));
    rlx_dtype dt;
    int32_t rank;
    int64_t got_shape[RLX_MAX_RANK];
    void* got = NULL;
    size_t bytes = 0;
    CHECK_OK(rlx_npy_load(path, &dt, &rank, got_shape, &got, &bytes, NULL));
    int same = dt == types[k] && rank == 1 && got_shape[0] == shape[0] && bytes == sizeof data &&
               memcmp(got, data, sizeof data) == 0;
    rlx_free(got);
    CHECK(same);
  }
  int64_t one[1] = {1};
  uint8_t b = 0x38;
  char* err = NULL;
  CHECK(rlx_npy_save(path, RLX_F8E4M3FN, 1, one, &b, 1, &err) == RLX_UNIMPLEMENTED);
  CHECK(err && strstr(err, "f8e4m3fn"));
  rlx_free(err);
  remove(path);
}

int main(void) {
  RUN(float8_codes_by_hand);
  RUN(float8_decode_specials);
  RUN(float8_every_code_round_trips);
  RUN(float8_through_f64_and_f16);
  RUN(new_integer_casts);
  RUN(names_sizes_and_text);
  RUN(float8_is_refused_by_compute_ops);
  RUN(u64_order_runs_unsigned);
  RUN(npy_round_trip_new_integers);
  return test_summary();
}
