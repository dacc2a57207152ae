/* The generated ElementwiseRegion kernels (backends/cuda/cuda_nvrtc.h)
 * without a GPU: the source the generator writes for small programs, and
 * that NVRTC compiles it (libnvrtc needs no device) for the H200's sm_90
 * and for sm_80. Exits 77 (skipped) after the generator checks when
 * libnvrtc cannot be loaded. */
#include <string.h>

#include "harness.h"
#include "backends/cuda/cuda_nvrtc.h"

/* gelu(x * y + 0.5) - cast(z): x, y of the region dtype, z another one. */
static rlx_region_program sample_program(rlx_dtype t) {
  rlx_region_program p;
  memset(&p, 0, sizeof p);
  p.dtype = t;
  p.n_inputs = 3;
  p.n_instrs = 6;
  p.code[0] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_MUL, 0, 1};
  p.code[1] = (rlx_region_instr){RLX_RI_CONST, 0, 0, 0};
  p.imm[1] = 0.5;
  p.code[2] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_ADD, 3, 4};
  p.code[3] = (rlx_region_instr){RLX_RI_UNARY, RLX_ACT_GELU, 5, 0};
  p.code[4] = (rlx_region_instr){RLX_RI_CAST, 0, 2, 0};
  p.code[5] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_SUB, 6, 7};
  return p;
}

static rlx_region_form sample_form(rlx_dtype t, rlx_dtype cast_from, int32_t rank, int32_t width) {
  rlx_region_form f;
  memset(&f, 0, sizeof f);
  f.rank = rank;
  f.width = width;
  f.out_dtype = t;
  f.in_dtype[0] = f.in_dtype[1] = t;
  f.in_dtype[2] = cast_from;
  f.in_step1[0] = f.in_step1[2] = 1; /* y broadcast along the inner dim */
  return f;
}

static int count(const char* s, const char* what) {
  int n = 0;
  for (const char* at = strstr(s, what); at; at = strstr(at + 1, what)) n++;
  return n;
}

TEST(source_bakes_the_form) {
  rlx_region_program p = sample_program(RLX_BF16);
  rlx_region_form f = sample_form(RLX_BF16, RLX_F32, 2, 4);
  rlx_error err = {0};
  char* src = NULL;
  CHECK(rlx_nvrtc_region_source(&p, &f, &src, &err) == RLX_OK);
  CHECK(strstr(src, RLX_NVRTC_REGION_KERNEL "(char* arena, rlxk_region p"));
  CHECK(strstr(src, "#include \"base/scalar_math.h\"")); /* the shared math, not a copy */
  char want[64];
  snprintf(want, sizeof want, "rlx_binary_f32(%d, v0[l], v1[l])", RLX_BIN_MUL);
  CHECK_MSG(strstr(src, want), "no %s in\n%s", want, src);
  snprintf(want, sizeof want, "rlx_act_f32(%d, v5[l])", RLX_ACT_GELU);
  CHECK(strstr(src, want));
  CHECK(strstr(src, "const float c4 = __int_as_float(0x3f000000u)")); /* 0.5 */
  CHECK(strstr(src, "rg_ld4_bf16(arena + p.ioff[0]"));    /* steps 1: vector load */
  CHECK(strstr(src, "rg_ld_bf16(arena + p.ioff[1]"));     /* broadcast: one element */
  CHECK(strstr(src, "rg_ld4_f32(arena + p.ioff[2]"));     /* the cast's input */
  CHECK(strstr(src, "rg_st4_bf16(arena + p.ooff"));
  CHECK(count(src, "= rg_round_bf16(") == 5); /* every non-constant result */
  free(src);
}

