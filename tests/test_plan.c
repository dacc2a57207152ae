/* Memory planner: randomized graphs checked by rlx_plan_verify and by an
 * independent brute-force check written here; aliasing and in-place cases;
 * 64-bit offsets; arena vs peak-live ratio on GPT-style and MLP graphs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/graph.h"
#include "passes/plan.h"

/* ------------------------------------------------------------ independent check */

static uint64_t type_bytes(const rlx_type* t) {
  uint64_t b = rlx_dtype_size(t->dtype);
  for (int32_t d = 0; d < t->rank; d++) b *= (uint64_t)t->shape[d];
  return b;
}

static int is_view_node(const rlx_graph* g, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  if (n->op == RLX_OP_RESHAPE || n->op == RLX_OP_STOP_GRADIENT) return 1;
  return n->op == RLX_OP_CAST &&
         g->values[n->in[0]].type.dtype == g->values[n->out[0]].type.dtype;
}

/* The value whose bytes a value shows, following views only. */
static int32_t test_view_root(const rlx_graph* g, int32_t v) {
  while (is_view_node(g, g->values[v].node)) v = g->nodes[g->values[v].node].in[0];
  return v;
}

static int is_elementwise(rlx_op op) {
  return op == RLX_OP_BINARY || op == RLX_OP_COMPARE || op == RLX_OP_WHERE ||
         op == RLX_OP_ACTIVATION || op == RLX_OP_CAST;
}

static int same_shape_and_size(const rlx_type* a, const rlx_type* b) {
  if (a->rank != b->rank || rlx_dtype_size(a->dtype) != rlx_dtype_size(b->dtype)) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* u (an input of node p) and v (its output) may share bytes exactly when p
 * writes v elementwise over u. */
static int inplace_pair(const rlx_graph* g, int32_t p, int32_t u, int32_t v) {
  const rlx_node* n = &g->nodes[p];
  if (!is_elementwise(n->op) || n->out[0] != v) return 0;
  int reads_u = 0;
  for (int32_t s = 0; s < n->n_in; s++) reads_u |= n->in[s] == u;
  return reads_u && same_shape_and_size(&g->values[u].type, &g->values[v].type);
}

static int allowed_overlap(const rlx_graph* g, const rlx_plan* pl, int32_t p, int32_t u,
                           int32_t v) {
  if (pl->offset[u] != pl->offset[v]) return 0;
  if (test_view_root(g, u) == test_view_root(g, v)) return 1;
  if (p >= g->n_nodes) return 0; /* after the last node nothing runs */
  return inplace_pair(g, p, u, v) || inplace_pair(g, p, v, u);
}

/* Simulates every position: the values whose contents must be intact there
 * (own lifetime from the graph, leaves and outputs for the whole run) must
 * not overlap, except a view with its source or an in-place write at p. */
static int brute_force_check(const rlx_graph* g, const rlx_plan* pl, char* why, size_t cap) {
  int32_t n = g->n_nodes, nv = g->n_values;
  int32_t* lo = malloc(sizeof(int32_t) * (size_t)(nv + 1));
  int32_t* hi = malloc(sizeof(int32_t) * (size_t)(nv + 1));
  int32_t* live = malloc(sizeof(int32_t) * (size_t)(nv + 1));
  int ok = lo && hi && live;
  for (int32_t v = 0; ok && v < nv; v++) {
    int32_t ni = g->values[v].node;
    int leaf = g->nodes[ni].op == RLX_OP_INPUT || g->nodes[ni].op == RLX_OP_PARAM ||
               g->nodes[ni].op == RLX_OP_CONSTANT;
    lo[v] = leaf ? 0 : ni;
    hi[v] = leaf ? n : ni;
    uint64_t b = type_bytes(&g->values[v].type);
    if (pl->bytes[v] != b || pl->offset[v] % pl->alignment || pl->offset[v] + b > pl->arena_bytes) {
      snprintf(why, cap, "value %d: bytes %llu (want %llu) offset %llu arena %llu", (int)v,
               (unsigned long long)pl->bytes[v], (unsigned long long)b,
               (unsigned long long)pl->offset[v], (unsigned long long)pl->arena_bytes);
      ok = 0;
    }
  }
  for (int32_t ni = 0; ok && ni < n; ni++)
    for (int32_t s = 0; s < g->nodes[ni].n_in; s++) {
      int32_t t = g->nodes[ni].in[s];
      if (t >= 0 && hi[t] < ni) hi[t] = ni;
    }
  /* A graph output's contents exist from its producer on (before that its
   * bytes may still hold the input it is computed over in place), but the
   * plan must reserve them for the whole run. */
  for (int32_t i = 0; ok && i < g->n_outputs; i++) {
    int32_t t = g->outputs[i], r = pl->root[t];
    hi[t] = n;
    if (pl->bytes[t] && (pl->first[r] != 0 || pl->last[r] != n)) {
      snprintf(why, cap, "output value %d: root %d lives [%d,%d]", (int)t, (int)r,
               (int)pl->first[r], (int)pl->last[r]);
      ok = 0;
    }
  }
  for (int32_t p = 0; ok && p <= n; p++) {
    int32_t m = 0;
    for (int32_t v = 0; v < nv; v++)
      if (lo[v] <= p && p <= hi[v] && pl->bytes[v]) live[m++] = v;
    for (int32_t i = 0; ok && i < m; i++)
      for (int32_t j = i + 1; ok && j < m; j++) {
        int32_t u = live[i], v = live[j];
        uint64_t u0 = pl->offset[u], u1 = u0 + pl->bytes[u];
        uint64_t v0 = pl->offset[v], v1 = v0 + pl->bytes[v];
        if (u0 < v1 && v0 < u1 && !allowed_overlap(g, pl, p, u, v)) {
          snprintf(why, cap, "position %d: value %d [%llu,%llu) overlaps value %d [%llu,%llu)",
                   (int)p, (int)u, (unsigned long long)u0, (unsigned long long)u1, (int)v,
                   (unsigned long long)v0, (unsigned long long)v1);
          ok = 0;
        }
      }
  }
  if (ok && pl->arena_bytes < pl->peak_live_bytes) {
    snprintf(why, cap, "arena %llu < peak live %llu", (unsigned long long)pl->arena_bytes,
             (unsigned long long)pl->peak_live_bytes);
    ok = 0;
  }
  free(lo);
  free(hi);
  free(live);
  return ok;
}

/* ------------------------------------------------------------ random graphs */

typedef struct pool {
  rlx_tensor t[256];
  int32_t n;
} pool;

static void pool_add(pool* p, rlx_tensor t) {
  if (p->n < 256) p->t[p->n++] = t;
}

static rlx_tensor pool_pick(const pool* p) {
  /* Favour recent tensors so chains (and dying inputs) are common. */
  int32_t lo = p->n > 6 && test_rand_int(0, 3) ? p->n - 6 : 0;
  return p->t[test_rand_int(lo, p->n - 1)];
}

static rlx_type type_of(rlx_graph* g, rlx_tensor t) { return g->values[t].type; }

static int param_counter = 0;

static rlx_tensor new_leaf(rlx_graph* g, rlx_dtype dt, const rlx_dim* shape, int32_t rank) {
  char name[32];
  snprintf(name, sizeof name, "p%d", param_counter++);
  rlx_tensor t = RLX_NONE;
  if (test_rand_int(0, 1))
    rlx_graph_add_param(g, name, dt, shape, rank, &t);
  else
    rlx_graph_add_input(g, name, dt, shape, rank, &t);
  return t;
}

static rlx_tensor random_leaf(rlx_graph* g) {
  rlx_dim shape[3];
  int32_t rank = (int32_t)test_rand_int(1, 3);
  for (int32_t d = 0; d < rank; d++) shape[d] = test_rand_int(test_rand_int(0, 30) ? 1 : 0, 7);
  return new_leaf(g, RLX_F32, shape, rank);
}

/* A second operand for x: x itself, a pool tensor of the same type, a new
 * leaf of the same shape, or one of its last dim (broadcast). */
static rlx_tensor partner(rlx_graph* g, const pool* p, rlx_tensor x) {
  rlx_type xt = type_of(g, x);
  int choice = (int)test_rand_int(0, 3);
  if (choice == 0) return x;
  if (choice == 1)
    for (int32_t tries = 0; tries < 8; tries++) {
      rlx_tensor y = pool_pick(p);
      rlx_type yt = type_of(g, y);
      if (yt.dtype == xt.dtype && same_shape_and_size(&xt, &yt)) return y;
    }
  if (choice == 3 && xt.rank > 0) return new_leaf(g, xt.dtype, &xt.shape[xt.rank - 1], 1);
  return new_leaf(g, xt.dtype, xt.shape, xt.rank);
}

static rlx_status random_reshape(rlx_graph* g, rlx_tensor x, rlx_tensor* out) {
  rlx_type xt = type_of(g, x);
  rlx_dim shape[3] = {RLX_DIM_INFER, 1, 1};
  int32_t rank = 1;
  if (xt.rank >= 2 && test_rand_int(0, 1)) { /* merge the first two dims */
    shape[0] = xt.shape[0] * xt.shape[1];
    for (int32_t d = 2; d < xt.rank; d++) shape[rank++] = xt.shape[d];
  } else if (test_rand_int(0, 1)) {
    shape[1] = xt.rank ? xt.shape[xt.rank - 1] : 1;
    rank = 2;
  }
  return rlx_graph_add_reshape(g, x, shape, rank, out);
}

static rlx_status random_transpose(rlx_graph* g, rlx_tensor x, rlx_tensor* out) {
  rlx_type xt = type_of(g, x);
  int32_t perm[RLX_MAX_RANK];
  for (int32_t d = 0; d < xt.rank; d++) perm[d] = d;
  for (int32_t d = xt.rank - 1; d > 0; d--) {
    int32_t j = (int32_t)test_rand_int(0, d), tmp = perm[d];
    perm[d] = perm[j];
    perm[j] = tmp;
  }
  return rlx_graph_add_transpose(g, x, perm, xt.rank, out);
}

static rlx_status random_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor* out) {
  rlx_type xt = type_of(g, x);
  if (xt.rank < 2) return RLX_INVALID_ARGUMENT;
  rlx_dim ws[2] = {xt.shape[xt.rank - 1], test_rand_int(1, 9)};
  return rlx_graph_add_matmul(g, x, new_leaf(g, xt.dtype, ws, 2), 0, 0, out);
}

