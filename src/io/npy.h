/* NumPy .npy files (format versions 1.0, 2.0, 3.0), little-endian, C order.
 * Used by the CLI (inputs/outputs), the fixture tests and the fuzzers.
 *
 * dtypes: <f4 <f2 <f8 |i1 |u1 <i4 <i8 |b1. bf16 has no .npy dtype: write it
 * as f32 and cast in the graph. */
#ifndef RLX_IO_NPY_H
#define RLX_IO_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "base/error.h"

/* Reads a whole .npy file. On success *out_data is malloc'd (free() it; never
 * NULL, even for an empty array) and holds *out_bytes bytes; out_shape has
 * room for RLX_MAX_RANK dims. On failure nothing is allocated and err names
 * the file and the problem. */
rlx_status rlx_npy_read(const char* path, rlx_error* err, rlx_dtype* out_dtype,
                        int32_t* out_rank, int64_t* out_shape, void** out_data,
                        size_t* out_bytes);

/* Same, from n bytes in memory (errors name the source as "<memory>"). */
rlx_status rlx_npy_read_mem(const void* buf, size_t n, rlx_error* err, rlx_dtype* out_dtype,
                            int32_t* out_rank, int64_t* out_shape, void** out_data,
                            size_t* out_bytes);

/* Writes a version 1.0 .npy file (a rank <= 8 header always fits). shape
 * dims must be static (>= 0) and data must hold numel × dtype size bytes. */
rlx_status rlx_npy_write(const char* path, rlx_dtype dtype, int32_t rank, const int64_t* shape,
                         const void* data, rlx_error* err);

#endif
