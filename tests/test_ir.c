/* IR core: builders, shape rules and their errors, symbols, specialize, clone. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ir/graph.h"

/* Checks t has the given dtype and shape. */
static int type_is(rlx_graph* g, rlx_tensor t, rlx_dtype dt, int32_t rank, const rlx_dim* shape) {
  rlx_dtype d;
  int32_t r;
  rlx_dim s[RLX_MAX_RANK];
  if (rlx_graph_tensor_type(g, t, &d, &r, s) != RLX_OK) return 0;
  if (d != dt || r != rank) return 0;
  for (int32_t i = 0; i < rank; i++)
    if (s[i] != shape[i]) return 0;
  return 1;
}
#define SHAPE(...) ((const rlx_dim[]){__VA_ARGS__})
#define IS(g, t, dt, rank, ...) type_is(g, t, dt, rank, SHAPE(__VA_ARGS__))
#define IS0(g, t, dt) type_is(g, t, dt, 0, NULL)

/* A failed add: INVALID_ARGUMENT, nothing appended, message names op and
 * node id and contains `what`. */
#define CHECK_FAILS(g, expr, op_text, what)                                              \
  do {                                                                                   \
    int32_t n0_ = rlx_graph_node_count(g);                                               \
    int32_t v0_ = (g)->n_values;                                                         \
    rlx_status st_ = (expr);                                                             \
    const char* m_ = rlx_graph_last_error(g);                                            \
    char id_[32];                                                                        \
    snprintf(id_, sizeof id_, "%%%d", (int)n0_);                                         \
    CHECK_MSG(st_ == RLX_INVALID_ARGUMENT, "status %d for %s", (int)st_, #expr);         \
    CHECK_MSG(strstr(m_, op_text) && strstr(m_, id_) && strstr(m_, what),                \
              "message '%s' lacks '%s' / '%s' / '%s'", m_, op_text, id_, what);          \
    CHECK(rlx_graph_node_count(g) == n0_ && (g)->n_values == v0_);                       \
  } while (0)

static rlx_tensor in_f32(rlx_graph* g, const char* name, int32_t rank, const rlx_dim* shape) {
  rlx_tensor t = RLX_NONE;
  if (rlx_graph_add_input(g, name, RLX_F32, shape, rank, &t) != RLX_OK) return RLX_NONE;
  return t;
}
static rlx_tensor in_t(rlx_graph* g, const char* name, rlx_dtype dt, int32_t rank,
                       const rlx_dim* shape) {
  rlx_tensor t = RLX_NONE;
  if (rlx_graph_add_input(g, name, dt, shape, rank, &t) != RLX_OK) return RLX_NONE;
  return t;
}

/* ------------------------------------------------------------------ leaves */

TEST(leaves) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x, w, c, s;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, SHAPE(4, 8), 2, &x));
  CHECK_OK_G(g, rlx_graph_add_param(g, "w", RLX_BF16, SHAPE(8, 16), 2, &w));
  float data[6];
  test_fill_f32(data, 6, -1, 1);
  CHECK_OK_G(g, rlx_graph_add_constant(g, RLX_F32, SHAPE(2, 3), 2, data, sizeof data, &c));
  CHECK_OK_G(g, rlx_graph_add_input(g, "scalar", RLX_I64, NULL, 0, &s));
  CHECK(IS(g, x, RLX_F32, 2, 4, 8) && IS(g, w, RLX_BF16, 2, 8, 16) && IS(g, c, RLX_F32, 2, 2, 3));
  CHECK(IS0(g, s, RLX_I64));
  CHECK(rlx_graph_node_count(g) == 4);
  /* Constant bytes are an owned copy. */
  const rlx_node* cn = rlx_producer(g, c);
  CHECK(cn->a.data != data && cn->a.data_bytes == sizeof data);
  CHECK(memcmp(cn->a.data, data, sizeof data) == 0);
  CHECK(strcmp(rlx_producer(g, x)->a.name, "x") == 0);

  rlx_tensor t;
  CHECK_FAILS(g, rlx_graph_add_input(g, "x", RLX_F32, SHAPE(1), 1, &t), "input", "already used");
  CHECK_FAILS(g, rlx_graph_add_param(g, "w", RLX_F32, SHAPE(1), 1, &t), "param", "'w'");
  CHECK_FAILS(g, rlx_graph_add_param(g, "x", RLX_F32, SHAPE(1), 1, &t), "param", "'x'");
  CHECK_FAILS(g, rlx_graph_add_input(g, "", RLX_F32, SHAPE(1), 1, &t), "input", "name");
  CHECK_FAILS(g, rlx_graph_add_input(g, NULL, RLX_F32, SHAPE(1), 1, &t), "input", "name");
  CHECK_FAILS(g, rlx_graph_add_input(g, "y", RLX_F32, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1), 9, &t),
              "input", "rank");
  CHECK_FAILS(g, rlx_graph_add_input(g, "y", (rlx_dtype)99, SHAPE(1), 1, &t), "input", "dtype");
  CHECK_FAILS(g, rlx_graph_add_input(g, "y", RLX_F32, SHAPE(-5), 1, &t), "input", "symbol");
  CHECK_FAILS(g, rlx_graph_add_input(g, "y", RLX_F32, SHAPE(1 << 30, 1 << 30, 1 << 30), 3, &t),
              "input", "too many");
  CHECK_FAILS(g, rlx_graph_add_constant(g, RLX_F32, SHAPE(2, 3), 2, data, 20, &t), "constant",
              "24");
  CHECK_FAILS(g, rlx_graph_add_constant(g, RLX_F32, SHAPE(2, 3), 2, NULL, 24, &t), "constant",
              "NULL");
  rlx_dim b;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &b));
  CHECK_FAILS(g, rlx_graph_add_constant(g, RLX_F32, SHAPE(b, 3), 2, data, 24, &t), "constant",
              "static");
  /* Still usable: the same name now works under a fresh id. */
  CHECK_OK_G(g, rlx_graph_add_input(g, "y", RLX_F16, SHAPE(b, 3), 2, &t));
  CHECK(t == 4 && IS(g, t, RLX_F16, 2, b, 3));
  CHECK(rlx_graph_tensor_type(g, 99, NULL, NULL, NULL) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
  rlx_graph_destroy(NULL);
}

TEST(names_and_strings) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  CHECK(strcmp(rlx_graph_last_error(g), "") == 0);
  rlx_dim b, s, b2;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &b));
  CHECK_OK_G(g, rlx_graph_symbol(g, "seq", &s));
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &b2));
  CHECK(b == -1 && s == -2 && b2 == b && g->n_symbols == 2);
  CHECK(rlx_graph_symbol(g, "1abc", &b2) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_symbol(g, "a b", &b2) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_symbol(g, "", &b2) == RLX_INVALID_ARGUMENT);
  rlx_tensor x = in_f32(g, "x", 3, SHAPE(2, b, 16)), y;
  CHECK(x != RLX_NONE);
  char buf[128];
  CHECK(strcmp(rlx_type_str(g, rlx_tensor_type(g, x), buf, sizeof buf), "f32[2,batch,16]") == 0);
  rlx_type scalar = {RLX_BOOL, 0, {0}};
  CHECK(strcmp(rlx_type_str(g, &scalar, buf, sizeof buf), "bool[]") == 0);
  char tiny[6];
  rlx_type_str(g, rlx_tensor_type(g, x), tiny, sizeof tiny);
  CHECK(strlen(tiny) == 5); /* truncated, terminated */
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, x, &y));
  CHECK(strcmp(rlx_node_str(g, 1, buf, sizeof buf), "%1 (relu)") == 0);
  CHECK_OK_G(g, rlx_graph_set_name(g, y, "act1"));
  CHECK(strcmp(rlx_node_str(g, 1, buf, sizeof buf), "%1 (relu 'act1')") == 0);
  CHECK(strcmp(rlx_node_str(g, 0, buf, sizeof buf), "%0 (input)") == 0);
  CHECK(rlx_graph_set_name(g, 7, "nope") == RLX_INVALID_ARGUMENT);
  CHECK(strcmp(rlx_op_name(RLX_OP_REDUCE, RLX_RED_PROD), "reduce_prod") == 0);
  CHECK(strcmp(rlx_op_name(RLX_OP_COMPARE, RLX_CMP_GE), "ge") == 0);
  CHECK(strcmp(rlx_op_name(RLX_OP_ACTIVATION, RLX_ACT_GELU_APPROX), "gelu_approx") == 0);
  CHECK(strcmp(rlx_op_name(RLX_OP_BINARY, RLX_BIN_POW), "pow") == 0);
  CHECK(strcmp(rlx_op_name(RLX_OP_MATMUL, 0), "matmul") == 0);
  CHECK(strcmp(rlx_op_table[RLX_OP_FUSED_RESIDUAL_RMS_NORM].text, "fused_residual_rms_norm") == 0);
  CHECK(rlx_op_table[RLX_OP_TOPK].n_outputs == 2 && rlx_op_table[RLX_OP_CONCAT].max_inputs == 64);

  rlx_tensor outs[2] = {y, x};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  CHECK(g->n_outputs == 2 && g->outputs[0] == y && g->outputs[1] == x);
  outs[1] = 42;
  CHECK(rlx_graph_set_outputs(g, outs, 2) == RLX_INVALID_ARGUMENT);
  CHECK(g->n_outputs == 2 && g->outputs[1] == x); /* unchanged after the error */
  CHECK(strstr(rlx_graph_last_error(g), "42"));

  rlx_type t = {RLX_F16, 3, {2, 3, 5}};
  CHECK(rlx_type_numel(&t) == 30 && rlx_type_bytes(&t) == 60);
  t.shape[1] = b;
  CHECK(rlx_type_numel(&t) == -1 && rlx_type_bytes(&t) == -1);
  CHECK(rlx_dtype_is_float(RLX_BF16) && !rlx_dtype_is_float(RLX_I32));
  CHECK(rlx_dtype_is_int(RLX_U8) && !rlx_dtype_is_int(RLX_BOOL) && !rlx_dtype_is_int(RLX_F64));
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ elementwise */

/* Reference NumPy broadcast over static dims; 0 if incompatible. */
static int ref_broadcast(const rlx_dim* a, int ra, const rlx_dim* b, int rb, rlx_dim* o, int* ro) {
  *ro = ra > rb ? ra : rb;
  for (int i = 1; i <= *ro; i++) {
    rlx_dim da = i <= ra ? a[ra - i] : 1, db = i <= rb ? b[rb - i] : 1;
    if (da != db && da != 1 && db != 1) return 0;
    o[*ro - i] = da == 1 ? db : da;
  }
  return 1;
}

