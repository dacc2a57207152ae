/* The text format (see SPEC §1): one line per node, written with the graph's
 * own tensor ids and every output type spelled out, so a file can be diffed,
 * written by hand and checked against shape inference when it is read back.
 *
 *   rlx 1
 *   symbols batch
 *   %0 = input name="x" : f32[batch,16]
 *   %1 = relu(%0) label="act" : f32[batch,16]
 *   outputs %1
 *
 * A dim may be an expression over dims ("f32[B*T,768]", "len=T-1"; + - * /
 * % with parentheses, cdiv/min/max(a,b)); the symbols line lists the dim
 * table in order, expressions in parentheses: "symbols B T (B*T)".
 *
 * Print and parse are inverses: print(parse(print(g))) == print(g). The parser
 * is fed untrusted input (it is fuzzed): every read is bounds-checked and every
 * problem is an RLX_INVALID_ARGUMENT with a "line:col: what" message. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/file.h"
#include "ir/graph.h"
#include "ir/names.h"
#include "ir/quant.h"

/* Dims above this are surely a typo or an attack, and products of a few of
 * them would overflow int64 byte counts further down. */
#define TEXT_MAX_DIM ((int64_t)1 << 40)
#define TEXT_MAX_NUMEL ((int64_t)1 << 50)
#define TEXT_MAX_NUMBER_CHARS 64
#define TEXT_MAX_STRING_BYTES (1u << 20)

/* ------------------------------------------------------------------ names */

static const char* const layout_names[] = {"bshd", "bhsd"};
static const char* const mask_names[] = {"none", "causal", "custom", "sliding", "bias"};
static const char* const style_names[] = {"neox", "gptj"};
static const char* const pool_names[] = {"max", "avg", "argmax"};
static const char* const pad_names[] = {"constant", "reflect", "edge", "wrap"};
static const char* const d2s_names[] = {"dcr", "crd"};
static const char* const resize_names[] = {"nearest", "linear", "cubic"};
static const char* const coord_names[] = {"half_pixel", "half_pixel_symmetric",
                                          "pytorch_half_pixel", "align_corners", "asymmetric",
                                          "tf_half_pixel_for_nn", "tf_crop_and_resize"};
