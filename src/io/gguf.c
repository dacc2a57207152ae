/* GGUF reader (see gguf.h for the layout). The file is mapped read-only and
 * walked once at open: every count, length, dim and offset is checked
 * against the bytes that remain before it is used, so the accessors later
 * only index tables built here and never read outside the map. Files come
 * from users and fuzzers: every failure names the file, the item and what
 * is wrong. The host is little-endian (as the file), so values are read
 * with memcpy. */
#include "io/gguf.h"

#include "base/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GGUF_HEADER_BYTES 24
#define GGUF_DEFAULT_ALIGNMENT 32

/* ------------------------------------------------------------------ ggml types */

typedef struct ggml_type_desc {
  uint32_t id;
  const char* name;
  int64_t block_elems, block_bytes;
} ggml_type_desc;

/* Block geometry of each tensor type GGUF files carry (ids are the file's). */
static const ggml_type_desc ggml_types[] = {
    {0, "f32", 1, 4},          {1, "f16", 1, 2},          {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},       {6, "q5_0", 32, 22},       {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},       {9, "q8_1", 32, 36},       {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},    {12, "q4_K", 256, 144},    {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},    {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},   {18, "iq3_xxs", 256, 98},  {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},    {21, "iq3_s", 256, 110},   {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136},  {24, "i8", 1, 1},          {25, "i16", 1, 2},
    {26, "i32", 1, 4},         {27, "i64", 1, 8},         {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},    {30, "bf16", 1, 2},        {34, "tq1_0", 256, 54},
    {35, "tq2_0", 256, 66},    {39, "mxfp4", 32, 17},     {40, "nvfp4", 64, 36},
};

static const ggml_type_desc* ggml_type_find(uint32_t id) {
  for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
    if (ggml_types[i].id == id) return &ggml_types[i];
  return NULL;
}

const char* rlx_ggml_type_name(uint32_t type) {
  const ggml_type_desc* d = ggml_type_find(type);
  return d ? d->name : NULL;
}

rlx_status rlx_ggml_type_block(uint32_t type, int64_t* out_block_elems,
                               int64_t* out_block_bytes) {
  const ggml_type_desc* d = ggml_type_find(type);
  if (!d) return RLX_UNIMPLEMENTED;
  if (out_block_elems) *out_block_elems = d->block_elems;
  if (out_block_bytes) *out_block_bytes = d->block_bytes;
  return RLX_OK;
}

/* ------------------------------------------------------------------ value types */

static const char* const value_type_names[] = {"u8",  "i8",     "u16",   "i16", "u32",
                                               "i32", "f32",    "bool",  "string",
                                               "array", "u64",  "i64",   "f64"};
#define GGUF_N_VALUE_TYPES 13

const char* rlx_gguf_type_name(rlx_gguf_type t) {
  return (unsigned)t < GGUF_N_VALUE_TYPES ? value_type_names[t] : "unknown";
}

/* Bytes of one scalar element; 0 for string and array. */
static size_t value_size(rlx_gguf_type t) {
  static const size_t sizes[GGUF_N_VALUE_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return sizes[t];
}

/* ------------------------------------------------------------------ the object */

typedef struct gguf_kv {
  char* key;
  rlx_gguf_type type;
  rlx_gguf_type elem;  /* arrays: the element type */
  uint64_t len;        /* strings: bytes; arrays: elements */
  const uint8_t* at;   /* the scalar, the string's bytes, or the first element */
  uint64_t* str_at;    /* string arrays: each element's offset (its length field) from at */
} gguf_kv;

typedef struct gguf_tensor {
  rlx_gguf_tensor_info info; /* info.name is owned */
} gguf_tensor;

struct rlx_gguf {
  char* name;
  const uint8_t* base;
  size_t size;
  void* map; /* NULL for rlx_gguf_open_memory */
  uint32_t version, alignment;
  int64_t n_kv, n_tensors;
  gguf_kv* kv;
  gguf_tensor* tensors;
  int64_t* kv_sorted;     /* indices by key, for lookups and the duplicate check */
  int64_t* tensor_sorted; /* indices by name */
  rlx_error err;
};

/* ------------------------------------------------------------------ bounded reading */

typedef struct cursor {
  const uint8_t* p;
  size_t n, pos;
  const char* name; /* file name for messages */
  rlx_error* err;
} cursor;

/* Fails unless `bytes` more bytes remain; what says what was being read. */
static rlx_status need(cursor* c, uint64_t bytes, const char* what) {
  if (bytes > c->n - c->pos)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': %s needs %llu bytes at offset %zu, but the file has %zu "
                    "(truncated or corrupt)",
                    c->name, what, (unsigned long long)bytes, c->pos, c->n);
  return RLX_OK;
}