TEST(broadcast_random) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  test_seed(7);
  int ok_count = 0, err_count = 0;
  for (int it = 0; it < 300; it++) {
    rlx_dim a[4], b[4], o[4];
    int ra = (int)test_rand_int(0, 4), rb = (int)test_rand_int(0, 4), ro;
    for (int i = 0; i < ra; i++) a[i] = test_rand_int(1, 3);
    for (int i = 0; i < rb; i++) b[i] = test_rand_int(1, 3);
    char na[16], nb[16];
    snprintf(na, sizeof na, "a%d", it);
    snprintf(nb, sizeof nb, "b%d", it);
    rlx_tensor ta = in_f32(g, na, ra, a), tb = in_f32(g, nb, rb, b), t;
    CHECK(ta != RLX_NONE && tb != RLX_NONE);
    rlx_binary_op op = (rlx_binary_op)test_rand_int(0, RLX_BIN_COUNT - 1);
    int want = ref_broadcast(a, ra, b, rb, o, &ro);
    rlx_status st = rlx_graph_add_binary(g, op, ta, tb, &t);
    CHECK_MSG((st == RLX_OK) == want, "it %d: %s", it, rlx_graph_last_error(g));
    if (want) {
      CHECK(type_is(g, t, RLX_F32, ro, o));
      ok_count++;
    } else {
      CHECK(strstr(rlx_graph_last_error(g), rlx_op_name(RLX_OP_BINARY, op)));
      CHECK(strstr(rlx_graph_last_error(g), "broadcast"));
      err_count++;
    }
  }
  CHECK(ok_count > 50 && err_count > 20);
  rlx_graph_destroy(g);
}

TEST(elementwise) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor a = in_f32(g, "a", 3, SHAPE(4, 1, 3)), b = in_f32(g, "b", 2, SHAPE(5, 1));
  rlx_tensor i = in_t(g, "i", RLX_I32, 1, SHAPE(3)), m = in_t(g, "m", RLX_BOOL, 2, SHAPE(5, 3));
  rlx_tensor h = in_t(g, "h", RLX_F16, 1, SHAPE(3)), t;
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &t));
  CHECK(IS(g, t, RLX_F32, 3, 4, 5, 3));
  CHECK_OK_G(g, rlx_graph_add_compare(g, RLX_CMP_LT, b, a, &t));
  CHECK(IS(g, t, RLX_BOOL, 3, 4, 5, 3));
  CHECK_OK_G(g, rlx_graph_add_where(g, m, a, b, &t));
  CHECK(IS(g, t, RLX_F32, 3, 4, 5, 3));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MAX, m, m, &t));
  CHECK(IS(g, t, RLX_BOOL, 2, 5, 3));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_NEG, i, &t));
  CHECK(IS(g, t, RLX_I32, 1, 3));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_GELU, h, &t));
  CHECK(IS(g, t, RLX_F16, 1, 3));
  for (int k = RLX_ACT_RELU; k < RLX_ACT_COUNT; k++)
    CHECK_OK_G(g, rlx_graph_add_activation(g, (rlx_activation)k, a, &t));

  CHECK_FAILS(g, rlx_graph_add_binary(g, RLX_BIN_MUL, a, i, &t), "mul", "dtypes differ");
  CHECK_FAILS(g, rlx_graph_add_binary(g, RLX_BIN_SUB, a, h, &t), "sub", "f16[3]");
  CHECK_FAILS(g, rlx_graph_add_binary(g, RLX_BIN_ADD, m, m, &t), "add", "bool");
  CHECK_FAILS(g, rlx_graph_add_binary(g, (rlx_binary_op)7, a, a, &t), "binary", "kind");
  CHECK_FAILS(g, rlx_graph_add_binary(g, RLX_BIN_DIV, a, 1000, &t), "div", "does not exist");
  CHECK_FAILS(g, rlx_graph_add_binary(g, RLX_BIN_DIV, a, RLX_NONE, &t), "div", "required");
  CHECK_FAILS(g, rlx_graph_add_compare(g, RLX_CMP_EQ, a, i, &t), "eq", "dtypes");
  CHECK_FAILS(g, rlx_graph_add_compare(g, (rlx_compare_op)-1, a, a, &t), "compare", "kind");
  CHECK_FAILS(g, rlx_graph_add_where(g, a, a, b, &t), "where", "bool");
  CHECK_FAILS(g, rlx_graph_add_where(g, m, a, i, &t), "where", "dtypes");
  rlx_tensor m2 = in_t(g, "m2", RLX_BOOL, 1, SHAPE(4));
  CHECK_FAILS(g, rlx_graph_add_where(g, m2, a, b, &t), "where", "broadcast");
  CHECK_FAILS(g, rlx_graph_add_activation(g, RLX_ACT_EXP, i, &t), "exp", "float");
  CHECK_FAILS(g, rlx_graph_add_activation(g, RLX_ACT_RELU, m, &t), "relu", "integer");
  CHECK_FAILS(g, rlx_graph_add_activation(g, RLX_ACT_NONE, a, &t), "none", "range");
  CHECK_FAILS(g, rlx_graph_add_activation(g, RLX_ACT_COUNT, a, &t), "activation", "range");
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ matmul */

TEST(matmul) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor a = in_f32(g, "a", 4, SHAPE(2, 1, 4, 8)), b = in_f32(g, "b", 3, SHAPE(3, 8, 16));
  rlx_tensor at = in_f32(g, "at", 2, SHAPE(8, 4)), bt = in_f32(g, "bt", 2, SHAPE(16, 8));
  rlx_tensor bias = in_f32(g, "bias", 1, SHAPE(16)), bad = in_f32(g, "bad", 1, SHAPE(4));
  rlx_tensor ai = in_t(g, "ai", RLX_I32, 2, SHAPE(4, 8)), bi = in_t(g, "bi", RLX_I32, 2, SHAPE(8, 4));
  rlx_tensor v = in_f32(g, "v", 1, SHAPE(8)), t;
  CHECK_OK_G(g, rlx_graph_add_matmul(g, a, b, 0, 0, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 3, 4, 16));
  CHECK_OK_G(g, rlx_graph_add_matmul(g, at, bt, 1, 1, &t));
  CHECK(IS(g, t, RLX_F32, 2, 4, 16));
  CHECK_OK_G(g, rlx_graph_add_matmul(g, at, b, 7, 0, &t)); /* flags normalise to 1 */
  CHECK(IS(g, t, RLX_F32, 3, 3, 4, 16) && rlx_producer(g, t)->a.transpose_a == 1);
  CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, a, bt, bias, 0, 1, RLX_ACT_GELU, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 1, 4, 16));
  CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, a, b, RLX_NONE, 0, 0, RLX_ACT_NONE, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 3, 4, 16));
  CHECK(rlx_producer(g, t)->in[2] == RLX_NONE && rlx_producer(g, t)->n_in == 3);

  CHECK_FAILS(g, rlx_graph_add_matmul(g, a, bt, 0, 0, &t), "matmul", "inner dims differ");
  CHECK_FAILS(g, rlx_graph_add_matmul(g, a, bt, 0, 0, &t), "matmul", "f32[2,1,4,8]");
  CHECK_FAILS(g, rlx_graph_add_matmul(g, a, b, 0, 1, &t), "matmul", "transposes");
  CHECK_FAILS(g, rlx_graph_add_matmul(g, v, b, 0, 0, &t), "matmul", "rank >= 2");
  CHECK_FAILS(g, rlx_graph_add_matmul(g, ai, bi, 0, 0, &t), "matmul", "float");
  CHECK_FAILS(g, rlx_graph_add_matmul(g, ai, b, 0, 0, &t), "matmul", "float");
  rlx_tensor c = in_f32(g, "c", 4, SHAPE(3, 4, 8, 16));
  CHECK_FAILS(g, rlx_graph_add_matmul(g, a, c, 0, 0, &t), "matmul", "batch dims");
  CHECK_FAILS(g, rlx_graph_add_fused_matmul_bias_act(g, a, b, bad, 0, 0, RLX_ACT_RELU, &t),
              "fused_matmul_bias_act", "bias");
  CHECK_FAILS(g, rlx_graph_add_fused_matmul_bias_act(g, a, b, bias, 0, 0, RLX_ACT_COUNT, &t),
              "fused_matmul_bias_act", "activation");
  CHECK_FAILS(g, rlx_graph_add_fused_matmul_bias_act(g, RLX_NONE, b, bias, 0, 0, RLX_ACT_NONE, &t),
              "fused_matmul_bias_act", "input 0");
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ layout */

