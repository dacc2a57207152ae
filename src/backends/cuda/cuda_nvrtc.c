/* ElementwiseRegion -> CUDA C source, and NVRTC loaded at run time
 * (cuda_nvrtc.h). */
#define _GNU_SOURCE
#include "backends/cuda/cuda_nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/dtype.h"

/* ------------------------------------------------------------------ embedded headers */

/* The text nvcc builds the fatbins from (CMakeLists.txt embeds it with
 * embed.cmake): the generated code includes it instead of copying it. */
extern const unsigned char rlx_nvrtc_hdr_rlx[], rlx_nvrtc_hdr_scalar_math[], rlx_nvrtc_hdr_params[];
extern const size_t rlx_nvrtc_hdr_rlx_size, rlx_nvrtc_hdr_scalar_math_size,
    rlx_nvrtc_hdr_params_size;

/* NVRTC has no C library headers: these give the embedded headers the few
 * names they take from <stdint.h> / <stddef.h> (NVRTC builds for a 64-bit
 * target, the only kind rlx supports). */
static const char k_stdint_h[] =
    "#pragma once\n"
    "typedef signed char int8_t; typedef short int16_t; typedef int int32_t;\n"
    "typedef long long int64_t; typedef unsigned char uint8_t; typedef unsigned short uint16_t;\n"
    "typedef unsigned int uint32_t; typedef unsigned long long uint64_t;\n"
    "#define INT64_MAX 9223372036854775807LL\n"
    "#define INT64_MIN (-INT64_MAX - 1)\n"
    "#define UINT64_MAX 18446744073709551615ULL\n"
    "#define INT64_C(c) c##LL\n"
    "#define UINT64_C(c) c##ULL\n";
static const char k_stddef_h[] = "#pragma once\ntypedef unsigned long size_t;\n";

/* Before the headers: the <math.h> constants scalar_math.h uses (the bit
 * patterns glibc's NAN and INFINITY have), and the half conversions as the
 * sm_80+ instructions cuda_fp16.h / cuda_bf16.h compile them to (their
 * headers are too large to parse per compile). Loads widen exactly; stores
 * round to nearest even (rounding on the integer bits instead measured
 * slower on the H200: 94 vs 79 us for the bf16 GELU derivative). An f32 region's "rounding" adds -0 with an
 * explicit rounding mode (x + -0 is x; a NaN stays a NaN): the compiler may
 * not contract a product of one instruction into the next instruction's
 * add as an FMA, so each result is what its unfused kernel stores. */