static rlx_status read_u32(cursor* c, const char* what, uint32_t* out) {
  RLX_RETURN_IF_ERROR(need(c, 4, what));
  memcpy(out, c->p + c->pos, 4);
  c->pos += 4;
  return RLX_OK;
}

static rlx_status read_u64(cursor* c, const char* what, uint64_t* out) {
  RLX_RETURN_IF_ERROR(need(c, 8, what));
  memcpy(out, c->p + c->pos, 8);
  c->pos += 8;
  return RLX_OK;
}

/* A string: u64 length, then that many bytes (checked to be in the file). */
static rlx_status read_string(cursor* c, const char* what, const uint8_t** out,
                              uint64_t* out_len) {
  RLX_RETURN_IF_ERROR(read_u64(c, what, out_len));
  RLX_RETURN_IF_ERROR(need(c, *out_len, what));
  *out = c->p + c->pos;
  c->pos += (size_t)*out_len;
  return RLX_OK;
}

/* A NUL-terminated copy of a key or tensor name; an embedded NUL would make
 * two names compare equal, so it is refused. */
static rlx_status copy_name(cursor* c, const char* what, int64_t index, char** out) {
  const uint8_t* s;
  uint64_t len;
  RLX_RETURN_IF_ERROR(read_string(c, what, &s, &len));
  if (memchr(s, 0, (size_t)len))
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT, "GGUF '%s': %s %lld contains a NUL byte",
                    c->name, what, (long long)index);
  *out = malloc((size_t)len + 1);
  RLX_CHECK_ALLOC(c->err, *out);
  memcpy(*out, s, (size_t)len);
  (*out)[len] = 0;
  return RLX_OK;
}

/* ------------------------------------------------------------------ metadata */

static rlx_status read_value_type(cursor* c, const char* key, rlx_gguf_type* out) {
  uint32_t t;
  RLX_RETURN_IF_ERROR(read_u32(c, "a value type", &t));
  if (t >= GGUF_N_VALUE_TYPES)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': key '%s' has unknown value type %u (known: 0..12)", c->name, key,
                    t);
  *out = (rlx_gguf_type)t;
  return RLX_OK;
}

/* Bools must be 0 or 1: anything else means the file is not what it says. */
static rlx_status check_bools(cursor* c, const char* key, const uint8_t* at, uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    if (at[i] > 1)
      return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                      "GGUF '%s': key '%s': bool value %u is neither 0 nor 1", c->name, key,
                      at[i]);
  return RLX_OK;
}

/* An array of strings: records where each element starts so element access
 * is direct later. The count is bounded by the bytes left (8 per length
 * field) before anything is allocated. */
static rlx_status read_string_array(cursor* c, gguf_kv* kv) {
  if (kv->len > (c->n - c->pos) / 8)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': key '%s': %llu strings cannot fit in the %zu bytes left",
                    c->name, kv->key, (unsigned long long)kv->len, c->n - c->pos);
  kv->str_at = malloc((size_t)(kv->len ? kv->len : 1) * sizeof(uint64_t));
  RLX_CHECK_ALLOC(c->err, kv->str_at);
  kv->at = c->p + c->pos;
  for (uint64_t j = 0; j < kv->len; j++) {
    kv->str_at[j] = (uint64_t)(c->p + c->pos - kv->at);
    const uint8_t* s;
    uint64_t len;
    RLX_RETURN_IF_ERROR(read_string(c, "a string array element", &s, &len));
  }
  return RLX_OK;
}