TEST(layout) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x = in_f32(g, "x", 3, SHAPE(2, 3, 4)), y = in_f32(g, "y", 3, SHAPE(2, 5, 4));
  rlx_tensor z = in_t(g, "z", RLX_F16, 3, SHAPE(2, 5, 4)), one = in_f32(g, "one", 2, SHAPE(3, 1));
  rlx_tensor idx = in_t(g, "idx", RLX_I64, 2, SHAPE(6, 7)), t;
  rlx_tensor fidx = in_f32(g, "fidx", 1, SHAPE(2));

  CHECK_OK_G(g, rlx_graph_add_transpose(g, x, (const int32_t[]){2, 0, 1}, 3, &t));
  CHECK(IS(g, t, RLX_F32, 3, 4, 2, 3));
  CHECK_FAILS(g, rlx_graph_add_transpose(g, x, (const int32_t[]){2, 0, 2}, 3, &t), "transpose",
              "permutation");
  CHECK_FAILS(g, rlx_graph_add_transpose(g, x, (const int32_t[]){1, 0}, 2, &t), "transpose",
              "rank-3");

  CHECK_OK_G(g, rlx_graph_add_narrow(g, x, -1, 1, 2, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 2) && rlx_producer(g, t)->a.axis == 2);
  CHECK_OK_G(g, rlx_graph_add_narrow(g, x, 1, 3, 0, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 0, 4));
  CHECK_FAILS(g, rlx_graph_add_narrow(g, x, 1, 2, 2, &t), "narrow", "outside");
  CHECK_FAILS(g, rlx_graph_add_narrow(g, x, 3, 0, 1, &t), "narrow", "axis 3");
  CHECK_FAILS(g, rlx_graph_add_narrow(g, x, 0, -1, 1, &t), "narrow", ">= 0");

  rlx_tensor cat[3] = {x, y, x};
  CHECK_OK_G(g, rlx_graph_add_concat(g, cat, 3, -2, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 11, 4));
  CHECK_OK_G(g, rlx_graph_add_concat(g, cat, 1, 0, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 4));
  CHECK_FAILS(g, rlx_graph_add_concat(g, cat, 2, 0, &t), "concat", "must match");
  rlx_tensor cat2[2] = {y, z};
  CHECK_FAILS(g, rlx_graph_add_concat(g, cat2, 2, 1, &t), "concat", "f16");
  CHECK_FAILS(g, rlx_graph_add_concat(g, cat2, 0, 1, &t), "concat", "inputs");
  CHECK_FAILS(g, rlx_graph_add_concat(g, cat2, 65, 1, &t), "concat", "inputs");

  CHECK_OK_G(g, rlx_graph_add_expand(g, one, SHAPE(2, 3, 5), 3, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 5));
  CHECK_FAILS(g, rlx_graph_add_expand(g, one, SHAPE(2, 4, 5), 3, &t), "expand", "neither");
  CHECK_FAILS(g, rlx_graph_add_expand(g, x, SHAPE(3, 4), 2, &t), "expand", "cannot expand");

  CHECK_OK_G(g, rlx_graph_add_reverse(g, x, (const int32_t[]){-1, 0}, 2, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 4) && rlx_producer(g, t)->a.axes == 5u);
  CHECK_FAILS(g, rlx_graph_add_reverse(g, x, (const int32_t[]){2, -1}, 2, &t), "reverse", "twice");
  CHECK_FAILS(g, rlx_graph_add_reverse(g, x, (const int32_t[]){3}, 1, &t), "reverse", "range");

  CHECK_OK_G(g, rlx_graph_add_gather(g, x, idx, 1, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 6, 7, 4));
  CHECK_OK_G(g, rlx_graph_add_gather(g, x, idx, -3, &t));
  CHECK(IS(g, t, RLX_F32, 4, 6, 7, 3, 4));
  CHECK_FAILS(g, rlx_graph_add_gather(g, x, fidx, 0, &t), "gather", "i32 or i64");
  rlx_tensor big = in_t(g, "big", RLX_I32, 7, SHAPE(1, 1, 1, 1, 1, 1, 2));
  CHECK_FAILS(g, rlx_graph_add_gather(g, x, big, 0, &t), "gather", "rank");

  rlx_tensor sidx = in_t(g, "sidx", RLX_I32, 3, SHAPE(2, 7, 3));
  rlx_tensor src = in_f32(g, "src", 3, SHAPE(2, 7, 3)), src16 = in_t(g, "s16", RLX_F16, 3, SHAPE(2, 7, 3));
  CHECK_OK_G(g, rlx_graph_add_scatter_add(g, x, sidx, src, 1, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 4));
  CHECK_FAILS(g, rlx_graph_add_scatter_add(g, x, sidx, src, 2, &t), "scatter_add", "exceed");
  CHECK_FAILS(g, rlx_graph_add_scatter_add(g, x, sidx, src16, 1, &t), "scatter_add", "src");
  CHECK_FAILS(g, rlx_graph_add_scatter_add(g, x, idx, src, 1, &t), "scatter_add", "rank");

  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(6, RLX_DIM_INFER), 2, &t));
  CHECK(IS(g, t, RLX_F32, 2, 6, 4));
  CHECK(rlx_producer(g, t)->a.type.shape[1] == 4);
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(24), 1, &t));
  CHECK(IS(g, t, RLX_F32, 1, 24));
  CHECK_FAILS(g, rlx_graph_add_reshape(g, x, SHAPE(5, 5), 2, &t), "reshape", "element counts");
  CHECK_FAILS(g, rlx_graph_add_reshape(g, x, SHAPE(5, RLX_DIM_INFER), 2, &t), "reshape", "infer");
  CHECK_FAILS(g, rlx_graph_add_reshape(g, x, SHAPE(RLX_DIM_INFER, RLX_DIM_INFER), 2, &t),
              "reshape", "more than one");

  CHECK_OK_G(g, rlx_graph_add_cast(g, x, RLX_BF16, &t));
  CHECK(IS(g, t, RLX_BF16, 3, 2, 3, 4));
  CHECK_FAILS(g, rlx_graph_add_cast(g, x, RLX_DTYPE_COUNT, &t), "cast", "dtype");
  CHECK_OK_G(g, rlx_graph_add_stop_gradient(g, z, &t));
  CHECK(IS(g, t, RLX_F16, 3, 2, 5, 4));
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ reductions */

TEST(reductions) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x = in_f32(g, "x", 3, SHAPE(2, 3, 4)), i = in_t(g, "i", RLX_I32, 2, SHAPE(3, 4));
  rlx_tensor m = in_t(g, "m", RLX_BOOL, 1, SHAPE(4)), t, t2;
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_SUM, x, NULL, 0, 0, &t));
  CHECK(IS0(g, t, RLX_F32) && rlx_producer(g, t)->a.axes == 7u);
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_MEAN, x, NULL, 0, 1, &t));
  CHECK(IS(g, t, RLX_F32, 3, 1, 1, 1));
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_MAX, x, (const int32_t[]){-1, 0}, 2, 0, &t));
  CHECK(IS(g, t, RLX_F32, 1, 3));
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_PROD, i, (const int32_t[]){1}, 1, 1, &t));
  CHECK(IS(g, t, RLX_I32, 2, 3, 1));
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_MIN, m, NULL, 0, 0, &t));
  CHECK(IS0(g, t, RLX_BOOL));
  CHECK_FAILS(g, rlx_graph_add_reduce(g, RLX_RED_SUM, x, (const int32_t[]){1, -2}, 2, 0, &t),
              "reduce_sum", "twice");
  CHECK_FAILS(g, rlx_graph_add_reduce(g, RLX_RED_MEAN, i, NULL, 0, 0, &t), "reduce_mean", "float");
  CHECK_FAILS(g, rlx_graph_add_reduce(g, RLX_RED_SUM, m, NULL, 0, 0, &t), "reduce_sum", "bool");
  CHECK_FAILS(g, rlx_graph_add_reduce(g, RLX_RED_COUNT, x, NULL, 0, 0, &t), "reduce", "kind");

  CHECK_OK_G(g, rlx_graph_add_argmax(g, x, 1, 0, &t));
  CHECK(IS(g, t, RLX_I64, 2, 2, 4));
  CHECK_OK_G(g, rlx_graph_add_argmin(g, x, -1, 1, &t));
  CHECK(IS(g, t, RLX_I64, 3, 2, 3, 1) && rlx_producer(g, t)->a.axis == 2);
  CHECK_FAILS(g, rlx_graph_add_argmax(g, x, 3, 0, &t), "argmax", "axis 3");

  CHECK_OK_G(g, rlx_graph_add_softmax(g, x, -1, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 4) && rlx_producer(g, t)->a.axis == 2);
  CHECK_OK_G(g, rlx_graph_add_log_softmax(g, x, 0, &t));
  CHECK_FAILS(g, rlx_graph_add_softmax(g, i, 0, &t), "softmax", "float");
  CHECK_FAILS(g, rlx_graph_add_log_softmax(g, x, -4, &t), "log_softmax", "axis -4");

  CHECK_OK_G(g, rlx_graph_add_cumsum(g, i, 1, 1, 5, &t));
  CHECK(IS(g, t, RLX_I32, 2, 3, 4) && rlx_producer(g, t)->a.reverse == 1);
  CHECK_FAILS(g, rlx_graph_add_cumsum(g, m, 0, 0, 0, &t), "cumsum", "bool");

  CHECK_OK_G(g, rlx_graph_add_topk(g, x, 3, 1, 1, &t, &t2));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 4) && IS(g, t2, RLX_I64, 3, 2, 3, 4) && t2 == t + 1);
  CHECK(rlx_producer(g, t) == rlx_producer(g, t2) && g->values[t2].index == 1);
  CHECK_OK_G(g, rlx_graph_add_topk(g, x, 1, -1, 0, &t, &t2));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 1));
  CHECK_FAILS(g, rlx_graph_add_topk(g, x, 4, 1, 1, &t, &t2), "topk", "k = 4");
  CHECK_FAILS(g, rlx_graph_add_topk(g, x, 0, 1, 1, &t, &t2), "topk", "k = 0");
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ norms */

TEST(norms) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x = in_f32(g, "x", 3, SHAPE(2, 3, 8)), r = in_f32(g, "r", 3, SHAPE(2, 3, 8));
  rlx_tensor g8 = in_f32(g, "g8", 1, SHAPE(8)), g38 = in_f32(g, "g38", 2, SHAPE(3, 8));
  rlx_tensor g4 = in_f32(g, "g4", 1, SHAPE(4)), h8 = in_t(g, "h8", RLX_F16, 1, SHAPE(8));
  rlx_tensor xi = in_t(g, "xi", RLX_I32, 2, SHAPE(2, 8)), t, s;
  CHECK_OK_G(g, rlx_graph_add_layer_norm(g, x, g8, g8, -1, 1e-5f, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 8) && rlx_producer(g, t)->a.axis == 2);
  CHECK_OK_G(g, rlx_graph_add_layer_norm(g, x, g38, RLX_NONE, 1, 0, &t));
  CHECK_OK_G(g, rlx_graph_add_layer_norm(g, x, RLX_NONE, RLX_NONE, 0, 1e-6f, &t));
  CHECK_FAILS(g, rlx_graph_add_layer_norm(g, x, g8, g8, 1, 1e-5f, &t), "layer_norm", "gamma");
  CHECK_FAILS(g, rlx_graph_add_layer_norm(g, x, g8, g4, -1, 1e-5f, &t), "layer_norm", "beta");
  CHECK_FAILS(g, rlx_graph_add_layer_norm(g, x, g8, g8, -1, -1.0f, &t), "layer_norm", "eps");
  CHECK_FAILS(g, rlx_graph_add_layer_norm(g, x, g8, g8, -1, NAN, &t), "layer_norm", "eps");
  CHECK_FAILS(g, rlx_graph_add_layer_norm(g, xi, RLX_NONE, RLX_NONE, -1, 0, &t), "layer_norm",
              "float");
  CHECK_FAILS(g, rlx_graph_add_layer_norm(g, RLX_NONE, g8, g8, -1, 0, &t), "layer_norm", "input 0");

  CHECK_OK_G(g, rlx_graph_add_rms_norm(g, x, g8, 1e-6f, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 8));
  CHECK_OK_G(g, rlx_graph_add_rms_norm(g, x, RLX_NONE, 1e-6f, &t));
  CHECK_FAILS(g, rlx_graph_add_rms_norm(g, x, g4, 1e-6f, &t), "rms_norm", "gamma");
  CHECK_FAILS(g, rlx_graph_add_rms_norm(g, x, h8, 1e-6f, &t), "rms_norm", "f16[8]");

  CHECK_OK_G(g, rlx_graph_add_fused_residual_layer_norm(g, x, r, g8, g8, g8, 1e-5f, &t, &s));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 8) && IS(g, s, RLX_F32, 3, 2, 3, 8) && s == t + 1);
  CHECK_OK_G(g, rlx_graph_add_fused_residual_layer_norm(g, x, r, RLX_NONE, RLX_NONE, RLX_NONE,
                                                        1e-5f, &t, &s));
  CHECK_OK_G(g, rlx_graph_add_fused_residual_rms_norm(g, x, r, RLX_NONE, g8, 1e-5f, &t, &s));
  CHECK(IS(g, s, RLX_F32, 3, 2, 3, 8));
  CHECK_FAILS(g, rlx_graph_add_fused_residual_layer_norm(g, x, g8, g8, g8, g8, 0, &t, &s),
              "fused_residual_layer_norm", "residual");
  CHECK_FAILS(g, rlx_graph_add_fused_residual_layer_norm(g, x, r, g8, g8, g4, 0, &t, &s),
              "fused_residual_layer_norm", "beta");
  CHECK_FAILS(g, rlx_graph_add_fused_residual_rms_norm(g, x, r, g4, g8, 0, &t, &s),
              "fused_residual_rms_norm", "bias");
  CHECK_FAILS(g, rlx_graph_add_fused_residual_rms_norm(g, x, RLX_NONE, g8, g8, 0, &t, &s),
              "fused_residual_rms_norm", "input 1");
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ transformer */