static const char* const grid_pad_names[] = {"zeros", "border", "reflection"};
static const char* const nearest_names[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil"};
static const char* const conv_layout_names[] = {"channels_first", "channels_last",
                                                "channels_last_ohwi"};

#define COUNT_OF(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))
_Static_assert(COUNT_OF(mask_names) == RLX_MASK_BIAS + 1, "mask_names out of sync");
_Static_assert(COUNT_OF(coord_names) == RLX_COORD_TF_CROP_AND_RESIZE + 1, "coord_names out of sync");

typedef struct name_table {
  const char* const* names;
  int32_t count;
} name_table;

/* Families are one op whose attrs.kind picks the member; the text names the
 * member, spelled as rlx_op_name spells it (graph.c), so errors, dot and text
 * agree. Returns how many members the family has (0: not a family). */
static int32_t family_size(rlx_op op) {
  switch (op) {
    case RLX_OP_BINARY: return RLX_BIN_COUNT;
    case RLX_OP_COMPARE: return RLX_CMP_COUNT;
    case RLX_OP_ACTIVATION: return RLX_ACT_COUNT;
    case RLX_OP_REDUCE: return RLX_RED_COUNT;
    default: return 0;
  }
}

/* ------------------------------------------------------------------ attribute table */

typedef enum attr_kind {
  AK_I32, AK_I64, AK_F32, AK_PERM, AK_AXES, AK_INTS, AK_STR, AK_BYTES,
  AK_ENUM_ACT, AK_ENUM_LAYOUT, AK_ENUM_MASK, AK_ENUM_STYLE, AK_ENUM_POOL, AK_ENUM_PAD, AK_ENUM_D2S,
  AK_FLOATS, AK_ENUM_RESIZE, AK_ENUM_COORD, AK_ENUM_NEAREST, AK_ENUM_GRID_PAD,
  AK_ENUM_CONV_LAYOUT, AK_ENUM_QUANT
} attr_kind;

typedef struct attr_info {
  const char* text;
  attr_kind kind;
  size_t offset; /* of the field in rlx_node_attrs */
} attr_info;

static const attr_info attr_table[RLX_ATTR_COUNT] = {
#define ATTR(e, text, kind, field) {text, AK_##kind, offsetof(rlx_node_attrs, field)},
#include "ir/attrs.def"
#undef ATTR
};

static name_table enum_names(attr_kind k) {
  switch (k) {
    case AK_ENUM_ACT: return (name_table){rlx_activation_names, RLX_ACT_COUNT};
    case AK_ENUM_LAYOUT: return (name_table){layout_names, COUNT_OF(layout_names)};
    case AK_ENUM_MASK: return (name_table){mask_names, COUNT_OF(mask_names)};
    case AK_ENUM_STYLE: return (name_table){style_names, COUNT_OF(style_names)};
    case AK_ENUM_POOL: return (name_table){pool_names, COUNT_OF(pool_names)};
    case AK_ENUM_PAD: return (name_table){pad_names, COUNT_OF(pad_names)};
    case AK_ENUM_D2S: return (name_table){d2s_names, COUNT_OF(d2s_names)};
    case AK_ENUM_RESIZE: return (name_table){resize_names, COUNT_OF(resize_names)};
    case AK_ENUM_COORD: return (name_table){coord_names, COUNT_OF(coord_names)};
    case AK_ENUM_NEAREST: return (name_table){nearest_names, COUNT_OF(nearest_names)};
    case AK_ENUM_GRID_PAD: return (name_table){grid_pad_names, COUNT_OF(grid_pad_names)};
    case AK_ENUM_CONV_LAYOUT: return (name_table){conv_layout_names, COUNT_OF(conv_layout_names)};
    case AK_ENUM_QUANT: return (name_table){rlx_quant_names, RLX_QUANT_COUNT};
    default: return (name_table){NULL, 0};
  }
}

/* Fields are read and written through memcpy so one table serves every type. */
static int32_t attr_get_i32(const rlx_node_attrs* a, size_t off) {
  int32_t v;
  memcpy(&v, (const char*)a + off, sizeof v);
  return v;
}
static void attr_set_i32(rlx_node_attrs* a, size_t off, int32_t v) {
  memcpy((char*)a + off, &v, sizeof v);
}

/* ------------------------------------------------------------------ printer */

static int is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* \" and \\ are the format's escapes; control bytes also get escapes so that
 * a name made through the API can never break the line structure. */
static void print_quoted(rlx_buf* b, const char* s) {
  rlx_buf_add(b, "\"", 1);
  for (const char* c = s ? s : ""; *c; c++) {
    unsigned char u = (unsigned char)*c;
    if (u == '"' || u == '\\') { rlx_buf_add(b, "\\", 1); rlx_buf_add(b, c, 1); }
    else if (u == '\n') rlx_buf_puts(b, "\\n");
    else if (u == '\t') rlx_buf_puts(b, "\\t");
    else if (u < 0x20 || u == 0x7f) rlx_buf_printf(b, "\\x%02x", u);
    else rlx_buf_add(b, c, 1);
  }
  rlx_buf_add(b, "\"", 1);
}

/* Symbol names are bare identifiers when they can be, quoted otherwise. */
static void print_symbol(rlx_buf* b, const char* name) {
  int bare = name && is_ident_start(name[0]);
  for (const char* c = name; bare && *c; c++) bare = is_ident_char(*c);
  if (bare) rlx_buf_puts(b, name);
  else print_quoted(b, name);
}

static void print_float(rlx_buf* b, float v) {
  if (isnan(v)) rlx_buf_puts(b, "nan");
  else if (isinf(v)) rlx_buf_puts(b, v > 0 ? "inf" : "-inf");
  else rlx_buf_printf(b, "%.9g", (double)v);
}

static void print_type(rlx_buf* b, const rlx_graph* g, const rlx_type* t) {
  rlx_buf_puts(b, rlx_dtype_name(t->dtype));
  rlx_buf_add(b, "[", 1);
  for (int32_t i = 0; i < t->rank && i < RLX_MAX_RANK; i++) {
    if (i) rlx_buf_add(b, ",", 1);
    rlx_dim d = t->shape[i];
    if (d >= 0) { rlx_buf_printf(b, "%" PRId64, d); continue; }
    int64_t sym = -(d + 1);
    if (sym < g->n_symbols && g->dim_defs[sym].op) rlx_buf_puts(b, g->symbols[sym]); /* B*T */
    else if (sym < g->n_symbols) print_symbol(b, g->symbols[sym]);
    else rlx_buf_add(b, "?", 1); /* corrupt graph: keep printing, the parser will reject it */
  }
  rlx_buf_add(b, "]", 1);
}

/* A dim: a size, a symbol or an expression (as in types). */
static void print_dim(rlx_buf* b, const rlx_graph* g, rlx_dim d) {
  int64_t sym = d < 0 ? -(d + 1) : 0;
  if (d >= 0) rlx_buf_printf(b, "%" PRId64, d);
  else if (sym < g->n_symbols && g->dim_defs[sym].op) rlx_buf_puts(b, g->symbols[sym]);
  else if (sym < g->n_symbols) print_symbol(b, g->symbols[sym]);
  else rlx_buf_add(b, "?", 1);
}

/* Attributes that hold sizes (narrow's start and len) may be symbolic dims. */
static int attr_is_dim(rlx_attr_id id) { return id == RLX_ATTR_START || id == RLX_ATTR_LEN; }

static void print_attr(rlx_buf* b, const rlx_graph* g, const rlx_node* n, int32_t input_rank,
                       rlx_attr_id id) {
  const attr_info* info = &attr_table[id];
  const rlx_node_attrs* a = &n->a;
  rlx_buf_printf(b, " %s=", info->text);
  switch (info->kind) {
    case AK_I32: rlx_buf_printf(b, "%" PRId32, attr_get_i32(a, info->offset)); break;
    case AK_I64: {
      int64_t v;
      memcpy(&v, (const char*)a + info->offset, sizeof v);
      if (attr_is_dim(id)) print_dim(b, g, v);
      else rlx_buf_printf(b, "%" PRId64, v);
      break;
    }
    case AK_F32: {
      float v;
      memcpy(&v, (const char*)a + info->offset, sizeof v);
      print_float(b, v);
      break;
    }
    case AK_PERM: {
      rlx_buf_add(b, "[", 1);
      for (int32_t i = 0; i < input_rank && i < RLX_MAX_RANK; i++)
        rlx_buf_printf(b, "%s%" PRId32, i ? "," : "", a->perm[i]);
      rlx_buf_add(b, "]", 1);
      break;
    }
    case AK_FLOATS: {
      rlx_floats l;
      memcpy(&l, (const char*)a + info->offset, sizeof l);
      rlx_buf_add(b, "[", 1);
      for (int32_t i = 0; i < l.n && i < RLX_INTS_MAX; i++) {
        if (i) rlx_buf_add(b, ",", 1);
        print_float(b, l.v[i]);
      }
      rlx_buf_add(b, "]", 1);
      break;
    }
    case AK_INTS: {
      rlx_ints l;
      memcpy(&l, (const char*)a + info->offset, sizeof l);
      rlx_buf_add(b, "[", 1);
      for (int32_t i = 0; i < l.n && i < RLX_INTS_MAX; i++)
        rlx_buf_printf(b, "%s%" PRId64, i ? "," : "", l.v[i]);
      rlx_buf_add(b, "]", 1);
      break;
    }
    case AK_AXES: {
      rlx_buf_add(b, "[", 1);
      int first = 1;
      for (int i = 0; i < 32; i++) {
        if (!(a->axes & (1u << i))) continue;
        rlx_buf_printf(b, "%s%d", first ? "" : ",", i);
        first = 0;
      }
      rlx_buf_add(b, "]", 1);
      break;
    }
    case AK_STR: print_quoted(b, a->name); break;
    case AK_BYTES: {
      rlx_buf_puts(b, "0x");
      static const char hex[] = "0123456789abcdef";
      const unsigned char* d = a->data;
      rlx_buf_reserve(b, 2 * a->data_bytes);
      for (size_t i = 0; d && i < a->data_bytes && !b->oom; i++) {
        char two[2] = {hex[d[i] >> 4], hex[d[i] & 15]};
        rlx_buf_add(b, two, 2);
      }
      break;
    }
    default: {
      name_table t = enum_names(info->kind);
      int32_t v = attr_get_i32(a, info->offset);
      if (v >= 0 && v < t.count) rlx_buf_puts(b, t.names[v]);
      else rlx_buf_printf(b, "%" PRId32, v); /* the parser takes numbers for enums too */
      break;
    }
  }
}

static void print_node(rlx_buf* b, const rlx_graph* g, const rlx_node* n) {
  const rlx_op_info* info = &rlx_op_table[n->op];
  for (int32_t i = 0; i < n->n_out; i++) rlx_buf_printf(b, "%s%%%" PRId32, i ? ", " : "", n->out[i]);
  rlx_buf_puts(b, " = ");
  rlx_buf_puts(b, rlx_op_name(n->op, n->a.kind));
  int32_t input_rank = 0;
  if (info->max_inputs > 0) {
    rlx_buf_add(b, "(", 1);
    for (int32_t i = 0; i < n->n_in; i++) {
      if (i) rlx_buf_puts(b, ", ");
      if (n->in[i] == RLX_NONE) rlx_buf_add(b, "_", 1);
      else rlx_buf_printf(b, "%%%" PRId32, n->in[i]);
    }
    rlx_buf_add(b, ")", 1);
  }
  if (n->n_in > 0 && n->in[0] >= 0 && n->in[0] < g->n_values)
    input_rank = g->values[n->in[0]].type.rank;
  else if (n->n_out > 0)
    input_rank = g->values[n->out[0]].type.rank;
  for (int32_t id = 0; id < RLX_ATTR_COUNT; id++)
    if (info->attrs & (1ull << id)) print_attr(b, g, n, input_rank, (rlx_attr_id)id);
  if (n->label) {
    rlx_buf_puts(b, " label=");
    print_quoted(b, n->label);
  }
  rlx_buf_puts(b, " : ");
  for (int32_t i = 0; i < n->n_out; i++) {
    if (i) rlx_buf_puts(b, ", ");
    print_type(b, g, &g->values[n->out[i]].type);
  }
  rlx_buf_add(b, "\n", 1);
}

rlx_status rlx_graph_print(const rlx_graph* g, char** out_text) {
  if (!out_text) return RLX_INVALID_ARGUMENT;
  *out_text = NULL;
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_buf b = {0};
  rlx_buf_puts(&b, "rlx 1\n");
  if (g->n_symbols > 0) {
    rlx_buf_puts(&b, "symbols");
    for (int32_t i = 0; i < g->n_symbols; i++) {
      rlx_buf_add(&b, " ", 1);
      /* Expressions in parentheses, so the table keeps its order (codes). */
      if (g->dim_defs[i].op) rlx_buf_printf(&b, "(%s)", g->symbols[i]);
      else print_symbol(&b, g->symbols[i]);
    }
    rlx_buf_add(&b, "\n", 1);
  }
  for (int32_t i = 0; i < g->n_nodes; i++) print_node(&b, g, &g->nodes[i]);
  rlx_buf_puts(&b, "outputs");
  for (int32_t i = 0; i < g->n_outputs; i++) rlx_buf_printf(&b, " %%%" PRId32, g->outputs[i]);
  rlx_buf_add(&b, "\n", 1);
  if (b.oom) {
    free(b.p);
    return RLX_RESOURCE_EXHAUSTED;
  }
  *out_text = b.p;
  return RLX_OK;
}

void rlx_free(void* p) { free(p); }

/* ------------------------------------------------------------------ id map */

/* Text ids are arbitrary non-negative integers (hand-written files need not
 * be dense), so they map to tensors through a small open-addressing table. */
typedef struct id_map {
  int64_t* keys; /* -1 = empty */
  rlx_tensor* vals;
  size_t cap, n;
} id_map;

static size_t id_hash(int64_t k, size_t cap) {
  uint64_t h = (uint64_t)k * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> 17) & (cap - 1);
}

