/* ONNX importer: small models built here with the protobuf-c structs,
 * serialized, imported, compiled on the CPU and compared with values
 * computed in the test; opset variants; import-time folding and frozen
 * inputs; errors for unsupported ops/attributes and malformed files; the
 * public API (load, set_params, read_tensor) through files on disk. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "io/onnx.h"
#include "ir/graph.h"

#ifndef RLX_HAVE_ONNX

TEST(not_built_reports_unimplemented) {
  rlx_graph* g = NULL;
  char* err = NULL;
  CHECK(rlx_onnx_load("tests/nothing.onnx", &g, &err) == RLX_UNIMPLEMENTED);
  CHECK(err && strstr(err, "not built"));
  rlx_free(err);
}

int main(void) {
  RUN(not_built_reports_unimplemented);
  return test_summary();
}

#else
#include "onnx.pb-c.h"

/* ------------------------------------------------------------------ model building */

/* Everything a test model allocates, freed by model_free. */
static void* pool[4096];
static int n_pool;

static void* tnew(size_t n) {
  void* p = calloc(1, n);
  if (p && n_pool < (int)(sizeof pool / sizeof pool[0])) pool[n_pool++] = p;
  return p;
}

static char* tstr(const char* s) {
  char* p = tnew(strlen(s) + 1);
  strcpy(p, s);
  return p;
}

static void pool_free(void) {
  for (int i = 0; i < n_pool; i++) free(pool[i]);
  n_pool = 0;
}

typedef struct model {
  Onnx__ModelProto m;
  Onnx__GraphProto g;
  Onnx__OperatorSetIdProto opset;
  Onnx__OperatorSetIdProto* opsets[1];
  Onnx__NodeProto* nodes[128];
  Onnx__ValueInfoProto* inputs[8];
  Onnx__ValueInfoProto* outputs[8];
  Onnx__TensorProto* inits[8];
} model;

static void model_init(model* md, int64_t opset) {
  memset(md, 0, sizeof *md);
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
  Onnx__OperatorSetIdProto o = ONNX__OPERATOR_SET_ID_PROTO__INIT;
  md->m = m;
  md->g = g;
  md->opset = o;
  md->opset.domain = tstr("");
  md->opset.has_version = 1;
  md->opset.version = opset;
  md->opsets[0] = &md->opset;
  md->m.has_ir_version = 1;
  md->m.ir_version = 8;
  md->m.n_opset_import = 1;
  md->m.opset_import = md->opsets;
  md->m.graph = &md->g;
  md->g.name = tstr("test");
  md->g.node = md->nodes;
  md->g.input = md->inputs;
  md->g.output = md->outputs;
  md->g.initializer = md->inits;
}

/* "a,b" -> list; "" entries stay (absent optional inputs). */
static char** names(const char* csv, size_t* n) {
  char** out = tnew(sizeof(char*) * 16);
  *n = 0;
  if (!csv || !*csv) return out;
  const char* p = csv;
  for (;;) {
    const char* e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char* s = tnew(len + 1);
    memcpy(s, p, len);
    out[(*n)++] = s;
    if (!e) break;
    p = e + 1;
  }
  return out;
}

static Onnx__NodeProto* node(model* md, const char* op, const char* in, const char* out) {
  Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;
  Onnx__NodeProto* n = tnew(sizeof *n);
  *n = init;
  n->op_type = tstr(op);
  n->name = tstr(op);
  n->input = names(in, &n->n_input);
  n->output = names(out, &n->n_output);
  n->attribute = tnew(sizeof(Onnx__AttributeProto*) * 8);
  md->nodes[md->g.n_node++] = n;
  return n;
}

static Onnx__AttributeProto* attr(Onnx__NodeProto* n, const char* name,
                                  Onnx__AttributeProto__AttributeType type) {
  Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
  Onnx__AttributeProto* a = tnew(sizeof *a);
  *a = init;
  a->name = tstr(name);
  a->has_type = 1;
  a->type = type;
  n->attribute[n->n_attribute++] = a;
  return a;
}

static void attr_i(Onnx__NodeProto* n, const char* name, int64_t v) {
  Onnx__AttributeProto* a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  a->has_i = 1;
  a->i = v;
}

static void attr_f(Onnx__NodeProto* n, const char* name, float v) {
  Onnx__AttributeProto* a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  a->has_f = 1;
  a->f = v;
}

static void attr_ints(Onnx__NodeProto* n, const char* name, const int64_t* v, size_t k) {
  Onnx__AttributeProto* a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  a->ints = tnew(sizeof(int64_t) * (k ? k : 1));
  memcpy(a->ints, v, sizeof(int64_t) * k);
  a->n_ints = k;
}

/* A graph input or output: dims >= 0 static, -1 symbolic named sym. */
static Onnx__ValueInfoProto* value_info(const char* name, int elem, int rank, const int64_t* dims,
                                        const char* sym) {
  Onnx__ValueInfoProto vi = ONNX__VALUE_INFO_PROTO__INIT;
  Onnx__TypeProto tp = ONNX__TYPE_PROTO__INIT;
  Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
  Onnx__TensorShapeProto sh = ONNX__TENSOR_SHAPE_PROTO__INIT;
  Onnx__ValueInfoProto* v = tnew(sizeof *v);
  Onnx__TypeProto* t = tnew(sizeof *t);
  Onnx__TypeProto__Tensor* ten = tnew(sizeof *ten);
  Onnx__TensorShapeProto* shape = tnew(sizeof *shape);
  *v = vi;
  *t = tp;
  *ten = tt;
  *shape = sh;
  v->name = tstr(name);
  v->type = t;
  t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  t->tensor_type = ten;
  ten->has_elem_type = 1;
  ten->elem_type = elem;
  ten->shape = shape;
  shape->dim = tnew(sizeof(void*) * 8);
  for (int i = 0; i < rank; i++) {
    Onnx__TensorShapeProto__Dimension di = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    Onnx__TensorShapeProto__Dimension* d = tnew(sizeof *d);
    *d = di;
    if (dims[i] >= 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = tstr(sym);
    }
    shape->dim[shape->n_dim++] = d;
  }
  return v;
}

static void input(model* md, const char* name, int elem, int rank, const int64_t* dims) {
  md->inputs[md->g.n_input++] = value_info(name, elem, rank, dims, "batch");
}

static void output(model* md, const char* name) {
  md->outputs[md->g.n_output++] = value_info(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL,
                                             NULL);
}

/* A TensorProto with raw data. */
static Onnx__TensorProto* tensor(const char* name, int elem, int rank, const int64_t* dims,
                                 const void* data, size_t bytes) {
  Onnx__TensorProto init = ONNX__TENSOR_PROTO__INIT;
  Onnx__TensorProto* t = tnew(sizeof *t);
  *t = init;
  t->name = tstr(name);
  t->has_data_type = 1;
  t->data_type = elem;
  t->dims = tnew(sizeof(int64_t) * 8);
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  t->n_dims = (size_t)rank;
  t->has_raw_data = 1;
  t->raw_data.len = bytes;
  t->raw_data.data = tnew(bytes ? bytes : 1);
  memcpy(t->raw_data.data, data, bytes);
  return t;
}

static void initializer(model* md, Onnx__TensorProto* t) { md->inits[md->g.n_initializer++] = t; }

static void attr_t(Onnx__NodeProto* n, const char* name, Onnx__TensorProto* t) {
  Onnx__AttributeProto* a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  a->t = t;
}

static uint8_t* pack(model* md, size_t* n) {
  *n = onnx__model_proto__get_packed_size(&md->m);
  uint8_t* buf = tnew(*n ? *n : 1);
  onnx__model_proto__pack(&md->m, buf);
  return buf;
}

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* ------------------------------------------------------------------ running */

static rlx_status import(model* md, const rlx_onnx_options* o, rlx_onnx_model** out,
                         rlx_error* err) {
  size_t n;
  uint8_t* buf = pack(md, &n);
  return rlx_onnx_import(buf, n, o, out, err);
}

/* Compiles m, sets params and the named f32 inputs, runs, reads output k. */
static int run_f32(rlx_onnx_model* m, int n_in, const char* const* in_names,
                   const int64_t (*shapes)[4], const int* ranks, const float* const* data,
                   int k, float* out, size_t out_n) {
  rlx_exec* e = NULL;
  rlx_error err = {{0}};
  if (rlx_compile(m->graph, "cpu", NULL, &e) != RLX_OK) {
    fprintf(stderr, "compile: %s\n", rlx_graph_last_error(m->graph));
    return 0;
  }
  int ok = rlx_onnx_model_set_params(m, e, &err) == RLX_OK;
  for (int i = 0; ok && i < n_in; i++) {
    int64_t count = 1;
    for (int d = 0; d < ranks[i]; d++) count *= shapes[i][d];
    ok = rlx_exec_set_input(e, in_names[i], RLX_F32, shapes[i], ranks[i], data[i],
                            sizeof(float) * (size_t)count) == RLX_OK;
  }
  ok = ok && rlx_exec_run(e) == RLX_OK;
  ok = ok && rlx_exec_read_output(e, k, RLX_F32, out, sizeof(float) * out_n) == RLX_OK;
  if (!ok) fprintf(stderr, "run: %s %s\n", rlx_exec_last_error(e), err.msg);
  rlx_exec_destroy(e);
  return ok;
}