TEST(attention) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  /* BSHD, GQA 8 query heads over 2 kv heads, Dv != D, decode Sq=1 vs Sk=7 */
  rlx_tensor q = in_f32(g, "q", 4, SHAPE(2, 1, 8, 16)), k = in_f32(g, "k", 4, SHAPE(2, 7, 2, 16));
  rlx_tensor v = in_f32(g, "v", 4, SHAPE(2, 7, 2, 32)), t;
  rlx_tensor mask = in_f32(g, "mask", 2, SHAPE(1, 7)), bmask = in_t(g, "bm", RLX_BOOL, 4, SHAPE(2, 1, 1, 7));
  rlx_tensor badm = in_f32(g, "badm", 2, SHAPE(2, 7));
  rlx_attention_desc d = {8, 2, 16, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0};
  CHECK_OK_G(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 1, 8, 32));
  const rlx_node* n = rlx_producer(g, t);
  CHECK(n->a.num_kv_heads == 2 && fabsf(n->a.score_scale - 0.25f) < 1e-7f);
  d.num_kv_heads = 0;
  d.mask = RLX_MASK_NONE;
  d.score_scale = 0.5f;
  rlx_tensor kf = in_f32(g, "kf", 4, SHAPE(2, 7, 8, 16)), vf = in_f32(g, "vf", 4, SHAPE(2, 7, 8, 16));
  CHECK_OK_G(g, rlx_graph_add_attention(g, q, kf, vf, RLX_NONE, &d, &t));
  n = rlx_producer(g, t);
  CHECK(n->a.num_kv_heads == 8 && n->a.score_scale == 0.5f);
  d.num_kv_heads = 2;
  d.mask = RLX_MASK_CUSTOM;
  CHECK_OK_G(g, rlx_graph_add_attention(g, q, k, v, mask, &d, &t));
  CHECK_OK_G(g, rlx_graph_add_attention(g, q, k, v, bmask, &d, &t));
  d.mask = RLX_MASK_BIAS;
  CHECK_OK_G(g, rlx_graph_add_attention(g, q, k, v, mask, &d, &t));
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, bmask, &d, &t), "attention", "mask");
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, badm, &d, &t), "attention", "broadcast");
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "needs a mask");
  d.mask = RLX_MASK_CAUSAL;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, mask, &d, &t), "attention", "no mask");
  d.mask = RLX_MASK_SLIDING;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "window");
  d.window = 4;
  CHECK_OK_G(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t));
  d.num_kv_heads = 3;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "divide");
  d.num_kv_heads = 2;
  d.head_dim = 8;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "heads of dim");
  d.head_dim = 16;
  d.num_kv_heads = 4;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "kv heads");
  d.num_kv_heads = 2;
  d.softcap = -1;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "softcap");
  d.softcap = 30;
  d.layout = RLX_LAYOUT_BHSD; /* q now reads as [B=2, H=1, S=8, D=16] */
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &t), "attention", "bhsd");
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, NULL, &t), "attention", "NULL");
  d.layout = RLX_LAYOUT_BSHD;
  CHECK_FAILS(g, rlx_graph_add_attention(g, q, k, kf, RLX_NONE, &d, &t), "attention", "v ");

  /* BHSD: q [B,H,Sq,D] */
  rlx_tensor q2 = in_t(g, "q2", RLX_BF16, 4, SHAPE(1, 4, 5, 8));
  rlx_tensor k2 = in_t(g, "k2", RLX_BF16, 4, SHAPE(1, 1, 9, 8));
  rlx_tensor v2 = in_t(g, "v2", RLX_BF16, 4, SHAPE(1, 1, 9, 8)), k2f = in_f32(g, "k2f", 4, SHAPE(1, 1, 9, 8));
  rlx_attention_desc d2 = {4, 1, 8, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0};
  CHECK_OK_G(g, rlx_graph_add_attention(g, q2, k2, v2, RLX_NONE, &d2, &t));
  CHECK(IS(g, t, RLX_BF16, 4, 1, 4, 5, 8));
  CHECK_FAILS(g, rlx_graph_add_attention(g, q2, k2f, v2, RLX_NONE, &d2, &t), "attention", "dtype");
  rlx_graph_destroy(g);
}

TEST(rope_and_sample) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x = in_f32(g, "x", 4, SHAPE(2, 5, 4, 16)), xh = in_f32(g, "xh", 4, SHAPE(2, 4, 5, 16));
  rlx_tensor cs = in_f32(g, "cos", 2, SHAPE(5, 4)), sn = in_f32(g, "sin", 2, SHAPE(5, 4));
  rlx_tensor ct = in_f32(g, "cos_tok", 2, SHAPE(10, 4)), st = in_f32(g, "sin_tok", 2, SHAPE(10, 4));
  rlx_tensor c8 = in_f32(g, "c8", 2, SHAPE(5, 8)), s8 = in_f32(g, "s8", 2, SHAPE(5, 8));
  rlx_tensor ch = in_t(g, "ch", RLX_F16, 2, SHAPE(5, 4)), t;
  CHECK_OK_G(g, rlx_graph_add_rope(g, x, cs, sn, 16, 8, RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 5, 4, 16));
  CHECK_OK_G(g, rlx_graph_add_rope(g, xh, ct, st, 16, 8, RLX_ROPE_GPTJ, RLX_LAYOUT_BHSD, &t));
  CHECK_OK_G(g, rlx_graph_add_rope(g, x, c8, s8, 16, 16, RLX_ROPE_GPTJ, RLX_LAYOUT_BSHD, &t));
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, sn, 16, 7, RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &t),
              "rope", "n_rot");
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, sn, 16, 18, RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &t),
              "rope", "n_rot");
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, sn, 8, 8, RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &t),
              "rope", "head_dim");
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, ch, 16, 8, RLX_ROPE_NEOX, RLX_LAYOUT_BSHD, &t),
              "rope", "sin");
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, sn, 16, 8, RLX_ROPE_NEOX, RLX_LAYOUT_BHSD, &t),
              "rope", "rows");
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, sn, 16, 8, (rlx_rope_style)2, RLX_LAYOUT_BSHD, &t),
              "rope", "style");
  CHECK_FAILS(g, rlx_graph_add_rope(g, x, cs, sn, 16, 8, RLX_ROPE_NEOX, (rlx_layout)2, &t),
              "rope", "layout");

  rlx_tensor logits = in_f32(g, "logits", 3, SHAPE(2, 3, 50)), l1 = in_f32(g, "l1", 1, SHAPE(50));
  rlx_tensor li = in_t(g, "li", RLX_I32, 1, SHAPE(50));
  CHECK_OK_G(g, rlx_graph_add_sample(g, logits, 40, 0.9f, 0.7f, &t));
  CHECK(IS(g, t, RLX_I64, 2, 2, 3));
  CHECK_OK_G(g, rlx_graph_add_sample(g, l1, 0, 1.0f, 0.0f, &t));
  CHECK(IS0(g, t, RLX_I64));
  CHECK_FAILS(g, rlx_graph_add_sample(g, l1, 0, 0.0f, 1.0f, &t), "sample", "top_p");
  CHECK_FAILS(g, rlx_graph_add_sample(g, l1, -1, 1.0f, 1.0f, &t), "sample", "top_k");
  CHECK_FAILS(g, rlx_graph_add_sample(g, li, 0, 1.0f, 1.0f, &t), "sample", "float");
  rlx_graph_destroy(g);
}