static rlx_status read_array(cursor* c, gguf_kv* kv) {
  RLX_RETURN_IF_ERROR(read_value_type(c, kv->key, &kv->elem));
  RLX_RETURN_IF_ERROR(read_u64(c, "an array length", &kv->len));
  if (kv->elem == RLX_GGUF_ARRAY)
    return rlx_fail(c->err, RLX_UNIMPLEMENTED,
                    "GGUF '%s': key '%s' is an array of arrays (not supported)", c->name,
                    kv->key);
  if (kv->elem == RLX_GGUF_STRING) return read_string_array(c, kv);
  size_t size = value_size(kv->elem);
  if (kv->len > (c->n - c->pos) / size)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': key '%s': array of %llu %s needs more than the %zu bytes left",
                    c->name, kv->key, (unsigned long long)kv->len,
                    rlx_gguf_type_name(kv->elem), c->n - c->pos);
  kv->at = c->p + c->pos;
  c->pos += (size_t)kv->len * size;
  if (kv->elem == RLX_GGUF_BOOL) return check_bools(c, kv->key, kv->at, kv->len);
  return RLX_OK;
}

static rlx_status read_kv(cursor* c, int64_t index, gguf_kv* kv) {
  RLX_RETURN_IF_ERROR(copy_name(c, "key", index, &kv->key));
  RLX_RETURN_IF_ERROR(read_value_type(c, kv->key, &kv->type));
  if (kv->type == RLX_GGUF_ARRAY) return read_array(c, kv);
  if (kv->type == RLX_GGUF_STRING) {
    RLX_RETURN_IF_ERROR(read_string(c, kv->key, &kv->at, &kv->len));
    return RLX_OK;
  }
  size_t size = value_size(kv->type);
  RLX_RETURN_IF_ERROR(need(c, size, kv->key));
  kv->at = c->p + c->pos;
  c->pos += size;
  if (kv->type == RLX_GGUF_BOOL) return check_bools(c, kv->key, kv->at, 1);
  return RLX_OK;
}

/* ------------------------------------------------------------------ sorted lookups */

typedef struct named_index {
  const char* name;
  int64_t index;
} named_index;

static int by_name(const void* a, const void* b) {
  return strcmp(((const named_index*)a)->name, ((const named_index*)b)->name);
}

/* Sorted index of n names (gathered through name_of), failing on a
 * duplicate: GGUF keys and tensor names are unique. */
static rlx_status sort_names(rlx_gguf* g, int64_t n, const char* (*name_of)(const rlx_gguf*, int64_t),
                             const char* what, int64_t** out, rlx_error* err) {
  named_index* pairs = malloc((size_t)(n ? n : 1) * sizeof *pairs);
  int64_t* idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
  if (!pairs || !idx) {
    free(pairs);
    free(idx);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (int64_t i = 0; i < n; i++) pairs[i] = (named_index){name_of(g, i), i};
  qsort(pairs, (size_t)n, sizeof *pairs, by_name);
  rlx_status s = RLX_OK;
  for (int64_t i = 0; i < n; i++) {
    idx[i] = pairs[i].index;
    if (i && s == RLX_OK && strcmp(pairs[i - 1].name, pairs[i].name) == 0)
      s = rlx_fail(err, RLX_INVALID_ARGUMENT, "GGUF '%s': %s '%s' appears twice", g->name, what,
                   pairs[i].name);
  }
  free(pairs);
  if (s != RLX_OK) {
    free(idx);
    return s;
  }
  *out = idx;
  return RLX_OK;
}

static const char* kv_name(const rlx_gguf* g, int64_t i) { return g->kv[i].key; }
static const char* tensor_name(const rlx_gguf* g, int64_t i) { return g->tensors[i].info.name; }

static int64_t sorted_find(const rlx_gguf* g, const int64_t* sorted, int64_t n,
                           const char* (*name_of)(const rlx_gguf*, int64_t), const char* name) {
  if (!g || !name) return -1;
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name_of(g, sorted[mid]), name);
    if (c == 0) return sorted[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

int64_t rlx_gguf_find_key(const rlx_gguf* g, const char* key) {
  return g ? sorted_find(g, g->kv_sorted, g->n_kv, kv_name, key) : -1;
}

int64_t rlx_gguf_find_tensor(const rlx_gguf* g, const char* name) {
  return g ? sorted_find(g, g->tensor_sorted, g->n_tensors, tensor_name, name) : -1;
}

/* ------------------------------------------------------------------ tensors */

static rlx_status read_dims(cursor* c, rlx_gguf_tensor_info* t) {
  uint32_t n_dims;
  RLX_RETURN_IF_ERROR(read_u32(c, "a tensor's dim count", &n_dims));
  if (n_dims > RLX_MAX_RANK)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT, "GGUF '%s': tensor '%s' has %u dims (max %d)",
                    c->name, t->name, n_dims, RLX_MAX_RANK);
  t->n_dims = (int32_t)n_dims;
  t->numel = 1;
  for (uint32_t d = 0; d < n_dims; d++) {
    uint64_t dim;
    RLX_RETURN_IF_ERROR(read_u64(c, "a tensor dim", &dim));
    if (dim > (uint64_t)INT64_MAX || (dim && (uint64_t)t->numel > (uint64_t)INT64_MAX / dim))
      return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                      "GGUF '%s': tensor '%s': dims overflow 64 bits (dim %u = %llu)", c->name,
                      t->name, d, (unsigned long long)dim);
    t->dims[d] = (int64_t)dim;
    t->numel *= (int64_t)dim;
  }
  return RLX_OK;
}