static rlx_status random_cast(rlx_graph* g, rlx_tensor x, rlx_tensor* out) {
  static const rlx_dtype kinds[] = {RLX_F32, RLX_I32, RLX_F16, RLX_F64, RLX_F32};
  return rlx_graph_add_cast(g, x, kinds[test_rand_int(0, 4)], out);
}

/* Adds one random op on pool tensors; the new tensors join the pool. */
static rlx_status random_op(rlx_graph* g, pool* p) {
  rlx_tensor x = pool_pick(p), outs[2] = {RLX_NONE, RLX_NONE};
  rlx_type xt = type_of(g, x);
  int32_t last = xt.rank > 0 ? xt.rank - 1 : 0;
  rlx_status st;
  switch (test_rand_int(0, 13)) {
    case 0: st = rlx_graph_add_binary(g, RLX_BIN_ADD, x, partner(g, p, x), outs); break;
    case 1: st = rlx_graph_add_binary(g, RLX_BIN_MUL, partner(g, p, x), x, outs); break;
    case 2: st = rlx_graph_add_activation(g, RLX_ACT_RELU, x, outs); break;
    case 3: st = rlx_graph_add_activation(g, RLX_ACT_EXP, x, outs); break;
    case 4: st = random_matmul(g, x, outs); break;
    case 5: st = random_reshape(g, x, outs); break;
    case 6: st = random_transpose(g, x, outs); break;
    case 7: {
      rlx_tensor xs[2] = {x, partner(g, p, x)};
      st = rlx_graph_add_concat(g, xs, 2, 0, outs);
      break;
    }
    case 8: {
      int32_t axis = (int32_t)test_rand_int(0, last);
      st = rlx_graph_add_reduce(g, RLX_RED_SUM, x, &axis, 1, (int32_t)test_rand_int(0, 1), outs);
      break;
    }
    case 9: st = rlx_graph_add_softmax(g, x, last, outs); break;
    case 10: {
      int64_t k = xt.rank ? test_rand_int(1, xt.shape[last] > 0 ? xt.shape[last] : 1) : 1;
      st = rlx_graph_add_topk(g, x, k, last, 1, &outs[0], &outs[1]);
      break;
    }
    case 11: st = random_cast(g, x, outs); break;
    case 12: { /* where(x > y, x, y): three slots of two element sizes */
      rlx_tensor y = partner(g, p, x), cond;
      st = rlx_graph_add_compare(g, RLX_CMP_GT, x, y, &cond);
      if (st == RLX_OK) st = rlx_graph_add_where(g, cond, x, y, outs);
      break;
    }
    default: st = rlx_graph_add_stop_gradient(g, x, outs); break;
  }
  if (st == RLX_OK)
    for (int32_t i = 0; i < 2; i++)
      if (outs[i] != RLX_NONE) pool_add(p, outs[i]);
  return st;
}