TEST(conv_shapes) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim n;
  CHECK_OK_G(g, rlx_graph_symbol(g, "n", &n));
  rlx_tensor x = in_f32(g, "x", 4, SHAPE(n, 6, 7, 9)), xl = in_f32(g, "xl", 4, SHAPE(2, 7, 9, 6));
  rlx_tensor w = in_f32(g, "w", 4, SHAPE(8, 3, 3, 2)), b = in_f32(g, "b", 1, SHAPE(8)), t;
  rlx_tensor xi = in_t(g, "xi", RLX_I32, 4, SHAPE(2, 6, 7, 9)), b5 = in_f32(g, "b5", 1, SHAPE(5));
  int64_t st[2] = {2, 1}, pads[4] = {1, 0, 2, 1}, dil[2] = {1, 3}, op[2] = {1, 0};
  /* H: (7 + 1 + 2 - 3) / 2 + 1 = 4; W: (9 + 0 + 1 - 4) / 1 + 1 = 7; 2 groups */
  CHECK_OK_G(g, rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, st, pads, dil, 2, RLX_ACT_RELU,
                                   RLX_CONV_CHANNELS_FIRST, &t));
  CHECK(IS(g, t, RLX_F32, 4, n, 8, 4, 7));
  rlx_tensor res = in_f32(g, "res", 4, SHAPE(n, 8, 4, 7));
  CHECK_OK_G(g, rlx_graph_add_conv(g, x, w, b, res, 2, st, pads, dil, 2, RLX_ACT_NONE,
                                   RLX_CONV_CHANNELS_FIRST, &t));
  CHECK_OK_G(g, rlx_graph_add_conv(g, xl, w, RLX_NONE, RLX_NONE, 2, st, pads, dil, 2, RLX_ACT_NONE,
                                   RLX_CONV_CHANNELS_LAST, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 4, 7, 8));
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL, 1,
                                    RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv", "input channels per group");
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL, 4,
                                    RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv", "groups");
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, b5, RLX_NONE, 2, NULL, NULL, NULL, 2, RLX_ACT_NONE,
                                    RLX_CONV_CHANNELS_FIRST, &t),
              "conv", "bias");
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, RLX_NONE, x, 2, NULL, NULL, NULL, 2, RLX_ACT_NONE,
                                    RLX_CONV_CHANNELS_FIRST, &t),
              "conv", "residual");
  int64_t big_dil[2] = {4, 1};
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, big_dil, 2,
                                    RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv", ">= 1");
  CHECK_FAILS(g, rlx_graph_add_conv(g, xi, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL, 2,
                                    RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv", "float");
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 1, NULL, NULL, NULL, 2,
                                    RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv", "rank 3");
  CHECK_FAILS(g, rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL, 2,
                                    RLX_ACT_NONE, (rlx_conv_layout)7, &t),
              "conv", "layout");
  CHECK(rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 4, NULL, NULL, NULL, 2, RLX_ACT_NONE,
                           RLX_CONV_CHANNELS_FIRST, &t) != RLX_OK);

  /* ConvTranspose: w [C = 6, OC/g = 3, 3, 2], 2 groups -> OC 6;
   * H: (7 - 1) * 2 - 1 - 2 + 2 + 1 + 1 = 13; W: 8 - 0 - 1 + 3 + 0 + 1 = 11 */
  rlx_tensor wt = in_f32(g, "wt", 4, SHAPE(6, 3, 3, 2));
  CHECK_OK_G(g, rlx_graph_add_conv_transpose(g, x, wt, RLX_NONE, RLX_NONE, 2, st, pads, dil, op, 2,
                                             RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t));
  CHECK(IS(g, t, RLX_F32, 4, n, 6, 13, 11));
  int64_t bad_op[2] = {2, 0};
  CHECK_FAILS(g, rlx_graph_add_conv_transpose(g, x, wt, RLX_NONE, RLX_NONE, 2, st, pads, dil,
                                              bad_op, 2, RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv_transpose", "output_padding");
  CHECK_FAILS(g, rlx_graph_add_conv_transpose(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL,
                                              NULL, 1, RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &t),
              "conv_transpose", "C = 6");

  /* Im2Col: K = 3 * 2 taps, L = 4 * 9 positions (W: 9 + 0 + 1 - 2 + 1) */
  int64_t k[2] = {3, 2};
  CHECK_OK_G(g, rlx_graph_add_im2col(g, x, 2, k, st, pads, NULL, RLX_CONV_CHANNELS_FIRST, &t));
  CHECK(IS(g, t, RLX_F32, 3, n, 6 * 6, 4 * 9));
  CHECK_OK_G(g, rlx_graph_add_im2col(g, xl, 2, k, st, pads, NULL, RLX_CONV_CHANNELS_LAST, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 4 * 9, 6 * 6));
  int64_t k0[2] = {0, 1}, k9[2] = {9, 1};
  CHECK_FAILS(g, rlx_graph_add_im2col(g, x, 2, k0, NULL, NULL, NULL, RLX_CONV_CHANNELS_FIRST, &t),
              "im2col", ">= 1");
  CHECK_FAILS(g, rlx_graph_add_im2col(g, x, 2, k9, NULL, NULL, NULL, RLX_CONV_CHANNELS_FIRST, &t),
              "im2col", "does not fit");
  CHECK(rlx_graph_add_im2col(g, x, 2, NULL, NULL, NULL, NULL, RLX_CONV_CHANNELS_FIRST, &t) != RLX_OK);
  rlx_graph_destroy(g);
}

TEST(pool_pad_depth_space_shapes) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim n;
  CHECK_OK_G(g, rlx_graph_symbol(g, "n", &n));
  rlx_tensor x = in_f32(g, "x", 4, SHAPE(n, 3, 7, 6)), x1 = in_f32(g, "x1", 3, SHAPE(2, 3, 10));
  rlx_tensor xi = in_t(g, "xi", RLX_I32, 4, SHAPE(2, 3, 7, 6)), t;
  int64_t k[2] = {3, 2}, st[2] = {2, 1}, pads[4] = {1, 0, 1, 1}, dil[2] = {1, 2};
  CHECK_OK_G(g, rlx_graph_add_pool(g, x, RLX_POOL_MAX, 2, k, st, pads, NULL, 0, 0, &t));
  /* H: (7 + 2 - 3) / 2 + 1 = 4; W: (6 + 1 - 2) / 1 + 1 = 6 */
  CHECK(IS(g, t, RLX_F32, 4, n, 3, 4, 6));
  CHECK_OK_G(g, rlx_graph_add_pool(g, x, RLX_POOL_AVG, 2, k, st, pads, dil, 1, 1, &t));
  /* H ceil: (8 / 2) + 1 = 5, the last window starts at 8 >= 7 + 1: dropped -> 4;
   * W: 6 + 1 - 3 = 4 -> 5 */
  CHECK(IS(g, t, RLX_F32, 4, n, 3, 4, 5));
  int64_t k1[1] = {3}, s1[1] = {3};
  CHECK_OK_G(g, rlx_graph_add_pool(g, x1, RLX_POOL_MAX, 1, k1, s1, NULL, NULL, 1, 0, &t));
  CHECK(IS(g, t, RLX_F32, 3, 2, 3, 4));
  int64_t big[2] = {9, 2}, zero[2] = {0, 1}, negpad[4] = {-1, 0, 0, 0};
  CHECK_FAILS(g, rlx_graph_add_pool(g, x, RLX_POOL_MAX, 2, big, NULL, NULL, NULL, 0, 0, &t),
              "pool", "does not fit");
  CHECK_FAILS(g, rlx_graph_add_pool(g, x, RLX_POOL_MAX, 2, zero, NULL, NULL, NULL, 0, 0, &t),
              "pool", ">= 1");
  CHECK_FAILS(g, rlx_graph_add_pool(g, x, RLX_POOL_MAX, 2, k, NULL, negpad, NULL, 0, 0, &t),
              "pool", ">= 0");
  CHECK_FAILS(g, rlx_graph_add_pool(g, xi, RLX_POOL_MAX, 2, k, NULL, NULL, NULL, 0, 0, &t),
              "pool", "float");
  CHECK_FAILS(g, rlx_graph_add_pool(g, x1, RLX_POOL_MAX, 2, k, NULL, NULL, NULL, 0, 0, &t),
              "pool", "spatial");
  CHECK_OK_G(g, rlx_graph_add_pool(g, x, RLX_POOL_ARGMAX, 2, k, st, pads, NULL, 0, 0, &t));
  CHECK(IS(g, t, RLX_I64, 4, n, 3, 4, 6));
  CHECK_FAILS(g, rlx_graph_add_pool(g, x, (rlx_pool_kind)3, 2, k, NULL, NULL, NULL, 0, 0, &t),
              "pool", "kind");
  CHECK(rlx_graph_add_pool(g, x, RLX_POOL_MAX, 4, k, NULL, NULL, NULL, 0, 0, &t) != RLX_OK);

  int64_t p4[8] = {0, 0, -2, 1, 0, 0, 3, 0};
  CHECK_OK_G(g, rlx_graph_add_pad(g, x, RLX_PAD_REFLECT, p4, 0, &t));
  CHECK(IS(g, t, RLX_F32, 4, n, 3, 8, 7));
  CHECK_OK_G(g, rlx_graph_add_pad(g, xi, RLX_PAD_CONSTANT, p4, 3, &t));
  CHECK(IS(g, t, RLX_I32, 4, 2, 3, 8, 7));
  int64_t crop[8] = {0, 0, -5, 0, 0, 0, -3, 0}, on_n[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  CHECK_FAILS(g, rlx_graph_add_pad(g, x, RLX_PAD_CONSTANT, crop, 0, &t), "pad", "crop");
  CHECK_FAILS(g, rlx_graph_add_pad(g, x, RLX_PAD_EDGE, on_n, 0, &t), "pad", "symbolic");
  CHECK_FAILS(g, rlx_graph_add_pad(g, x, (rlx_pad_mode)4, p4, 0, &t), "pad", "mode");

  rlx_tensor xd = in_f32(g, "xd", 4, SHAPE(n, 12, 2, 3));
  CHECK_OK_G(g, rlx_graph_add_depth_to_space(g, xd, 2, RLX_D2S_CRD, &t));
  CHECK(IS(g, t, RLX_F32, 4, n, 3, 4, 6));
  CHECK_OK_G(g, rlx_graph_add_space_to_depth(g, t, 2, &t));
  CHECK(IS(g, t, RLX_F32, 4, n, 12, 2, 3));
  CHECK_FAILS(g, rlx_graph_add_depth_to_space(g, xd, 3, RLX_D2S_DCR, &t), "depth_to_space",
              "block^2");
  CHECK_FAILS(g, rlx_graph_add_space_to_depth(g, xd, 2, &t), "space_to_depth", "multiples");
  CHECK_FAILS(g, rlx_graph_add_depth_to_space(g, xd, 0, RLX_D2S_DCR, &t), "depth_to_space",
              "block");
  CHECK_FAILS(g, rlx_graph_add_depth_to_space(g, x1, 1, RLX_D2S_DCR, &t), "depth_to_space",
              "[N, C, H, W]");
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ dim expressions */

static rlx_dim dexpr(rlx_graph* g, rlx_dim_op op, rlx_dim a, rlx_dim b) {
  rlx_dim d = 0;
  if (rlx_graph_dim_expr(g, op, a, b, &d) != RLX_OK) return INT64_MIN;
  return d;
}

TEST(dim_expressions_intern_and_simplify) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim b, t;
  CHECK_OK_G(g, rlx_graph_symbol(g, "B", &b));
  CHECK_OK_G(g, rlx_graph_symbol(g, "T", &t));
  /* static operands fold */
  CHECK(dexpr(g, RLX_DIM_MUL, 6, 7) == 42 && dexpr(g, RLX_DIM_CEIL_DIV, 7, 2) == 4);
  CHECK(dexpr(g, RLX_DIM_FLOOR_DIV, 7, 2) == 3 && dexpr(g, RLX_DIM_MOD, 7, 3) == 1);
  CHECK(dexpr(g, RLX_DIM_MIN, 7, 3) == 3 && dexpr(g, RLX_DIM_MAX, 7, 3) == 7);
  CHECK(rlx_graph_symbol_count(g) == 2);
  /* identities make no entry */
  CHECK(dexpr(g, RLX_DIM_MUL, b, 1) == b && dexpr(g, RLX_DIM_MUL, 1, b) == b);
  CHECK(dexpr(g, RLX_DIM_ADD, 0, t) == t && dexpr(g, RLX_DIM_SUB, t, 0) == t);
  CHECK(dexpr(g, RLX_DIM_MUL, t, 0) == 0 && dexpr(g, RLX_DIM_SUB, t, t) == 0);
  CHECK(dexpr(g, RLX_DIM_FLOOR_DIV, t, 1) == t && dexpr(g, RLX_DIM_MAX, t, t) == t);
  CHECK(dexpr(g, RLX_DIM_MIN, t, 0) == 0 && dexpr(g, RLX_DIM_MAX, t, 0) == t);
  CHECK(rlx_graph_symbol_count(g) == 2);
  /* interned, commutative operands ordered */
  rlx_dim bt = dexpr(g, RLX_DIM_MUL, b, t);
  CHECK(bt < 0 && dexpr(g, RLX_DIM_MUL, t, b) == bt && rlx_graph_symbol_count(g) == 3);
  rlx_dim t12 = dexpr(g, RLX_DIM_MUL, 12, t);
  CHECK(t12 == dexpr(g, RLX_DIM_MUL, t, 12));
  /* (x*c)/c = x, (x*c)%c = 0, (x+c)-c = x */
  CHECK(dexpr(g, RLX_DIM_FLOOR_DIV, t12, 12) == t && dexpr(g, RLX_DIM_CEIL_DIV, bt, t) == b);
  CHECK(dexpr(g, RLX_DIM_MOD, t12, 12) == 0);
  CHECK(dexpr(g, RLX_DIM_SUB, dexpr(g, RLX_DIM_ADD, t, 5), 5) == t);
  /* names */
  const char* name = NULL;
  CHECK(rlx_graph_symbol_name(g, bt, &name) == RLX_OK && strcmp(name, "B*T") == 0);
  rlx_dim tm1 = dexpr(g, RLX_DIM_SUB, t, 1);
  CHECK(rlx_graph_symbol_name(g, dexpr(g, RLX_DIM_MUL, tm1, b), &name) == RLX_OK);
  CHECK(strcmp(name, "B*(T-1)") == 0);
  CHECK(rlx_graph_symbol_name(g, dexpr(g, RLX_DIM_SUB, b, tm1), &name) == RLX_OK);
  CHECK(strcmp(name, "B-(T-1)") == 0);
  /* a leaf by name finds the leaf, never an expression */
  rlx_dim again;
  CHECK_OK_G(g, rlx_graph_symbol(g, "T", &again));
  CHECK(again == t);
  /* errors */
  rlx_dim d;
  CHECK(rlx_graph_dim_expr(g, RLX_DIM_SUB, 2, 5, &d) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "negative"));
  CHECK(rlx_graph_dim_expr(g, RLX_DIM_FLOOR_DIV, 2, 0, &d) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "division by zero"));
  CHECK(rlx_graph_dim_expr(g, (rlx_dim_op)99, b, t, &d) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_dim_expr(g, RLX_DIM_ADD, b, -1000, &d) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "not a size or symbol"));
  /* nesting is bounded, so every walk over an expression is short */
  rlx_dim deep = t;
  int levels = 0;
  while (levels < 1000 && rlx_graph_dim_expr(g, RLX_DIM_ADD, deep, 1, &deep) == RLX_OK) levels++;
  CHECK(levels == 64 && strstr(rlx_graph_last_error(g), "deeper"));
  rlx_graph_destroy(g);
}