static int close_to(const float* a, const float* b, int n, double tol) {
  for (int i = 0; i < n; i++)
    if (!(fabs((double)a[i] - (double)b[i]) <= tol * (1.0 + fabs((double)b[i])))) {
      fprintf(stderr, "element %d: got %.9g want %.9g\n", i, a[i], b[i]);
      return 0;
    }
  return 1;
}

/* ------------------------------------------------------------------ tests */

TEST(add_relu_with_initializer_param) {
  model md;
  model_init(&md, 17);
  int64_t dims[2] = {2, 3};
  float w[6], x[6], want[6], got[6];
  test_fill_f32(w, 6, -2, 2);
  test_fill_f32(x, 6, -2, 2);
  initializer(&md, tensor("w", F32, 2, dims, w, sizeof w));
  input(&md, "x", F32, 2, dims);
  node(&md, "Add", "x,w", "s");
  node(&md, "Relu", "s", "y");
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  CHECK(m->n_params == 1 && strcmp(m->params[0].name, "w") == 0);
  CHECK(m->n_inputs == 1 && m->input_in_graph[0] == 1);
  for (int i = 0; i < 6; i++) want[i] = x[i] + w[i] > 0 ? x[i] + w[i] : 0;
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{2, 3}};
  const int ranks[1] = {2};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 6);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, 6, 1e-6));
}

TEST(gemm_transposes_alpha_beta) {
  model md;
  model_init(&md, 13);
  int64_t da[2] = {4, 3}, db[2] = {5, 4}, dc[1] = {5};
  float a[12], b[20], cb[5], got[15], want[15];
  test_fill_f32(a, 12, -1, 1);
  test_fill_f32(b, 20, -1, 1);
  test_fill_f32(cb, 5, -1, 1);
  input(&md, "a", F32, 2, da);
  input(&md, "b", F32, 2, db);
  initializer(&md, tensor("c", F32, 1, dc, cb, sizeof cb));
  Onnx__NodeProto* n = node(&md, "Gemm", "a,b,c", "y");
  attr_i(n, "transA", 1);
  attr_i(n, "transB", 1);
  attr_f(n, "alpha", 0.5f);
  attr_f(n, "beta", 2.0f);
  output(&md, "y");
  /* y[m][n] = 0.5 * sum_k a[k][m] b[n][k] + 2 c[n], with A: [K=4, M=3], B: [N=5, K=4] */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++) {
      double s = 0;
      for (int k = 0; k < 4; k++) s += (double)a[k * 3 + i] * b[j * 4 + k];
      want[i * 5 + j] = (float)(0.5 * s + 2.0 * cb[j]);
    }
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const char* in[2] = {"a", "b"};
  const int64_t shapes[2][4] = {{4, 3}, {5, 4}};
  const int ranks[2] = {2, 2};
  const float* data[2] = {a, b};
  int ok = run_f32(m, 2, in, shapes, ranks, data, 0, got, 15);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, 15, 1e-5));
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds to a static reshape. */
TEST(shape_chain_folds_to_constants) {
  model md;
  model_init(&md, 13);
  int64_t dx[3] = {2, 3, 4}, one = 1;
  int64_t idx0 = 0, minus1 = -1, axes0 = 0;
  input(&md, "x", F32, 3, dx);
  initializer(&md, tensor("i0", I64, 0, NULL, &idx0, 8));
  initializer(&md, tensor("m1", I64, 1, &one, &minus1, 8));
  initializer(&md, tensor("ax", I64, 1, &one, &axes0, 8));
  node(&md, "Shape", "x", "s");
  node(&md, "Gather", "s,i0", "d0");
  node(&md, "Unsqueeze", "d0,ax", "d0v");
  node(&md, "Concat", "d0v,m1", "target");
  attr_i(md.nodes[md.g.n_node - 1], "axis", 0);
  node(&md, "Reshape", "x,target", "y");
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  rlx_dtype dt;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
  rlx_graph* g = m->graph;
  CHECK(rlx_graph_tensor_type(g, g->outputs[0], &dt, &rank, shape) == RLX_OK);
  int ok = rank == 2 && shape[0] == 2 && shape[1] == 12;
  /* folded: the graph holds the input and the reshape only */
  int n_nodes = g->n_nodes;
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok);
  CHECK_MSG(n_nodes == 2, "%d nodes", n_nodes);
}

/* A Reshape target fed as a graph input must be known at import time: the
 * importer names the input, and freezing it makes the import succeed. */
TEST(reshape_target_input_needs_freezing) {
  model md;
  model_init(&md, 14);
  int64_t dx[2] = {2, 6}, ds[1] = {2};
  input(&md, "x", F32, 2, dx);
  input(&md, "shape", I64, 1, ds);
  node(&md, "Reshape", "x,shape", "y");
  output(&md, "y");
  char needs[64];
  rlx_onnx_options o;
  memset(&o, 0, sizeof o);
  o.needs_input = needs;
  o.needs_input_cap = sizeof needs;
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK(import(&md, &o, &m, &err) == RLX_FAILED_PRECONDITION && m == NULL);
  CHECK_MSG(strcmp(needs, "shape") == 0 && strstr(err.msg, "Reshape"), "%s / %s", needs, err.msg);
  int64_t target[2] = {3, -1};
  rlx_host_tensor v = {RLX_I64, 1, {2}, target, sizeof target};
  const char* fn[1] = {"shape"};
  o.frozen_names = fn;
  o.frozen_values = &v;
  o.n_frozen = 1;
  CHECK_MSG(import(&md, &o, &m, &err) == RLX_OK, "%s", err.msg);
  float x[12], got[12];
  test_fill_f32(x, 12, -1, 1);
  rlx_dtype dt;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
  rlx_graph_tensor_type(m->graph, m->graph->outputs[0], &dt, &rank, shape);
  int frozen = m->input_frozen[1] && !m->input_in_graph[1];
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{2, 6}};
  const int ranks[1] = {2};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 12);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(frozen && rank == 2 && shape[0] == 3 && shape[1] == 4);
  CHECK(ok && close_to(got, x, 12, 0));
}

TEST(unsupported_op_and_attribute_are_named) {
  model md;
  model_init(&md, 13);
  int64_t d[4] = {1, 1, 4, 4};
  input(&md, "x", F32, 4, d);
  node(&md, "Bernoulli", "x", "y"); /* random: out of scope */
  md.nodes[0]->name = tstr("roi_1");
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK(import(&md, NULL, &m, &err) == RLX_UNIMPLEMENTED && !m);
  CHECK_MSG(strstr(err.msg, "Bernoulli") && strstr(err.msg, "roi_1"), "%s", err.msg);
  pool_free();

  model_init(&md, 13);
  input(&md, "x", F32, 4, d);
  Onnx__NodeProto* n = node(&md, "Relu", "x", "y");
  attr_i(n, "fancy_mode", 1);
  output(&md, "y");
  CHECK(import(&md, NULL, &m, &err) == RLX_UNIMPLEMENTED);
  CHECK_MSG(strstr(err.msg, "Relu") && strstr(err.msg, "fancy_mode"), "%s", err.msg);
  pool_free();

  /* an op from another domain */
  model_init(&md, 13);
  input(&md, "x", F32, 4, d);
  n = node(&md, "FusedGemm", "x", "y");
  n->domain = tstr("com.microsoft");
  output(&md, "y");
  CHECK(import(&md, NULL, &m, &err) == RLX_UNIMPLEMENTED);
  CHECK_MSG(strstr(err.msg, "com.microsoft"), "%s", err.msg);
  pool_free();
}

TEST(malformed_files_are_errors) {
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  uint8_t junk[64];
  for (int i = 0; i < 64; i++) junk[i] = (uint8_t)test_rand_u64();
  CHECK(rlx_onnx_import(junk, sizeof junk, NULL, &m, &err) != RLX_OK && !m);
  CHECK(rlx_onnx_import("", 0, NULL, &m, &err) == RLX_INVALID_ARGUMENT); /* no graph */
  /* a model truncated in the middle */
  model md;
  model_init(&md, 13);
  int64_t d[2] = {2, 2};
  float w[4] = {1, 2, 3, 4};
  input(&md, "x", F32, 2, d);
  initializer(&md, tensor("w", F32, 2, d, w, sizeof w));
  node(&md, "Mul", "x,w", "y");
  output(&md, "y");
  size_t n;
  uint8_t* buf = pack(&md, &n);
  for (size_t cut = 1; cut < n; cut += 7) {
    rlx_status s = rlx_onnx_import(buf, cut, NULL, &m, &err);
    if (s == RLX_OK) rlx_onnx_model_destroy(m);
  }
  /* raw data that does not match the shape */
  md.inits[0]->raw_data.len = 12;
  CHECK(import(&md, NULL, &m, &err) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.msg, "'w'"), "%s", err.msg);
  /* a node input nobody produces */
  md.inits[0]->raw_data.len = 16;
  md.nodes[0]->input[1] = tstr("nowhere");
  CHECK(import(&md, NULL, &m, &err) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(err.msg, "nowhere"), "%s", err.msg);
  pool_free();
}

