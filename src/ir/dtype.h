/* Element conversions shared by the CPU kernels, the executable's I/O
 * conversions and the file loaders. */
#ifndef RLX_IR_DTYPE_H
#define RLX_IR_DTYPE_H

#include <stdint.h>
#include "rlx.h"

float rlx_f16_to_f32(uint16_t h);
uint16_t rlx_f32_to_f16(float f);   /* round to nearest even */
float rlx_bf16_to_f32(uint16_t h);
uint16_t rlx_f32_to_bf16(float f);  /* round to nearest even, NaN kept */

/* Element i of a buffer of dtype t, as a double (bool -> 0/1). */
double rlx_load_f64(const void* base, rlx_dtype t, int64_t i);
/* Stores v as dtype t (integers: truncation toward zero, saturating; bool: v != 0). */
void rlx_store_f64(void* base, rlx_dtype t, int64_t i, double v);
/* Integer element (for indices and exact integer math). */
int64_t rlx_load_i64(const void* base, rlx_dtype t, int64_t i);
void rlx_store_i64(void* base, rlx_dtype t, int64_t i, int64_t v);

/* Converts n elements between dtypes (float <-> float, int <-> int, any -> any
 * via double when exactness allows). */
void rlx_convert(void* dst, rlx_dtype dt, const void* src, rlx_dtype st, int64_t n);

#endif
