/* Convolution geometry shared by the IR and autodiff.
 *
 * The gradient of Conv with respect to its input x is the ConvTranspose of
 * dy with the same weight, strides, pads, dilations, groups and layout
 * (Conv's w [OC, C/g, k...] is exactly ConvTranspose's [C_in = OC,
 * C_out/g = C/g, k...]). ConvTranspose's output size per spatial dim is
 *   (out - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + op + 1,
 * while Conv floored (in + pads - dilation * (k - 1) - 1) / stride; the
 * input positions the floor dropped (at most stride - 1 of them at the end,
 * which no window reads, so their gradient is zero) come back through
 * output_padding op:
 *   op = in + pad_begin + pad_end - dilation * (k - 1) - 1 - (out - 1) * stride,
 * i.e. the remainder of that division, in [0, stride). ConvTranspose
 * requires op < max(stride, dilation), which this always meets.
 *
 * Channels-last Conv with OHWI weights (w [OC, k..., C/g]): ConvTranspose
 * takes only [C_in, C_out/g, k...] weights, so autodiff transposes w to
 * [OC, C/g, k...] and uses layout RLX_CONV_CHANNELS_LAST (a small weight
 * transpose, hoisted like every other op on params). */
#ifndef RLX_IR_CONV_GEOMETRY_H
#define RLX_IR_CONV_GEOMETRY_H

#include <stdint.h>

/* output_padding[i] for the ConvTranspose that gives Conv's input gradient
 * the shape of x: in[i] = x's spatial sizes, out[i] = dy's, kernel, strides,
 * dilations per dim (NULL strides / dilations = all 1), pads[2 * ns] begins
 * then ends (NULL = none). Returns 0, or -1 (output_padding untouched) if
 * the sizes are not those of a Conv with that geometry. */
static inline int rlx_conv_input_grad_output_padding(int32_t ns, const int64_t* in,
                                                     const int64_t* out, const int64_t* kernel,
                                                     const int64_t* strides, const int64_t* pads,
                                                     const int64_t* dilations,
                                                     int64_t* output_padding) {
  int64_t op[3];
  if (ns < 1 || ns > 3) return -1;
  for (int32_t i = 0; i < ns; i++) {
    int64_t s = strides ? strides[i] : 1, d = dilations ? dilations[i] : 1;
    int64_t span = in[i] + (pads ? pads[i] + pads[ns + i] : 0) - d * (kernel[i] - 1) - 1;
    if (s < 1 || d < 1 || span < 0 || span / s + 1 != out[i]) return -1;
    op[i] = span % s;
  }
  for (int32_t i = 0; i < ns; i++) output_padding[i] = op[i];
  return 0;
}

#endif