TEST(symbolic_dims_become_symbols) {
  model md;
  model_init(&md, 13);
  int64_t d[2] = {-1, 3};
  input(&md, "x", F32, 2, d);
  node(&md, "Sigmoid", "x", "y");
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  int has_symbol = m->graph->n_symbols == 1 && strcmp(m->graph->symbols[0], "batch") == 0;
  float x[12], got[12], want[12];
  test_fill_f32(x, 12, -3, 3);
  for (int i = 0; i < 12; i++) want[i] = (float)(1.0 / (1.0 + exp(-(double)x[i])));
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{4, 3}};
  const int ranks[1] = {2};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 12);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(has_symbol);
  CHECK(ok && close_to(got, want, 12, 1e-6));
}

/* Softmax before opset 13 normalizes over the flattened block from axis on. */
TEST(softmax_opset_11_flattens_opset_13_does_not) {
  float x[24], got[24], want[24];
  test_fill_f32(x, 24, -2, 2);
  for (int version = 11; version <= 13; version += 2) {
    model md;
    model_init(&md, version);
    int64_t d[3] = {2, 3, 4};
    input(&md, "x", F32, 3, d);
    attr_i(node(&md, "Softmax", "x", "y"), "axis", 1);
    output(&md, "y");
    int block = version == 11 ? 12 : 3, stride = version == 11 ? 1 : 4;
    for (int b = 0; b < 2; b++)
      for (int inner = 0; inner < (version == 11 ? 1 : 4); inner++) {
        double s = 0;
        for (int j = 0; j < block; j++) s += exp(x[b * 12 + inner + j * stride]);
        for (int j = 0; j < block; j++)
          want[b * 12 + inner + j * stride] = (float)(exp(x[b * 12 + inner + j * stride]) / s);
      }
    rlx_onnx_model* m = NULL;
    rlx_error err = {{0}};
    CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
    const char* in[1] = {"x"};
    const int64_t shapes[1][4] = {{2, 3, 4}};
    const int ranks[1] = {3};
    const float* data[1] = {x};
    int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 24);
    rlx_onnx_model_destroy(m);
    pool_free();
    CHECK_MSG(ok && close_to(got, want, 24, 1e-5), "opset %d", version);
  }
}

/* Axes moved from attributes to inputs at opset 13 (ReduceSum, Unsqueeze);
 * both forms import to the same result. Transpose perm as an attribute. */
TEST(axes_attribute_before_13_input_after) {
  float x[24], want[24], got[24];
  test_fill_f32(x, 24, -1, 1);
  /* y = unsqueeze(reduce_sum(transpose(x, [2,0,1]), axes=[2], keepdims=0), axes=[0]):
   * x [2,3,4] -> [4,2,3] -> sum over the 3 -> [4,2] -> [1,4,2] */
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 2; i++) {
      double s = 0;
      for (int j = 0; j < 3; j++) s += x[i * 12 + j * 4 + k];
      want[k * 2 + i] = (float)s;
    }
  for (int version = 11; version <= 13; version += 2) {
    model md;
    model_init(&md, version);
    int64_t d[3] = {2, 3, 4}, perm[3] = {2, 0, 1}, ax2 = 2, ax0 = 0, one = 1;
    input(&md, "x", F32, 3, d);
    attr_ints(node(&md, "Transpose", "x", "t"), "perm", perm, 3);
    Onnx__NodeProto* r;
    Onnx__NodeProto* u;
    if (version < 13) {
      r = node(&md, "ReduceSum", "t", "r");
      attr_ints(r, "axes", &ax2, 1);
      u = node(&md, "Unsqueeze", "r", "y");
      attr_ints(u, "axes", &ax0, 1);
    } else {
      initializer(&md, tensor("a2", I64, 1, &one, &ax2, 8));
      initializer(&md, tensor("a0", I64, 1, &one, &ax0, 8));
      r = node(&md, "ReduceSum", "t,a2", "r");
      u = node(&md, "Unsqueeze", "r,a0", "y");
    }
    attr_i(r, "keepdims", 0);
    output(&md, "y");
    rlx_onnx_model* m = NULL;
    rlx_error err = {{0}};
    CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "opset %d: %s", version, err.msg);
    rlx_dtype dt;
    int32_t rank;
    rlx_dim shape[RLX_MAX_RANK];
    rlx_graph_tensor_type(m->graph, m->graph->outputs[0], &dt, &rank, shape);
    const char* in[1] = {"x"};
    const int64_t shapes[1][4] = {{2, 3, 4}};
    const int ranks[1] = {3};
    const float* data[1] = {x};
    int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 8);
    rlx_onnx_model_destroy(m);
    pool_free();
    CHECK_MSG(rank == 3 && shape[0] == 1 && shape[1] == 4 && shape[2] == 2, "opset %d", version);
    CHECK_MSG(ok && close_to(got, want, 8, 1e-6), "opset %d", version);
  }
}

/* Conv (im2col by gather + grouped matmul) against a direct loop: 2 groups,
 * stride 2, asymmetric pads, dilation 2, bias. */
TEST(conv_grouped_strided_padded) {
  enum { N = 2, C = 4, H = 7, W = 6, M = 6, G = 2, KH = 3, KW = 2 };
  const int sh = 2, sw = 1, dh = 1, dw = 2, pt = 1, pl = 0, pb = 2, pr = 1;
  const int oh = (H + pt + pb - ((KH - 1) * dh + 1)) / sh + 1;
  const int ow = (W + pl + pr - ((KW - 1) * dw + 1)) / sw + 1;
  static float x[N * C * H * W], w[M * (C / G) * KH * KW], b[M], got[N * M * 8 * 8],
      want[N * M * 8 * 8];
  test_fill_f32(x, N * C * H * W, -1, 1);
  test_fill_f32(w, M * (C / G) * KH * KW, -1, 1);
  test_fill_f32(b, M, -1, 1);
  for (int n = 0; n < N; n++)
    for (int m = 0; m < M; m++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          double acc = b[m];
          int g = m / (M / G);
          for (int cc = 0; cc < C / G; cc++)
            for (int ki = 0; ki < KH; ki++)
              for (int kj = 0; kj < KW; kj++) {
                int y = i * sh + ki * dh - pt, z = j * sw + kj * dw - pl;
                if (y < 0 || y >= H || z < 0 || z >= W) continue;
                int ch = g * (C / G) + cc;
                acc += (double)x[((n * C + ch) * H + y) * W + z] *
                       w[((m * (C / G) + cc) * KH + ki) * KW + kj];
              }
          want[((n * M + m) * oh + i) * ow + j] = (float)acc;
        }
  model md;
  model_init(&md, 13);
  int64_t dx[4] = {N, C, H, W}, dwt[4] = {M, C / G, KH, KW}, db[1] = {M};
  input(&md, "x", F32, 4, dx);
  initializer(&md, tensor("w", F32, 4, dwt, w, sizeof w));
  initializer(&md, tensor("b", F32, 1, db, b, sizeof b));
  Onnx__NodeProto* n = node(&md, "Conv", "x,w,b", "y");
  int64_t strides[2] = {sh, sw}, dil[2] = {dh, dw}, pads[4] = {pt, pl, pb, pr};
  attr_i(n, "group", G);
  attr_ints(n, "strides", strides, 2);
  attr_ints(n, "dilations", dil, 2);
  attr_ints(n, "pads", pads, 4);
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{N, C, H, W}};
  const int ranks[1] = {4};
  const float* data[1] = {x};
  int count = N * M * oh * ow;
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, (size_t)count);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, count, 1e-5));
}

/* Floor, Ceil, Sign are exact compositions; Erf goes through gelu in f64. */
TEST(floor_ceil_sign_erf_compositions) {
  float x[12] = {-2.5f, -1.5f, -0.5f, -0.0f, 0.5f, 1.5f, 2.5f, 3.0f, -7.25f, 1e9f, -8388609.0f,
                 0.1f};
  const char* ops[4] = {"Floor", "Ceil", "Sign", "Erf"};
  for (int k = 0; k < 4; k++) {
    model md;
    model_init(&md, 13);
    int64_t d[1] = {12};
    input(&md, "x", F32, 1, d);
    node(&md, ops[k], "x", "y");
    output(&md, "y");
    float got[12], want[12];
    for (int i = 0; i < 12; i++) {
      double v = x[i];
      want[i] = (float)(k == 0 ? floor(v) : k == 1 ? ceil(v) : k == 2 ? (v > 0) - (v < 0) : erf(v));
    }
    rlx_onnx_model* m = NULL;
    rlx_error err = {{0}};
    CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
    const char* in[1] = {"x"};
    const int64_t shapes[1][4] = {{12}};
    const int ranks[1] = {1};
    const float* data[1] = {x};
    int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 12);
    rlx_onnx_model_destroy(m);
    pool_free();
    CHECK_MSG(ok && close_to(got, want, 12, k == 3 ? 1e-6 : 0), "%s", ops[k]);
  }
}