/* Specialization evaluates expressions from the leaves; the executable binds
 * leaves from inputs and checks input dims that are expressions. */
TEST(dim_expressions_bind) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim b, t, bt, tm1;
  CHECK_OK_G(g, rlx_graph_symbol(g, "B", &b));
  CHECK_OK_G(g, rlx_graph_symbol(g, "T", &t));
  bt = dexpr(g, RLX_DIM_MUL, b, t);
  tm1 = dexpr(g, RLX_DIM_SUB, t, 1);
  rlx_tensor x = in_f32(g, "x", 2, SHAPE(b, t)), flat = in_f32(g, "flat", 1, SHAPE(bt));
  rlx_tensor y, s, z;
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(bt), 1, &y));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, y, flat, &s)); /* same code: no max */
  CHECK(IS(g, s, RLX_F32, 1, bt));
  CHECK_OK_G(g, rlx_graph_add_narrow(g, x, 1, 1, tm1, &z)); /* x[:, 1:] */
  CHECK(IS(g, z, RLX_F32, 2, b, tm1));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, (rlx_tensor[]){s, z}, 2));
  int64_t sizes[4] = {2, 3, -1, -1};
  rlx_graph* sp = NULL;
  CHECK_OK_G(g, rlx_graph_specialize(g, sizes, &sp));
  CHECK(IS(sp, s, RLX_F32, 1, 6) && IS(sp, z, RLX_F32, 2, 2, 2));
  CHECK(rlx_producer(sp, z)->a.len == 2);
  rlx_graph_destroy(sp);
  /* T = 0 makes T-1 negative: an error naming the dim */
  int64_t zero_t[4] = {2, 0, -1, -1};
  CHECK(rlx_graph_specialize(g, zero_t, &sp) != RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "T-1"));

  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float xs[6] = {1, 2, 3, 4, 5, 6}, fl[6] = {10, 20, 30, 40, 50, 60}, out[6];
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, (int64_t[]){2, 3}, 2, xs, sizeof xs) == RLX_OK);
  /* flat's dim B*T must be 6 once B and T are bound */
  CHECK(rlx_exec_set_input(e, "flat", RLX_F32, (int64_t[]){5}, 1, fl, 5 * sizeof(float)) == RLX_OK);
  CHECK(rlx_exec_run(e) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_exec_last_error(e), "flat") && strstr(rlx_exec_last_error(e), "B*T"));
  CHECK(rlx_exec_set_input(e, "flat", RLX_F32, (int64_t[]){6}, 1, fl, sizeof fl) == RLX_OK);
  rlx_status rs = rlx_exec_run(e);
  if (rs != RLX_OK) fprintf(stderr, "%s\n", rlx_exec_last_error(e));
  CHECK(rs == RLX_OK);
  CHECK(rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out) == RLX_OK);
  for (int i = 0; i < 6; i++) CHECK(out[i] == xs[i] + fl[i]);
  CHECK(rlx_exec_read_output(e, 1, RLX_F32, out, 4 * sizeof(float)) == RLX_OK);
  CHECK(out[0] == 2 && out[1] == 3 && out[2] == 5 && out[3] == 6);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Pooling over a symbolic spatial dim gives an expression that agrees with
 * the static rule at every size where the window fits. */
TEST(pool_over_symbolic_dim_matches_static_rule) {
  static const int64_t cfg[][6] = {/* k, s, d, pb, pe, ceil */
                                   {2, 2, 1, 0, 0, 0}, {3, 2, 1, 1, 1, 1}, {3, 1, 2, 0, 1, 0},
                                   {2, 3, 1, 0, 0, 1}, {5, 2, 1, 2, 2, 1}, {1, 4, 1, 0, 0, 1}};
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    const int64_t* p = cfg[i];
    rlx_graph* g = NULL;
    CHECK(rlx_graph_create(&g) == RLX_OK);
    rlx_dim h;
    CHECK_OK_G(g, rlx_graph_symbol(g, "H", &h));
    rlx_tensor x = in_f32(g, "x", 3, SHAPE(1, 2, h)), y;
    int64_t pads[2] = {p[3], p[4]};
    CHECK_OK_G(g, rlx_graph_add_pool(g, x, RLX_POOL_MAX, 1, &p[0], &p[1], pads, &p[2], (int32_t)p[5],
                                     0, &y));
    CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
    rlx_dim od = g->values[y].type.shape[2];
    CHECK(od < 0);
    for (int64_t n = 1; n <= 24; n++) {
      int64_t sizes[RLX_DIM_MAX_DEPTH] = {0};
      for (int j = 0; j < RLX_DIM_MAX_DEPTH; j++) sizes[j] = -1;
      sizes[0] = n;
      rlx_graph* sp = NULL;
      if (rlx_graph_specialize(g, sizes, &sp) != RLX_OK) continue; /* the window does not fit */
      rlx_error err;
      CHECK(rlx_graph_symbol_count(g) <= RLX_DIM_MAX_DEPTH);
      CHECK(rlx_graph_eval_dims(g, sizes, &err) == RLX_OK);
      int64_t want = sp->values[y].type.shape[2], got = rlx_dim_value(g, od, sizes);
      rlx_graph_destroy(sp);
      CHECK_MSG(got == want, "config %d, H = %lld: expression %lld, static %lld", (int)i,
                (long long)n, (long long)got, (long long)want);
    }
    rlx_graph_destroy(g);
  }
}

/* A leaf that only an expression input mentions cannot be bound from it. */
TEST(dim_expression_leaf_unbound_is_an_error) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim b, t;
  CHECK_OK_G(g, rlx_graph_symbol(g, "B", &b));
  CHECK_OK_G(g, rlx_graph_symbol(g, "T", &t));
  rlx_tensor x = in_f32(g, "x", 1, SHAPE(dexpr(g, RLX_DIM_MUL, b, t))), y;
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, x, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float xs[6] = {0};
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, (int64_t[]){6}, 1, xs, sizeof xs) == RLX_OK);
  CHECK(rlx_exec_run(e) == RLX_FAILED_PRECONDITION);
  CHECK(strstr(rlx_exec_last_error(e), "'B' is not bound"));
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ symbols */

TEST(channel_norm_shapes) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x = in_f32(g, "x", 4, SHAPE(2, 6, 5, 3)), c6 = in_f32(g, "c6", 1, SHAPE(6));
  rlx_tensor c4 = in_f32(g, "c4", 1, SHAPE(4)), v = in_f32(g, "v", 1, SHAPE(6));
  rlx_tensor xi = in_t(g, "xi", RLX_I32, 3, SHAPE(2, 6, 3)), t;
  CHECK_OK_G(g, rlx_graph_add_group_norm(g, x, c6, c6, 3, 1e-5f, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 6, 5, 3) && rlx_producer(g, t)->a.groups == 3);
  CHECK_OK_G(g, rlx_graph_add_group_norm(g, x, RLX_NONE, RLX_NONE, 6, 0, &t));
  CHECK_FAILS(g, rlx_graph_add_group_norm(g, x, c6, c6, 4, 1e-5f, &t), "group_norm", "divisible");
  CHECK_FAILS(g, rlx_graph_add_group_norm(g, x, c6, c6, 0, 1e-5f, &t), "group_norm", "groups");
  CHECK_FAILS(g, rlx_graph_add_group_norm(g, x, c4, c6, 2, 1e-5f, &t), "group_norm", "gamma");
  CHECK_FAILS(g, rlx_graph_add_group_norm(g, x, c6, c6, 2, -1.0f, &t), "group_norm", "eps");
  CHECK_FAILS(g, rlx_graph_add_group_norm(g, xi, RLX_NONE, RLX_NONE, 2, 0, &t), "group_norm",
              "float");
  CHECK_FAILS(g, rlx_graph_add_group_norm(g, c6, RLX_NONE, RLX_NONE, 1, 0, &t), "group_norm",
              "rank");
  CHECK_OK_G(g, rlx_graph_add_channel_norm(g, x, c6, RLX_NONE, 1e-6f, &t));
  CHECK_FAILS(g, rlx_graph_add_channel_norm(g, x, c6, c4, 1e-6f, &t), "channel_norm", "beta");
  CHECK_OK_G(g, rlx_graph_add_batch_norm(g, x, c6, c6, v, v, 1e-5f, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 6, 5, 3));
  CHECK_OK_G(g, rlx_graph_add_batch_norm(g, x, RLX_NONE, RLX_NONE, v, v, 1e-5f, &t));
  CHECK_FAILS(g, rlx_graph_add_batch_norm(g, x, c6, c6, c4, v, 1e-5f, &t), "batch_norm", "mean");
  CHECK_FAILS(g, rlx_graph_add_batch_norm(g, x, c6, c6, v, RLX_NONE, 1e-5f, &t), "batch_norm",
              "input 4");
  CHECK_OK_G(g, rlx_graph_add_lrn(g, x, 3, 1e-4f, 0.75f, 1.0f, &t));
  CHECK(IS(g, t, RLX_F32, 4, 2, 6, 5, 3));
  CHECK_FAILS(g, rlx_graph_add_lrn(g, x, 0, 1e-4f, 0.75f, 1.0f, &t), "lrn", "size");
  CHECK_FAILS(g, rlx_graph_add_lrn(g, x, 3, NAN, 0.75f, 1.0f, &t), "lrn", "finite");
  rlx_dim d;
  CHECK_OK_G(g, rlx_graph_symbol(g, "d", &d));
  rlx_tensor x5 = in_f32(g, "x5", 5, SHAPE(1, 4, 2, d, 3));
  rlx_tensor x5s = in_f32(g, "x5s", 5, SHAPE(1, 4, 2, 2, 3));
  CHECK_OK_G(g, rlx_graph_add_lrn(g, x5s, 3, 1e-4f, 0.75f, 1.0f, &t));
  CHECK_FAILS(g, rlx_graph_add_lrn(g, x5, 3, 1e-4f, 0.75f, 1.0f, &t), "lrn", "static");
  rlx_graph_destroy(g);
}