/* Type, size in bytes from the type's blocks, and the offset. */
static rlx_status read_type_and_offset(cursor* c, rlx_gguf_tensor_info* t) {
  RLX_RETURN_IF_ERROR(read_u32(c, "a tensor type", &t->type));
  const ggml_type_desc* d = ggml_type_find(t->type);
  if (!d)
    return rlx_fail(c->err, RLX_UNIMPLEMENTED, "GGUF '%s': tensor '%s' has unknown ggml type %u",
                    c->name, t->name, t->type);
  t->type_name = d->name;
  int64_t row = t->n_dims ? t->dims[0] : 1;
  if (row % d->block_elems)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': tensor '%s': first dim %lld is not a multiple of %s's block of "
                    "%lld elements",
                    c->name, t->name, (long long)row, d->name, (long long)d->block_elems);
  uint64_t blocks = (uint64_t)t->numel / (uint64_t)d->block_elems;
  if (blocks > UINT64_MAX / (uint64_t)d->block_bytes)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT, "GGUF '%s': tensor '%s': byte size overflows",
                    c->name, t->name);
  t->bytes = blocks * (uint64_t)d->block_bytes;
  return read_u64(c, "a tensor offset", &t->offset);
}

static rlx_status read_tensor_info(cursor* c, int64_t index, rlx_gguf_tensor_info* t) {
  char* name = NULL;
  RLX_RETURN_IF_ERROR(copy_name(c, "tensor name", index, &name));
  t->name = name;
  RLX_RETURN_IF_ERROR(read_dims(c, t));
  return read_type_and_offset(c, t);
}

/* Every tensor must be aligned and lie inside the data section. */
static rlx_status place_tensors(rlx_gguf* g, size_t data_start, rlx_error* err) {
  for (int64_t i = 0; i < g->n_tensors; i++) {
    rlx_gguf_tensor_info* t = &g->tensors[i].info;
    if (t->offset % g->alignment)
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "GGUF '%s': tensor '%s': offset %llu is not a multiple of the alignment %u",
                      g->name, t->name, (unsigned long long)t->offset, g->alignment);
    uint64_t room = data_start <= g->size ? g->size - data_start : 0;
    if (t->offset > room || t->bytes > room - t->offset)
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "GGUF '%s': tensor '%s': %llu bytes at data offset %llu end past the "
                      "file's %llu data bytes (truncated or corrupt)",
                      g->name, t->name, (unsigned long long)t->bytes,
                      (unsigned long long)t->offset, (unsigned long long)room);
    t->data = g->base + data_start + t->offset;
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ open / close */