/* Slice with a negative step (a gather) and GatherElements with negative indices. */
TEST(slice_negative_step_and_gather_elements) {
  model md;
  model_init(&md, 13);
  int64_t d[2] = {3, 5}, one = 1;
  int64_t start = -1, end = -100, axis = 1, step = -2;
  input(&md, "x", F32, 2, d);
  initializer(&md, tensor("s", I64, 1, &one, &start, 8));
  initializer(&md, tensor("e", I64, 1, &one, &end, 8));
  initializer(&md, tensor("a", I64, 1, &one, &axis, 8));
  initializer(&md, tensor("st", I64, 1, &one, &step, 8));
  node(&md, "Slice", "x,s,e,a,st", "y");
  output(&md, "y");
  float x[15], got[9], want[9];
  test_fill_f32(x, 15, -1, 1);
  for (int r = 0; r < 3; r++)
    for (int j = 0; j < 3; j++) want[r * 3 + j] = x[r * 5 + 4 - 2 * j];
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{3, 5}};
  const int ranks[1] = {2};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 9);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, 9, 0));

  model_init(&md, 13);
  int64_t di[2] = {2, 5};
  int64_t idx[10] = {0, -1, 2, 1, 0, -3, 2, 2, 1, 0};
  input(&md, "x", F32, 2, d);
  initializer(&md, tensor("i", I64, 2, di, idx, sizeof idx));
  attr_i(node(&md, "GatherElements", "x,i", "y"), "axis", 0);
  output(&md, "y");
  float got2[10], want2[10];
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < 5; j++) {
      int64_t k = idx[r * 5 + j] < 0 ? idx[r * 5 + j] + 3 : idx[r * 5 + j];
      want2[r * 5 + j] = x[k * 5 + j];
    }
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  ok = run_f32(m, 1, in, shapes, ranks, data, 0, got2, 10);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got2, want2, 10, 0));
}

/* A Constant node with a tensor attribute, and typed (non-raw) initializer fields. */
TEST(constant_node_and_typed_fields) {
  model md;
  model_init(&md, 13);
  int64_t d[1] = {3};
  float c[3] = {1.5f, -2.0f, 4.0f};
  input(&md, "x", F32, 1, d);
  Onnx__TensorProto* t = tensor("", F32, 1, d, c, 0);
  t->has_raw_data = 0;
  t->float_data = c;
  t->n_float_data = 3;
  attr_t(node(&md, "Constant", "", "k"), "value", t);
  Onnx__TensorProto* w = tensor("w", F32, 1, d, c, 0);
  w->has_raw_data = 0;
  float wf[3] = {10, 20, 30};
  w->float_data = wf;
  w->n_float_data = 3;
  initializer(&md, w);
  node(&md, "Mul", "x,k", "p");
  node(&md, "Add", "p,w", "y");
  output(&md, "y");
  float x[3] = {2, 3, 4}, got[3], want[3];
  for (int i = 0; i < 3; i++) want[i] = x[i] * c[i] + wf[i];
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{3}};
  const int ranks[1] = {1};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 3);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, 3, 0));
}

static int write_file(const char* path, const void* buf, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(buf, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* Public API over files: external data next to the model, rlx_onnx_load,
 * rlx_onnx_set_params, rlx_onnx_read_tensor; a location outside the folder
 * is refused. */
TEST(public_api_and_external_data) {
  char dir[] = "/tmp/rlx_onnx_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char model_path[256], data_path[256], pb_path[256];
  snprintf(model_path, sizeof model_path, "%s/model.onnx", dir);
  snprintf(data_path, sizeof data_path, "%s/weights.bin", dir);
  snprintf(pb_path, sizeof pb_path, "%s/input_0.pb", dir);
  float w[4] = {0.5f, -1, 2, 3}, pad[2] = {99, 99};
  CHECK(write_file(data_path, pad, sizeof pad));
  FILE* f = fopen(data_path, "ab");
  CHECK(f && fwrite(w, 1, sizeof w, f) == sizeof w && fclose(f) == 0);

  model md;
  model_init(&md, 13);
  int64_t d[1] = {4};
  input(&md, "x", F32, 1, d);
  Onnx__TensorProto* t = tensor("w", F32, 1, d, w, 0);
  t->has_raw_data = 0;
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  const char* keys[3] = {"location", "offset", "length"};
  const char* vals[3] = {"weights.bin", "8", "16"};
  t->external_data = tnew(sizeof(void*) * 3);
  for (int i = 0; i < 3; i++) {
    Onnx__StringStringEntryProto e = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    Onnx__StringStringEntryProto* p = tnew(sizeof *p);
    *p = e;
    p->key = tstr(keys[i]);
    p->value = tstr(vals[i]);
    t->external_data[t->n_external_data++] = p;
  }
  initializer(&md, t);
  node(&md, "Mul", "x,w", "y");
  output(&md, "y");
  size_t n;
  uint8_t* buf = pack(&md, &n);
  CHECK(write_file(model_path, buf, n));

  float x[4] = {1, 2, 3, 4}, got[4];
  Onnx__TensorProto* xt = tensor("x", F32, 1, d, x, sizeof x);
  size_t pn = onnx__tensor_proto__get_packed_size(xt);
  uint8_t* pb = tnew(pn);
  onnx__tensor_proto__pack(xt, pb);
  CHECK(write_file(pb_path, pb, pn));

  rlx_graph* g = NULL;
  char* msg = NULL;
  CHECK_MSG(rlx_onnx_load(model_path, &g, &msg) == RLX_OK, "%s", msg ? msg : "");
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  CHECK_MSG(rlx_onnx_set_params(e, model_path, &msg) == RLX_OK, "%s", msg ? msg : "");
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data = NULL;
  size_t bytes = 0;
  CHECK_MSG(rlx_onnx_read_tensor(pb_path, &dt, &rank, shape, &data, &bytes, &msg) == RLX_OK, "%s",
            msg ? msg : "");
  CHECK(dt == RLX_F32 && rank == 1 && shape[0] == 4 && bytes == sizeof x);
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", dt, shape, rank, data, bytes));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, got, sizeof got));
  for (int i = 0; i < 4; i++) CHECK(got[i] == x[i] * w[i]);
  rlx_free(data);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);

  /* a location that leaves the model's folder */
  t->external_data[0]->value = tstr("../weights.bin");
  buf = pack(&md, &n);
  CHECK(write_file(model_path, buf, n));
  CHECK(rlx_onnx_load(model_path, &g, &msg) == RLX_INVALID_ARGUMENT && !g);
  CHECK_MSG(msg && strstr(msg, "inside"), "%s", msg ? msg : "");
  rlx_free(msg);
  CHECK(rlx_onnx_load("/nonexistent/model.onnx", &g, &msg) == RLX_NOT_FOUND);
  rlx_free(msg);
  unlink(model_path);
  unlink(data_path);
  unlink(pb_path);
  rmdir(dir);
  pool_free();
}

/* ------------------------------------------------------------------ hardening (issue 13) */

/* Serialized protobuf, written back to front so each message's length is
 * known when its tag goes in front of it. */
typedef struct wire {
  uint8_t* buf;
  size_t cap, pos; /* bytes live in buf[pos, cap) */
} wire;

static void wire_front(wire* w, const uint8_t* b, size_t n) {
  w->pos -= n;
  memcpy(w->buf + w->pos, b, n);
}

/* Wraps everything written so far as field `field` (length-delimited). */
static void wire_wrap(wire* w, uint32_t field) {
  uint8_t v[16];
  size_t n = 0;
  uint64_t len = w->cap - w->pos;
  do {
    v[n++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
    len >>= 7;
  } while (len);
  wire_front(w, v, n);
  uint8_t tag = (uint8_t)(field << 3 | 2); /* every field used here is < 16 */
  wire_front(w, &tag, 1);
}

/* A ModelProto nested `levels` subgraphs deep through
 * GraphProto.node -> NodeProto.attribute -> AttributeProto.g -> GraphProto,
 * or `levels` sequence types deep through TypeProto.sequence_type ->
 * Sequence.elem_type -> TypeProto in a graph input. */
static wire deep_model(int levels, int through_types) {
  wire w = {NULL, (size_t)levels * 16 + 64, 0};
  w.buf = malloc(w.cap);
  w.pos = w.cap;
  for (int i = 0; i < levels; i++) {
    if (through_types) {
      wire_wrap(&w, 1); /* Sequence.elem_type */
      wire_wrap(&w, 4); /* TypeProto.sequence_type */
    } else {
      wire_wrap(&w, 1); /* GraphProto.node */
      wire_wrap(&w, 6); /* AttributeProto.g */
      wire_wrap(&w, 5); /* NodeProto.attribute */
    }
  }
  if (through_types) {
    wire_wrap(&w, 2);  /* ValueInfoProto.type */
    wire_wrap(&w, 11); /* GraphProto.input */
  } else {
    wire_wrap(&w, 1); /* GraphProto.node */
  }
  wire_wrap(&w, 7); /* ModelProto.graph */
  return w;
}

typedef struct import_job {
  const uint8_t* buf;
  size_t n;
  rlx_status status;
  rlx_error err;
} import_job;

static void* import_thread(void* arg) {
  import_job* j = arg;
  rlx_onnx_model* m = NULL;
  j->status = rlx_onnx_import(j->buf, j->n, NULL, &m, &j->err);
  rlx_onnx_model_destroy(m);
  return NULL;
}

/* Imports on a thread with a 256 KiB stack: a recursive parse of thousands
 * of levels overflows it (the test crashes) where the depth check refuses
 * the file first. */
static rlx_status import_small_stack(const wire* w, rlx_error* err) {
  import_job j = {w->buf + w->pos, w->cap - w->pos, RLX_INTERNAL, {{0}}};
  pthread_attr_t at;
  pthread_t th;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 256 << 10);
  if (pthread_create(&th, &at, import_thread, &j) != 0) return RLX_INTERNAL;
  pthread_join(th, NULL);
  pthread_attr_destroy(&at);
  *err = j.err;
  return j.status;
}

TEST(deep_nesting_is_refused_before_parsing) {
  for (int types = 0; types < 2; types++) {
    wire w = deep_model(3000, types);
    rlx_error err = {{0}};
    rlx_status s = import_small_stack(&w, &err);
    free(w.buf);
    CHECK_MSG(s == RLX_INVALID_ARGUMENT && strstr(err.msg, "deeper than 100"), "%d: %s", (int)s,
              err.msg);
  }
  /* Nesting within the limit goes on to the importer, which names what it
   * does not support (a sequence input), not the depth. */
  wire w = deep_model(40, 1);
  rlx_error err = {{0}};
  rlx_status s = import_small_stack(&w, &err);
  free(w.buf);
  CHECK_MSG(s != RLX_OK && !strstr(err.msg, "deeper"), "%s", err.msg);
}

/* Range(0, n, 1) forty times, each added to a running sum: every value is
 * known at import time. Run in a child process so its peak memory can be
 * measured alone. Returns the child's peak RSS in MiB (-1 on failure) and
 * the import's status and message. */
static long fold_bomb_child(int64_t n, const char* budget, rlx_status* out_status, char* msg,
                            size_t cap) {
  model md;
  model_init(&md, 13);
  int64_t lim = n, zero = 0, one = 1;
  initializer(&md, tensor("start", I64, 0, NULL, &zero, 8));
  initializer(&md, tensor("limit", I64, 0, NULL, &lim, 8));
  initializer(&md, tensor("delta", I64, 0, NULL, &one, 8));
  char prev[32] = "", name[32], sum[32];
  for (int i = 0; i < 40; i++) {
    snprintf(name, sizeof name, "range%d", i);
    node(&md, "Range", "start,limit,delta", name)->name = tstr(name);
    if (!prev[0]) {
      snprintf(prev, sizeof prev, "%s", name);
      continue;
    }
    char ins[80];
    snprintf(sum, sizeof sum, "sum%d", i);
    snprintf(ins, sizeof ins, "%s,%s", prev, name);
    node(&md, "Add", ins, sum)->name = tstr(sum);
    snprintf(prev, sizeof prev, "%s", sum);
  }
  output(&md, prev);
  size_t bytes;
  uint8_t* buf = pack(&md, &bytes);
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    setenv("RLX_ONNX_FOLD_BUDGET", budget, 1);
    rlx_onnx_model* m = NULL;
    rlx_error err = {{0}};
    rlx_status s = rlx_onnx_import(buf, bytes, NULL, &m, &err);
    rlx_onnx_model_destroy(m);
    if (write(fds[1], &s, sizeof s) != sizeof s || write(fds[1], err.msg, sizeof err.msg) < 0)
      _exit(2);
    _exit(0);
  }
  close(fds[1]);
  rlx_error err = {{0}};
  int ok = pid > 0 && read(fds[0], out_status, sizeof *out_status) == sizeof *out_status &&
           read(fds[0], err.msg, sizeof err.msg) > 0;
  close(fds[0]);
  int st = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  if (pid > 0) wait4(pid, &st, 0, &ru);
  snprintf(msg, cap, "%s", err.msg);
  return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? ru.ru_maxrss / 1024 : -1;
}