static rlx_graph* random_graph(int32_t* accepted, int32_t* tried) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  pool p = {{0}, 0};
  int32_t n_leaves = (int32_t)test_rand_int(1, 3);
  for (int32_t i = 0; i < n_leaves; i++) {
    rlx_tensor t = random_leaf(g);
    if (t != RLX_NONE) pool_add(&p, t);
  }
  if (p.n == 0) return g;
  int32_t n_ops = (int32_t)test_rand_int(1, 40);
  for (int32_t i = 0; i < n_ops; i++) {
    (*tried)++;
    if (random_op(g, &p) == RLX_OK) (*accepted)++;
  }
  rlx_tensor outs[3];
  int32_t n_out = (int32_t)test_rand_int(0, 3);
  for (int32_t i = 0; i < n_out; i++) outs[i] = pool_pick(&p);
  rlx_graph_set_outputs(g, outs, n_out);
  return g;
}

TEST(random_graphs_verify) {
  test_seed(12345);
  int32_t accepted = 0, tried = 0, inplace_seen = 0, views_seen = 0;
  for (int32_t iter = 0; iter < 3000; iter++) {
    rlx_graph* g = random_graph(&accepted, &tried);
    CHECK(g != NULL);
    rlx_plan_options opt = {(uint64_t)16 << test_rand_int(0, 4), (int32_t)test_rand_int(0, 1), 0};
    rlx_plan pl;
    rlx_status st = rlx_plan_memory(g, &opt, &pl);
    if (st != RLX_OK) {
      fprintf(stderr, "iter %d: %s\n", (int)iter, rlx_graph_last_error(g));
      rlx_graph_destroy(g);
      CHECK(st == RLX_OK);
    }
    char why[256] = "";
    st = rlx_plan_verify(g, &pl);
    int brute_ok = brute_force_check(g, &pl, why, sizeof why);
    for (int32_t v = 0; v < g->n_values; v++)
      if (pl.root[v] != v && pl.bytes[v]) {
        if (is_view_node(g, g->values[v].node)) views_seen++;
        else inplace_seen++;
      }
    if (st != RLX_OK || !brute_ok)
      fprintf(stderr, "iter %d: verify: %s; brute force: %s\n", (int)iter,
              st == RLX_OK ? "ok" : rlx_graph_last_error(g), brute_ok ? "ok" : why);
    rlx_plan_free(&pl);
    rlx_graph_destroy(g);
    CHECK(st == RLX_OK && brute_ok);
  }
  printf("  random graphs: %d/%d ops built, %d views, %d in-place values\n", (int)accepted,
         (int)tried, (int)views_seen, (int)inplace_seen);
  /* The generator must exercise the planner, not mostly fail to build. */
  CHECK(accepted * 2 > tried);
  CHECK(views_seen > 100 && inplace_seen > 100);
}

/* Root blocks no larger than `boundary` that straddle a multiple of it. */
static int32_t straddling(const rlx_graph* g, const rlx_plan* pl, uint64_t boundary) {
  int32_t n = 0;
  for (int32_t v = 0; v < g->n_values; v++) {
    uint64_t b = pl->bytes[v], o = pl->offset[v];
    if (pl->root[v] == v && b > 0 && b <= boundary && o / boundary != (o + b - 1) / boundary) n++;
  }
  return n;
}

/* With a boundary (a backend's arena split into buffers), plans stay valid
 * and no block that fits between two multiples straddles one; without it
 * the same graphs do straddle (so the hint is what keeps them apart). */
TEST(boundary_keeps_blocks_inside) {
  test_seed(4242);
  int32_t accepted = 0, tried = 0, with = 0, without = 0;
  for (int32_t iter = 0; iter < 500; iter++) {
    rlx_graph* g = random_graph(&accepted, &tried);
    CHECK(g != NULL);
    uint64_t boundary = (uint64_t)256 << test_rand_int(0, 4);
    for (int pass = 0; pass < 2; pass++) {
      rlx_plan_options opt = {64, (int32_t)test_rand_int(0, 1), pass ? boundary : 0};
      rlx_plan pl;
      rlx_status st = rlx_plan_memory(g, &opt, &pl);
      CHECK_MSG(st == RLX_OK, "iter %d: %s", (int)iter, rlx_graph_last_error(g));
      if (st != RLX_OK) break;
      char why[256] = "";
      CHECK_MSG(rlx_plan_verify(g, &pl) == RLX_OK, "iter %d: %s", (int)iter,
                rlx_graph_last_error(g));
      CHECK_MSG(brute_force_check(g, &pl, why, sizeof why), "iter %d: %s", (int)iter, why);
      if (pass) with += straddling(g, &pl, boundary);
      else without += straddling(g, &pl, boundary);
      rlx_plan_free(&pl);
    }
    rlx_graph_destroy(g);
  }
  printf("  boundaries: %d straddling blocks without the hint, %d with\n", (int)without, (int)with);
  CHECK(without > 0);
  CHECK(with == 0);
}

