/* Generated CUDA C for ElementwiseRegion steps, compiled at run time by
 * NVRTC (issue 16: the interpreter kernel, region.cu, costs more per
 * element than the bytes a region saves; straight-line code does not).
 *
 * The generator writes one kernel per region *form*: the program, the
 * dtypes, the folded rank, the vector width and which inputs step along
 * the inner dim are baked in; offsets, shape and strides stay in the
 * kernel's rlxk_region parameter (params.h, the interpreter's), so
 * identical regions (GPT-2's 12 layers) share one source and one kernel.
 * Every op goes through the unfused kernels' own scalar functions
 * (rlx_binary_f32 / rlx_act_f32 of base/scalar_math.h: NVRTC is given the
 * text of that header, of rlx.h and of params.h, embedded at build time)
 * and every result is rounded to the region's dtype, as region.cu does,
 * so results equal the interpreter's bits.
 *
 * libnvrtc is loaded with dlopen (libnvrtc.so.13, libnvrtc.so.12,
 * libnvrtc.so), never linked. This file needs no CUDA headers and is built
 * even without the CUDA backend, so the generator and the NVRTC compile
 * are tested on a machine without a GPU (tests/test_nvrtc.c). */
#ifndef RLX_BACKENDS_CUDA_NVRTC_H
#define RLX_BACKENDS_CUDA_NVRTC_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "base/error.h"
#include "ir/region.h"

/* Name of the kernel in every generated source. */
#define RLX_NVRTC_REGION_KERNEL "rlx_gen_region"

/* What the generator bakes in besides the program. */
typedef struct rlx_region_form {
  int32_t rank;                        /* folded dims of the step (1..RLX_MAX_RANK) */
  int32_t width;                       /* elements per thread along the inner dim: 1 or 4 */
  int32_t out_dtype;                   /* storage dtype of the output */
  int32_t in_dtype[RLX_REGION_MAX_INPUTS];
  uint8_t in_step1[RLX_REGION_MAX_INPUTS]; /* width 4: input steps 1 along the inner dim (else 0) */
} rlx_region_form;

/* Writes the CUDA C source of program p for form f into a malloc'd string
 * (*out_src; the caller frees). RLX_UNIMPLEMENTED when a dtype has no
 * generated load/store (only f32, f16 and bf16 do): the caller then uses
 * the interpreter. */
rlx_status rlx_nvrtc_region_source(const rlx_region_program* p, const rlx_region_form* f,
                                   char** out_src, rlx_error* err);

/* Whether libnvrtc could be loaded (once per process); when not, reason
 * (may be NULL) says why. */
int rlx_nvrtc_available(char* reason, size_t cap);

/* Compiles src for compute capability cc_major.cc_minor: a cubin for
 * sm_XY when NVRTC knows the architecture, else PTX for the newest one it
 * knows below it (the driver finishes it). *out_image (malloc'd, the
 * caller frees) is what cuModuleLoadData takes; *out_ms the time spent in
 * NVRTC. A failed compile is RLX_INTERNAL with NVRTC's log in the message. */
rlx_status rlx_nvrtc_compile(const char* src, int cc_major, int cc_minor, void** out_image,
                             size_t* out_bytes, double* out_ms, rlx_error* err);

/* Compiles run by rlx_nvrtc_compile in this process (successful or not)
 * and the ms they took. */
void rlx_nvrtc_stats(int32_t* n_compiles, double* ms);

#endif