static int id_map_find(const id_map* m, int64_t k, rlx_tensor* out) {
  if (!m->cap) return 0;
  for (size_t i = id_hash(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == -1) return 0;
    if (m->keys[i] == k) { if (out) *out = m->vals[i]; return 1; }
  }
}

static int id_map_grow(id_map* m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  int64_t* keys = malloc(cap * sizeof *keys);
  rlx_tensor* vals = malloc(cap * sizeof *vals);
  if (!keys || !vals) { free(keys); free(vals); return 0; }
  for (size_t i = 0; i < cap; i++) keys[i] = -1;
  for (size_t j = 0; j < m->cap; j++) {
    if (m->keys[j] == -1) continue;
    size_t i = id_hash(m->keys[j], cap);
    while (keys[i] != -1) i = (i + 1) & (cap - 1);
    keys[i] = m->keys[j];
    vals[i] = m->vals[j];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return 1;
}

static int id_map_put(id_map* m, int64_t k, rlx_tensor v) {
  if ((m->n + 1) * 2 > m->cap && !id_map_grow(m)) return 0;
  size_t i = id_hash(k, m->cap);
  while (m->keys[i] != -1) i = (i + 1) & (m->cap - 1);
  m->keys[i] = k;
  m->vals[i] = v;
  m->n++;
  return 1;
}

static void id_map_free(id_map* m) {
  free(m->keys);
  free(m->vals);
}

/* ------------------------------------------------------------------ lexer */

typedef enum tok_kind { T_EOF, T_EOL, T_IDENT, T_ID, T_NUM, T_STR, T_PUNCT } tok_kind;

typedef struct token {
  tok_kind kind;
  const char* s; /* T_STR: the raw text between the quotes; T_ID: the digits */
  size_t n;
  int32_t line, col;
} token;

typedef struct parser {
  const char* src;
  size_t pos;
  int32_t line;
  size_t line_start;
  token tok;
  rlx_graph* g;
  id_map ids;
  int saw_node;
  char msg[1200];
} parser;

__attribute__((format(printf, 4, 5))) static rlx_status fail_at(parser* p, int32_t line,
                                                                 int32_t col, const char* fmt,
                                                                 ...) {
  if (p->msg[0]) return RLX_INVALID_ARGUMENT; /* keep the first, most precise message */
  int n = snprintf(p->msg, sizeof p->msg, "%" PRId32 ":%" PRId32 ": ", line, col);
  if (n < 0 || (size_t)n >= sizeof p->msg) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->msg + n, sizeof p->msg - (size_t)n, fmt, ap);
  va_end(ap);
  return RLX_INVALID_ARGUMENT;
}
#define FAIL(p, t, ...) fail_at((p), (t)->line, (t)->col, __VA_ARGS__)

static rlx_status out_of_memory(parser* p, const token* t) {
  fail_at(p, t->line, t->col, "out of host memory");
  return RLX_RESOURCE_EXHAUSTED;
}

static int32_t cur_col(const parser* p, size_t pos) {
  size_t c = pos - p->line_start + 1;
  return c > INT32_MAX ? INT32_MAX : (int32_t)c;
}

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
static int is_num_char(char c) { return is_ident_char(c) || c == '.' || c == '+' || c == '-'; }

/* Quoted strings may not span lines; escapes are checked here so decoding
 * later cannot fail. */
static rlx_status lex_string(parser* p, token* t) {
  size_t i = p->pos + 1;
  const char* s = p->src;
  for (;;) {
    char c = s[i];
    if (c == '\0' || c == '\n') return FAIL(p, t, "unterminated string");
    if (c == '"') break;
    if (c == '\\') {
      char e = s[i + 1];
      if (e == 'x' && is_hex(s[i + 2]) && is_hex(s[i + 3])) {
        if (hex_val(s[i + 2]) == 0 && hex_val(s[i + 3]) == 0)
          return fail_at(p, t->line, cur_col(p, i), "\\x00 is not allowed in a string");
        i += 4;
        continue;
      }
      if (e != '"' && e != '\\' && e != 'n' && e != 't')
        return fail_at(p, t->line, cur_col(p, i), "bad escape in string");
      i += 2;
      continue;
    }
    i++;
  }
  if (i - (p->pos + 1) > TEXT_MAX_STRING_BYTES) return FAIL(p, t, "string too long");
  t->kind = T_STR;
  t->s = s + p->pos + 1;
  t->n = i - (p->pos + 1);
  p->pos = i + 1;
  return RLX_OK;
}

static rlx_status advance(parser* p) {
  const char* s = p->src;
  for (;;) {
    char c = s[p->pos];
    if (c == ' ' || c == '\t' || c == '\r') p->pos++;
    else if (c == '#') { while (s[p->pos] && s[p->pos] != '\n') p->pos++; }
    else break;
  }
  token* t = &p->tok;
  t->line = p->line;
  t->col = cur_col(p, p->pos);
  t->s = s + p->pos;
  t->n = 1;
  char c = s[p->pos];
  if (c == '\0') { t->kind = T_EOF; t->n = 0; return RLX_OK; }
  if (c == '\n') {
    t->kind = T_EOL;
    p->pos++;
    p->line = p->line < INT32_MAX ? p->line + 1 : p->line;
    p->line_start = p->pos;
    return RLX_OK;
  }
  if (c == '"') return lex_string(p, t);
  if (c == '%') {
    size_t i = p->pos + 1;
    while (s[i] >= '0' && s[i] <= '9') i++;
    if (i == p->pos + 1) return FAIL(p, t, "expected digits after '%%'");
    t->kind = T_ID;
    t->s = s + p->pos + 1;
    t->n = i - p->pos - 1;
    p->pos = i;
    return RLX_OK;
  }
  if (is_ident_start(c)) {
    size_t i = p->pos;
    while (is_ident_char(s[i])) i++;
    t->kind = T_IDENT;
    t->n = i - p->pos;
    p->pos = i;
    return RLX_OK;
  }
  if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.') {
    size_t i = p->pos;
    while (is_num_char(s[i])) i++;
    t->kind = T_NUM;
    t->n = i - p->pos;
    p->pos = i;
    return RLX_OK;
  }
  if (strchr("=(),:[]", c)) {
    t->kind = T_PUNCT;
    p->pos++;
    return RLX_OK;
  }
  if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
    return FAIL(p, t, "unexpected byte 0x%02x", (unsigned char)c);
  return FAIL(p, t, "unexpected character '%c'", c);
}