/* rlx_plan_verify must catch a corrupted plan. */
TEST(verify_rejects_bad_plans) {
  rlx_graph* g = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  rlx_dim s[2] = {4, 8};
  rlx_tensor a, b, x, y, z;
  CHECK_OK_G(g, rlx_graph_add_input(g, "a", RLX_F32, s, 2, &a));
  CHECK_OK_G(g, rlx_graph_add_input(g, "b", RLX_F32, s, 2, &b));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &x));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, x, a, &y));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_SUB, y, x, &z));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &z, 1));
  rlx_plan_options opt = {64, 0, 0};
  rlx_plan pl;
  CHECK_OK_G(g, rlx_plan_memory(g, &opt, &pl));
  CHECK_OK_G(g, rlx_plan_verify(g, &pl));
  uint64_t saved = pl.offset[y];
  pl.offset[y] = pl.offset[x]; /* x and y are both live at z */
  CHECK(rlx_plan_verify(g, &pl) == RLX_INTERNAL);
  pl.offset[y] = saved + 8; /* misaligned */
  CHECK(rlx_plan_verify(g, &pl) == RLX_INTERNAL);
  pl.offset[y] = saved;
  pl.last[x] = 3; /* x is read at node 4 */
  CHECK(rlx_plan_verify(g, &pl) == RLX_INTERNAL);
  pl.last[x] = 4;
  pl.root[y] = x; /* y is not a legal in-place write over x (x read later) */
  pl.offset[y] = pl.offset[x];
  CHECK(rlx_plan_verify(g, &pl) == RLX_INTERNAL);
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------ aliasing and in place */

typedef struct small_graph {
  rlx_graph* g;
  rlx_tensor a, b, c;
} small_graph;

static rlx_status small_inputs(small_graph* s) {
  rlx_dim ab[2] = {4, 8}, cs[1] = {8};
  RLX_RETURN_IF_ERROR(rlx_graph_create(&s->g));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(s->g, "a", RLX_F32, ab, 2, &s->a));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(s->g, "b", RLX_F32, ab, 2, &s->b));
  return rlx_graph_add_param(s->g, "c", RLX_F32, cs, 1, &s->c);
}

static rlx_status plan_checked(rlx_graph* g, int32_t inplace, rlx_plan* pl) {
  rlx_plan_options opt = {64, inplace, 0};
  RLX_RETURN_IF_ERROR(rlx_plan_memory(g, &opt, pl));
  char why[256];
  rlx_status st = rlx_plan_verify(g, pl);
  if (st == RLX_OK && !brute_force_check(g, pl, why, sizeof why)) {
    fprintf(stderr, "brute force: %s\n", why);
    st = RLX_INTERNAL;
  }
  if (st != RLX_OK) rlx_plan_free(pl);
  return st;
}

TEST(inplace_relu_over_dying_add) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor sum, r;
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, s.a, s.b, &sum));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, sum, &r));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &r, 1));
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int shared = pl.root[r] == sum && pl.offset[r] == pl.offset[sum];
  /* the output keeps add's bytes alive to the end */
  int persistent = pl.first[sum] == 0 && pl.last[sum] == g->n_nodes;
  rlx_plan_free(&pl);
  CHECK(shared && persistent);
  CHECK(rlx_plan_inplace_ok(g, g->values[r].node, 0));
  CHECK(!rlx_plan_inplace_ok(g, g->values[sum].node, 0)); /* a is an input */
  CHECK_OK_G(g, plan_checked(g, 0, &pl));
  int separate = pl.root[r] == r && pl.offset[r] != pl.offset[sum];
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(separate);
}

TEST(no_inplace_when_input_lives_on) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor sum, r, q, leafrelu;
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, s.a, s.b, &sum));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, sum, &r));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, r, sum, &q)); /* sum read again */
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, s.a, &leafrelu));
  rlx_tensor outs[2] = {q, leafrelu};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int ok = pl.root[r] == r && pl.offset[r] != pl.offset[sum];
  ok = ok && (pl.root[q] == sum || pl.root[q] == r); /* both die at q */
  ok = ok && pl.root[leafrelu] == leafrelu && pl.offset[leafrelu] != pl.offset[s.a];
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(ok);
}

TEST(no_inplace_over_broadcast_input) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor small, big, y, z;
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, s.c, &small)); /* [8] */
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, s.a, &big));   /* [4,8] */
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, small, big, &y));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_NEG, y, &z));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &z, 1));
  CHECK(!rlx_plan_inplace_ok(g, g->values[y].node, 0));
  CHECK(rlx_plan_inplace_ok(g, g->values[y].node, 1));
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int ok = pl.root[y] == big && pl.root[z] == big;
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(ok);
}

/* out = add(x, reshape(x)) where only the view has out's exact shape: the
 * planner must not write over bytes another slot reads with another shape. */
TEST(no_inplace_when_other_slot_reads_other_shape) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor x, w, y;
  rlx_dim s3[3] = {1, 4, 8};
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, s.a, s.b, &x));
  CHECK_OK_G(g, rlx_graph_add_reshape(g, x, s3, 3, &w));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, x, w, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  CHECK(rlx_plan_inplace_ok(g, g->values[y].node, 1));
  CHECK(!rlx_plan_inplace_ok(g, g->values[y].node, 0));
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int ok = pl.root[y] == y && pl.root[w] == x;
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(ok);
}

TEST(views_share_offsets) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor t, v, sg, id, w, k, f16, i32, u;
  rlx_dim flat[1] = {32};
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, s.a, s.b, &t));
  CHECK_OK_G(g, rlx_graph_add_reshape(g, t, flat, 1, &v));
  CHECK_OK_G(g, rlx_graph_add_stop_gradient(g, v, &sg));
  CHECK_OK_G(g, rlx_graph_add_cast(g, sg, RLX_F32, &id)); /* identity cast: a view */
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, t, &w));
  CHECK_OK_G(g, rlx_graph_add_cast(g, w, RLX_I32, &k));  /* same size: may run in place */
  CHECK_OK_G(g, rlx_graph_add_cast(g, w, RLX_F16, &f16)); /* smaller: never in place */
  CHECK_OK_G(g, rlx_graph_add_cast(g, f16, RLX_I32, &i32));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, id, id, &u));
  rlx_tensor outs[3] = {u, k, i32};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 3));
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int ok = pl.root[v] == t && pl.root[sg] == t && pl.root[id] == t;
  ok = ok && pl.offset[v] == pl.offset[t] && pl.offset[id] == pl.offset[t];
  /* t's class is read by w and, through id, by u, its last user: u takes it */
  ok = ok && pl.root[u] == t && pl.last[t] == g->n_nodes;
  ok = ok && pl.root[f16] == f16 && pl.root[i32] == i32;
  ok = ok && pl.root[k] == k; /* w is still read by the f16 cast after k */
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(ok);
}