static rlx_status read_header(rlx_gguf* g, cursor* c, uint64_t* n_tensors, uint64_t* n_kv) {
  if (g->size < GGUF_HEADER_BYTES || memcmp(g->base, "GGUF", 4) != 0)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': not a GGUF file (no \"GGUF\" magic in a %zu-byte file)", g->name,
                    g->size);
  c->pos = 4;
  RLX_RETURN_IF_ERROR(read_u32(c, "the version", &g->version));
  if (g->version == 1)
    return rlx_fail(c->err, RLX_UNIMPLEMENTED,
                    "GGUF '%s': version 1 is not supported (only versions 2 and 3; convert the "
                    "file again with a current gguf writer)",
                    g->name);
  if ((g->version & 0xFFFF) == 0 && g->version)
    return rlx_fail(c->err, RLX_UNIMPLEMENTED,
                    "GGUF '%s': big-endian GGUF files are not supported", g->name);
  if (g->version != 2 && g->version != 3)
    return rlx_fail(c->err, RLX_UNIMPLEMENTED,
                    "GGUF '%s': version %u is not supported (only 2 and 3)", g->name, g->version);
  RLX_RETURN_IF_ERROR(read_u64(c, "the tensor count", n_tensors));
  RLX_RETURN_IF_ERROR(read_u64(c, "the key/value count", n_kv));
  /* A key/value takes at least 12 bytes, a tensor info at least 24: larger
   * counts cannot be honest, and must not size an allocation. */
  size_t left = g->size - c->pos;
  if (*n_kv > left / 12 || *n_tensors > left / 24)
    return rlx_fail(c->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': %llu tensors and %llu key/values cannot fit in %zu bytes",
                    g->name, (unsigned long long)*n_tensors, (unsigned long long)*n_kv, left);
  return RLX_OK;
}

/* general.alignment, when present, must be a nonzero u32. */
static rlx_status read_alignment(rlx_gguf* g, rlx_error* err) {
  g->alignment = GGUF_DEFAULT_ALIGNMENT;
  int64_t i = rlx_gguf_find_key(g, "general.alignment");
  if (i < 0) return RLX_OK;
  if (g->kv[i].type != RLX_GGUF_U32)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "GGUF '%s': general.alignment is %s, not u32",
                    g->name, rlx_gguf_type_name(g->kv[i].type));
  memcpy(&g->alignment, g->kv[i].at, 4);
  if (g->alignment == 0)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "GGUF '%s': general.alignment is 0", g->name);
  return RLX_OK;
}

static rlx_status parse(rlx_gguf* g, rlx_error* err) {
  cursor c = {g->base, g->size, 0, g->name, err};
  uint64_t n_tensors = 0, n_kv = 0;
  RLX_RETURN_IF_ERROR(read_header(g, &c, &n_tensors, &n_kv));
  /* one spare entry each: an item that fails half-way owns its name there */
  g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv);
  g->tensors = calloc((size_t)n_tensors + 1, sizeof *g->tensors);
  RLX_CHECK_ALLOC(err, g->kv && g->tensors);
  for (uint64_t i = 0; i < n_kv; i++, g->n_kv++)
    RLX_RETURN_IF_ERROR(read_kv(&c, (int64_t)i, &g->kv[i]));
  RLX_RETURN_IF_ERROR(sort_names(g, g->n_kv, kv_name, "key", &g->kv_sorted, err));
  RLX_RETURN_IF_ERROR(read_alignment(g, err));
  for (uint64_t i = 0; i < n_tensors; i++, g->n_tensors++)
    RLX_RETURN_IF_ERROR(read_tensor_info(&c, (int64_t)i, &g->tensors[i].info));
  RLX_RETURN_IF_ERROR(
      sort_names(g, g->n_tensors, tensor_name, "tensor", &g->tensor_sorted, err));
  size_t data_start = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
  return place_tensors(g, data_start, err);
}

void rlx_gguf_close(rlx_gguf* g) {
  if (!g) return;
  /* up to and including the entry that was being read when parsing failed */
  for (int64_t i = 0; g->kv && i <= g->n_kv; i++) {
    free(g->kv[i].key);
    free(g->kv[i].str_at);
  }
  for (int64_t i = 0; g->tensors && i <= g->n_tensors; i++) free((char*)g->tensors[i].info.name);
  free(g->kv);
  free(g->tensors);
  free(g->kv_sorted);
  free(g->tensor_sorted);
  if (g->map) munmap(g->map, g->size);
  free(g->name);
  free(g);
}

static rlx_status open_parsed(rlx_gguf* g, rlx_gguf** out, rlx_error* err) {
  rlx_status s = parse(g, err);
  if (s != RLX_OK) {
    rlx_gguf_close(g);
    return s;
  }
  *out = g;
  return RLX_OK;
}

static rlx_gguf* new_gguf(const char* name, rlx_error* err) {
  rlx_gguf* g = calloc(1, sizeof *g);
  if (g) g->name = strdup(name ? name : "<memory>");
  if (!g || !g->name) {
    free(g);
    rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    return NULL;
  }
  return g;
}