static const char k_prelude[] =
    "#define NAN __int_as_float(0x7fc00000)\n"
    "#define INFINITY __int_as_float(0x7f800000)\n"
    "#include \"base/scalar_math.h\"\n"
    "#include \"params.h\"\n"
    "#define RG __device__ __forceinline__\n"
    "RG float rg_from_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }\n"
    "RG float rg_from_f16(unsigned short h) { float r; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(h)); return r; }\n"
    "RG unsigned short rg_to_bf16(float v) { unsigned short r; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(v)); return r; }\n"
    "RG unsigned short rg_to_f16(float v) { unsigned short r; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(r) : \"f\"(v)); return r; }\n"
    "RG float rg_round_f32(float v) { return __fadd_rn(v, -0.0f); }\n"
    "RG float rg_round_bf16(float v) { return rg_from_bf16(rg_to_bf16(v)); }\n"
    "RG float rg_round_f16(float v) { return rg_from_f16(rg_to_f16(v)); }\n"
    "RG float rg_ld_f32(const char* b, int i) { return ((const float*)b)[i]; }\n"
    "RG float rg_ld_bf16(const char* b, int i) { return rg_from_bf16(((const unsigned short*)b)[i]); }\n"
    "RG float rg_ld_f16(const char* b, int i) { return rg_from_f16(((const unsigned short*)b)[i]); }\n"
    "RG float rg_ld_f64(const char* b, int i) { return (float)((const double*)b)[i]; }\n"
    "RG void rg_st_f32(char* b, int i, float v) { ((float*)b)[i] = v; }\n"
    "RG void rg_st_bf16(char* b, int i, float v) { ((unsigned short*)b)[i] = rg_to_bf16(v); }\n"
    "RG void rg_st_f16(char* b, int i, float v) { ((unsigned short*)b)[i] = rg_to_f16(v); }\n"
    "RG void rg_ld4_f32(const char* b, int i, float* x) {\n"
    "  float4 v = *(const float4*)((const float*)b + i); x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w; }\n"
    "RG void rg_ld4_bf16(const char* b, int i, float* x) {\n"
    "  uint2 u = *(const uint2*)(b + 2 * (long long)i);\n"
    "  x[0] = __uint_as_float(u.x << 16); x[1] = __uint_as_float(u.x & 0xffff0000u);\n"
    "  x[2] = __uint_as_float(u.y << 16); x[3] = __uint_as_float(u.y & 0xffff0000u); }\n"
    "RG void rg_ld4_f16(const char* b, int i, float* x) {\n"
    "  uint2 u = *(const uint2*)(b + 2 * (long long)i);\n"
    "  x[0] = rg_from_f16(u.x & 0xffff); x[1] = rg_from_f16(u.x >> 16);\n"
    "  x[2] = rg_from_f16(u.y & 0xffff); x[3] = rg_from_f16(u.y >> 16); }\n"
    "RG void rg_st4_f32(char* b, int i, const float* x) {\n"
    "  *(float4*)((float*)b + i) = make_float4(x[0], x[1], x[2], x[3]); }\n"
    "RG void rg_st4_bf16(char* b, int i, const float* x) {\n"
    "  *(uint2*)(b + 2 * (long long)i) = make_uint2(rg_to_bf16(x[0]) | (unsigned)rg_to_bf16(x[1]) << 16,\n"
    "                                              rg_to_bf16(x[2]) | (unsigned)rg_to_bf16(x[3]) << 16); }\n"
    "RG void rg_st4_f16(char* b, int i, const float* x) {\n"
    "  *(uint2*)(b + 2 * (long long)i) = make_uint2(rg_to_f16(x[0]) | (unsigned)rg_to_f16(x[1]) << 16,\n"
    "                                              rg_to_f16(x[2]) | (unsigned)rg_to_f16(x[3]) << 16); }\n";

/* ------------------------------------------------------------------ source text */

typedef struct text {
  char* s;
  size_t n, cap;
  int oom;
} text;

static void put(text* t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text* t, const char* fmt, ...) {
  if (t->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    if (k < 0) {
      t->oom = 1;
      return;
    }
    if (t->n + (size_t)k < t->cap) {
      t->n += (size_t)k;
      return;
    }
    size_t cap = (t->cap + (size_t)k) * 2;
    char* grown = realloc(t->s, cap);
    if (!grown) {
      t->oom = 1;
      return;
    }
    t->s = grown;
    t->cap = cap;
  }
}

/* Suffix of the load / store / round helpers for a storage dtype; NULL for
 * dtypes the generated code does not handle (f64: loads only, below). */
static const char* dtype_suffix(int32_t t) {
  switch (t) {
    case RLX_F32: return "f32";
    case RLX_BF16: return "bf16";
    case RLX_F16: return "f16";
    default: return NULL;
  }
}

/* Loads also read f64 (a cast's input; narrowed to float as the
 * interpreter's ld_f32 does), one element at a time. */
static const char* load_suffix(int32_t t) { return t == RLX_F64 ? "f64" : dtype_suffix(t); }

/* Element index expression of a view with strides st (an array in p) at
 * the thread's coordinates i0..i{rank-1}. */
static void put_index(text* t, const char* strides, int32_t rank) {
  for (int32_t d = 0; d < rank; d++) put(t, "%si%d * %s[%d]", d ? " + " : "", d, strides, d);
}