/* A graph output that is a view of an intermediate keeps its bytes to the end. */
TEST(output_view_extends_source) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor t, o, e, f;
  rlx_dim flat[1] = {32};
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, s.a, s.b, &t));
  CHECK_OK_G(g, rlx_graph_add_reshape(g, t, flat, 1, &o));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, t, &e)); /* t dies here */
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, e, &f));
  rlx_tensor outs[2] = {o, f};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  CHECK(!rlx_plan_inplace_ok(g, g->values[e].node, 0)); /* t's bytes are an output */
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int ok = pl.root[o] == t && pl.first[t] == 0 && pl.last[t] == g->n_nodes;
  ok = ok && pl.root[e] == e && pl.offset[e] != pl.offset[t] && pl.root[f] == e;
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(ok);
}

TEST(topk_outputs_distinct) {
  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_graph* g = s.g;
  rlx_tensor t, val, idx, r;
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, s.a, s.b, &t));
  CHECK_OK_G(g, rlx_graph_add_topk(g, t, 3, 1, 1, &val, &idx));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, val, &r));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &r, 1)); /* idx is never read */
  rlx_plan pl;
  CHECK_OK_G(g, plan_checked(g, 1, &pl));
  int ok = pl.bytes[val] == 4 * 3 * 4 && pl.bytes[idx] == 4 * 3 * 8;
  ok = ok && pl.root[val] == val && pl.root[idx] == idx;
  ok = ok && (pl.offset[val] + pl.bytes[val] <= pl.offset[idx] ||
              pl.offset[idx] + pl.bytes[idx] <= pl.offset[val]);
  ok = ok && pl.first[idx] == pl.last[idx] && pl.root[r] == val;
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(ok);
}

TEST(rejects_symbolic_and_bad_options) {
  rlx_graph* g = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  rlx_dim batch;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &batch));
  rlx_dim shape[2] = {batch, 8};
  rlx_tensor x, y;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, shape, 2, &x));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_RELU, x, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  rlx_plan_options opt = {64, 1, 0};
  rlx_plan pl;
  CHECK(rlx_plan_memory(g, &opt, &pl) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "value 0") != NULL);
  CHECK(strstr(rlx_graph_last_error(g), "symbolic") != NULL);
  CHECK(pl.offset == NULL && pl.arena_bytes == 0);
  rlx_graph_destroy(g);

  small_graph s;
  CHECK(small_inputs(&s) == RLX_OK);
  rlx_plan_options bad = {24, 1, 0};
  CHECK(rlx_plan_memory(s.g, &bad, &pl) == RLX_INVALID_ARGUMENT);
  bad.alignment = 8;
  CHECK(rlx_plan_memory(s.g, &bad, &pl) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(s.g), "alignment") != NULL);
  rlx_graph_destroy(s.g);
}

/* ------------------------------------------------------------ 64-bit offsets */

TEST(offsets_past_4gib) {
  rlx_graph* g = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  rlx_dim big[2] = {65536, 16384 + 3}; /* just over 4 GiB of f32 each */
  rlx_tensor a, b, s, t, u;
  CHECK_OK_G(g, rlx_graph_add_input(g, "a", RLX_F32, big, 2, &a));
  CHECK_OK_G(g, rlx_graph_add_param(g, "b", RLX_F32, big, 2, &b));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &s));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, s, a, &t));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_SUB, t, s, &u));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &u, 1));
  uint64_t each = (uint64_t)65536 * (16384 + 3) * 4;
  for (int32_t inplace = 0; inplace <= 1; inplace++) {
    rlx_plan pl;
    CHECK_OK_G(g, plan_checked(g, inplace, &pl));
    int ok = pl.bytes[s] == each && pl.tensor_bytes >= 4 * each;
    /* a, b, s, t live together: at least four blocks, the last past 12 GiB */
    uint64_t max_off = 0;
    for (int32_t v = 0; v < g->n_values; v++)
      if (pl.offset[v] > max_off) max_off = pl.offset[v];
    ok = ok && max_off >= 3 * each && pl.arena_bytes >= 4 * each;
    ok = ok && pl.peak_live_bytes >= 4 * each && pl.arena_bytes <= pl.tensor_bytes + 4096;
    printf("  4 GiB tensors (inplace %d): arena %llu, tensors %llu, peak %llu\n", (int)inplace,
           (unsigned long long)pl.arena_bytes, (unsigned long long)pl.tensor_bytes,
           (unsigned long long)pl.peak_live_bytes);
    rlx_plan_free(&pl);
    CHECK(ok);
  }
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------ arena vs peak live */

typedef struct gpt_dims {
  int64_t B, S, D, H, layers;
  int fused_attention;
} gpt_dims;

static int gpt_param_id = 0;

static rlx_status param(rlx_graph* g, const rlx_dim* shape, int32_t rank, rlx_tensor* out) {
  char name[32];
  snprintf(name, sizeof name, "w%d", gpt_param_id++);
  return rlx_graph_add_param(g, name, RLX_F32, shape, rank, out);
}

static rlx_status linear(rlx_graph* g, rlx_tensor x, int64_t in, int64_t out_dim,
                         rlx_tensor* out) {
  rlx_dim ws[2] = {in, out_dim}, bs[1] = {out_dim};
  rlx_tensor w, b, y;
  RLX_RETURN_IF_ERROR(param(g, ws, 2, &w));
  RLX_RETURN_IF_ERROR(param(g, bs, 1, &b));
  RLX_RETURN_IF_ERROR(rlx_graph_add_matmul(g, x, w, 0, 0, &y));
  return rlx_graph_add_binary(g, RLX_BIN_ADD, y, b, out);
}

static rlx_status layer_norm(rlx_graph* g, rlx_tensor x, int64_t D, rlx_tensor* out) {
  rlx_dim s[1] = {D};
  rlx_tensor gamma, beta;
  RLX_RETURN_IF_ERROR(param(g, s, 1, &gamma));
  RLX_RETURN_IF_ERROR(param(g, s, 1, &beta));
  return rlx_graph_add_layer_norm(g, x, gamma, beta, 2, 1e-5f, out);
}

/* Attention from primitives: heads split by reshape + transpose, scores by
 * matmul, scaled, causal bias added, softmax, weighted sum, heads merged. */
