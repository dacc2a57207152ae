/* The few cuDNN 9 types, enum values and entry points the CUDA backend uses
 * for convolution, declared here so that the library builds (and runs,
 * decomposing convolutions) on machines without cuDNN's headers. The values
 * are cuDNN 9's ABI (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h); the library is
 * opened with dlopen in cuda_loader.c and only reached through rlx_dnn_api.
 *
 * The legacy convolution API (descriptors + cudnnFind*, cudnnConvolution*)
 * is used rather than the graph API: it is a dozen calls instead of the
 * graph API's attribute-per-call backend descriptors, it offers the timed
 * algorithm search and the fused bias + activation + residual forward, and
 * each call is one stream-ordered launch sequence that CUDA-graph capture
 * records. cuDNN 9 marks it deprecated but ships it through the 9.x line. */
#ifndef RLX_BACKENDS_CUDA_CUDNN_TYPES_H
#define RLX_BACKENDS_CUDA_CUDNN_TYPES_H

#include <stddef.h>

typedef int rlx_dnn_status;           /* cudnnStatus_t; 0 = CUDNN_STATUS_SUCCESS */
#define RLX_DNN_SUCCESS 0

typedef struct rlx_dnn_context* rlx_dnn_handle;  /* cudnnHandle_t */
typedef struct rlx_dnn_tensor_s* rlx_dnn_tensor; /* cudnnTensorDescriptor_t */
typedef struct rlx_dnn_filter_s* rlx_dnn_filter; /* cudnnFilterDescriptor_t */
typedef struct rlx_dnn_conv_s* rlx_dnn_conv;     /* cudnnConvolutionDescriptor_t */
typedef struct rlx_dnn_act_s* rlx_dnn_act;       /* cudnnActivationDescriptor_t */

/* cudnnDataType_t */
enum { RLX_DNN_FLOAT = 0, RLX_DNN_DOUBLE = 1, RLX_DNN_HALF = 2, RLX_DNN_BFLOAT16 = 9 };
/* cudnnMathType_t: DEFAULT lets f32 use TF32 on Ampere+; FMA forbids it. */
enum { RLX_DNN_DEFAULT_MATH = 0, RLX_DNN_TENSOR_OP_MATH = 1, RLX_DNN_FMA_MATH = 3 };
/* cudnnTensorFormat_t (filters) */
enum { RLX_DNN_NCHW = 0, RLX_DNN_NHWC = 1 };
/* cudnnConvolutionMode_t: deep-learning convolution is cross-correlation. */
enum { RLX_DNN_CROSS_CORRELATION = 1 };
/* cudnnActivationMode_t, cudnnNanPropagation_t */
enum { RLX_DNN_ACT_RELU = 1, RLX_DNN_ACT_IDENTITY = 5 };
enum { RLX_DNN_PROPAGATE_NAN = 1 };
/* cudnnConvolutionFwdAlgo_t: the fused forward's identity activation runs
 * only with this one. */
enum { RLX_DNN_FWD_IMPLICIT_PRECOMP_GEMM = 1 };
/* cudnnDeterminism_t: the weight gradient keeps deterministic algorithms
 * only (some backward-filter algorithms accumulate with atomics). */
enum { RLX_DNN_DETERMINISTIC = 1 };

/* cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionBwdDataAlgoPerf_t and
 * cudnnConvolutionBwdFilterAlgoPerf_t share this layout (enums are ints). */
typedef struct rlx_dnn_algo_perf {
  int algo;
  rlx_dnn_status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
} rlx_dnn_algo_perf;

