/* Symbolic dim expressions: the graph's table of symbolic dims holds named
 * leaf symbols and expressions (op, a, b) over two dims. Expressions are
 * simplified and interned on creation so that dims equal by construction
 * (the B*T of a reshape and of the reshape that undoes it) are the same code,
 * which is what the shape rules compare. Binding evaluates them from the
 * leaves (rlx_graph_eval_dims). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "ir/graph.h"

static int64_t entry_of(rlx_dim d) { return -(d + 1); }

static const rlx_dim_def* def_of(const rlx_graph* g, rlx_dim d) {
  if (d >= 0 || entry_of(d) >= g->n_symbols) return NULL;
  return &g->dim_defs[entry_of(d)];
}

int rlx_dim_is_expr(const rlx_graph* g, rlx_dim d) {
  const rlx_dim_def* e = def_of(g, d);
  return e && e->op != 0;
}

int rlx_dim_mentions(const rlx_graph* g, rlx_dim d, rlx_dim sym) {
  if (d == sym) return 1;
  const rlx_dim_def* e = def_of(g, d);
  if (!e || e->op == 0) return 0;
  return rlx_dim_mentions(g, e->a, sym) || rlx_dim_mentions(g, e->b, sym);
}

/* Appends a table entry; takes ownership of name. */
static rlx_status append_entry(rlx_graph* g, char* name, int32_t op, rlx_dim a, rlx_dim b,
                               rlx_dim* out) {
  if (!name) return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  if (g->n_symbols == g->cap_symbols) {
    int32_t cap = g->cap_symbols ? g->cap_symbols * 2 : 16;
    char** names = realloc(g->symbols, sizeof(char*) * (size_t)cap);
    if (names) g->symbols = names;
    rlx_dim_def* defs = names ? realloc(g->dim_defs, sizeof(rlx_dim_def) * (size_t)cap) : NULL;
    if (!defs) {
      free(name);
      return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    }
    g->dim_defs = defs;
    g->cap_symbols = cap;
  }
  g->symbols[g->n_symbols] = name;
  g->dim_defs[g->n_symbols] = (rlx_dim_def){op, a, b, 0};
  if (op) {
    const rlx_dim_def *ea = def_of(g, a), *eb = def_of(g, b);
    int32_t da = ea ? ea->depth : 0, db = eb ? eb->depth : 0;
    g->dim_defs[g->n_symbols].depth = 1 + (da > db ? da : db);
  }
  *out = -(rlx_dim)g->n_symbols - 1;
  g->n_symbols++;
  return RLX_OK;
}

rlx_status rlx_graph_add_leaf_symbol(rlx_graph* g, const char* name, rlx_dim* out) {
  char* copy = malloc(strlen(name) + 1);
  if (copy) strcpy(copy, name);
  return append_entry(g, copy, 0, 0, 0, out);
}

/* ------------------------------------------------------------------ printing */

static int precedence(int32_t op) {
  switch (op) {
    case RLX_DIM_ADD: case RLX_DIM_SUB: return 1;
    case RLX_DIM_MUL: case RLX_DIM_FLOOR_DIV: case RLX_DIM_MOD: return 2;
    default: return 3; /* leaves, numbers and function forms never need parentheses */
  }
}

static const char* function_name(int32_t op) {
  return op == RLX_DIM_CEIL_DIV ? "cdiv" : op == RLX_DIM_MIN ? "min" : "max";
}

static const char* infix(int32_t op) {
  return op == RLX_DIM_ADD ? "+" : op == RLX_DIM_SUB ? "-" : op == RLX_DIM_MUL ? "*"
         : op == RLX_DIM_FLOOR_DIV ? "/" : "%";
}

static void print_operand(rlx_buf* b, const rlx_graph* g, rlx_dim d, int need_above) {
  if (d >= 0) {
    rlx_buf_printf(b, "%lld", (long long)d);
    return;
  }
  const rlx_dim_def* e = def_of(g, d);
  int paren = e && precedence(e->op) < need_above;
  if (paren) rlx_buf_add(b, "(", 1);
  rlx_buf_puts(b, e ? g->symbols[entry_of(d)] : "?");
  if (paren) rlx_buf_add(b, ")", 1);
}

/* "B*T", "(B+1)*T", "cdiv(T,2)": the text format reads these back. */
static char* expr_name(const rlx_graph* g, int32_t op, rlx_dim a, rlx_dim b) {
  rlx_buf buf = {0};
  if (precedence(op) == 3) {
    rlx_buf_printf(&buf, "%s(", function_name(op));
    print_operand(&buf, g, a, 0);
    rlx_buf_add(&buf, ",", 1);
    print_operand(&buf, g, b, 0);
    rlx_buf_add(&buf, ")", 1);
  } else {
    int p = precedence(op);
    print_operand(&buf, g, a, p);
    rlx_buf_puts(&buf, infix(op));
    /* The parser groups left to right, so a right operand of the same
     * precedence keeps its parentheses: a-(b+c), a*(b*c), a*(b%c). Even for
     * + and * this matters: the table entry is the tree, not its value. */
    print_operand(&buf, g, b, p + 1);
  }
  if (buf.oom || !buf.p) { /* the buffer keeps its text NUL-terminated */
    free(buf.p);
    return NULL;
  }
  return buf.p;
}