static rlx_status attention_primitive(rlx_graph* g, const gpt_dims* d, rlx_tensor q,
                                      rlx_tensor k, rlx_tensor v, rlx_tensor scale,
                                      rlx_tensor bias, rlx_tensor* out) {
  int64_t Dh = d->D / d->H;
  rlx_dim split[4] = {d->B, d->S, d->H, Dh}, merged[3] = {d->B, d->S, d->D};
  int32_t to_heads[4] = {0, 2, 1, 3}, to_keys[4] = {0, 2, 3, 1};
  rlx_tensor q4, k4, v4, qh, kh, vh, sc, scaled, biased, p, o, ot;
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, q, split, 4, &q4));
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, k, split, 4, &k4));
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, v, split, 4, &v4));
  RLX_RETURN_IF_ERROR(rlx_graph_add_transpose(g, q4, to_heads, 4, &qh));
  RLX_RETURN_IF_ERROR(rlx_graph_add_transpose(g, k4, to_keys, 4, &kh));
  RLX_RETURN_IF_ERROR(rlx_graph_add_transpose(g, v4, to_heads, 4, &vh));
  RLX_RETURN_IF_ERROR(rlx_graph_add_matmul(g, qh, kh, 0, 0, &sc));
  RLX_RETURN_IF_ERROR(rlx_graph_add_binary(g, RLX_BIN_MUL, sc, scale, &scaled));
  RLX_RETURN_IF_ERROR(rlx_graph_add_binary(g, RLX_BIN_ADD, scaled, bias, &biased));
  RLX_RETURN_IF_ERROR(rlx_graph_add_softmax(g, biased, 3, &p));
  RLX_RETURN_IF_ERROR(rlx_graph_add_matmul(g, p, vh, 0, 0, &o));
  RLX_RETURN_IF_ERROR(rlx_graph_add_transpose(g, o, to_heads, 4, &ot));
  return rlx_graph_add_reshape(g, ot, merged, 3, out);
}

static rlx_status attention_fused(rlx_graph* g, const gpt_dims* d, rlx_tensor q, rlx_tensor k,
                                  rlx_tensor v, rlx_tensor* out) {
  int64_t Dh = d->D / d->H;
  rlx_dim split[4] = {d->B, d->S, d->H, Dh}, merged[3] = {d->B, d->S, d->D};
  rlx_tensor q4, k4, v4, o;
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, q, split, 4, &q4));
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, k, split, 4, &k4));
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, v, split, 4, &v4));
  rlx_attention_desc desc = {(int32_t)d->H, 0, (int32_t)Dh, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL,
                             0, 0.0f, 0.0f};
  RLX_RETURN_IF_ERROR(rlx_graph_add_attention(g, q4, k4, v4, RLX_NONE, &desc, &o));
  return rlx_graph_add_reshape(g, o, merged, 3, out);
}

static rlx_status gpt_block(rlx_graph* g, const gpt_dims* d, rlx_tensor x, rlx_tensor scale,
                            rlx_tensor bias, rlx_tensor* out) {
  rlx_tensor h, qkv, q, k, v, att, proj, x1, h2, up, act, down;
  RLX_RETURN_IF_ERROR(layer_norm(g, x, d->D, &h));
  RLX_RETURN_IF_ERROR(linear(g, h, d->D, 3 * d->D, &qkv));
  RLX_RETURN_IF_ERROR(rlx_graph_add_narrow(g, qkv, 2, 0, d->D, &q));
  RLX_RETURN_IF_ERROR(rlx_graph_add_narrow(g, qkv, 2, d->D, d->D, &k));
  RLX_RETURN_IF_ERROR(rlx_graph_add_narrow(g, qkv, 2, 2 * d->D, d->D, &v));
  if (d->fused_attention)
    RLX_RETURN_IF_ERROR(attention_fused(g, d, q, k, v, &att));
  else
    RLX_RETURN_IF_ERROR(attention_primitive(g, d, q, k, v, scale, bias, &att));
  RLX_RETURN_IF_ERROR(linear(g, att, d->D, d->D, &proj));
  RLX_RETURN_IF_ERROR(rlx_graph_add_binary(g, RLX_BIN_ADD, x, proj, &x1));
  RLX_RETURN_IF_ERROR(layer_norm(g, x1, d->D, &h2));
  RLX_RETURN_IF_ERROR(linear(g, h2, d->D, 4 * d->D, &up));
  RLX_RETURN_IF_ERROR(rlx_graph_add_activation(g, RLX_ACT_GELU, up, &act));
  RLX_RETURN_IF_ERROR(linear(g, act, 4 * d->D, d->D, &down));
  return rlx_graph_add_binary(g, RLX_BIN_ADD, x1, down, out);
}

static rlx_status build_gpt(rlx_graph* g, const gpt_dims* d) {
  rlx_dim xs[3] = {d->B, d->S, d->D}, one[1] = {1}, ss[2] = {d->S, d->S};
  rlx_tensor x, scale = RLX_NONE, bias = RLX_NONE, logits;
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x));
  if (!d->fused_attention) {
    float sv = 0.125f;
    float* causal = malloc(sizeof(float) * (size_t)(d->S * d->S));
    if (!causal) return RLX_RESOURCE_EXHAUSTED;
    for (int64_t i = 0; i < d->S * d->S; i++) causal[i] = i % d->S <= i / d->S ? 0.0f : -1e9f;
    rlx_status st = rlx_graph_add_constant(g, RLX_F32, one, 1, &sv, sizeof sv, &scale);
    if (st == RLX_OK)
      st = rlx_graph_add_constant(g, RLX_F32, ss, 2, causal,
                                  sizeof(float) * (size_t)(d->S * d->S), &bias);
    free(causal);
    RLX_RETURN_IF_ERROR(st);
  }
  for (int64_t l = 0; l < d->layers; l++) RLX_RETURN_IF_ERROR(gpt_block(g, d, x, scale, bias, &x));
  RLX_RETURN_IF_ERROR(layer_norm(g, x, d->D, &x));
  RLX_RETURN_IF_ERROR(linear(g, x, d->D, 512, &logits));
  return rlx_graph_set_outputs(g, &logits, 1);
}