/* The coordinates of the thread's first element: the inner one times the
 * width, the outer ones by division (32-bit: the launch builder checked
 * every index fits). */
static void put_coords(text* t, const rlx_region_form* f) {
  int32_t last = f->rank - 1;
  put(t, "    unsigned r = t / inner;\n");
  put(t, "    int i%d = (int)(t - r * inner) * %d;\n", last, f->width);
  for (int32_t d = last - 1; d >= 0; d--) {
    if (d == 0) {
      put(t, "    int i0 = (int)r;\n");
    } else {
      put(t, "    int i%d = (int)(r %% (unsigned)p.shape[%d]);\n", d, d);
      put(t, "    r /= (unsigned)p.shape[%d];\n", d);
    }
  }
}

/* Input k into x<k>[width]: a vector load when it steps 1 along the inner
 * dim, else one element for every lane. */
static void put_load(text* t, const rlx_region_form* f, int32_t k) {
  const char* sfx = load_suffix(f->in_dtype[k]);
  char strides[32];
  snprintf(strides, sizeof strides, "p.istride[%d]", k);
  put(t, "    float v%d[%d];\n", k, f->width);
  if (f->width == 4 && f->in_step1[k]) {
    put(t, "    rg_ld4_%s(arena + p.ioff[%d], ", sfx, k);
    put_index(t, strides, f->rank);
    put(t, ", v%d);\n", k);
    return;
  }
  put(t, "    { float e = rg_ld_%s(arena + p.ioff[%d], ", sfx, k);
  put_index(t, strides, f->rank);
  put(t, ");\n      for (int l = 0; l < %d; l++) v%d[l] = e; }\n", f->width, k);
}

/* Operand slot s at lane l: constants are scalars (c<s>), values arrays. */
static void put_operand(text* t, const rlx_region_program* p, int32_t s) {
  if (s >= p->n_inputs && p->code[s - p->n_inputs].kind == RLX_RI_CONST) put(t, "c%d", s);
  else put(t, "v%d[l]", s);
}

/* The immediate as the region's dtype holds it, as bits of a float. */
static uint32_t imm_bits(const rlx_region_program* p, int32_t k) {
  uint8_t cell[8];
  rlx_store_f64(cell, (rlx_dtype)p->dtype, 0, p->imm[k]);
  float v = (float)rlx_load_f64(cell, (rlx_dtype)p->dtype, 0);
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return bits;
}

static void put_instr(text* t, const rlx_region_program* p, const rlx_region_form* f, int32_t k) {
  const rlx_region_instr* in = &p->code[k];
  int32_t self = p->n_inputs + k;
  if (in->kind == RLX_RI_CONST) {
    put(t, "    const float c%d = __int_as_float(0x%08xu);\n", self, imm_bits(p, k));
    return;
  }
  put(t, "    float v%d[%d];\n#pragma unroll\n    for (int l = 0; l < %d; l++) v%d[l] = rg_round_%s(",
      self, f->width, f->width, self, dtype_suffix(p->dtype));
  if (in->kind == RLX_RI_CAST) {
    put(t, "v%d[l]", in->a);
  } else if (in->kind == RLX_RI_UNARY) {
    put(t, "rlx_act_f32(%d, ", in->op);
    put_operand(t, p, in->a);
    put(t, ")");
  } else {
    put(t, "rlx_binary_f32(%d, ", in->op);
    put_operand(t, p, in->a);
    put(t, ", ");
    put_operand(t, p, in->b);
    put(t, ")");
  }
  put(t, ");\n");
}