/* A 2 KB model whose Range and Add nodes (8 MB each, under the per-node
 * cap) add up to 632 MB of known values: the budget (16 MiB here) stops it
 * at the node that crosses it, and the importer's peak memory stays near
 * it (the bound leaves room for the sanitizer's shadow and quarantine). */
TEST(fold_budget_stops_a_range_bomb) {
  rlx_status s = RLX_OK;
  char msg[1024];
  long peak = fold_bomb_child((int64_t)1 << 20, "16777216", &s, msg, sizeof msg);
  pool_free();
  CHECK_MSG(peak > 0, "child failed");
  printf("  fold bomb: %s, peak RSS %ld MiB\n", rlx_status_name(s), peak);
  CHECK_MSG(s == RLX_RESOURCE_EXHAUSTED && strstr(msg, "budget of 16777216") &&
            strstr(msg, "RLX_ONNX_FOLD_BUDGET") && strstr(msg, "node '"), "%s", msg);
  CHECK_MSG(peak < 250, "peak RSS %ld MiB", peak);
  /* Under the default budget the same model at 1/64 the size imports. */
  peak = fold_bomb_child((int64_t)1 << 14, "", &s, msg, sizeof msg);
  pool_free();
  CHECK_MSG(peak > 0 && s == RLX_OK, "%s", msg);
}

/* Inputs the importer folded away (read only by Shape or as CastLike's
 * `like`) and inputs no node reads are still the graph's inputs: set_input
 * accepts them, checked against the declared dtype and rank, and a run
 * does not need them. */
TEST(declared_inputs_are_kept_even_when_unread) {
  model md;
  model_init(&md, 15);
  int64_t dx[2] = {2, 3}, dl[1] = {4}, du[2] = {-1, 2}, dy[1] = {3};
  input(&md, "x", F32, 2, dx);
  input(&md, "like", F32, 1, dl);
  md.inputs[md.g.n_input++] = value_info("u", F32, 2, du, "n");
  input(&md, "y", F32, 1, dy);
  node(&md, "Shape", "x", "s");
  node(&md, "CastLike", "y,like", "yc");
  node(&md, "Relu", "yc", "out");
  output(&md, "out");
  output(&md, "s");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  int in_graph = m->n_inputs == 4 && m->input_in_graph[0] && m->input_in_graph[1] &&
                 m->input_in_graph[2] && !m->input_read[0] && !m->input_read[2] &&
                 m->input_read[3];
  rlx_exec* e = NULL;
  rlx_status cs = rlx_compile(m->graph, "cpu", NULL, &e);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(in_graph);
  CHECK(cs == RLX_OK);
  float y[3] = {-1, 2, -3}, x[6] = {0}, got[3];
  rlx_dim sy[1] = {3}, sx[2] = {2, 3}, su[2] = {5, 2}, bad[1] = {6};
  int64_t xi[6] = {0};
  float u[10] = {0};
  rlx_status s1 = rlx_exec_set_input(e, "y", RLX_F32, sy, 1, y, sizeof y);
  rlx_status s2 = rlx_exec_run(e); /* x, like and u never set */
  rlx_status s3 = rlx_exec_read_output(e, 0, RLX_F32, got, sizeof got);
  rlx_status s4 = rlx_exec_set_input(e, "x", RLX_F32, sx, 2, x, sizeof x);
  rlx_status s5 = rlx_exec_set_input(e, "x", RLX_I64, sx, 2, xi, sizeof xi);
  rlx_status s6 = rlx_exec_set_input(e, "x", RLX_F32, bad, 1, x, sizeof x);
  rlx_status s7 = rlx_exec_set_input(e, "u", RLX_F32, su, 2, u, sizeof u);
  rlx_status s8 = rlx_exec_run(e);
  rlx_exec_destroy(e);
  CHECK(s1 == RLX_OK && s2 == RLX_OK && s3 == RLX_OK);
  CHECK(got[0] == 0 && got[1] == 2 && got[2] == 0);
  CHECK(s4 == RLX_OK && s5 == RLX_INVALID_ARGUMENT && s6 == RLX_INVALID_ARGUMENT);
  CHECK(s7 == RLX_OK && s8 == RLX_OK);
}

/* Every ONNX file the importer opens (the model, external data, a .pb
 * tensor) is refused at once when it is a FIFO, a directory or a device,
 * and a missing file names the path and the OS's reason. An alarm turns a
 * hang into a failure. */