static int tok_is(const token* t, const char* word) {
  size_t n = strlen(word);
  return (t->kind == T_IDENT || t->kind == T_NUM) && t->n == n && memcmp(t->s, word, n) == 0;
}
static int tok_punct(const token* t, char c) { return t->kind == T_PUNCT && t->s[0] == c; }

/* For messages: the token text, cut short. */
static int tok_len(const token* t) { return t->n > 40 ? 40 : (int)t->n; }

static rlx_status expect_punct(parser* p, char c, const char* where) {
  if (!tok_punct(&p->tok, c)) return FAIL(p, &p->tok, "expected '%c' %s", c, where);
  return advance(p);
}

static rlx_status expect_end_of_line(parser* p) {
  if (p->tok.kind == T_EOL) return advance(p);
  if (p->tok.kind == T_EOF) return RLX_OK;
  return FAIL(p, &p->tok, "expected end of line, found '%.*s'", tok_len(&p->tok), p->tok.s);
}

static rlx_status skip_blank_lines(parser* p) {
  while (p->tok.kind == T_EOL) RLX_RETURN_IF_ERROR(advance(p));
  return RLX_OK;
}

/* ------------------------------------------------------------------ scalar values */

static rlx_status parse_int(parser* p, const token* t, int64_t lo, int64_t hi, int64_t* out) {
  char buf[TEXT_MAX_NUMBER_CHARS + 1];
  if (t->kind != T_NUM) return FAIL(p, t, "expected an integer");
  if (t->n > TEXT_MAX_NUMBER_CHARS) return FAIL(p, t, "number too long");
  memcpy(buf, t->s, t->n);
  buf[t->n] = '\0';
  char* end = NULL;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (end != buf + t->n || end == buf) return FAIL(p, t, "bad integer '%s'", buf);
  if (errno == ERANGE || v < lo || v > hi)
    return FAIL(p, t, "%s out of range [%" PRId64 ", %" PRId64 "]", buf, lo, hi);
  *out = v;
  return RLX_OK;
}

static rlx_status parse_float(parser* p, const token* t, float* out) {
  if (tok_is(t, "inf") || tok_is(t, "+inf")) { *out = INFINITY; return RLX_OK; }
  if (tok_is(t, "-inf")) { *out = -INFINITY; return RLX_OK; }
  if (tok_is(t, "nan")) { *out = NAN; return RLX_OK; }
  if (t->kind != T_NUM) return FAIL(p, t, "expected a number");
  if (t->n > TEXT_MAX_NUMBER_CHARS) return FAIL(p, t, "number too long");
  char buf[TEXT_MAX_NUMBER_CHARS + 1];
  memcpy(buf, t->s, t->n);
  buf[t->n] = '\0';
  char* end = NULL;
  float v = strtof(buf, &end);
  /* Only decimal numerals here: words like "infinity" or hex floats would
   * print back differently from how they were written. */
  if (end != buf + t->n || end == buf || strpbrk(buf, "xXiInN"))
    return FAIL(p, t, "bad number '%s'", buf);
  *out = v;
  return RLX_OK;
}

/* Decodes a string token already validated by lex_string. */
static rlx_status decode_string(parser* p, const token* t, char** out) {
  char* s = malloc(t->n + 1);
  if (!s) return out_of_memory(p, t);
  size_t n = 0;
  for (size_t i = 0; i < t->n; i++) {
    char c = t->s[i];
    if (c != '\\') { s[n++] = c; continue; }
    char e = t->s[++i];
    if (e == 'n') s[n++] = '\n';
    else if (e == 't') s[n++] = '\t';
    else if (e == 'x') {
      s[n++] = (char)(hex_val(t->s[i + 1]) * 16 + hex_val(t->s[i + 2]));
      i += 2;
    } else s[n++] = e;
  }
  s[n] = '\0';
  *out = s;
  return RLX_OK;
}

static rlx_status parse_hex_bytes(parser* p, const token* t, void** out, size_t* out_bytes) {
  if (t->kind != T_NUM || t->n < 2 || t->s[0] != '0' || (t->s[1] != 'x' && t->s[1] != 'X'))
    return FAIL(p, t, "expected constant data as 0x followed by hex bytes");
  size_t digits = t->n - 2;
  if (digits % 2) return FAIL(p, t, "odd number of hex digits in constant data");
  unsigned char* d = malloc(digits / 2 + 1);
  if (!d) return out_of_memory(p, t);
  for (size_t i = 0; i < digits; i += 2) {
    char hi = t->s[2 + i], lo = t->s[3 + i];
    if (!is_hex(hi) || !is_hex(lo)) {
      free(d);
      return fail_at(p, t->line, t->col + (int32_t)((2 + i) & 0x3fffffff), "bad hex digit");
    }
    d[i / 2] = (unsigned char)(hex_val(hi) * 16 + hex_val(lo));
  }
  *out = d;
  *out_bytes = digits / 2;
  return RLX_OK;
}

/* [a,b,c] of integers in [lo, hi]; at most cap entries. */
static rlx_status parse_int_list(parser* p, int64_t lo, int64_t hi, int32_t cap, int64_t* vals,
                                 int32_t* n, token* toks) {
  *n = 0;
  RLX_RETURN_IF_ERROR(expect_punct(p, '[', "to open a list"));
  if (tok_punct(&p->tok, ']')) return advance(p);
  for (;;) {
    if (*n >= cap) return FAIL(p, &p->tok, "list longer than %" PRId32 " entries", cap);
    toks[*n] = p->tok;
    RLX_RETURN_IF_ERROR(parse_int(p, &p->tok, lo, hi, &vals[*n]));
    (*n)++;
    RLX_RETURN_IF_ERROR(advance(p));
    if (tok_punct(&p->tok, ']')) return advance(p);
    RLX_RETURN_IF_ERROR(expect_punct(p, ',', "or ']' in a list"));
  }
}

/* [a,b,c] of floats; at most RLX_INTS_MAX entries. */
static rlx_status parse_float_list(parser* p, rlx_floats* l) {
  l->n = 0;
  RLX_RETURN_IF_ERROR(expect_punct(p, '[', "to open a list"));
  if (tok_punct(&p->tok, ']')) return advance(p);
  for (;;) {
    if (l->n >= RLX_INTS_MAX) return FAIL(p, &p->tok, "list longer than %d entries", RLX_INTS_MAX);
    RLX_RETURN_IF_ERROR(parse_float(p, &p->tok, &l->v[l->n]));
    l->n++;
    RLX_RETURN_IF_ERROR(advance(p));
    if (tok_punct(&p->tok, ']')) return advance(p);
    RLX_RETURN_IF_ERROR(expect_punct(p, ',', "or ']' in a list"));
  }
}

/* ------------------------------------------------------------------ types */

static int tok_to_cstr(const token* t, char* buf, size_t cap) {
  if (t->n >= cap) return 0;
  memcpy(buf, t->s, t->n);
  buf[t->n] = '\0';
  return 1;
}

static rlx_status parse_symbol_name(parser* p, const token* t, char** out) {
  if (t->kind == T_STR) return decode_string(p, t, out);
  if (t->kind != T_IDENT) return FAIL(p, t, "expected a symbol name");
  char* s = malloc(t->n + 1);
  if (!s) return out_of_memory(p, t);
  tok_to_cstr(t, s, t->n + 1);
  *out = s;
  return RLX_OK;
}

/* ---- dim expressions ("B*T", "(T+1)/2", "cdiv(T,2)"), read character by
 * character from the token's start: the tokenizer has no operators. */