rlx_status rlx_gguf_open_memory(const void* buf, size_t n, const char* name, rlx_gguf** out,
                                rlx_error* err) {
  if (!out) return rlx_fail(err, RLX_INVALID_ARGUMENT, "rlx_gguf_open: NULL out");
  *out = NULL;
  if (!buf && n) return rlx_fail(err, RLX_INVALID_ARGUMENT, "rlx_gguf_open: NULL buffer");
  rlx_gguf* g = new_gguf(name, err);
  if (!g) return RLX_RESOURCE_EXHAUSTED;
  g->base = buf;
  g->size = n;
  return open_parsed(g, out, err);
}

/* Maps the whole file read-only; an empty file maps nothing (and then
 * fails the magic check). */
static rlx_status map_file(rlx_gguf* g, const char* path, rlx_error* err) {
  int fd;
  int64_t size;
  RLX_RETURN_IF_ERROR(rlx_file_open_regular(path, "GGUF", &fd, &size, err));
  g->size = (size_t)size;
  if (size > 0) {
    void* m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      close(fd);
      return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "GGUF '%s': cannot map %lld bytes", path,
                      (long long)size);
    }
    g->map = m;
    g->base = m;
  }
  close(fd);
  return RLX_OK;
}

static rlx_status report(rlx_status s, const rlx_error* err, char** out_error) {
  if (!out_error) return s;
  *out_error = NULL;
  if (s == RLX_OK) return s;
  *out_error = strdup(err->msg);
  return s;
}

rlx_status rlx_gguf_open(const char* path, rlx_gguf** out, char** out_error) {
  rlx_error err = {{0}};
  if (!out) return report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "rlx_gguf_open: NULL out"), &err,
                          out_error);
  *out = NULL;
  rlx_gguf* g = new_gguf(path, &err);
  if (!g) return report(RLX_RESOURCE_EXHAUSTED, &err, out_error);
  rlx_status s = map_file(g, path, &err);
  if (s != RLX_OK) {
    rlx_gguf_close(g);
    return report(s, &err, out_error);
  }
  return report(open_parsed(g, out, &err), &err, out_error);
}

/* ------------------------------------------------------------------ accessors */

const char* rlx_gguf_last_error(const rlx_gguf* g) { return g ? g->err.msg : "NULL GGUF"; }
uint32_t rlx_gguf_version(const rlx_gguf* g) { return g ? g->version : 0; }
uint32_t rlx_gguf_alignment(const rlx_gguf* g) { return g ? g->alignment : 0; }
int64_t rlx_gguf_kv_count(const rlx_gguf* g) { return g ? g->n_kv : 0; }
int64_t rlx_gguf_tensor_count(const rlx_gguf* g) { return g ? g->n_tensors : 0; }

static rlx_status get_kv(rlx_gguf* g, int64_t i, const gguf_kv** out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (i < 0 || i >= g->n_kv)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "GGUF '%s': key index %lld out of 0..%lld",
                    g->name, (long long)i, (long long)g->n_kv - 1);
  *out = &g->kv[i];
  return RLX_OK;
}

rlx_status rlx_gguf_key(const rlx_gguf* g, int64_t i, const char** out_key) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv((rlx_gguf*)g, i, &kv));
  *out_key = kv->key;
  return RLX_OK;
}

rlx_status rlx_gguf_kv_type(const rlx_gguf* g, int64_t i, rlx_gguf_type* out_type) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv((rlx_gguf*)g, i, &kv));
  *out_type = kv->type;
  return RLX_OK;
}

/* A scalar of type t at p, as a signed/unsigned pair or a double. */
typedef struct scalar {
  int is_int, is_signed;
  uint64_t u;
  int64_t s;
  double f;
} scalar;