TEST(onnx_files_must_be_regular) {
  char dir[] = "/tmp/rlx_onnx_fifo_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char fifo[256], model_path[256];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(model_path, sizeof model_path, "%s/model.onnx", dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  alarm(20);
  rlx_graph* g = NULL;
  char* msg = NULL;
  rlx_status s = rlx_onnx_load(fifo, &g, &msg);
  int fifo_ok = s == RLX_INVALID_ARGUMENT && msg && strstr(msg, "FIFO") && strstr(msg, fifo);
  rlx_free(msg);
  s = rlx_onnx_load(dir, &g, &msg);
  int dir_ok = s == RLX_INVALID_ARGUMENT && msg && strstr(msg, "directory");
  rlx_free(msg);
  s = rlx_onnx_load("/dev/zero", &g, &msg);
  int dev_ok = s == RLX_INVALID_ARGUMENT && msg && strstr(msg, "character device");
  rlx_free(msg);
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data = NULL;
  size_t bytes = 0;
  s = rlx_onnx_read_tensor(fifo, &dt, &rank, shape, &data, &bytes, &msg);
  int pb_ok = s == RLX_INVALID_ARGUMENT && msg && strstr(msg, "FIFO");
  rlx_free(msg);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/missing.onnx", dir);
  s = rlx_onnx_load(missing, &g, &msg);
  int missing_ok = s == RLX_NOT_FOUND && msg && strstr(msg, missing) &&
                   strstr(msg, strerror(ENOENT));
  rlx_free(msg);

  /* external data: a FIFO, then a regular file shorter than offset + length */
  model md;
  model_init(&md, 13);
  int64_t d[1] = {4};
  float w[4] = {1, 2, 3, 4};
  input(&md, "x", F32, 1, d);
  Onnx__TensorProto* t = tensor("w", F32, 1, d, w, 0);
  t->has_raw_data = 0;
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  t->external_data = tnew(sizeof(void*) * 2);
  const char* keys[2] = {"location", "offset"};
  const char* vals[2] = {"fifo", "0"};
  for (int i = 0; i < 2; i++) {
    Onnx__StringStringEntryProto e = ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    Onnx__StringStringEntryProto* p = tnew(sizeof *p);
    *p = e;
    p->key = tstr(keys[i]);
    p->value = tstr(vals[i]);
    t->external_data[t->n_external_data++] = p;
  }
  initializer(&md, t);
  node(&md, "Mul", "x,w", "y");
  output(&md, "y");
  size_t n;
  uint8_t* buf = pack(&md, &n);
  CHECK(write_file(model_path, buf, n));
  s = rlx_onnx_load(model_path, &g, &msg);
  int ext_fifo_ok = s == RLX_INVALID_ARGUMENT && msg && strstr(msg, "FIFO") && strstr(msg, "'w'");
  rlx_free(msg);
  char short_path[300];
  snprintf(short_path, sizeof short_path, "%s/short.bin", dir);
  CHECK(write_file(short_path, w, 8));
  t->external_data[0]->value = tstr("short.bin");
  t->external_data[1]->value = tstr("4");
  buf = pack(&md, &n);
  CHECK(write_file(model_path, buf, n));
  s = rlx_onnx_load(model_path, &g, &msg);
  int ext_short_ok = s == RLX_INVALID_ARGUMENT && msg && strstr(msg, "is 8 bytes");
  rlx_free(msg);
  alarm(0);
  unlink(fifo);
  unlink(model_path);
  unlink(short_path);
  rmdir(dir);
  pool_free();
  CHECK(fifo_ok && dir_ok && dev_ok && pb_ok);
  CHECK(missing_ok);
  CHECK(ext_fifo_ok && ext_short_ok);
}

/* ------------------------------------------------------------------ newer dtypes */

/* An initializer of ONNX type `elem` (raw_data, or the typed field onnx.proto
 * keeps that type in), cast to FLOAT by the model; returns the f32 values. */
static int cast_initializer(int elem, int typed, const void* raw, size_t bytes, int n,
                            float* got) {
  model md;
  model_init(&md, 19);
  int64_t dims[1] = {n};
  Onnx__TensorProto* t = tensor("w", elem, 1, dims, raw, bytes);
  if (typed) { /* the same values in int32_data / uint64_data instead of raw_data */
    t->has_raw_data = 0;
    size_t es = bytes / (size_t)n;
    int wide = elem == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32 ||
               elem == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
    if (wide) {
      t->uint64_data = tnew(sizeof(uint64_t) * (size_t)n);
      t->n_uint64_data = (size_t)n;
    } else {
      t->int32_data = tnew(sizeof(int32_t) * (size_t)n);
      t->n_int32_data = (size_t)n;
    }
    for (int i = 0; i < n; i++) {
      uint64_t v = 0;
      memcpy(&v, (const uint8_t*)raw + (size_t)i * es, es);
      if (elem == ONNX__TENSOR_PROTO__DATA_TYPE__INT16) v = (uint64_t)(int64_t)(int16_t)v;
      if (wide) t->uint64_data[i] = v;
      else t->int32_data[i] = (int32_t)v;
    }
  }
  initializer(&md, t);
  Onnx__NodeProto* c = node(&md, "Cast", "w", "y");
  attr_i(c, "to", F32);
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  int ok = import(&md, NULL, &m, &err) == RLX_OK;
  if (!ok) fprintf(stderr, "import: %s\n", err.msg);
  ok = ok && run_f32(m, 0, NULL, NULL, NULL, NULL, 0, got, (size_t)n);
  rlx_onnx_model_destroy(m);
  pool_free();
  return ok;
}

/* GroupNormalization with opset 18's per-group scale / bias (spread over
 * each group's channels) and opset 21's per-channel ones, against a naive
 * two-pass reference. */
static void check_group_norm(int64_t opset, int per_group) {
  enum { N = 2, C = 6, G = 3, S = 5 };
  model md;
  model_init(&md, opset);
  int64_t xs[3] = {N, C, S}, vs[1] = {per_group ? G : C};
  float x[N * C * S], scale[C], bias[C], want[N * C * S], got[N * C * S];
  test_fill_f32(x, N * C * S, -2, 2);
  test_fill_f32(scale, C, 0.5, 2);
  test_fill_f32(bias, C, -1, 1);
  initializer(&md, tensor("scale", F32, 1, vs, scale, sizeof(float) * (size_t)vs[0]));
  initializer(&md, tensor("bias", F32, 1, vs, bias, sizeof(float) * (size_t)vs[0]));
  input(&md, "x", F32, 3, xs);
  Onnx__NodeProto* n = node(&md, "GroupNormalization", "x,scale,bias", "y");
  attr_i(n, "num_groups", G);
  attr_f(n, "epsilon", 1e-3f);
  output(&md, "y");
  int per = C / G * S;
  for (int g = 0; g < N * G; g++) {
    double mean = 0, var = 0;
    for (int j = 0; j < per; j++) mean += x[g * per + j];
    mean /= per;
    for (int j = 0; j < per; j++) var += (x[g * per + j] - mean) * (x[g * per + j] - mean);
    var /= per;
    for (int j = 0; j < per; j++) {
      int ch = (g % G) * (C / G) + j / S, v = per_group ? ch / (C / G) : ch;
      want[g * per + j] =
          (float)((x[g * per + j] - mean) / sqrt(var + 1e-3) * scale[v] + bias[v]);
    }
  }
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{N, C, S}};
  const int ranks[1] = {3};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, N * C * S);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK_MSG(ok && close_to(got, want, N * C * S, 1e-5), "opset %lld per_group %d",
            (long long)opset, per_group);
}

TEST(group_normalization_scales_per_group_or_channel) {
  check_group_norm(18, 1);
  check_group_norm(21, 0);
}

TEST(initializers_of_the_newer_dtypes) {
  const int16_t i16[3] = {-32768, 7, 32767};
  const uint16_t u16[3] = {65535, 7, 0};
  const uint32_t u32[3] = {4000000000u, 7, 0};
  const uint64_t u64[3] = {1ull << 40, 7, 0};
  const uint8_t f8[3] = {0x38, 0x7E, 0xB0}; /* e4m3fn: 1, 448, -0.5 */
  const float want_i16[3] = {-32768, 7, 32767}, want_u16[3] = {65535, 7, 0},
              want_u32[3] = {4000000000.0f, 7, 0}, want_u64[3] = {1099511627776.0f, 7, 0},
              want_f8[3] = {1.0f, 448.0f, -0.5f};
  float got[3];
  for (int typed = 0; typed < 2; typed++) {
    CHECK(cast_initializer(ONNX__TENSOR_PROTO__DATA_TYPE__INT16, typed, i16, sizeof i16, 3, got) &&
          close_to(got, want_i16, 3, 0));
    CHECK(cast_initializer(ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, typed, u16, sizeof u16, 3, got) &&
          close_to(got, want_u16, 3, 0));
    CHECK(cast_initializer(ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, typed, u32, sizeof u32, 3, got) &&
          close_to(got, want_u32, 3, 0));
    CHECK(cast_initializer(ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, typed, u64, sizeof u64, 3, got) &&
          close_to(got, want_u64, 3, 0));
    CHECK(cast_initializer(17 /* FLOAT8E4M3FN */, typed, f8, sizeof f8, 3, got) &&
          close_to(got, want_f8, 3, 0));
  }
  /* the other float8 codes: 0x40 is 2.0 in e5m2 (19) and 1.0 in both fnuz (18, 20) */
  const uint8_t one_code[1] = {0x40};
  const float two[1] = {2.0f}, one[1] = {1.0f};
  CHECK(cast_initializer(19, 0, one_code, 1, 1, got) && close_to(got, two, 1, 0));
  CHECK(cast_initializer(18, 0, one_code, 1, 1, got) && close_to(got, one, 1, 0));
  CHECK(cast_initializer(20, 1, one_code, 1, 1, got) && close_to(got, one, 1, 0));
}

/* Cast f32 -> FLOAT8E4M3FN -> f32 rounds and saturates; saturate=0 is refused. */
static int f8_cast_model(model* md, int64_t saturate) {
  model_init(md, 19);
  int64_t dims[1] = {4};
  input(md, "x", F32, 1, dims);
  Onnx__NodeProto* a = node(md, "Cast", "x", "q");
  attr_i(a, "to", 17);
  if (saturate >= 0) attr_i(a, "saturate", saturate);
  Onnx__NodeProto* b = node(md, "Cast", "q", "y");
  attr_i(b, "to", F32);
  output(md, "y");
  return 1;
}