typedef struct dim_scan {
  parser* p;
  const token* t; /* where errors point */
  const char* s;
  int32_t depth;  /* parentheses and calls open: bounded (the text is untrusted) */
} dim_scan;

static rlx_status scan_expr(dim_scan* d, rlx_dim* out);

static void scan_space(dim_scan* d) {
  while (*d->s == ' ' || *d->s == '\t') d->s++;
}

static rlx_status scan_combine(dim_scan* d, rlx_dim_op op, rlx_dim a, rlx_dim b, rlx_dim* out) {
  if (rlx_graph_dim_expr(d->p->g, op, a, b, out) != RLX_OK)
    return FAIL(d->p, d->t, "%s", rlx_graph_last_error(d->p->g));
  /* A folded size obeys the literals' bound: it may be printed as an
   * operand of a larger expression, which must parse again. */
  if (*out > TEXT_MAX_DIM) return FAIL(d->p, d->t, "dim above %lld", (long long)TEXT_MAX_DIM);
  return RLX_OK;
}

static rlx_status scan_atom_inner(dim_scan* d, rlx_dim* out);

static rlx_status scan_atom(dim_scan* d, rlx_dim* out) {
  if (++d->depth > RLX_DIM_MAX_DEPTH)
    return FAIL(d->p, d->t, "dim expression nests deeper than %d", RLX_DIM_MAX_DEPTH);
  rlx_status s = scan_atom_inner(d, out);
  d->depth--;
  return s;
}

static rlx_status scan_atom_inner(dim_scan* d, rlx_dim* out) {
  scan_space(d);
  const char* s = d->s;
  if (*s == '(') {
    d->s++;
    RLX_RETURN_IF_ERROR(scan_expr(d, out));
    scan_space(d);
    if (*d->s != ')') return FAIL(d->p, d->t, "expected ')' in a dim expression");
    d->s++;
    return RLX_OK;
  }
  if (*s >= '0' && *s <= '9') {
    int64_t v = 0;
    while (*d->s >= '0' && *d->s <= '9') {
      v = v * 10 + (*d->s++ - '0');
      if (v > TEXT_MAX_DIM) return FAIL(d->p, d->t, "dim above %lld", (long long)TEXT_MAX_DIM);
    }
    *out = v;
    return RLX_OK;
  }
  if (!is_ident_start(*s)) return FAIL(d->p, d->t, "expected a dim in a dim expression");
  size_t n = 0;
  while (is_ident_char(s[n])) n++;
  d->s = s + n;
  static const struct { const char* name; rlx_dim_op op; } fns[] = {
      {"cdiv", RLX_DIM_CEIL_DIV}, {"min", RLX_DIM_MIN}, {"max", RLX_DIM_MAX}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    if (n != strlen(fns[i].name) || memcmp(s, fns[i].name, n) != 0 || *d->s != '(') continue;
    rlx_dim a, b;
    d->s++;
    RLX_RETURN_IF_ERROR(scan_expr(d, &a));
    scan_space(d);
    if (*d->s != ',') return FAIL(d->p, d->t, "expected ',' in %s(a,b)", fns[i].name);
    d->s++;
    RLX_RETURN_IF_ERROR(scan_expr(d, &b));
    scan_space(d);
    if (*d->s != ')') return FAIL(d->p, d->t, "expected ')' closing %s(a,b)", fns[i].name);
    d->s++;
    return scan_combine(d, fns[i].op, a, b, out);
  }
  char name[256];
  if (n >= sizeof name) return FAIL(d->p, d->t, "symbol name too long");
  memcpy(name, s, n);
  name[n] = '\0';
  if (rlx_graph_symbol(d->p->g, name, out) != RLX_OK)
    return FAIL(d->p, d->t, "%s", rlx_graph_last_error(d->p->g));
  return RLX_OK;
}

/* term := atom (('*' | '/' | '%') atom)*;  expr := term (('+' | '-') term)* */
static rlx_status scan_term(dim_scan* d, rlx_dim* out) {
  RLX_RETURN_IF_ERROR(scan_atom(d, out));
  for (;;) {
    scan_space(d);
    char c = *d->s;
    if (c != '*' && c != '/' && c != '%') return RLX_OK;
    d->s++;
    rlx_dim b;
    RLX_RETURN_IF_ERROR(scan_atom(d, &b));
    rlx_dim_op op = c == '*' ? RLX_DIM_MUL : c == '/' ? RLX_DIM_FLOOR_DIV : RLX_DIM_MOD;
    RLX_RETURN_IF_ERROR(scan_combine(d, op, *out, b, out));
  }
}

static rlx_status scan_expr(dim_scan* d, rlx_dim* out) {
  RLX_RETURN_IF_ERROR(scan_term(d, out));
  for (;;) {
    scan_space(d);
    char c = *d->s;
    if (c != '+' && c != '-') return RLX_OK;
    d->s++;
    rlx_dim b;
    RLX_RETURN_IF_ERROR(scan_term(d, &b));
    RLX_RETURN_IF_ERROR(scan_combine(d, c == '+' ? RLX_DIM_ADD : RLX_DIM_SUB, *out, b, out));
  }
}

/* 1 when the dim at the current token is an expression rather than one
 * number or name: it opens with '(' or a function, or an operator follows. */
static int dim_is_expression(const parser* p) {
  const token* t = &p->tok;
  if (tok_punct(t, '(')) return 1;
  if (t->kind != T_IDENT && t->kind != T_NUM) return 0;
  const char* s = t->s;
  if (t->kind == T_NUM && !(*s >= '0' && *s <= '9')) return 0; /* -1: the old error */
  if (t->kind == T_NUM) while (*s >= '0' && *s <= '9') s++;
  else while (is_ident_char(*s)) s++;
  while (*s == ' ' || *s == '\t') s++;
  return *s && strchr("*/%+-(", *s) != NULL;
}

/* Parses the expression at the current token and moves past it. */
static rlx_status parse_dim_expression(parser* p, rlx_dim* out) {
  token t = p->tok;
  dim_scan d = {p, &t, t.s, 0};
  RLX_RETURN_IF_ERROR(scan_expr(&d, out));
  p->pos = (size_t)(d.s - p->src);
  return advance(p);
}

/* A dim: a static size, a symbol name (made on first use when the text
 * has no `symbols` line naming it) or an expression over dims. */
static rlx_status parse_dim(parser* p, rlx_dim* out) {
  const token* t = &p->tok;
  if (dim_is_expression(p)) return parse_dim_expression(p, out);
  if (t->kind == T_NUM) {
    int64_t v;
    RLX_RETURN_IF_ERROR(parse_int(p, t, 0, TEXT_MAX_DIM, &v));
    *out = v;
    return advance(p);
  }
  char* name = NULL;
  RLX_RETURN_IF_ERROR(parse_symbol_name(p, t, &name));
  rlx_status s = rlx_graph_symbol(p->g, name, out);
  free(name);
  if (s != RLX_OK) return FAIL(p, t, "%s", rlx_graph_last_error(p->g));
  return advance(p);
}

