/* The names of the op families' members (Binary, Compare, Activation,
 * Reduce), once: the text format prints and parses them, rlx_op_name
 * reports them, and the shader-constant generator derives the GLSL/WGSL
 * constants from them (RLX_ACT_<NAME>, ...). Indexed by the public enums of
 * include/rlx.h; the order is the enums' order. */
#ifndef RLX_IR_NAMES_H
#define RLX_IR_NAMES_H

#include "rlx.h"

static const char* const rlx_binary_names[RLX_BIN_COUNT] = {"add", "sub", "mul", "div",
                                                            "max", "min", "pow"};
static const char* const rlx_compare_names[RLX_CMP_COUNT] = {"eq", "ne", "lt", "le", "gt", "ge"};
static const char* const rlx_activation_names[RLX_ACT_COUNT] = {
    "none", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg",
    "abs",  "gelu", "gelu_approx", "silu", "round", "sin", "cos", "tan", "atan"};
static const char* const rlx_reduce_names[RLX_RED_COUNT] = {"reduce_sum", "reduce_mean",
                                                            "reduce_max", "reduce_min",
                                                            "reduce_prod"};

#endif
