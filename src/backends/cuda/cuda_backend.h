/* The CUDA backend's vtable, for the device registry (device.c). Built only
 * with RLX_HAVE_CUDA (CMake finds nvcc); see cuda_internal.h for the rest. */
#ifndef RLX_BACKENDS_CUDA_BACKEND_H
#define RLX_BACKENDS_CUDA_BACKEND_H

#include "runtime/backend.h"

extern const rlx_backend rlx_backend_cuda;

/* With RLX_CUDA_TIMING=1 in the environment at compile time, each run
 * records CUDA events around its device work; this returns the last run's
 * device milliseconds on the calling thread (-1 if none). For benchmarks. */
double rlx_cuda_last_run_ms(void);

#endif