static scalar load_scalar(rlx_gguf_type t, const uint8_t* p) {
  scalar v = {1, 0, 0, 0, 0};
  uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
  switch (t) {
    case RLX_GGUF_U8: case RLX_GGUF_BOOL: memcpy(&u8, p, 1); v.u = u8; break;
    case RLX_GGUF_I8: memcpy(&i8, p, 1); v.s = i8; v.is_signed = 1; break;
    case RLX_GGUF_U16: memcpy(&u16, p, 2); v.u = u16; break;
    case RLX_GGUF_I16: memcpy(&i16, p, 2); v.s = i16; v.is_signed = 1; break;
    case RLX_GGUF_U32: memcpy(&u32, p, 4); v.u = u32; break;
    case RLX_GGUF_I32: memcpy(&i32, p, 4); v.s = i32; v.is_signed = 1; break;
    case RLX_GGUF_U64: memcpy(&v.u, p, 8); break;
    case RLX_GGUF_I64: memcpy(&v.s, p, 8); v.is_signed = 1; break;
    case RLX_GGUF_F32: memcpy(&f32, p, 4); v.f = f32; v.is_int = 0; break;
    default: memcpy(&v.f, p, 8); v.is_int = 0; break; /* f64 */
  }
  if (v.is_int) v.f = v.is_signed ? (double)v.s : (double)v.u;
  return v;
}

static rlx_status wrong_type(rlx_gguf* g, const gguf_kv* kv, rlx_gguf_type t, const char* want) {
  return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "GGUF '%s': key '%s' is %s, not %s", g->name,
                  kv->key, rlx_gguf_type_name(t), want);
}

static rlx_status to_u64(rlx_gguf* g, const gguf_kv* kv, rlx_gguf_type t, const uint8_t* p,
                         uint64_t* out) {
  if (t == RLX_GGUF_STRING || t == RLX_GGUF_ARRAY || t == RLX_GGUF_F32 || t == RLX_GGUF_F64)
    return wrong_type(g, kv, t, "an integer");
  scalar v = load_scalar(t, p);
  if (v.is_signed && v.s < 0)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "GGUF '%s': key '%s' is negative (%lld)",
                    g->name, kv->key, (long long)v.s);
  *out = v.is_signed ? (uint64_t)v.s : v.u;
  return RLX_OK;
}

static rlx_status to_i64(rlx_gguf* g, const gguf_kv* kv, rlx_gguf_type t, const uint8_t* p,
                         int64_t* out) {
  if (t == RLX_GGUF_STRING || t == RLX_GGUF_ARRAY || t == RLX_GGUF_F32 || t == RLX_GGUF_F64)
    return wrong_type(g, kv, t, "an integer");
  scalar v = load_scalar(t, p);
  if (!v.is_signed && v.u > (uint64_t)INT64_MAX)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "GGUF '%s': key '%s' (%llu) exceeds int64",
                    g->name, kv->key, (unsigned long long)v.u);
  *out = v.is_signed ? v.s : (int64_t)v.u;
  return RLX_OK;
}

static rlx_status to_f64(rlx_gguf* g, const gguf_kv* kv, rlx_gguf_type t, const uint8_t* p,
                         double* out) {
  if (t == RLX_GGUF_STRING || t == RLX_GGUF_ARRAY || t == RLX_GGUF_BOOL)
    return wrong_type(g, kv, t, "a number");
  *out = load_scalar(t, p).f;
  return RLX_OK;
}

static rlx_status to_bool(rlx_gguf* g, const gguf_kv* kv, rlx_gguf_type t, const uint8_t* p,
                          int32_t* out) {
  if (t != RLX_GGUF_BOOL) return wrong_type(g, kv, t, "bool");
  *out = p[0];
  return RLX_OK;
}

rlx_status rlx_gguf_get_u64(rlx_gguf* g, int64_t i, uint64_t* out) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv(g, i, &kv));
  return to_u64(g, kv, kv->type, kv->at, out);
}

rlx_status rlx_gguf_get_i64(rlx_gguf* g, int64_t i, int64_t* out) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv(g, i, &kv));
  return to_i64(g, kv, kv->type, kv->at, out);
}

rlx_status rlx_gguf_get_f64(rlx_gguf* g, int64_t i, double* out) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv(g, i, &kv));
  return to_f64(g, kv, kv->type, kv->at, out);
}

rlx_status rlx_gguf_get_bool(rlx_gguf* g, int64_t i, int32_t* out) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv(g, i, &kv));
  return to_bool(g, kv, kv->type, kv->at, out);
}

rlx_status rlx_gguf_get_string(rlx_gguf* g, int64_t i, rlx_gguf_string* out) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_kv(g, i, &kv));
  if (kv->type != RLX_GGUF_STRING) return wrong_type(g, kv, kv->type, "string");
  out->data = (const char*)kv->at;
  out->len = kv->len;
  return RLX_OK;
}

