/* Build-time generator of the constants that shaders share with the host:
 *   gen_shader_constants OUT.glsl OUT.wgsl
 * writes a GLSL include (#defines, read by the Vulkan shaders through
 * common.glsl) and a WGSL prelude (embedded and prepended to every WebGPU
 * kernel). Every value is the C compiler's own value of an enum of
 * include/rlx.h, src/backends/kernels.def or the WebGPU record layout
 * (src/backends/webgpu/wg_layout.h), so shaders and host cannot disagree;
 * CMake runs this program whenever one of those headers changes.
 *
 * Shader code cannot include C, so the op *math* stays in GLSL/WGSL; only
 * its codes come from here. Names are the C names (RLX_ACT_GELU, RLX_K_NORM):
 * grepping one finds every backend's use. */
#include <stdio.h>
#include <stdlib.h>

#include "backends/webgpu/wg_layout.h"
#include "ir/names.h"
#include "passes/lower.h"
#include "rlx.h"

/* Activations, binary and compare ops get their constants from the member
 * names (src/ir/names.h): "gelu_approx" is RLX_ACT_GELU_APPROX, so a new
 * member needs no row here. */
typedef struct named_family {
  const char* prefix;
  const char* const* names;
  int count;
} named_family;

static const named_family k_families[] = {
    {"RLX_ACT_", rlx_activation_names, RLX_ACT_COUNT},
    {"RLX_BIN_", rlx_binary_names, RLX_BIN_COUNT},
    {"RLX_CMP_", rlx_compare_names, RLX_CMP_COUNT},
};

/* fmt gets the constant's name and value, e.g. "#define %s %d\n". */
static void write_families(FILE* f, const char* fmt) {
  for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++)
    for (int k = 0; k < k_families[i].count; k++) {
      char name[64];
      int n = snprintf(name, sizeof name, "%s", k_families[i].prefix);
      for (const char* c = k_families[i].names[k]; *c && n < (int)sizeof name - 1; c++)
        name[n++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
      name[n] = 0;
      fprintf(f, fmt, name, k);
    }
}

/* Each public enum the kernels switch on, member by member; the counts are
 * checked below so a member added to rlx.h without a row here fails the
 * build instead of leaving a shader without its code. */
#define RLX_SHADER_ENUMS(X)                                                                     \
  X(RLX_F32) X(RLX_F16) X(RLX_BF16) X(RLX_F64) X(RLX_I8) X(RLX_U8) X(RLX_I32) X(RLX_I64)        \
  X(RLX_BOOL) X(RLX_I16) X(RLX_U16) X(RLX_U32) X(RLX_U64) X(RLX_F8E4M3FN) X(RLX_F8E5M2)         \
  X(RLX_F8E4M3FNUZ) X(RLX_F8E5M2FNUZ)                                                           \
  X(RLX_RED_SUM) X(RLX_RED_MEAN) X(RLX_RED_MAX) X(RLX_RED_MIN) X(RLX_RED_PROD)                  \
  X(RLX_MASK_NONE) X(RLX_MASK_CAUSAL) X(RLX_MASK_CUSTOM) X(RLX_MASK_SLIDING) X(RLX_MASK_BIAS)   \
  X(RLX_ROPE_NEOX) X(RLX_ROPE_GPTJ)                                                             \
  X(RLX_QUANT_Q4_0) X(RLX_QUANT_Q4_1) X(RLX_QUANT_Q5_0) X(RLX_QUANT_Q5_1) X(RLX_QUANT_Q8_0)     \
  X(RLX_QUANT_Q2_K) X(RLX_QUANT_Q3_K) X(RLX_QUANT_Q4_K) X(RLX_QUANT_Q5_K) X(RLX_QUANT_Q6_K)     \
  X(RLX_QUANT_INT8_SYM) X(RLX_QUANT_INT8_ASYM) X(RLX_QUANT_INT4_SYM) X(RLX_QUANT_INT4_ASYM)     \
  X(RLX_QUANT_FP8_E4M3) X(RLX_QUANT_FP8_E5M2) X(RLX_QUANT_NVFP4)

_Static_assert(RLX_DTYPE_COUNT == 17, "a dtype without a shader constant");
_Static_assert(RLX_RED_COUNT == 5, "a reduce op without a shader constant");
_Static_assert(RLX_QUANT_COUNT == 17, "a quantization scheme without a shader constant");
_Static_assert(RLX_MASK_BIAS == 4 && RLX_ROPE_GPTJ == 1, "mask kinds / rope styles changed");

static const char* const k_header =
    "Generated at build time by scripts/gen_shader_constants.c from include/rlx.h,\n"
    "src/backends/kernels.def and src/backends/webgpu/wg_layout.h: do not edit.";

static int write_glsl(FILE* f) {
  fprintf(f, "/* %s */\n#ifndef RLX_SHADER_CONSTANTS\n#define RLX_SHADER_CONSTANTS\n", k_header);
#define GLSL_ENUM(name) fprintf(f, "#define %s %d\n", #name, (int)(name));
  RLX_SHADER_ENUMS(GLSL_ENUM)
#undef GLSL_ENUM
  write_families(f, "#define %s %d\n");
#define RLX_KERNEL(id, name, params, meaning) fprintf(f, "#define RLX_K_%s %d\n", #id, (int)RLX_K_##id);
#include "backends/kernels.def"
#undef RLX_KERNEL
  return fprintf(f, "#endif\n") < 0;
}

/* Record words keep the types the kernels compare them with (u32 words,
 * i32 for signed fields); enum codes are abstract integers, usable against
 * either. */
static int write_wgsl(FILE* f) {
  fprintf(f, "// %s\n", "Generated at build time by scripts/gen_shader_constants.c: do not edit.");
#define WGSL_U32(name, value) fprintf(f, "const %s: u32 = %uu;\n", #name, (unsigned)(value));
#define WGSL_I32(name, value) fprintf(f, "const %s: i32 = %d;\n", #name, (int)(value));
  RLX_WG_U32_CONSTS(WGSL_U32)
  RLX_WG_I32_CONSTS(WGSL_I32)
#undef WGSL_U32
#undef WGSL_I32
#define WGSL_ENUM(name) fprintf(f, "const %s = %d;\n", #name, (int)(name));
  RLX_SHADER_ENUMS(WGSL_ENUM)
#undef WGSL_ENUM
  write_families(f, "const %s = %d;\n");
#define RLX_KERNEL(id, name, params, meaning) fprintf(f, "const RLX_K_%s = %d;\n", #id, (int)RLX_K_##id);
#include "backends/kernels.def"
#undef RLX_KERNEL
  return ferror(f) != 0;
}

static int write_file(const char* path, int (*write)(FILE*)) {
  FILE* f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  int bad = write(f);
  if (fclose(f) != 0) bad = 1;
  if (bad) fprintf(stderr, "gen_shader_constants: writing %s failed\n", path);
  return bad;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OUT.glsl OUT.wgsl\n", argv[0]);
    return 2;
  }
  return write_file(argv[1], write_glsl) || write_file(argv[2], write_wgsl) ? 1 : 0;
}