static void put_store(text* t, const rlx_region_program* p, const rlx_region_form* f) {
  int32_t out = p->n_inputs + p->n_instrs - 1;
  const char* sfx = dtype_suffix(f->out_dtype);
  if (p->code[p->n_instrs - 1].kind == RLX_RI_CONST) { /* a constant output: every lane */
    put(t, "    float v%d[%d];\n    for (int l = 0; l < %d; l++) v%d[l] = c%d;\n", out, f->width,
        f->width, out, out);
  }
  if (f->width == 4) {
    put(t, "    rg_st4_%s(arena + p.ooff, ", sfx);
    put_index(t, "p.ostride", f->rank);
    put(t, ", v%d);\n", out);
  } else {
    put(t, "    rg_st_%s(arena + p.ooff, ", sfx);
    put_index(t, "p.ostride", f->rank);
    put(t, ", v%d[0]);\n", out);
  }
}

static rlx_status check_form(const rlx_region_program* p, const rlx_region_form* f,
                             rlx_error* err) {
  if (f->rank < 1 || f->rank > RLX_MAX_RANK || (f->width != 1 && f->width != 4) ||
      p->n_inputs < 1 || p->n_inputs > RLX_REGION_MAX_INPUTS || p->n_instrs < 1)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "nvrtc: region form rank %d width %d inputs %d instructions %d is not valid",
                    f->rank, f->width, p->n_inputs, p->n_instrs);
  if (!dtype_suffix(p->dtype) || !dtype_suffix(f->out_dtype))
    return rlx_fail(err, RLX_UNIMPLEMENTED, "nvrtc: no generated code for a %s region storing %s",
                    rlx_dtype_name((rlx_dtype)p->dtype), rlx_dtype_name((rlx_dtype)f->out_dtype));
  for (int32_t k = 0; k < p->n_inputs; k++)
    if (!load_suffix(f->in_dtype[k]) || (f->in_step1[k] && !dtype_suffix(f->in_dtype[k])))
      return rlx_fail(err, RLX_UNIMPLEMENTED, "nvrtc: no generated load of a %s input",
                      rlx_dtype_name((rlx_dtype)f->in_dtype[k]));
  return RLX_OK;
}

rlx_status rlx_nvrtc_region_source(const rlx_region_program* p, const rlx_region_form* f,
                                   char** out_src, rlx_error* err) {
  *out_src = NULL;
  rlx_status s = check_form(p, f, err);
  if (s) return s;
  text t = {0};
  put(&t, "%s", k_prelude);
  put(&t, "extern \"C\" __global__ void __launch_bounds__(256)\n");
  put(&t, RLX_NVRTC_REGION_KERNEL "(char* arena, rlxk_region p, rlxk_state* st) {\n");
  put(&t, "  const unsigned inner = (unsigned)p.shape[%d] / %du;\n", f->rank - 1, f->width);
  put(&t, "  const unsigned total = (unsigned)(p.n / %d);\n", f->width);
  put(&t, "  for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < total;\n");
  put(&t, "       t += gridDim.x * blockDim.x) {\n");
  put_coords(&t, f);
  for (int32_t k = 0; k < p->n_inputs; k++) put_load(&t, f, k);
  for (int32_t k = 0; k < p->n_instrs; k++) put_instr(&t, p, f, k);
  put_store(&t, p, f);
  put(&t, "  }\n}\n");
  if (t.oom) {
    free(t.s);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  *out_src = t.s;
  return RLX_OK;
}

/* ------------------------------------------------------------------ libnvrtc */

typedef struct nvrtc_api {
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*);
  int (*destroy)(void**);
  int (*compile)(void*, int, const char* const*);
  int (*log_size)(void*, size_t*);
  int (*log)(void*, char*);
  int (*cubin_size)(void*, size_t*);
  int (*cubin)(void*, char*);
  int (*ptx_size)(void*, size_t*);
  int (*ptx)(void*, char*);
  const char* (*error_string)(int);
  int (*num_archs)(int*);     /* optional (CUDA 11.2+) */
  int (*archs)(int*);
} nvrtc_api;

static pthread_once_t g_nvrtc_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int32_t g_compiles;
static double g_compile_ms;
static nvrtc_api g_nvrtc;
static int g_nvrtc_ok;
static char g_nvrtc_reason[256];