TEST(symbolic) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim b, s, n;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &b));
  CHECK_OK_G(g, rlx_graph_symbol(g, "seq", &s));
  CHECK_OK_G(g, rlx_graph_symbol(g, "n", &n));
  rlx_tensor x = in_f32(g, "x", 3, SHAPE(b, s, 8)), one = in_f32(g, "one", 3, SHAPE(1, s, 1));
  rlx_tensor y = in_f32(g, "y", 2, SHAPE(s, 8)), other = in_f32(g, "other", 2, SHAPE(4, 8));
  rlx_tensor w = in_f32(g, "w", 2, SHAPE(8, 3)), nn = in_f32(g, "nn", 1, SHAPE(n)), t;
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, x, one, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, s, 8));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, x, y, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, s, 8));
  CHECK_FAILS(g, rlx_graph_add_binary(g, RLX_BIN_ADD, x, other, &t), "add", "f32[batch,seq,8]");
  CHECK_OK_G(g, rlx_graph_add_matmul(g, x, w, 0, 0, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, s, 3));
  rlx_tensor mm = t;

  /* reshape: symbols must balance as multisets with equal static products */
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(s, b, 2, 4), 4, &t));
  CHECK(IS(g, t, RLX_F32, 4, s, b, 2, 4));
  /* the inferred dim may be a product of symbols */
  rlx_dim bs;
  CHECK_OK_G(g, rlx_graph_dim_expr(g, RLX_DIM_MUL, s, b, &bs));
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(RLX_DIM_INFER, 4, 2), 3, &t));
  CHECK(IS(g, t, RLX_F32, 3, bs, 4, 2));
  CHECK_FAILS(g, rlx_graph_add_reshape(g, x, SHAPE(RLX_DIM_INFER, 3, 2), 3, &t), "reshape", "infer");
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(b, RLX_DIM_INFER, 4, 2), 4, &t));
  CHECK(IS(g, t, RLX_F32, 4, b, s, 4, 2));
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, SHAPE(s, b, RLX_DIM_INFER), 3, &t));
  CHECK(IS(g, t, RLX_F32, 3, s, b, 8));
  CHECK_FAILS(g, rlx_graph_add_reshape(g, x, SHAPE(b, n, 8), 3, &t), "reshape", "element counts");
  CHECK_FAILS(g, rlx_graph_add_reshape(g, x, SHAPE(b, s, 16), 3, &t), "reshape", "element counts");

  /* narrow on a symbolic axis: checked when specialised */
  CHECK_OK_G(g, rlx_graph_add_narrow(g, x, 1, 0, 1, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, 1, 8));
  CHECK_OK_G(g, rlx_graph_add_narrow(g, x, 2, 2, 3, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, s, 3));
  rlx_tensor cat[2] = {x, x};
  /* along a symbolic axis: the sum */
  CHECK_OK_G(g, rlx_graph_add_concat(g, cat, 2, 1, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, dexpr(g, RLX_DIM_ADD, s, s), 8));
  CHECK_OK_G(g, rlx_graph_add_concat(g, cat, 2, 2, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, s, 16));
  CHECK_OK_G(g, rlx_graph_add_expand(g, one, SHAPE(b, s, 8), 3, &t));
  CHECK(IS(g, t, RLX_F32, 3, b, s, 8));
  CHECK_FAILS(g, rlx_graph_add_expand(g, x, SHAPE(s, s, 8), 3, &t), "expand", "neither");
  rlx_tensor tv, ti;
  CHECK_OK_G(g, rlx_graph_add_topk(g, nn, 5, 0, 1, &tv, &ti));
  CHECK(IS(g, tv, RLX_F32, 1, 5));
  CHECK_OK_G(g, rlx_graph_set_name(g, mm, "proj"));
  rlx_tensor outs[3] = {mm, ti, t};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 3));

  /* specialize: same numbering, static shapes, labels and outputs kept; one
   * size per dim table entry (the expressions' are computed) */
  CHECK(rlx_graph_symbol_count(g) <= 8);
  rlx_graph* sp = NULL;
  CHECK_OK_G(g, rlx_graph_specialize(g, (const int64_t[]){3, 5, 7, -1, -1, -1, -1, -1}, &sp));
  CHECK(sp->n_nodes == g->n_nodes && sp->n_values == g->n_values);
  CHECK(IS(sp, mm, RLX_F32, 3, 3, 5, 3) && IS(sp, t, RLX_F32, 3, 3, 5, 8));
  CHECK(IS(sp, x, RLX_F32, 3, 3, 5, 8) && IS(sp, tv, RLX_F32, 1, 5));
  for (int32_t i = 0; i < sp->n_values; i++) {
    CHECK(rlx_type_numel(&sp->values[i].type) >= 0);
    CHECK(sp->values[i].node == g->values[i].node && sp->values[i].index == g->values[i].index);
  }
  for (int32_t i = 0; i < sp->n_nodes; i++) CHECK(sp->nodes[i].op == g->nodes[i].op);
  CHECK(strcmp(sp->nodes[g->values[mm].node].label, "proj") == 0);
  CHECK(sp->n_outputs == 3 && sp->outputs[2] == t);
  rlx_graph_destroy(sp);

  /* a binding that breaks a rule is an error naming the node */
  sp = NULL;
  CHECK(rlx_graph_specialize(g, (const int64_t[]){3, 5, 4, -1, -1, -1, -1, -1}, &sp) == RLX_INVALID_ARGUMENT);
  CHECK(sp == NULL);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "topk") && strstr(rlx_graph_last_error(g), "specialize"),
            "%s", rlx_graph_last_error(g));
  CHECK(rlx_graph_specialize(g, (const int64_t[]){3, -5, 7, -1, -1, -1, -1, -1}, &sp) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "seq"));
  CHECK(rlx_graph_specialize(g, NULL, &sp) == RLX_INVALID_ARGUMENT);
  /* zero-size binding is legal */
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, x, x, &t));
  rlx_graph* g2 = NULL;
  CHECK(rlx_graph_create(&g2) == RLX_OK);
  rlx_dim m;
  CHECK_OK_G(g2, rlx_graph_symbol(g2, "m", &m));
  rlx_tensor z = in_f32(g2, "z", 2, SHAPE(m, 4));
  CHECK_OK_G(g2, rlx_graph_add_softmax(g2, z, -1, &t));
  CHECK_OK_G(g2, rlx_graph_specialize(g2, (const int64_t[]){0}, &sp));
  CHECK(IS(sp, t, RLX_F32, 2, 0, 4));
  rlx_graph_destroy(sp);
  rlx_graph_destroy(g2);
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------------ clone */

static int graphs_equal(const rlx_graph* a, const rlx_graph* b) {
  if (a->n_nodes != b->n_nodes || a->n_values != b->n_values || a->n_symbols != b->n_symbols ||
      a->n_outputs != b->n_outputs)
    return 0;
  for (int32_t i = 0; i < a->n_symbols; i++)
    if (strcmp(a->symbols[i], b->symbols[i]) != 0 || a->symbols[i] == b->symbols[i]) return 0;
  for (int32_t i = 0; i < a->n_values; i++)
    if (!rlx_type_equal(&a->values[i].type, &b->values[i].type) ||
        a->values[i].node != b->values[i].node)
      return 0;
  for (int32_t i = 0; i < a->n_nodes; i++) {
    const rlx_node *x = &a->nodes[i], *y = &b->nodes[i];
    if (x->op != y->op || x->n_in != y->n_in || x->n_out != y->n_out) return 0;
    if (memcmp(x->in, y->in, sizeof(rlx_tensor) * (size_t)x->n_in) != 0) return 0;
    if ((x->label == NULL) != (y->label == NULL)) return 0;
    if (x->label && (strcmp(x->label, y->label) != 0 || x->label == y->label)) return 0;
    if ((x->a.name == NULL) != (y->a.name == NULL)) return 0;
    if (x->a.name && (strcmp(x->a.name, y->a.name) != 0 || x->a.name == y->a.name)) return 0;
    if (x->a.data_bytes != y->a.data_bytes) return 0;
    if (x->a.data_bytes && (memcmp(x->a.data, y->a.data, x->a.data_bytes) != 0 ||
                            x->a.data == y->a.data))
      return 0;
    rlx_node_attrs ax = x->a, ay = y->a;
    ax.name = ay.name = NULL;
    ax.data = ay.data = NULL;
    if (memcmp(&ax, &ay, sizeof ax) != 0) return 0;
  }
  return a->n_outputs == 0 ||
         memcmp(a->outputs, b->outputs, sizeof(rlx_tensor) * (size_t)a->n_outputs) == 0;
}