static rlx_status build_mlp(rlx_graph* g, int64_t batch, int64_t width, int32_t layers) {
  rlx_dim xs[2] = {batch, width};
  rlx_tensor x;
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x));
  for (int32_t l = 0; l < layers; l++) {
    int64_t out_w = l % 2 ? width : 2 * width, in_w = l % 2 ? 2 * width : width;
    if (l == layers - 1) out_w = 10;
    RLX_RETURN_IF_ERROR(linear(g, x, in_w, out_w, &x));
    if (l < layers - 1) RLX_RETURN_IF_ERROR(rlx_graph_add_activation(g, RLX_ACT_RELU, x, &x));
  }
  return rlx_graph_set_outputs(g, &x, 1);
}

/* Plans g under both in-place settings and two alignments; returns the worst
 * arena / peak-live ratio, overall or for transient bytes (-1 on error). */
static double worst_ratio(rlx_graph* g, const char* what) {
  double worst = 0.0;
  for (int32_t inplace = 1; inplace >= 0; inplace--)
    for (uint64_t align = 64; align <= 256; align *= 4) {
      rlx_plan_options opt = {align, inplace, 0};
      rlx_plan pl;
      if (rlx_plan_memory(g, &opt, &pl) != RLX_OK) {
        fprintf(stderr, "%s: %s\n", what, rlx_graph_last_error(g));
        return -1.0;
      }
      char why[256];
      int ok = rlx_plan_verify(g, &pl) == RLX_OK && brute_force_check(g, &pl, why, sizeof why);
      uint64_t persist = 0;
      for (int32_t v = 0; v < g->n_values; v++)
        if (pl.root[v] == v && pl.first[v] == 0 && pl.last[v] == g->n_nodes) persist += pl.bytes[v];
      /* Persistent bytes are live everywhere, so both sides minus them is
       * the ratio for the transient activations alone (the harder part). */
      double ratio = (double)pl.arena_bytes / (double)pl.peak_live_bytes;
      double transient = (double)(pl.arena_bytes - persist) / (double)(pl.peak_live_bytes - persist);
      printf("  %s inplace=%d align=%llu: %d nodes, tensors %.2f MiB, persistent %.2f MiB, "
             "peak %.2f MiB, arena %.2f MiB, arena/peak %.4f (transient %.4f)\n",
             what, (int)inplace, (unsigned long long)align, (int)g->n_nodes,
             pl.tensor_bytes / 1048576.0, persist / 1048576.0, pl.peak_live_bytes / 1048576.0,
             pl.arena_bytes / 1048576.0, ratio, transient);
      rlx_plan_free(&pl);
      if (!ok) return -1.0;
      if (ratio > worst) worst = ratio;
      if (transient > worst) worst = transient;
    }
  return worst;
}

/* An Adam step whose outputs are device state of its inputs: each output is
 * planned in its input's bytes (no copy after the run), and two runs on the
 * CPU give PyTorch's numbers (torch.optim.Adam / AdamW, two steps, printed
 * by torch 2.x for these inputs). */
typedef struct adam_graph {
  rlx_graph* g;
  rlx_tensor p, m, v, out[3];
} adam_graph;

static rlx_status adam_step_graph(int decoupled, adam_graph* a) {
  rlx_dim n[1] = {6}, h[1] = {RLX_HYPER_COUNT};
  rlx_tensor grad, hyper;
  RLX_RETURN_IF_ERROR(rlx_graph_create(&a->g));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(a->g, "p", RLX_F32, n, 1, &a->p));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(a->g, "m", RLX_F32, n, 1, &a->m));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(a->g, "v", RLX_F32, n, 1, &a->v));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(a->g, "grad", RLX_F32, n, 1, &grad));
  RLX_RETURN_IF_ERROR(rlx_graph_add_input(a->g, "hyper", RLX_F32, h, 1, &hyper));
  rlx_adam_desc d = {0.9f, 0.999f, 1e-8f, 0.1f, decoupled};
  RLX_RETURN_IF_ERROR(rlx_graph_add_adam_update(a->g, a->p, grad, a->m, a->v, hyper, &d,
                                                &a->out[0], &a->out[1], &a->out[2]));
  return rlx_graph_set_outputs(a->g, a->out, 3);
}

/* rtol: the betas reach the update as floats (rlx_adam_desc), PyTorch's
 * as doubles: 1 - (float)0.999 is 1.3e-5 away from 1 - 0.999 relatively,
 * which v (and nothing else beyond 2e-6) shows. */
static int close_all(const float* got, const double* want, int n, double rtol, const char* what) {
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= rtol * fabs(want[i]) + 1e-9)) {
      fprintf(stderr, "%s[%d] = %.9g, torch %.9g\n", what, i, (double)got[i], want[i]);
      return 0;
    }
  return 1;
}

static void run_two_adam_steps(rlx_graph* g, const double want[3][6]) {
  const char* names[3] = {"p", "m", "v"};
  int32_t outs[3] = {0, 1, 2};
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.state_inputs = names;
  o.state_outputs = outs;
  o.n_states = 3;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
  rlx_dim n[1] = {6}, h[1] = {RLX_HYPER_COUNT};
  const float p0[6] = {0.5f, -1.0f, 2.0f, 0.25f, -0.75f, 1.5f}, zero[6] = {0};
  const float grads[2][6] = {{0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f},
                             {-0.3f, 0.25f, 0.05f, 0.6f, -0.1f, 0.2f}};
  CHECK_OK_E(e, rlx_exec_set_input(e, "p", RLX_F32, n, 1, p0, sizeof p0));
  CHECK_OK_E(e, rlx_exec_set_input(e, "m", RLX_F32, n, 1, zero, sizeof zero));
  CHECK_OK_E(e, rlx_exec_set_input(e, "v", RLX_F32, n, 1, zero, sizeof zero));
  for (int step = 1; step <= 2; step++) {
    float hyper[RLX_HYPER_COUNT] = {0.01f, 1.0f, (float)step, 1.0f};
    CHECK_OK_E(e, rlx_exec_set_input(e, "grad", RLX_F32, n, 1, grads[step - 1], sizeof grads[0]));
    CHECK_OK_E(e, rlx_exec_set_input(e, "hyper", RLX_F32, h, 1, hyper, sizeof hyper));
    CHECK_OK_E(e, rlx_exec_run(e));
  }
  float got[3][6];
  for (int k = 0; k < 3; k++) CHECK_OK_E(e, rlx_exec_read_output(e, k, RLX_F32, got[k], sizeof got[k]));
  rlx_exec_destroy(e);
  CHECK(close_all(got[0], want[0], 6, 2e-6, "p") && close_all(got[1], want[1], 6, 2e-6, "m") &&
        close_all(got[2], want[2], 6, 3e-5, "v"));
}