static rlx_status parse_type(parser* p, rlx_type* out) {
  token t0 = p->tok;
  memset(out, 0, sizeof *out);
  char name[16]; /* the longest dtype name is "f8e4m3fnuz" */
  int found = 0;
  if (t0.kind == T_IDENT && tok_to_cstr(&t0, name, sizeof name)) {
    for (int d = 0; d < RLX_DTYPE_COUNT && !found; d++)
      if (strcmp(name, rlx_dtype_name((rlx_dtype)d)) == 0) { out->dtype = (rlx_dtype)d; found = 1; }
  }
  if (!found) return FAIL(p, &t0, "expected a dtype, found '%.*s'", tok_len(&t0), t0.s);
  RLX_RETURN_IF_ERROR(advance(p));
  RLX_RETURN_IF_ERROR(expect_punct(p, '[', "after the dtype"));
  int64_t numel = 1;
  if (tok_punct(&p->tok, ']')) return advance(p);
  for (;;) {
    if (out->rank >= RLX_MAX_RANK) return FAIL(p, &p->tok, "rank above %d", RLX_MAX_RANK);
    token dt = p->tok;
    RLX_RETURN_IF_ERROR(parse_dim(p, &out->shape[out->rank]));
    rlx_dim d = out->shape[out->rank++];
    if (d > 0) {
      if (numel > TEXT_MAX_NUMEL / d) return FAIL(p, &dt, "type has too many elements");
      numel *= d;
    }
    if (tok_punct(&p->tok, ']')) return advance(p);
    RLX_RETURN_IF_ERROR(expect_punct(p, ',', "or ']' between dims"));
  }
}