static int nvrtc_sym(void* lib, const char* name, void* slot) {
  void* f = dlsym(lib, name);
  memcpy(slot, &f, sizeof f);
  return f != NULL;
}

static void nvrtc_load(void) {
  /* the toolkit's own directory last: it is often not on the loader's path */
  static const char* const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                      "/usr/local/cuda/lib64/libnvrtc.so.13",
                                      "/usr/local/cuda/lib64/libnvrtc.so.12"};
  void* lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(g_nvrtc_reason, sizeof g_nvrtc_reason, "no libnvrtc.so.13/.12 (%s)", dlerror());
    return;
  }
  nvrtc_api a;
  memset(&a, 0, sizeof a);
  int ok = nvrtc_sym(lib, "nvrtcCreateProgram", &a.create) &&
           nvrtc_sym(lib, "nvrtcDestroyProgram", &a.destroy) &&
           nvrtc_sym(lib, "nvrtcCompileProgram", &a.compile) &&
           nvrtc_sym(lib, "nvrtcGetProgramLogSize", &a.log_size) &&
           nvrtc_sym(lib, "nvrtcGetProgramLog", &a.log) &&
           nvrtc_sym(lib, "nvrtcGetCUBINSize", &a.cubin_size) &&
           nvrtc_sym(lib, "nvrtcGetCUBIN", &a.cubin) &&
           nvrtc_sym(lib, "nvrtcGetPTXSize", &a.ptx_size) && nvrtc_sym(lib, "nvrtcGetPTX", &a.ptx) &&
           nvrtc_sym(lib, "nvrtcGetErrorString", &a.error_string);
  if (!ok) {
    snprintf(g_nvrtc_reason, sizeof g_nvrtc_reason, "libnvrtc lacks a needed symbol");
    dlclose(lib);
    return;
  }
  nvrtc_sym(lib, "nvrtcGetNumSupportedArchs", &a.num_archs);
  nvrtc_sym(lib, "nvrtcGetSupportedArchs", &a.archs);
  g_nvrtc = a;
  g_nvrtc_ok = 1;
  snprintf(g_nvrtc_reason, sizeof g_nvrtc_reason, "libnvrtc loaded");
}

int rlx_nvrtc_available(char* reason, size_t cap) {
  pthread_once(&g_nvrtc_once, nvrtc_load);
  if (reason && cap) snprintf(reason, cap, "%s", g_nvrtc_reason);
  return g_nvrtc_ok;
}

/* The architecture to compile for: sm_XY itself when NVRTC lists it (or
 * cannot list), else the newest listed below it as PTX. */