TEST(adam_state_in_place) {
  static const double adamw[3][6] = {
      {0.493952423, -0.989638388, 1.97817886, 0.257013232, -0.763601005, 1.51099372},
      {-0.0210000016, 0.00699999928, 0.0320000015, 0.0240000002, 0.0349999964, -0.0340000018},
      {9.99900076e-05, 0.000102460006, 9.24100095e-05, 0.000519840047, 0.000259749999,
       0.000399640063}};
  static const double adam[3][6] = {
      {0.492952466, -0.987362385, 1.98068404, 0.257057637, -0.763341963, 1.51070428},
      {-0.0116000017, -0.0119000012, 0.0698999986, 0.0288500041, 0.0206499994, -0.00539999828},
      {8.54785103e-05, 0.000112711008, 0.000311751006, 0.000532360398, 0.000211420411,
       0.00032549855}};
  for (int decoupled = 0; decoupled < 2; decoupled++) {
    adam_graph a;
    CHECK(adam_step_graph(decoupled, &a) == RLX_OK);
    int32_t pairs[6] = {a.p, a.out[0], a.m, a.out[1], a.v, a.out[2]};
    rlx_plan_options opt = {64, 1, 0};
    rlx_plan pl;
    CHECK_OK_G(a.g, rlx_plan_memory_states(a.g, &opt, pairs, 3, &pl));
    int in_place = pl.offset[a.out[0]] == pl.offset[a.p] && pl.offset[a.out[1]] == pl.offset[a.m] &&
                   pl.offset[a.out[2]] == pl.offset[a.v];
    int distinct = pl.offset[a.p] != pl.offset[a.m] && pl.offset[a.m] != pl.offset[a.v];
    /* (rlx_plan_verify does not know state pairs: plan.h) */
    if (!in_place || !distinct)
      fprintf(stderr, "offsets p %llu m %llu v %llu -> %llu %llu %llu: %s\n",
              (unsigned long long)pl.offset[a.p], (unsigned long long)pl.offset[a.m],
              (unsigned long long)pl.offset[a.v], (unsigned long long)pl.offset[a.out[0]],
              (unsigned long long)pl.offset[a.out[1]], (unsigned long long)pl.offset[a.out[2]],
              rlx_graph_last_error(a.g));
    rlx_plan_free(&pl);
    CHECK(in_place && distinct);
    /* without the pairs every output has bytes of its own */
    CHECK_OK_G(a.g, rlx_plan_memory(a.g, &opt, &pl));
    int separate = pl.offset[a.out[0]] != pl.offset[a.p];
    rlx_plan_free(&pl);
    CHECK(separate);
    run_two_adam_steps(a.g, decoupled ? adamw : adam);
    rlx_graph_destroy(a.g);
  }
}

/* A state output stays in its input's bytes even when the producer has
 * another same-shape operand that dies there (the KV cache's
 * Where(at, new rows, cache)): in-place reuse must not take it away. */
TEST(state_beats_inplace) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim s4[4] = {1, 16, 2, 8}, m4[4] = {1, 16, 1, 1};
  rlx_tensor cache = RLX_NONE, rows = RLX_NONE, at = RLX_NONE, fresh = RLX_NONE, out = RLX_NONE;
  CHECK_OK_G(g, rlx_graph_add_input(g, "cache", RLX_F32, s4, 4, &cache));
  CHECK_OK_G(g, rlx_graph_add_input(g, "rows", RLX_F32, s4, 4, &rows));
  CHECK_OK_G(g, rlx_graph_add_input(g, "at", RLX_BOOL, m4, 4, &at));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_NEG, rows, &fresh)); /* dies at the Where */
  CHECK_OK_G(g, rlx_graph_add_where(g, at, fresh, cache, &out));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &out, 1));
  int32_t pairs[2] = {cache, out};
  rlx_plan_options opt = {64, 1, 0};
  rlx_plan pl;
  CHECK_OK_G(g, rlx_plan_memory_states(g, &opt, pairs, 1, &pl));
  int kept = pl.offset[out] == pl.offset[cache];
  rlx_plan_free(&pl);
  rlx_graph_destroy(g);
  CHECK(kept);
}

TEST(gpt_arena_near_peak) {
  gpt_dims dims[] = {{8, 256, 256, 8, 6, 0}, {8, 256, 256, 8, 6, 1}, {2, 64, 768, 12, 4, 0}};
  for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
    rlx_graph* g = NULL;
    CHECK_OK_G(g, rlx_graph_create(&g));
    rlx_status st = build_gpt(g, &dims[i]);
    if (st != RLX_OK) fprintf(stderr, "build: %s\n", rlx_graph_last_error(g));
    double r = st == RLX_OK ? worst_ratio(g, dims[i].fused_attention ? "gpt(fused attn)" : "gpt")
                            : -1.0;
    rlx_graph_destroy(g);
    CHECK(r > 0.0);
    CHECK_MSG(r <= 1.15, "arena/peak %.4f", r);
  }
}

TEST(mlp_arena_near_peak) {
  rlx_graph* g = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  CHECK_OK_G(g, build_mlp(g, 512, 256, 8));
  double r = worst_ratio(g, "mlp");
  rlx_graph_destroy(g);
  CHECK(r > 0.0);
  CHECK_MSG(r <= 1.15, "arena/peak %.4f", r);
}

int main(void) {
  RUN(inplace_relu_over_dying_add);
  RUN(no_inplace_when_input_lives_on);
  RUN(no_inplace_over_broadcast_input);
  RUN(no_inplace_when_other_slot_reads_other_shape);
  RUN(views_share_offsets);
  RUN(output_view_extends_source);
  RUN(topk_outputs_distinct);
  RUN(rejects_symbolic_and_bad_options);
  RUN(verify_rejects_bad_plans);
  RUN(offsets_past_4gib);
  RUN(adam_state_in_place);
  RUN(gpt_arena_near_peak);
  RUN(mlp_arena_near_peak);
  RUN(random_graphs_verify);
  RUN(boundary_keeps_blocks_inside);
  RUN(state_beats_inplace);
  return test_summary();
}