static rlx_status get_array(rlx_gguf* g, int64_t i, const gguf_kv** out) {
  RLX_RETURN_IF_ERROR(get_kv(g, i, out));
  if ((*out)->type != RLX_GGUF_ARRAY) return wrong_type(g, *out, (*out)->type, "an array");
  return RLX_OK;
}

rlx_status rlx_gguf_array_info(rlx_gguf* g, int64_t i, rlx_gguf_type* out_elem_type,
                               uint64_t* out_len) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_array(g, i, &kv));
  if (out_elem_type) *out_elem_type = kv->elem;
  if (out_len) *out_len = kv->len;
  return RLX_OK;
}

rlx_status rlx_gguf_array_data(rlx_gguf* g, int64_t i, const void** out_data) {
  const gguf_kv* kv = NULL;
  RLX_RETURN_IF_ERROR(get_array(g, i, &kv));
  if (kv->elem == RLX_GGUF_STRING)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': key '%s' is an array of strings (use rlx_gguf_array_string)",
                    g->name, kv->key);
  *out_data = kv->at;
  return RLX_OK;
}

/* Element j of array i: its address, after the bounds check. */
static rlx_status array_elem(rlx_gguf* g, int64_t i, uint64_t j, const gguf_kv** kv,
                             const uint8_t** p) {
  RLX_RETURN_IF_ERROR(get_array(g, i, kv));
  if (j >= (*kv)->len)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                    "GGUF '%s': key '%s': element %llu out of an array of %llu", g->name,
                    (*kv)->key, (unsigned long long)j, (unsigned long long)(*kv)->len);
  if ((*kv)->elem == RLX_GGUF_STRING) *p = (*kv)->at + (*kv)->str_at[j];
  else *p = (*kv)->at + j * value_size((*kv)->elem);
  return RLX_OK;
}

rlx_status rlx_gguf_array_u64(rlx_gguf* g, int64_t i, uint64_t j, uint64_t* out) {
  const gguf_kv* kv = NULL;
  const uint8_t* p = NULL;
  RLX_RETURN_IF_ERROR(array_elem(g, i, j, &kv, &p));
  return to_u64(g, kv, kv->elem, p, out);
}

rlx_status rlx_gguf_array_i64(rlx_gguf* g, int64_t i, uint64_t j, int64_t* out) {
  const gguf_kv* kv = NULL;
  const uint8_t* p = NULL;
  RLX_RETURN_IF_ERROR(array_elem(g, i, j, &kv, &p));
  return to_i64(g, kv, kv->elem, p, out);
}

rlx_status rlx_gguf_array_f64(rlx_gguf* g, int64_t i, uint64_t j, double* out) {
  const gguf_kv* kv = NULL;
  const uint8_t* p = NULL;
  RLX_RETURN_IF_ERROR(array_elem(g, i, j, &kv, &p));
  return to_f64(g, kv, kv->elem, p, out);
}

rlx_status rlx_gguf_array_bool(rlx_gguf* g, int64_t i, uint64_t j, int32_t* out) {
  const gguf_kv* kv = NULL;
  const uint8_t* p = NULL;
  RLX_RETURN_IF_ERROR(array_elem(g, i, j, &kv, &p));
  return to_bool(g, kv, kv->elem, p, out);
}

rlx_status rlx_gguf_array_string(rlx_gguf* g, int64_t i, uint64_t j, rlx_gguf_string* out) {
  const gguf_kv* kv = NULL;
  const uint8_t* p = NULL;
  RLX_RETURN_IF_ERROR(array_elem(g, i, j, &kv, &p));
  if (kv->elem != RLX_GGUF_STRING) return wrong_type(g, kv, kv->elem, "string");
  memcpy(&out->len, p, 8);
  out->data = (const char*)p + 8;
  return RLX_OK;
}

rlx_status rlx_gguf_tensor(rlx_gguf* g, int64_t i, rlx_gguf_tensor_info* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (i < 0 || i >= g->n_tensors)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "GGUF '%s': tensor index %lld out of 0..%lld",
                    g->name, (long long)i, (long long)g->n_tensors - 1);
  *out = g->tensors[i].info;
  return RLX_OK;
}