static int pick_arch(int cc, int* out_cubin) {
  *out_cubin = 1;
  int n = 0;
  if (!g_nvrtc.num_archs || !g_nvrtc.archs || g_nvrtc.num_archs(&n) != 0 || n <= 0 || n > 256)
    return cc;
  int archs[256], best = 0;
  if (g_nvrtc.archs(archs) != 0) return cc;
  for (int i = 0; i < n; i++) {
    if (archs[i] == cc) return cc;
    if (archs[i] < cc && archs[i] > best) best = archs[i];
  }
  *out_cubin = 0;
  return best ? best : cc;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* NUL-terminated copies of the embedded headers (made once). */
static char* g_hdr_text[3];
static pthread_once_t g_hdr_once = PTHREAD_ONCE_INIT;

static char* dup_bytes(const unsigned char* b, size_t n) {
  char* s = malloc(n + 1);
  if (s) {
    memcpy(s, b, n);
    s[n] = 0;
  }
  return s;
}

static void headers_load(void) {
  g_hdr_text[0] = dup_bytes(rlx_nvrtc_hdr_rlx, rlx_nvrtc_hdr_rlx_size);
  g_hdr_text[1] = dup_bytes(rlx_nvrtc_hdr_scalar_math, rlx_nvrtc_hdr_scalar_math_size);
  g_hdr_text[2] = dup_bytes(rlx_nvrtc_hdr_params, rlx_nvrtc_hdr_params_size);
}

static rlx_status nvrtc_result(void* prog, int cubin, void** out_image, size_t* out_bytes,
                               rlx_error* err) {
  size_t n = 0;
  int r = cubin ? g_nvrtc.cubin_size(prog, &n) : g_nvrtc.ptx_size(prog, &n);
  if (r != 0 || n == 0)
    return rlx_fail(err, RLX_INTERNAL, "nvrtc: %s size: %s", cubin ? "nvrtcGetCUBINSize" : "nvrtcGetPTXSize",
                    g_nvrtc.error_string(r));
  char* image = malloc(n);
  RLX_CHECK_ALLOC(err, image);
  r = cubin ? g_nvrtc.cubin(prog, image) : g_nvrtc.ptx(prog, image);
  if (r != 0) {
    free(image);
    return rlx_fail(err, RLX_INTERNAL, "nvrtc: getting the compiled code: %s",
                    g_nvrtc.error_string(r));
  }
  *out_image = image;
  *out_bytes = n;
  return RLX_OK;
}

/* A failed compile: the status with the start of NVRTC's log. */
static rlx_status compile_failed(void* prog, int r, rlx_error* err) {
  size_t n = 0;
  char* log = NULL;
  if (g_nvrtc.log_size(prog, &n) == 0 && n > 0 && (log = malloc(n + 1)) != NULL) {
    if (g_nvrtc.log(prog, log) != 0) log[0] = 0;
    log[n] = 0;
  }
  rlx_status s = rlx_fail(err, RLX_INTERNAL, "nvrtc: compiling a generated region kernel: %s: %.700s",
                          g_nvrtc.error_string(r), log ? log : "(no log)");
  free(log);
  return s;
}

rlx_status rlx_nvrtc_compile(const char* src, int cc_major, int cc_minor, void** out_image,
                             size_t* out_bytes, double* out_ms, rlx_error* err) {
  *out_image = NULL;
  *out_bytes = 0;
  char why[256];
  if (!rlx_nvrtc_available(why, sizeof why))
    return rlx_fail(err, RLX_UNAVAILABLE, "nvrtc: unavailable: %s", why);
  pthread_once(&g_hdr_once, headers_load);
  if (!g_hdr_text[0] || !g_hdr_text[1] || !g_hdr_text[2])
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  double t0 = now_ms();
  int cubin = 1, arch = pick_arch(cc_major * 10 + cc_minor, &cubin);
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", arch);
  /* -default-device: rlx.h's host API declarations parse as (unused) device ones. */
  const char* opts[] = {arch_opt, "-std=c++17", "-default-device"};
  const char* hdrs[] = {g_hdr_text[0], g_hdr_text[1], g_hdr_text[2], k_stdint_h, k_stddef_h};
  const char* names[] = {"rlx.h", "base/scalar_math.h", "params.h", "stdint.h", "stddef.h"};
  void* prog = NULL;
  int r = g_nvrtc.create(&prog, src, "rlx_region.cu", 5, hdrs, names);
  if (r != 0) return rlx_fail(err, RLX_INTERNAL, "nvrtc: nvrtcCreateProgram: %s", g_nvrtc.error_string(r));
  r = g_nvrtc.compile(prog, 3, opts);
  rlx_status s = r != 0 ? compile_failed(prog, r, err)
                        : nvrtc_result(prog, cubin, out_image, out_bytes, err);
  g_nvrtc.destroy(&prog);
  *out_ms = now_ms() - t0;
  pthread_mutex_lock(&g_stats_lock);
  g_compiles++;
  g_compile_ms += *out_ms;
  pthread_mutex_unlock(&g_stats_lock);
  return s;
}

void rlx_nvrtc_stats(int32_t* n_compiles, double* ms) {
  pthread_mutex_lock(&g_stats_lock);
  *n_compiles = g_compiles;
  *ms = g_compile_ms;
  pthread_mutex_unlock(&g_stats_lock);
}