/* ------------------------------------------------------------------ arithmetic */

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* a op b on sizes (a, b >= 0): NULL, or what is wrong with it. A size past
 * int64 (the fuzzer's 2^62 * 4) is an error, not a wrapped value. */
static const char* fold(int32_t op, int64_t a, int64_t b, int64_t* out) {
  const char* div0 = "a division by zero";
  switch (op) {
    case RLX_DIM_ADD: return __builtin_add_overflow(a, b, out) ? "past int64" : NULL;
    case RLX_DIM_SUB: *out = a - b; return NULL;
    case RLX_DIM_MUL: return __builtin_mul_overflow(a, b, out) ? "past int64" : NULL;
    case RLX_DIM_FLOOR_DIV: if (!b) return div0; *out = floor_div(a, b); return NULL;
    case RLX_DIM_CEIL_DIV: if (!b) return div0; *out = -floor_div(-a, b); return NULL;
    case RLX_DIM_MOD: if (!b) return div0; *out = a - b * floor_div(a, b); return NULL;
    case RLX_DIM_MIN: *out = a < b ? a : b; return NULL;
    case RLX_DIM_MAX: *out = a > b ? a : b; return NULL;
  }
  return "an unknown operation";
}

static int commutative(int32_t op) {
  return op == RLX_DIM_ADD || op == RLX_DIM_MUL || op == RLX_DIM_MIN || op == RLX_DIM_MAX;
}

/* Rewrites that keep equal-by-construction dims one code. Returns 1 and sets
 * *out when the expression reduces to an existing dim. Operands are
 * canonical: for commutative ops a static operand is b. */
static int simplify(const rlx_graph* g, int32_t op, rlx_dim a, rlx_dim b, rlx_dim* out) {
  const rlx_dim_def* ea = def_of(g, a);
  int a_is_times_b = ea && ea->op == RLX_DIM_MUL && (ea->b == b || ea->a == b);
  rlx_dim a_other = a_is_times_b ? (ea->b == b ? ea->a : ea->b) : 0;
  switch (op) {
    case RLX_DIM_ADD: case RLX_DIM_SUB:
      if (b == 0) return *out = a, 1;
      if (op == RLX_DIM_SUB && a == b) return *out = 0, 1;
      /* (x + c) - c = x */
      if (op == RLX_DIM_SUB && ea && ea->op == RLX_DIM_ADD && ea->b == b) return *out = ea->a, 1;
      return 0;
    case RLX_DIM_MUL:
      if (b == 1) return *out = a, 1;
      if (b == 0) return *out = 0, 1;
      return 0;
    case RLX_DIM_FLOOR_DIV: case RLX_DIM_CEIL_DIV:
      if (b == 1) return *out = a, 1;
      if (a == 0 || (a == b && b != 0)) return *out = a == 0 ? 0 : 1, 1;
      if (a_is_times_b) return *out = a_other, 1; /* (x*c)/c = x */
      return 0;
    case RLX_DIM_MOD:
      if (b == 1 || a_is_times_b || a == b) return *out = 0, 1;
      return 0;
    case RLX_DIM_MIN: case RLX_DIM_MAX:
      if (a == b) return *out = a, 1;
      if (b == 0) return *out = op == RLX_DIM_MIN ? 0 : a, 1; /* sizes are >= 0 */
      return 0;
  }
  return 0;
}

static rlx_status check_operand(rlx_graph* g, rlx_dim d) {
  if (d >= 0 || entry_of(d) < g->n_symbols) return RLX_OK;
  return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "dim %lld is not a size or symbol of the graph",
                  (long long)d);
}

rlx_status rlx_graph_dim_expr(rlx_graph* g, rlx_dim_op op, rlx_dim a, rlx_dim b,
                              rlx_dim* out_dim) {
  if (!g || !out_dim) return RLX_INVALID_ARGUMENT;
  if (op < RLX_DIM_ADD || op > RLX_DIM_MAX)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "dim expression op %d is not an rlx_dim_op",
                    (int)op);
  RLX_RETURN_IF_ERROR(check_operand(g, a));
  RLX_RETURN_IF_ERROR(check_operand(g, b));
  if (a >= 0 && b >= 0) {
    int64_t v = 0;
    const char* wrong = fold(op, a, b, &v);
    if (wrong || v < 0)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "dim expression %lld%s%lld is %s",
                      (long long)a, precedence(op) == 3 ? function_name(op) : infix(op),
                      (long long)b, wrong ? wrong : "negative");
    *out_dim = v;
    return RLX_OK;
  }
  /* Commutative: static operand second, else the older entry (larger code) first. */
  if (commutative(op) && (a >= 0 || (b < 0 && b > a))) {
    rlx_dim t = a;
    a = b;
    b = t;
  }
  if (simplify(g, op, a, b, out_dim)) return RLX_OK;
  const rlx_dim_def *ea = def_of(g, a), *eb = def_of(g, b);
  if ((ea && ea->depth >= RLX_DIM_MAX_DEPTH) || (eb && eb->depth >= RLX_DIM_MAX_DEPTH))
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "dim expression nests deeper than %d",
                    RLX_DIM_MAX_DEPTH);
  for (int32_t i = 0; i < g->n_symbols; i++) {
    const rlx_dim_def* e = &g->dim_defs[i];
    if (e->op == (int32_t)op && e->a == a && e->b == b) {
      *out_dim = -(rlx_dim)i - 1;
      return RLX_OK;
    }
  }
  return append_entry(g, expr_name(g, op, a, b), op, a, b, out_dim);
}