static int types_equal(const rlx_type* a, const rlx_type* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int32_t i = 0; i < a->rank && i < RLX_MAX_RANK; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

static const char* type_text(const rlx_graph* g, const rlx_type* t, char* buf, size_t cap) {
  rlx_buf b = {0};
  print_type(&b, g, t);
  snprintf(buf, cap, "%s", b.p && !b.oom ? b.p : "?");
  free(b.p);
  return buf;
}

/* ------------------------------------------------------------------ attributes */

static int find_attr(const token* t) {
  for (int id = 0; id < RLX_ATTR_COUNT; id++)
    if (tok_is(t, attr_table[id].text)) return id;
  return -1;
}

static rlx_status parse_enum(parser* p, const token* t, attr_kind kind, int32_t* out) {
  name_table names = enum_names(kind);
  if (t->kind == T_NUM) {
    int64_t v;
    RLX_RETURN_IF_ERROR(parse_int(p, t, INT32_MIN, INT32_MAX, &v));
    *out = (int32_t)v;
    return RLX_OK;
  }
  for (int32_t i = 0; i < names.count; i++)
    if (tok_is(t, names.names[i])) { *out = i; return RLX_OK; }
  return FAIL(p, t, "unknown value '%.*s'", tok_len(t), t->s);
}

/* Axes may be written negative (counted from the end of input 0's shape);
 * they are stored as a bitmask of non-negative axes. */
static rlx_status parse_axes(parser* p, int32_t input_rank, uint32_t* out) {
  int64_t vals[64];
  token toks[64];
  int32_t n = 0;
  RLX_RETURN_IF_ERROR(parse_int_list(p, -64, 63, 64, vals, &n, toks));
  *out = 0;
  for (int32_t i = 0; i < n; i++) {
    int64_t ax = vals[i] < 0 ? vals[i] + input_rank : vals[i];
    if (ax < 0 || ax >= RLX_MAX_RANK)
      return FAIL(p, &toks[i], "axis %" PRId64 " out of range for rank %" PRId32, vals[i],
                  input_rank);
    if (*out & (1u << ax)) return FAIL(p, &toks[i], "axis %" PRId64 " listed twice", vals[i]);
    *out |= 1u << ax;
  }
  return RLX_OK;
}

/* Parses the value token(s) of attribute id into a; the current token is the
 * first token of the value. */
static rlx_status parse_attr_value(parser* p, int id, rlx_node_attrs* a, int32_t input_rank) {
  const attr_info* info = &attr_table[id];
  token t = p->tok;
  int64_t v = 0;
  switch (info->kind) {
    case AK_I32:
      RLX_RETURN_IF_ERROR(parse_int(p, &t, INT32_MIN, INT32_MAX, &v));
      attr_set_i32(a, info->offset, (int32_t)v);
      return advance(p);
    case AK_I64:
      if (attr_is_dim((rlx_attr_id)id)) { /* a size, a symbol or an expression */
        RLX_RETURN_IF_ERROR(parse_dim(p, &v));
        memcpy((char*)a + info->offset, &v, sizeof v);
        return RLX_OK;
      }
      RLX_RETURN_IF_ERROR(parse_int(p, &t, INT64_MIN, INT64_MAX, &v));
      memcpy((char*)a + info->offset, &v, sizeof v);
      return advance(p);
    case AK_F32: {
      float f = 0;
      RLX_RETURN_IF_ERROR(parse_float(p, &t, &f));
      memcpy((char*)a + info->offset, &f, sizeof f);
      return advance(p);
    }
    case AK_PERM: {
      int64_t vals[RLX_MAX_RANK];
      token toks[RLX_MAX_RANK];
      int32_t n = 0;
      RLX_RETURN_IF_ERROR(parse_int_list(p, INT32_MIN, INT32_MAX, RLX_MAX_RANK, vals, &n, toks));
      for (int32_t i = 0; i < n; i++) a->perm[i] = (int32_t)vals[i];
      return RLX_OK;
    }
    case AK_FLOATS: {
      rlx_floats l;
      RLX_RETURN_IF_ERROR(parse_float_list(p, &l));
      memcpy((char*)a + info->offset, &l, sizeof l);
      return RLX_OK;
    }
    case AK_INTS: {
      rlx_ints l;
      token toks[RLX_INTS_MAX];
      RLX_RETURN_IF_ERROR(parse_int_list(p, -TEXT_MAX_DIM, TEXT_MAX_DIM, RLX_INTS_MAX, l.v, &l.n, toks));
      memcpy((char*)a + info->offset, &l, sizeof l);
      return RLX_OK;
    }
    case AK_AXES: return parse_axes(p, input_rank, &a->axes);
    case AK_STR:
      if (t.kind != T_STR) return FAIL(p, &t, "expected a quoted string");
      RLX_RETURN_IF_ERROR(decode_string(p, &t, &a->name));
      return advance(p);
    case AK_BYTES:
      RLX_RETURN_IF_ERROR(parse_hex_bytes(p, &t, &a->data, &a->data_bytes));
      return advance(p);
    default: {
      int32_t e = 0;
      RLX_RETURN_IF_ERROR(parse_enum(p, &t, info->kind, &e));
      attr_set_i32(a, info->offset, e);
      return advance(p);
    }
  }
}

/* ------------------------------------------------------------------ node lines */

typedef struct node_line {
  token out_toks[RLX_MAX_OUTPUTS];
  int64_t out_ids[RLX_MAX_OUTPUTS];
  int32_t n_out;
  token op_tok;
  rlx_op op;
  rlx_tensor in[RLX_MAX_INPUTS];
  int32_t n_in;
  rlx_node_attrs a;
  char* label;
  rlx_type types[RLX_MAX_OUTPUTS];
  token type_toks[RLX_MAX_OUTPUTS];
} node_line;

static int find_op(const token* t, rlx_op* op, int32_t* kind) {
  for (int o = 0; o < RLX_OP_COUNT; o++) {
    int32_t members = family_size((rlx_op)o);
    for (int32_t k = 0; k < members; k++) {
      if (tok_is(t, rlx_op_name((rlx_op)o, k))) { *op = (rlx_op)o; *kind = k; return 1; }
    }
    if (!members && tok_is(t, rlx_op_table[o].text)) { *op = (rlx_op)o; *kind = 0; return 1; }
  }
  return 0;
}

static rlx_status parse_value_id(parser* p, const token* t, int64_t* out) {
  if (t->kind != T_ID) return FAIL(p, t, "expected a value id like %%3");
  if (t->n > 10) return FAIL(p, t, "value id too large");
  int64_t v = 0;
  for (size_t i = 0; i < t->n; i++) v = v * 10 + (t->s[i] - '0');
  if (v > INT32_MAX) return FAIL(p, t, "value id too large");
  *out = v;
  return RLX_OK;
}

static rlx_status lookup_input(parser* p, const token* t, rlx_tensor* out) {
  int64_t id = 0;
  RLX_RETURN_IF_ERROR(parse_value_id(p, t, &id));
  if (!id_map_find(&p->ids, id, out))
    return FAIL(p, t, "%%%" PRId64 " used before definition", id);
  return RLX_OK;
}

static rlx_status parse_outputs_ids(parser* p, node_line* nl) {
  for (;;) {
    const token* t = &p->tok;
    if (nl->n_out >= RLX_MAX_OUTPUTS) return FAIL(p, t, "more than %d outputs", RLX_MAX_OUTPUTS);
    int64_t id = 0;
    RLX_RETURN_IF_ERROR(parse_value_id(p, t, &id));
    if (id_map_find(&p->ids, id, NULL)) return FAIL(p, t, "%%%" PRId64 " redefined", id);
    for (int32_t i = 0; i < nl->n_out; i++)
      if (nl->out_ids[i] == id) return FAIL(p, t, "%%%" PRId64 " redefined", id);
    nl->out_toks[nl->n_out] = *t;
    nl->out_ids[nl->n_out++] = id;
    RLX_RETURN_IF_ERROR(advance(p));
    if (!tok_punct(&p->tok, ',')) return expect_punct(p, '=', "after the output ids");
    RLX_RETURN_IF_ERROR(advance(p));
  }
}

static rlx_status parse_inputs(parser* p, node_line* nl) {
  if (!tok_punct(&p->tok, '(')) return RLX_OK; /* leaves omit the parentheses */
  RLX_RETURN_IF_ERROR(advance(p));
  if (tok_punct(&p->tok, ')')) return advance(p);
  for (;;) {
    const token* t = &p->tok;
    if (nl->n_in >= RLX_MAX_INPUTS) return FAIL(p, t, "more than %d inputs", RLX_MAX_INPUTS);
    if (tok_is(t, "_")) nl->in[nl->n_in] = RLX_NONE;
    else RLX_RETURN_IF_ERROR(lookup_input(p, t, &nl->in[nl->n_in]));
    nl->n_in++;
    RLX_RETURN_IF_ERROR(advance(p));
    if (tok_punct(&p->tok, ')')) return advance(p);
    RLX_RETURN_IF_ERROR(expect_punct(p, ',', "or ')' between inputs"));
  }
}

static rlx_status parse_attrs(parser* p, node_line* nl) {
  const rlx_op_info* info = &rlx_op_table[nl->op];
  const char* op_name = rlx_op_name(nl->op, nl->a.kind);
  int32_t input_rank = 0;
  if (nl->n_in > 0 && nl->in[0] != RLX_NONE) input_rank = rlx_tensor_type(p->g, nl->in[0])->rank;
  uint64_t seen = 0;
  while (p->tok.kind == T_IDENT) {
    token name = p->tok;
    RLX_RETURN_IF_ERROR(advance(p));
    RLX_RETURN_IF_ERROR(expect_punct(p, '=', "after the attribute name"));
    if (tok_is(&name, "label")) {
      if (nl->label) return FAIL(p, &name, "duplicate attribute 'label'");
      if (p->tok.kind != T_STR) return FAIL(p, &p->tok, "expected a quoted string");
      RLX_RETURN_IF_ERROR(decode_string(p, &p->tok, &nl->label));
      RLX_RETURN_IF_ERROR(advance(p));
      continue;
    }
    int id = find_attr(&name);
    if (id < 0) return FAIL(p, &name, "unknown attribute '%.*s'", tok_len(&name), name.s);
    if (!(info->attrs & (1ull << id)))
      return FAIL(p, &name, "'%s' has no attribute '%s'", op_name, attr_table[id].text);
    if (seen & (1ull << id)) return FAIL(p, &name, "duplicate attribute '%s'", attr_table[id].text);
    seen |= 1ull << id;
    RLX_RETURN_IF_ERROR(parse_attr_value(p, id, &nl->a, input_rank));
  }
  return RLX_OK;
}

static rlx_status parse_types(parser* p, node_line* nl) {
  RLX_RETURN_IF_ERROR(expect_punct(p, ':', "before the output type"));
  int32_t want = rlx_op_table[nl->op].n_outputs;
  for (int32_t i = 0;; i++) {
    if (i >= want)
      return FAIL(p, &p->tok, "'%s' has %" PRId32 " output type(s)",
                  rlx_op_name(nl->op, nl->a.kind), want);
    nl->type_toks[i] = p->tok;
    RLX_RETURN_IF_ERROR(parse_type(p, &nl->types[i]));
    if (!tok_punct(&p->tok, ',')) {
      if (i + 1 != want)
        return FAIL(p, &p->tok, "'%s' has %" PRId32 " output types, %" PRId32 " given",
                    rlx_op_name(nl->op, nl->a.kind), want, i + 1);
      return expect_end_of_line(p);
    }
    RLX_RETURN_IF_ERROR(advance(p));
  }
}

/* Adds the parsed node to the graph and checks the inferred output types
 * against the ones the text declares. */
static rlx_status add_parsed_node(parser* p, node_line* nl) {
  const rlx_op_info* info = &rlx_op_table[nl->op];
  const char* op_name = rlx_op_name(nl->op, nl->a.kind);
  if (info->flags & OPF_DECLARED) nl->a.type = nl->types[0];
  rlx_tensor outs[RLX_MAX_OUTPUTS] = {RLX_NONE, RLX_NONE, RLX_NONE};
  if (rlx_graph_add_node(p->g, nl->op, &nl->a, nl->in, nl->n_in, outs) != RLX_OK)
    return FAIL(p, &nl->op_tok, "%s", rlx_graph_last_error(p->g));
  for (int32_t i = 0; i < nl->n_out; i++) {
    const rlx_type* got = rlx_tensor_type(p->g, outs[i]);
    if (!types_equal(got, &nl->types[i])) {
      char want_s[160], got_s[160];
      return FAIL(p, &nl->type_toks[i], "'%s' output %" PRId32 " is %s, the text says %s",
                  op_name, i, type_text(p->g, got, got_s, sizeof got_s),
                  type_text(p->g, &nl->types[i], want_s, sizeof want_s));
    }
  }
  if (nl->label && rlx_graph_set_name(p->g, outs[0], nl->label) != RLX_OK)
    return FAIL(p, &nl->op_tok, "%s", rlx_graph_last_error(p->g));
  for (int32_t i = 0; i < nl->n_out; i++)
    if (!id_map_put(&p->ids, nl->out_ids[i], outs[i])) return out_of_memory(p, &nl->op_tok);
  return RLX_OK;
}

static rlx_status parse_node_line(parser* p, node_line* nl) {
  RLX_RETURN_IF_ERROR(parse_outputs_ids(p, nl));
  nl->op_tok = p->tok;
  int32_t kind = 0;
  if (p->tok.kind != T_IDENT || !find_op(&p->tok, &nl->op, &kind))
    return FAIL(p, &p->tok, "unknown op '%.*s'", tok_len(&p->tok), p->tok.s);
  nl->a.kind = kind;
  const rlx_op_info* info = &rlx_op_table[nl->op];
  const char* op_name = rlx_op_name(nl->op, kind);
  if (nl->n_out != info->n_outputs)
    return FAIL(p, &nl->op_tok, "'%s' has %" PRId32 " output(s), the line names %" PRId32,
                op_name, info->n_outputs, nl->n_out);
  RLX_RETURN_IF_ERROR(advance(p));
  RLX_RETURN_IF_ERROR(parse_inputs(p, nl));
  if (nl->n_in < info->min_inputs || nl->n_in > info->max_inputs)
    return FAIL(p, &nl->op_tok, "'%s' takes %" PRId32 "..%" PRId32 " inputs, got %" PRId32,
                op_name, info->min_inputs, info->max_inputs, nl->n_in);
  RLX_RETURN_IF_ERROR(parse_attrs(p, nl));
  RLX_RETURN_IF_ERROR(parse_types(p, nl));
  return add_parsed_node(p, nl);
}

static rlx_status parse_node(parser* p) {
  node_line* nl = calloc(1, sizeof *nl);
  if (!nl) return out_of_memory(p, &p->tok);
  rlx_status s = parse_node_line(p, nl);
  free(nl->a.name);
  free(nl->a.data);
  free(nl->label);
  free(nl);
  p->saw_node = 1;
  return s;
}

/* ------------------------------------------------------------------ file structure */

static rlx_status parse_header(parser* p) {
  RLX_RETURN_IF_ERROR(skip_blank_lines(p));
  if (!tok_is(&p->tok, "rlx")) return FAIL(p, &p->tok, "expected 'rlx 1' header");
  RLX_RETURN_IF_ERROR(advance(p));
  if (!tok_is(&p->tok, "1")) return FAIL(p, &p->tok, "unsupported version (expected 'rlx 1')");
  RLX_RETURN_IF_ERROR(advance(p));
  return expect_end_of_line(p);
}

static rlx_status parse_symbols(parser* p) {
  token kw = p->tok;
  if (p->saw_node || p->g->n_symbols > 0)
    return FAIL(p, &kw, "'symbols' must come once, before the first node");
  RLX_RETURN_IF_ERROR(advance(p));
  while (p->tok.kind != T_EOL && p->tok.kind != T_EOF) {
    token t = p->tok;
    if (tok_punct(&t, '(')) { /* an expression entry, after its operands */
      int32_t before = p->g->n_symbols;
      rlx_dim d;
      RLX_RETURN_IF_ERROR(parse_dim_expression(p, &d));
      if (p->g->n_symbols != before + 1 || d != -(rlx_dim)before - 1)
        return FAIL(p, &t, "dim expression is not a new entry of the symbol table");
      continue;
    }
    char* name = NULL;
    RLX_RETURN_IF_ERROR(parse_symbol_name(p, &t, &name));
    int32_t before = p->g->n_symbols;
    rlx_dim d;
    rlx_status s = rlx_graph_symbol(p->g, name, &d);
    free(name);
    if (s != RLX_OK) return FAIL(p, &t, "%s", rlx_graph_last_error(p->g));
    if (p->g->n_symbols == before) return FAIL(p, &t, "duplicate symbol '%.*s'", tok_len(&t), t.s);
    RLX_RETURN_IF_ERROR(advance(p));
  }
  return expect_end_of_line(p);
}

static rlx_status parse_outputs_line(parser* p) {
  token kw = p->tok;
  RLX_RETURN_IF_ERROR(advance(p));
  rlx_tensor* outs = NULL;
  int32_t n = 0, cap = 0;
  rlx_status s = RLX_OK;
  while (s == RLX_OK && p->tok.kind != T_EOL && p->tok.kind != T_EOF) {
    if (n == cap) {
      int32_t ncap = cap ? cap * 2 : 8;
      rlx_tensor* grown = ncap < (1 << 24) ? realloc(outs, (size_t)ncap * sizeof *outs) : NULL;
      if (!grown) { s = FAIL(p, &p->tok, "too many outputs"); break; }
      outs = grown;
      cap = ncap;
    }
    s = lookup_input(p, &p->tok, &outs[n]);
    if (s == RLX_OK) { n++; s = advance(p); }
  }
  if (s == RLX_OK && n > 0 && rlx_graph_set_outputs(p->g, outs, n) != RLX_OK)
    s = FAIL(p, &kw, "%s", rlx_graph_last_error(p->g));
  free(outs);
  RLX_RETURN_IF_ERROR(s);
  RLX_RETURN_IF_ERROR(expect_end_of_line(p));
  RLX_RETURN_IF_ERROR(skip_blank_lines(p));
  if (p->tok.kind != T_EOF) return FAIL(p, &p->tok, "text after the 'outputs' line");
  return RLX_OK;
}

static rlx_status parse_body(parser* p) {
  RLX_RETURN_IF_ERROR(advance(p));
  RLX_RETURN_IF_ERROR(parse_header(p));
  for (;;) {
    RLX_RETURN_IF_ERROR(skip_blank_lines(p));
    const token* t = &p->tok;
    if (t->kind == T_EOF) return FAIL(p, t, "missing 'outputs' line");
    if (tok_is(t, "symbols")) RLX_RETURN_IF_ERROR(parse_symbols(p));
    else if (tok_is(t, "outputs")) return parse_outputs_line(p);
    else if (t->kind == T_ID) RLX_RETURN_IF_ERROR(parse_node(p));
    else return FAIL(p, t, "expected a node line ('%%N = op ...'), 'symbols' or 'outputs'");
  }
}

static char* dup_message(const char* m) {
  size_t n = strlen(m);
  char* s = malloc(n + 1);
  if (s) memcpy(s, m, n + 1);
  return s;
}

rlx_status rlx_graph_parse(const char* text, rlx_graph** out_graph, char** out_error) {
  if (out_error) *out_error = NULL;
  if (!out_graph) return RLX_INVALID_ARGUMENT;
  *out_graph = NULL;
  if (!text) {
    if (out_error) *out_error = dup_message("1:1: no text");
    return RLX_INVALID_ARGUMENT;
  }
  parser* p = calloc(1, sizeof *p);
  if (!p) return RLX_RESOURCE_EXHAUSTED;
  p->src = text;
  p->line = 1;
  rlx_status s = rlx_graph_create(&p->g);
  if (s != RLX_OK) {
    free(p);
    return s;
  }
  s = parse_body(p);
  if (s != RLX_OK) {
    if (!p->msg[0]) snprintf(p->msg, sizeof p->msg, "%" PRId32 ":1: %s", p->line, rlx_status_name(s));
    if (out_error) *out_error = dup_message(p->msg);
    rlx_graph_destroy(p->g);
  } else {
    *out_graph = p->g;
  }
  id_map_free(&p->ids);
  free(p);
  return s;
}

/* Largest graph text file read: constants are written inline, so a text
 * graph can be large, but not larger than this. */
#define TEXT_MAX_FILE_BYTES ((int64_t)1 << 30)

rlx_status rlx_graph_load(const char* path, rlx_graph** out_graph, char** out_error) {
  if (out_error) *out_error = NULL;
  if (!out_graph) return RLX_INVALID_ARGUMENT;
  *out_graph = NULL;
  rlx_error err = {{0}};
  void* text = NULL;
  size_t n = 0;
  rlx_status s = rlx_file_read_all(path, "graph text file", TEXT_MAX_FILE_BYTES, &text, &n, &err);
  if (s != RLX_OK) {
    if (out_error) *out_error = dup_message(err.msg);
    return s;
  }
  if (strlen(text) != n) {
    s = RLX_INVALID_ARGUMENT;
    snprintf(err.msg, sizeof err.msg, "graph text file '%s' holds a NUL byte (not text)", path);
    if (out_error) *out_error = dup_message(err.msg);
  } else {
    s = rlx_graph_parse(text, out_graph, out_error);
  }
  free(text);
  return s;
}