TEST(source_shares_and_differs) {
  rlx_region_program p = sample_program(RLX_F32);
  rlx_region_form f = sample_form(RLX_F32, RLX_F16, 3, 1);
  rlx_error err = {0};
  char *a = NULL, *b = NULL, *c = NULL;
  CHECK(rlx_nvrtc_region_source(&p, &f, &a, &err) == RLX_OK);
  CHECK(rlx_nvrtc_region_source(&p, &f, &b, &err) == RLX_OK);
  CHECK(strcmp(a, b) == 0); /* the per-process cache keys on this text */
  p.imm[1] = 0.25;
  CHECK(rlx_nvrtc_region_source(&p, &f, &c, &err) == RLX_OK);
  CHECK(strcmp(a, c) != 0);
  CHECK(strstr(a, "r /= (unsigned)p.shape[1]")); /* rank 3: the middle dim divides */
  CHECK(strstr(a, "rg_st_f32(arena + p.ooff, i0 * p.ostride[0] + i1 * p.ostride[1] + i2 * p.ostride[2]"));
  free(a);
  free(b);
  free(c);
}

TEST(source_refuses_what_it_cannot_load) {
  rlx_region_program p = sample_program(RLX_F32);
  rlx_region_form f = sample_form(RLX_F32, RLX_F64, 1, 1);
  rlx_error err = {0};
  char* src = NULL;
  f.in_step1[2] = 0; /* f64: a cast's input, read one element at a time */
  CHECK(rlx_nvrtc_region_source(&p, &f, &src, &err) == RLX_OK);
  CHECK(strstr(src, "rg_ld_f64(arena + p.ioff[2]"));
  free(src);
  src = (char*)&err;
  f.in_dtype[2] = RLX_I32; /* no float load */
  CHECK(rlx_nvrtc_region_source(&p, &f, &src, &err) == RLX_UNIMPLEMENTED);
  CHECK(src == NULL);
  CHECK_MSG(strstr(err.msg, "i32"), "message: %s", err.msg);
  f = sample_form(RLX_F32, RLX_F16, 1, 3);
  CHECK(rlx_nvrtc_region_source(&p, &f, &src, &err) == RLX_INVALID_ARGUMENT);
}

static void compile_for(rlx_dtype t, int32_t width, int cc) {
  rlx_region_program p = sample_program(t);
  rlx_region_form f = sample_form(t, RLX_F32, 2, width);
  rlx_error err = {0};
  char* src = NULL;
  CHECK(rlx_nvrtc_region_source(&p, &f, &src, &err) == RLX_OK);
  void* image = NULL;
  size_t bytes = 0;
  double ms = 0;
  rlx_status s = rlx_nvrtc_compile(src, cc / 10, cc % 10, &image, &bytes, &ms, &err);
  CHECK_MSG(s == RLX_OK, "%s\n--- source:\n%s", err.msg, src);
  CHECK(bytes > 4);
  const unsigned char* elf = image;
  CHECK(elf[0] == 0x7f && elf[1] == 'E' && elf[2] == 'L' && elf[3] == 'F'); /* a cubin */
  printf("  %s width %d sm_%d: %zu bytes in %.1f ms\n", rlx_dtype_name(t), width, cc, bytes, ms);
  free(image);
  free(src);
}

TEST(nvrtc_compiles_generated_source) {
  compile_for(RLX_F32, 4, 90);
  compile_for(RLX_BF16, 4, 90);
  compile_for(RLX_F16, 1, 90);
  compile_for(RLX_BF16, 4, 80);
}

TEST(nvrtc_errors_carry_the_log) {
  rlx_error err = {0};
  void* image = (void*)&err;
  size_t bytes = 1;
  double ms = 0;
  const char* bad = "extern \"C\" __global__ void k() { undeclared_name_here = 1; }\n";
  CHECK(rlx_nvrtc_compile(bad, 9, 0, &image, &bytes, &ms, &err) == RLX_INTERNAL);
  CHECK(image == NULL && bytes == 0);
  CHECK_MSG(strstr(err.msg, "undeclared_name_here"), "message: %s", err.msg);
}

int main(void) {
  RUN(source_bakes_the_form);
  RUN(source_shares_and_differs);
  RUN(source_refuses_what_it_cannot_load);
  char why[256];
  if (!rlx_nvrtc_available(why, sizeof why)) {
    printf("SKIP nvrtc compiles: %s\n", why);
    return test_failures ? 1 : 77;
  }
  RUN(nvrtc_compiles_generated_source);
  RUN(nvrtc_errors_carry_the_log);
  return test_summary();
}