TEST(cast_through_float8) {
  model md;
  f8_cast_model(&md, -1);
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const float x[4] = {300.0f, 1e6f, -0.3f, 17.0f}, want[4] = {288.0f, 448.0f, -0.3125f, 16.0f};
  float got[4];
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{4}};
  const int ranks[1] = {1};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 4);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, 4, 0));
  f8_cast_model(&md, 0);
  m = NULL;
  CHECK(import(&md, NULL, &m, &err) == RLX_UNIMPLEMENTED);
  CHECK(strstr(err.msg, "saturate=0"));
  pool_free();
}

/* ------------------------------------------------------------------ Einsum, Det, value-shaped ops */

static void attr_s(Onnx__NodeProto* n, const char* name, const char* v) {
  Onnx__AttributeProto* a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  a->has_s = 1;
  a->s.len = strlen(v);
  a->s.data = (uint8_t*)tstr(v);
}

/* Brute-force einsum over every assignment of the labels: `eq` spells every
 * dim with a letter (no ellipsis, explicit output), so it is the reference
 * for an equation the importer sees in another spelling. */
static void einsum_ref(const char* eq, int n_in, const int64_t (*shapes)[4], const float* const* x,
                       float* out, int64_t out_n) {
  const char* terms[4];
  int lens[4], n_t = 0;
  int64_t size[128] = {0};
  const char* p = eq;
  for (; n_t <= n_in; n_t++) {
    terms[n_t] = p;
    while (*p && *p != ',' && *p != '-') p++;
    lens[n_t] = (int)(p - terms[n_t]);
    if (*p == ',') p++;
    else if (*p == '-') p += 2;
  }
  char labels[16];
  int n_lab = 0;
  for (int t = 0; t < n_in; t++)
    for (int d = 0; d < lens[t]; d++) {
      int ch = terms[t][d];
      if (!size[ch]) labels[n_lab++] = (char)ch;
      if (shapes[t][d] > size[ch]) size[ch] = shapes[t][d]; /* size 1 broadcasts */
    }
  double acc[256] = {0};
  int64_t val[128] = {0};
  for (int64_t combo = 0;; combo++) {
    int64_t rem = combo;
    for (int l = n_lab - 1; l >= 0; l--) {
      val[(int)labels[l]] = rem % size[(int)labels[l]];
      rem /= size[(int)labels[l]];
    }
    if (rem) break;
    double prod = 1;
    for (int t = 0; t < n_in; t++) {
      int64_t off = 0;
      for (int d = 0; d < lens[t]; d++)
        off = off * shapes[t][d] + (shapes[t][d] == 1 ? 0 : val[(int)terms[t][d]]);
      prod *= x[t][off];
    }
    int64_t o = 0;
    for (int d = 0; d < lens[n_in]; d++) o = o * size[(int)terms[n_in][d]] + val[(int)terms[n_in][d]];
    acc[o] += prod;
  }
  for (int64_t i = 0; i < out_n; i++) out[i] = (float)acc[i];
}

typedef struct einsum_case {
  const char* eq;  /* what the model says */
  const char* ref; /* the same, every dim named */
  int n_in;
  int ranks[3];
  int64_t shapes[3][4];
  int64_t out_n;
} einsum_case;

static int einsum_check(const einsum_case* k) {
  model md;
  model_init(&md, 12);
  static const char* const in_names[3] = {"a", "b", "c"};
  float data[3][64], got[64], want[64];
  const float* ptrs[3];
  for (int i = 0; i < k->n_in; i++) {
    input(&md, in_names[i], F32, k->ranks[i], k->shapes[i]);
    test_fill_f32(data[i], 64, -1, 1);
    ptrs[i] = data[i];
  }
  const char* ins = k->n_in == 1 ? "a" : k->n_in == 2 ? "a,b" : "a,b,c";
  attr_s(node(&md, "Einsum", ins, "y"), "equation", k->eq);
  output(&md, "y");
  einsum_ref(k->ref, k->n_in, (const int64_t(*)[4])k->shapes, ptrs, want, k->out_n);
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  int ok = import(&md, NULL, &m, &err) == RLX_OK;
  if (!ok) fprintf(stderr, "%s: %s\n", k->eq, err.msg);
  ok = ok && run_f32(m, k->n_in, in_names, (const int64_t(*)[4])k->shapes, k->ranks, ptrs, 0, got,
                     (size_t)k->out_n);
  rlx_onnx_model_destroy(m);
  pool_free();
  if (ok && !close_to(got, want, (int)k->out_n, 1e-5)) {
    fprintf(stderr, "einsum %s differs\n", k->eq);
    ok = 0;
  }
  return ok;
}

TEST(einsum_equations) {
  static const einsum_case cases[] = {
      {"bij,bjk->bik", "bij,bjk->bik", 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}, 30},
      {"ii->i", "ii->i", 1, {2}, {{4, 4}}, 4},
      {"ij->", "ij->", 1, {2}, {{3, 4}}, 1},
      {"ii", "ii->", 1, {2}, {{5, 5}}, 1},
      {"...ij,...jk->...ik", "xyij,xyjk->xyik", 2, {4, 4}, {{2, 3, 2, 4}, {2, 3, 4, 2}}, 24},
      {"ij,jk,kl->il", "ij,jk,kl->il", 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 2}}, 4},
      {"i,j", "i,j->ij", 2, {1, 1}, {{3}, {4}}, 12},
      {"ij,ij->ji", "ij,ij->ji", 2, {2, 2}, {{3, 4}, {3, 4}}, 12},
      {"iij,kj->ki", "iij,kj->ki", 2, {3, 2}, {{3, 3, 2}, {4, 2}}, 12},
      {"b i j, b k j -> b", "bij,bkj->b", 2, {3, 3}, {{2, 2, 3}, {2, 4, 3}}, 2},
      {"...ij,...jk", "xyij,yjk->xyik", 2, {4, 3}, {{2, 3, 2, 4}, {3, 4, 2}}, 24},
      {"...ij,...jk->...ik", "xyij,xyjk->xyik", 2, {4, 4}, {{2, 1, 2, 4}, {1, 3, 4, 2}}, 24},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK_MSG(einsum_check(&cases[i]), "%s", cases[i].eq);
}

/* Det of 3x3 matrices (Leibniz expansion) against the cofactor formula. */
TEST(det_three_by_three) {
  model md;
  model_init(&md, 11);
  int64_t d[3] = {2, 3, 3};
  input(&md, "x", F32, 3, d);
  node(&md, "Det", "x", "y");
  output(&md, "y");
  float x[18], got[2], want[2];
  test_fill_f32(x, 18, -2, 2);
  for (int b = 0; b < 2; b++) {
    const float* a = x + 9 * b;
    want[b] = (float)((double)a[0] * (a[4] * a[8] - a[5] * a[7]) -
                      (double)a[1] * (a[3] * a[8] - a[5] * a[6]) +
                      (double)a[2] * (a[3] * a[7] - a[4] * a[6]));
  }
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(import(&md, NULL, &m, &err) == RLX_OK, "%s", err.msg);
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{2, 3, 3}};
  const int ranks[1] = {3};
  const float* data[1] = {x};
  int ok = run_f32(m, 1, in, shapes, ranks, data, 0, got, 2);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && close_to(got, want, 2, 1e-5));
}

/* NonZero's output shape is its input's non-zero count: an input derived
 * from a graph input is reported as needed, and a frozen one folds. */
TEST(nonzero_needs_its_input) {
  model md;
  model_init(&md, 13);
  int64_t d[2] = {2, 3};
  input(&md, "x", F32, 2, d);
  node(&md, "NonZero", "x", "y");
  output(&md, "y");
  char needs[64] = "";
  rlx_onnx_options o;
  memset(&o, 0, sizeof o);
  o.needs_input = needs;
  o.needs_input_cap = sizeof needs;
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  CHECK(import(&md, &o, &m, &err) == RLX_FAILED_PRECONDITION && m == NULL);
  CHECK_MSG(strcmp(needs, "x") == 0, "%s / %s", needs, err.msg);
  float v[6] = {0, 1.5f, 0, -2, 0, 3};
  rlx_host_tensor h = {RLX_F32, 2, {2, 3}, v, sizeof v};
  const char* fn[1] = {"x"};
  o.frozen_names = fn;
  o.frozen_values = &h;
  o.n_frozen = 1;
  CHECK_MSG(import(&md, &o, &m, &err) == RLX_OK, "%s", err.msg);
  rlx_dtype dt;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
  rlx_graph_tensor_type(m->graph, m->graph->outputs[0], &dt, &rank, shape);
  CHECK(dt == RLX_I64 && rank == 2 && shape[0] == 2 && shape[1] == 3);
  rlx_exec* e = NULL;
  int64_t got[6], want[6] = {0, 1, 1, 1, 0, 2};
  int ok = rlx_compile(m->graph, "cpu", NULL, &e) == RLX_OK &&
           rlx_onnx_model_set_params(m, e, &err) == RLX_OK && rlx_exec_run(e) == RLX_OK &&
           rlx_exec_read_output(e, 0, RLX_I64, got, sizeof got) == RLX_OK;
  rlx_exec_destroy(e);
  rlx_onnx_model_destroy(m);
  pool_free();
  CHECK(ok && memcmp(got, want, sizeof got) == 0);
}

/* ScatterElements with known duplicate indices: each reduction applies the
 * updates in index order (none: the last write wins); mul with indices
 * from a graph input is reported as needing them. */