typedef struct rlx_dnn_api {
  size_t (*get_version)(void);
  const char* (*get_error_string)(rlx_dnn_status);
  rlx_dnn_status (*create)(rlx_dnn_handle*);
  rlx_dnn_status (*destroy)(rlx_dnn_handle);
  rlx_dnn_status (*set_stream)(rlx_dnn_handle, void* stream);
  rlx_dnn_status (*create_tensor)(rlx_dnn_tensor*);
  rlx_dnn_status (*set_tensor_nd)(rlx_dnn_tensor, int dtype, int nb_dims, const int* dims,
                                  const int* strides);
  rlx_dnn_status (*destroy_tensor)(rlx_dnn_tensor);
  rlx_dnn_status (*create_filter)(rlx_dnn_filter*);
  rlx_dnn_status (*set_filter_nd)(rlx_dnn_filter, int dtype, int format, int nb_dims,
                                  const int* dims);
  rlx_dnn_status (*destroy_filter)(rlx_dnn_filter);
  rlx_dnn_status (*create_conv)(rlx_dnn_conv*);
  rlx_dnn_status (*set_conv_nd)(rlx_dnn_conv, int n, const int* pad, const int* stride,
                                const int* dilation, int mode, int compute_type);
  rlx_dnn_status (*set_conv_groups)(rlx_dnn_conv, int groups);
  rlx_dnn_status (*set_conv_math)(rlx_dnn_conv, int math);
  rlx_dnn_status (*destroy_conv)(rlx_dnn_conv);
  rlx_dnn_status (*create_act)(rlx_dnn_act*);
  rlx_dnn_status (*set_act)(rlx_dnn_act, int mode, int nan, double coef);
  rlx_dnn_status (*destroy_act)(rlx_dnn_act);
  rlx_dnn_status (*find_fwd)(rlx_dnn_handle, rlx_dnn_tensor, rlx_dnn_filter, rlx_dnn_conv,
                             rlx_dnn_tensor, int want, int* got, rlx_dnn_algo_perf*);
  rlx_dnn_status (*heur_fwd)(rlx_dnn_handle, rlx_dnn_tensor, rlx_dnn_filter, rlx_dnn_conv,
                             rlx_dnn_tensor, int want, int* got, rlx_dnn_algo_perf*);
  rlx_dnn_status (*fwd_ws)(rlx_dnn_handle, rlx_dnn_tensor, rlx_dnn_filter, rlx_dnn_conv,
                           rlx_dnn_tensor, int algo, size_t*);
  rlx_dnn_status (*find_bwd_data)(rlx_dnn_handle, rlx_dnn_filter, rlx_dnn_tensor, rlx_dnn_conv,
                                  rlx_dnn_tensor, int want, int* got, rlx_dnn_algo_perf*);
  rlx_dnn_status (*heur_bwd_data)(rlx_dnn_handle, rlx_dnn_filter, rlx_dnn_tensor, rlx_dnn_conv,
                                  rlx_dnn_tensor, int want, int* got, rlx_dnn_algo_perf*);
  rlx_dnn_status (*bwd_data_ws)(rlx_dnn_handle, rlx_dnn_filter, rlx_dnn_tensor, rlx_dnn_conv,
                                rlx_dnn_tensor, int algo, size_t*);
  rlx_dnn_status (*forward)(rlx_dnn_handle, const void* alpha, rlx_dnn_tensor, const void* x,
                            rlx_dnn_filter, const void* w, rlx_dnn_conv, int algo, void* ws,
                            size_t ws_bytes, const void* beta, rlx_dnn_tensor, void* y);
  rlx_dnn_status (*forward_fused)(rlx_dnn_handle, const void* alpha1, rlx_dnn_tensor,
                                  const void* x, rlx_dnn_filter, const void* w, rlx_dnn_conv,
                                  int algo, void* ws, size_t ws_bytes, const void* alpha2,
                                  rlx_dnn_tensor z_desc, const void* z, rlx_dnn_tensor bias_desc,
                                  const void* bias, rlx_dnn_act, rlx_dnn_tensor, void* y);
  rlx_dnn_status (*backward_data)(rlx_dnn_handle, const void* alpha, rlx_dnn_filter,
                                  const void* w, rlx_dnn_tensor, const void* dy, rlx_dnn_conv,
                                  int algo, void* ws, size_t ws_bytes, const void* beta,
                                  rlx_dnn_tensor, void* dx);
  /* backward filter (the weight gradient): loaded when present; without
   * them ConvBackwardWeight is decomposed */
  rlx_dnn_status (*find_bwd_filter)(rlx_dnn_handle, rlx_dnn_tensor x, rlx_dnn_tensor dy,
                                    rlx_dnn_conv, rlx_dnn_filter dw, int want, int* got,
                                    rlx_dnn_algo_perf*);
  rlx_dnn_status (*heur_bwd_filter)(rlx_dnn_handle, rlx_dnn_tensor x, rlx_dnn_tensor dy,
                                    rlx_dnn_conv, rlx_dnn_filter dw, int want, int* got,
                                    rlx_dnn_algo_perf*);
  rlx_dnn_status (*bwd_filter_ws)(rlx_dnn_handle, rlx_dnn_tensor x, rlx_dnn_tensor dy,
                                  rlx_dnn_conv, rlx_dnn_filter dw, int algo, size_t*);
  rlx_dnn_status (*backward_filter)(rlx_dnn_handle, const void* alpha, rlx_dnn_tensor,
                                    const void* x, rlx_dnn_tensor, const void* dy, rlx_dnn_conv,
                                    int algo, void* ws, size_t ws_bytes, const void* beta,
                                    rlx_dnn_filter, void* dw);
  rlx_dnn_status (*transform)(rlx_dnn_handle, const void* alpha, rlx_dnn_tensor, const void* x,
                              const void* beta, rlx_dnn_tensor, void* y);
  rlx_dnn_status (*add_tensor)(rlx_dnn_handle, const void* alpha, rlx_dnn_tensor, const void* a,
                               const void* beta, rlx_dnn_tensor, void* c);
} rlx_dnn_api;

#endif