TEST(clone) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim b;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &b));
  rlx_tensor x = in_f32(g, "x", 2, SHAPE(b, 8)), w, c, y, z, outs[2];
  CHECK_OK_G(g, rlx_graph_add_param(g, "w", RLX_F32, SHAPE(8, 4), 2, &w));
  float data[4];
  test_fill_f32(data, 4, 0.5, 2);
  CHECK_OK_G(g, rlx_graph_add_constant(g, RLX_F32, SHAPE(4), 1, data, sizeof data, &c));
  CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, x, w, c, 0, 0, RLX_ACT_SILU, &y));
  CHECK_OK_G(g, rlx_graph_set_name(g, y, "ffn"));
  CHECK_OK_G(g, rlx_graph_add_topk(g, y, 2, -1, 1, &outs[0], &outs[1]));
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_SUM, y, (const int32_t[]){1}, 1, 1, &z));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  rlx_graph* c1 = NULL;
  CHECK(rlx_graph_clone(g, &c1) == RLX_OK);
  CHECK(graphs_equal(g, c1));
  /* An edit to the original does not reach the clone. */
  CHECK_OK_G(g, rlx_graph_set_name(g, y, "changed"));
  CHECK(!graphs_equal(g, c1));
  rlx_graph_destroy(g);
  rlx_tensor t;
  CHECK_OK_G(c1, rlx_graph_add_activation(c1, RLX_ACT_TANH, z, &t));
  CHECK(IS(c1, t, RLX_F32, 2, b, 1));
  CHECK(strcmp(c1->nodes[c1->values[y].node].label, "ffn") == 0);
  CHECK(memcmp(rlx_producer(c1, c)->a.data, data, sizeof data) == 0);
  /* Clone of an empty graph. */
  rlx_graph *e = NULL, *e2 = NULL;
  CHECK(rlx_graph_create(&e) == RLX_OK && rlx_graph_clone(e, &e2) == RLX_OK);
  CHECK(graphs_equal(e, e2));
  rlx_graph_destroy(e);
  rlx_graph_destroy(e2);
  rlx_graph_destroy(c1);
}

/* Raw rlx_graph_add_node path (text parser, passes): arity, optional inputs,
 * canonical attrs. */
TEST(add_node_direct) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor x = in_f32(g, "x", 2, SHAPE(3, 4)), t[2];
  rlx_node_attrs a = {0};
  a.kind = RLX_ACT_RELU;
  a.axis = 5; /* not a relu attribute: dropped */
  CHECK_OK_G(g, rlx_graph_add_node(g, RLX_OP_ACTIVATION, &a, &x, 1, t));
  CHECK(rlx_producer(g, t[0])->a.axis == 0 && rlx_producer(g, t[0])->a.kind == RLX_ACT_RELU);
  rlx_tensor two[2] = {x, x};
  CHECK_FAILS(g, rlx_graph_add_node(g, RLX_OP_ACTIVATION, &a, two, 2, t), "relu", "1 inputs");
  CHECK_FAILS(g, rlx_graph_add_node(g, RLX_OP_SOFTMAX, NULL, &x, 0, t), "softmax", "got 0");
  rlx_tensor none = RLX_NONE;
  CHECK_FAILS(g, rlx_graph_add_node(g, RLX_OP_SOFTMAX, NULL, &none, 1, t), "softmax", "input 0");
  CHECK(rlx_graph_add_node(g, RLX_OP_COUNT, NULL, &x, 1, t) == RLX_INVALID_ARGUMENT);
  /* a declared reshape with the shape in attrs.type */
  memset(&a, 0, sizeof a);
  a.type = (rlx_type){RLX_F32, 3, {2, 2, 3}};
  CHECK_OK_G(g, rlx_graph_add_node(g, RLX_OP_RESHAPE, &a, &x, 1, t));
  CHECK(IS(g, t[0], RLX_F32, 3, 2, 2, 3));
  a.type.dtype = RLX_I32;
  CHECK_FAILS(g, rlx_graph_add_node(g, RLX_OP_RESHAPE, &a, &x, 1, t), "reshape", "cast");
  a.type = (rlx_type){RLX_I32, 2, {3, 5}};
  CHECK_FAILS(g, rlx_graph_add_node(g, RLX_OP_CAST, &a, &x, 1, t), "cast", "shape");
  rlx_graph_destroy(g);
}

/* Small ints with the occasional extreme: the values a fuzzed text file or a
 * careless caller can put in attributes. */
static int64_t rand_attr(void) {
  static const int64_t extremes[] = {INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, RLX_DIM_INFER,
                                     -1000, 1 << 30};
  if (test_rand_int(0, 9) == 0) return extremes[test_rand_int(0, 6)];
  return test_rand_int(-3, 9);
}

static int32_t rand_i32(void) {
  int64_t v = rand_attr();
  return v < INT32_MIN || v > INT32_MAX ? -1 : (int32_t)v;
}

/* Every op with random inputs and attributes: never a crash (run under
 * ASan/UBSan), only OK or INVALID_ARGUMENT, and an OK node has sane types. */
TEST(random_attrs_never_crash) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim b;
  CHECK_OK_G(g, rlx_graph_symbol(g, "b", &b));
  rlx_tensor pool[12];
  pool[0] = in_f32(g, "p0", 2, SHAPE(3, 4));
  pool[1] = in_f32(g, "p1", 4, SHAPE(2, 3, 4, 8));
  pool[2] = in_t(g, "p2", RLX_I64, 1, SHAPE(4));
  pool[3] = in_t(g, "p3", RLX_BOOL, 2, SHAPE(3, 1));
  pool[4] = in_f32(g, "p4", 1, SHAPE(4));
  pool[5] = in_f32(g, "p5", 0, NULL);
  pool[6] = in_f32(g, "p6", 3, SHAPE(b, 3, 4));
  pool[7] = in_t(g, "p7", RLX_I32, 2, SHAPE(3, 4));
  pool[8] = in_t(g, "p8", RLX_F16, 4, SHAPE(1, 4, 2, 8));
  pool[9] = in_f32(g, "p9", 2, SHAPE(8, 4));
  pool[10] = in_f32(g, "p10", 4, SHAPE(2, 2, 4, 8));
  pool[11] = in_f32(g, "p11", 2, SHAPE(4, 4));
  for (int i = 0; i < 12; i++) CHECK(pool[i] != RLX_NONE);
  test_seed(11);
  int ok = 0;
  uint8_t bytes[64] = {1};
  for (int it = 0; it < 20000; it++) {
    rlx_op op = (rlx_op)test_rand_int(0, RLX_OP_COUNT - 1);
    const rlx_op_info* info = &rlx_op_table[op];
    rlx_node_attrs a = {0};
    a.kind = rand_i32();
    a.axis = rand_i32();
    a.start = rand_attr();
    a.len = rand_attr();
    a.axes = (uint32_t)test_rand_u64() & (test_rand_int(0, 1) ? 0xffu : 0xffffffffu);
    a.keep_dim = rand_i32();
    a.k = rand_attr();
    a.transpose_a = rand_i32();
    a.transpose_b = rand_i32();
    a.act = rand_i32();
    a.eps = (float)rand_attr() * 0.25f;
    a.num_heads = rand_i32();
    a.num_kv_heads = rand_i32();
    a.head_dim = rand_i32();
    a.layout = rand_i32();
    a.mask = rand_i32();
    a.window = rand_i32();
    a.n_rot = rand_i32();
    a.style = rand_i32();
    a.top_k = rand_i32();
    a.top_p = (float)rand_attr() * 0.25f;
    for (int d = 0; d < RLX_MAX_RANK; d++) a.perm[d] = rand_i32();
    a.type.dtype = (rlx_dtype)test_rand_int(-1, RLX_DTYPE_COUNT);
    a.type.rank = (int32_t)test_rand_int(-1, RLX_MAX_RANK + 1);
    for (int d = 0; d < RLX_MAX_RANK; d++) a.type.shape[d] = rand_attr();
    char name[16];
    snprintf(name, sizeof name, "n%d", it);
    a.name = test_rand_int(0, 5) ? name : NULL;
    a.data = test_rand_int(0, 3) ? bytes : NULL;
    a.data_bytes = (size_t)test_rand_int(0, 64);
    int32_t n_in = info->min_inputs + (int32_t)test_rand_int(-1, 2);
    if (n_in > info->max_inputs + 1) n_in = info->max_inputs + 1;
    if (n_in < 0) n_in = 0;
    rlx_tensor in[RLX_MAX_INPUTS + 1];
    for (int32_t i = 0; i < n_in; i++)
      in[i] = test_rand_int(0, 7) ? pool[test_rand_int(0, 11)] : RLX_NONE;
    rlx_tensor outs[RLX_MAX_OUTPUTS];
    rlx_status st = rlx_graph_add_node(g, op, &a, in, n_in, outs);
    CHECK_MSG(st == RLX_OK || st == RLX_INVALID_ARGUMENT, "status %d", (int)st);
    if (st != RLX_OK) {
      CHECK(strstr(rlx_graph_last_error(g), rlx_op_name(op, a.kind)));
      continue;
    }
    ok++;
    for (int32_t i = 0; i < info->n_outputs; i++) {
      const rlx_type* t = rlx_tensor_type(g, outs[i]);
      CHECK(t->rank >= 0 && t->rank <= RLX_MAX_RANK && t->dtype < RLX_DTYPE_COUNT);
      /* a dim is a size or an entry of the dim table (b, or an expression an
       * earlier node interned, which a declared type may name) */
      for (int32_t d = 0; d < t->rank; d++)
        CHECK(t->shape[d] >= 0 || -(t->shape[d] + 1) < g->n_symbols);
    }
  }
  CHECK(ok > 200);
  rlx_graph* c = NULL;
  CHECK(rlx_graph_clone(g, &c) == RLX_OK && graphs_equal(g, c));
  rlx_graph* sp = NULL;
  /* Some random nodes (topk over the symbol) only fail once it is bound. */
  /* one size per dim-table entry: b, and any expression a node interned */
  int64_t sizes[64];
  for (int i = 0; i < 64; i++) sizes[i] = 2;
  CHECK(g->n_symbols <= 64);
  rlx_status st = rlx_graph_specialize(g, sizes, &sp);
  CHECK(st == RLX_OK || (st == RLX_INVALID_ARGUMENT && !sp &&
                         strstr(rlx_graph_last_error(g), "specialize: %")));
  rlx_graph_destroy(sp);
  rlx_graph_destroy(c);
  rlx_graph_destroy(g);
}

int main(void) {
  RUN(leaves);
  RUN(names_and_strings);
  RUN(broadcast_random);
  RUN(elementwise);
  RUN(matmul);
  RUN(layout);
  RUN(reductions);
  RUN(norms);
  RUN(attention);
  RUN(rope_and_sample);
  RUN(pool_pad_depth_space_shapes);
  RUN(conv_shapes);
  RUN(channel_norm_shapes);
  RUN(symbolic);
  RUN(dim_expressions_intern_and_simplify);
  RUN(dim_expressions_bind);
  RUN(dim_expression_leaf_unbound_is_an_error);
  RUN(pool_over_symbolic_dim_matches_static_rule);
  RUN(clone);
  RUN(add_node_direct);
  RUN(random_attrs_never_crash);
  return test_summary();
}