/* ------------------------------------------------------------------ binding */

int64_t rlx_dim_value(const rlx_graph* g, rlx_dim d, const int64_t* sizes) {
  if (d >= 0) return d;
  return entry_of(d) < g->n_symbols ? sizes[entry_of(d)] : -1;
}

rlx_status rlx_graph_eval_dims(const rlx_graph* g, int64_t* sizes, rlx_error* err) {
  for (int32_t i = 0; i < g->n_symbols; i++) {
    const rlx_dim_def* e = &g->dim_defs[i];
    if (e->op == 0) continue;
    int64_t a = rlx_dim_value(g, e->a, sizes), b = rlx_dim_value(g, e->b, sizes), v = -1;
    if (a < 0 || b < 0) {
      sizes[i] = -1;
      continue;
    }
    const char* wrong = fold(e->op, a, b, &v);
    if (wrong || v < 0)
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "dim '%s' is %s at a=%lld, b=%lld: check the sizes of its symbols",
                      g->symbols[i], wrong ? wrong : "negative", (long long)a, (long long)b);
    sizes[i] = v;
  }
  return RLX_OK;
}

rlx_status rlx_graph_copy_dims(rlx_graph* dst, const rlx_graph* src) {
  for (int32_t i = 0; i < src->n_symbols; i++) {
    char* name = malloc(strlen(src->symbols[i]) + 1);
    if (name) strcpy(name, src->symbols[i]);
    rlx_dim d;
    const rlx_dim_def* e = &src->dim_defs[i];
    RLX_RETURN_IF_ERROR(append_entry(dst, name, e->op, e->a, e->b, &d));
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ products */

/* A product: static coefficient times non-product factors. */
typedef struct product {
  int64_t coef;
  int32_t n;
  rlx_dim f[32];
} product;

static int collect(const rlx_graph* g, rlx_dim d, product* p) {
  const rlx_dim_def* e = def_of(g, d);
  if (d >= 0) /* a coefficient past int64: not a product we can reason about */
    return !__builtin_mul_overflow(p->coef, d, &p->coef);
  if (e && e->op == RLX_DIM_MUL) return collect(g, e->a, p) && collect(g, e->b, p);
  if (p->n == 32) return 0;
  p->f[p->n++] = d;
  return 1;
}

static int collect_all(const rlx_graph* g, const rlx_dim* d, int32_t n, product* p) {
  p->coef = 1;
  p->n = 0;
  for (int32_t i = 0; i < n; i++)
    if (!collect(g, d[i], p)) return 0;
  return 1;
}

/* Removes b's factors from a; 0 when one is missing. */
static int cancel(product* a, const product* b) {
  for (int32_t i = 0; i < b->n; i++) {
    int32_t j = 0;
    while (j < a->n && a->f[j] != b->f[i]) j++;
    if (j == a->n) return 0;
    a->f[j] = a->f[--a->n];
  }
  return 1;
}

int rlx_dims_div_exact(rlx_graph* g, const rlx_dim* a, int32_t na, const rlx_dim* b, int32_t nb,
                       rlx_dim* out) {
  product pa, pb;
  if (!collect_all(g, a, na, &pa) || !collect_all(g, b, nb, &pb)) return 0;
  if (pb.coef == 0 || pa.coef % pb.coef != 0 || !cancel(&pa, &pb)) return 0;
  rlx_dim r = pa.coef / pb.coef;
  for (int32_t i = 0; i < pa.n; i++)
    if (rlx_graph_dim_expr(g, RLX_DIM_MUL, r, pa.f[i], &r) != RLX_OK) return 0;
  *out = r;
  return 1;
}

int rlx_dims_same_count(const rlx_graph* g, const rlx_dim* a, int32_t na, const rlx_dim* b,
                        int32_t nb) {
  product pa, pb;
  if (!collect_all(g, a, na, &pa) || !collect_all(g, b, nb, &pb)) return 0;
  if (pa.coef == 0 && pb.coef == 0) return 1; /* zero elements either way */
  int32_t nb_before = pb.n;
  if (pa.n == nb_before && cancel(&pa, &pb) && pa.coef == pb.coef) return 1;
  /* Undecidable when a factor is a sum, quotient, min...: specialization decides. */
  for (int32_t i = 0; i < na; i++)
    if (rlx_dim_is_expr(g, a[i])) return -1;
  for (int32_t i = 0; i < nb; i++)
    if (rlx_dim_is_expr(g, b[i])) return -1;
  return 0;
}