static int scatter_case(const char* reduction, const float* want, int known) {
  model md;
  model_init(&md, 18);
  int64_t d[2] = {1, 5}, di[2] = {1, 4};
  int64_t idx[4] = {1, -4, 3, 1};
  float upd[4] = {2, 3, 4, 5};
  input(&md, "x", F32, 2, d);
  if (known) initializer(&md, tensor("i", I64, 2, di, idx, sizeof idx));
  else input(&md, "i", I64, 2, di);
  initializer(&md, tensor("u", F32, 2, di, upd, sizeof upd));
  Onnx__NodeProto* n = node(&md, "ScatterElements", "x,i,u", "y");
  attr_i(n, "axis", 1);
  attr_s(n, "reduction", reduction);
  output(&md, "y");
  char needs[64] = "";
  rlx_onnx_options o;
  memset(&o, 0, sizeof o);
  o.needs_input = needs;
  o.needs_input_cap = sizeof needs;
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  rlx_status s = import(&md, &o, &m, &err);
  if (!known) {
    pool_free();
    return s == RLX_FAILED_PRECONDITION && strcmp(needs, "i") == 0;
  }
  float x[5] = {1, 4, -1, 2, 7}, got[5];
  const char* in[1] = {"x"};
  const int64_t shapes[1][4] = {{1, 5}};
  const int ranks[1] = {2};
  const float* data[1] = {x};
  int ok = s == RLX_OK && run_f32(m, 1, in, shapes, ranks, data, 0, got, 5);
  if (s != RLX_OK) fprintf(stderr, "%s: %s\n", reduction, err.msg);
  rlx_onnx_model_destroy(m);
  pool_free();
  return ok && close_to(got, want, 5, 0);
}

TEST(scatter_elements_duplicates_per_reduction) {
  static const float none[5] = {1, 5, -1, 4, 7}, add[5] = {1, 14, -1, 6, 7};
  static const float mul[5] = {1, 120, -1, 8, 7}, mx[5] = {1, 5, -1, 4, 7};
  static const float mn[5] = {1, 2, -1, 2, 7};
  CHECK(scatter_case("none", none, 1));
  CHECK(scatter_case("add", add, 1));
  CHECK(scatter_case("mul", mul, 1));
  CHECK(scatter_case("max", mx, 1));
  CHECK(scatter_case("min", mn, 1));
  CHECK(scatter_case("mul", mul, 0));
}

/* The quantization ops refuse what they cannot do exactly with a message
 * naming the op and the dtype or parameter (their numbers are checked
 * against numpy by tests/onnx_quant.sh on every backend). */
static void quant_refusal(int64_t opset, const char* op, int x_elem, const char* extra_in,
                          int extra_elem, const char* attr_name, int64_t attr_v, rlx_status want,
                          const char* msg1, const char* msg2) {
  model md;
  model_init(&md, opset);
  int64_t d[2] = {2, 3}, one[1] = {3};
  input(&md, "x", x_elem, 2, d);
  float s = 0.5f;
  initializer(&md, tensor("s", F32, 0, NULL, &s, sizeof s));
  char ins[64];
  snprintf(ins, sizeof ins, "x,s%s%s", extra_in ? "," : "", extra_in ? extra_in : "");
  if (extra_in) input(&md, extra_in, extra_elem, 1, one);
  Onnx__NodeProto* n = node(&md, op, ins, "y");
  if (attr_name) attr_i(n, attr_name, attr_v);
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  rlx_status st = import(&md, NULL, &m, &err);
  CHECK_MSG(st == want && !m, "%s: status %d: %s", op, (int)st, err.msg);
  CHECK_MSG(strstr(err.msg, op) && strstr(err.msg, msg1) && (!msg2 || strstr(err.msg, msg2)),
            "%s", err.msg);
  rlx_onnx_model_destroy(m);
  pool_free();
}

TEST(quantization_ops_refuse_clearly) {
  enum { U8 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, I16 = ONNX__TENSOR_PROTO__DATA_TYPE__INT16 };
  /* int4 has no rlx dtype */
  quant_refusal(21, "QuantizeLinear", F32, NULL, 0, "output_dtype", 22, RLX_UNIMPLEMENTED,
                "output_dtype int4", NULL);
  /* float8 without saturation */
  quant_refusal(19, "QuantizeLinear", F32, "z", 17, "saturate", 0, RLX_UNIMPLEMENTED,
                "saturate=0", "f8e4m3fn");
  quant_refusal(21, "QuantizeLinear", F32, NULL, 0, "output_dtype", 7, RLX_UNIMPLEMENTED,
                "quantized dtype i64", NULL);
  quant_refusal(13, "DequantizeLinear", I64, NULL, 0, NULL, 0, RLX_UNIMPLEMENTED, "i64", NULL);
  /* a per-axis zero point of the wrong length (3 along axis 0 of [2, 3]) */
  quant_refusal(13, "DequantizeLinear", U8, "z", U8, "axis", 0, RLX_INVALID_ARGUMENT,
                "x_zero_point has 3 elements", NULL);
  /* a 16-bit operand of an integer matmul */
  quant_refusal(10, "MatMulInteger", I16, "b", I16, NULL, 0, RLX_UNIMPLEMENTED, "A of dtype i16",
                "u8, i8");
}

/* MatMul(x, DequantizeLinear(constant W)) imports as one DequantMatMul
 * (W kept as int8 rows); a per-row (axis 0) scale has no Int8Block form
 * and stays a MatMul of the dequantized weight. Numbers: onnx_quant.sh. */
static int qdq_matmul_uses_dequant(int64_t axis, int per_axis) {
  model md;
  model_init(&md, 13);
  int64_t xd[2] = {2, 4}, wd[2] = {4, 3}, s3[1] = {3}, s4[1] = {4};
  uint8_t w[12] = {0, 1, 2, 3, 250, 251, 252, 253, 128, 7, 9, 200};
  float sc[4] = {0.5f, 0.25f, 0.125f, 1.0f};
  uint8_t zp[4] = {1, 2, 3, 4};
  enum { U8 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8 };
  int64_t* sd = axis == 1 ? s3 : s4;
  input(&md, "x", F32, 2, xd);
  initializer(&md, tensor("w", U8, 2, wd, w, sizeof w));
  initializer(&md, tensor("s", F32, per_axis, sd, sc, sizeof(float) * (per_axis ? (size_t)sd[0] : 1)));
  initializer(&md, tensor("z", U8, per_axis, sd, zp, per_axis ? (size_t)sd[0] : 1));
  Onnx__NodeProto* n = node(&md, "DequantizeLinear", "w,s,z", "wf");
  if (per_axis) attr_i(n, "axis", axis);
  node(&md, "MatMul", "x,wf", "y");
  output(&md, "y");
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  int found = -1;
  if (import(&md, NULL, &m, &err) == RLX_OK) {
    char* text = NULL;
    if (rlx_graph_print(m->graph, &text) == RLX_OK) found = strstr(text, "dequant_matmul") != NULL;
    rlx_free(text);
  } else {
    fprintf(stderr, "import: %s\n", err.msg);
  }
  rlx_onnx_model_destroy(m);
  pool_free();
  return found;
}

TEST(qdq_matmul_becomes_dequant_matmul) {
  CHECK(qdq_matmul_uses_dequant(1, 0) == 1); /* per tensor */
  CHECK(qdq_matmul_uses_dequant(1, 1) == 1); /* per column */
  CHECK(qdq_matmul_uses_dequant(0, 1) == 0); /* per row: a plain MatMul */
  setenv("RLX_ONNX_NO_DEQUANT_MATMUL", "1", 1);
  CHECK(qdq_matmul_uses_dequant(1, 0) == 0); /* switched off */
  unsetenv("RLX_ONNX_NO_DEQUANT_MATMUL");
}

int main(void) {
  test_seed(9);
  RUN(add_relu_with_initializer_param);
  RUN(gemm_transposes_alpha_beta);
  RUN(shape_chain_folds_to_constants);
  RUN(reshape_target_input_needs_freezing);
  RUN(unsupported_op_and_attribute_are_named);
  RUN(malformed_files_are_errors);
  RUN(symbolic_dims_become_symbols);
  RUN(softmax_opset_11_flattens_opset_13_does_not);
  RUN(axes_attribute_before_13_input_after);
  RUN(floor_ceil_sign_erf_compositions);
  RUN(conv_grouped_strided_padded);
  RUN(slice_negative_step_and_gather_elements);
  RUN(constant_node_and_typed_fields);
  RUN(public_api_and_external_data);
  RUN(deep_nesting_is_refused_before_parsing);
  RUN(fold_budget_stops_a_range_bomb);
  RUN(declared_inputs_are_kept_even_when_unread);
  RUN(onnx_files_must_be_regular);
  RUN(initializers_of_the_newer_dtypes);
  RUN(group_normalization_scales_per_group_or_channel);
  RUN(cast_through_float8);
  RUN(einsum_equations);
  RUN(det_three_by_three);
  RUN(nonzero_needs_its_input);
  RUN(scatter_elements_duplicates_per_reduction);
  RUN(quantization_ops_refuse_clearly);
  RUN(qdq_matmul_becomes_dequant_matmul);
  return test_summary();
}
#endif
