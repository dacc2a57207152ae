/* safetensors reader (see safetensors.h and the rlx_safetensors_* section of
 * rlx.h).
 *
 * Layout of a file: an unsigned 64-bit little-endian length N, N bytes of a
 * JSON object (possibly padded with spaces), then the data region. The
 * object maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (offsets relative to the data region) and may hold a
 * "__metadata__" object of string pairs.
 *
 * The JSON is parsed by json-c (Debian's libjson-c-dev), not by hand: it is
 * maintained, it parses integers as exact 64-bit values (cJSON keeps every
 * number as a double, which loses offsets past 2^53), it bounds nesting
 * depth, and its strict mode refuses what JSON does not allow. Everything
 * json-c accepts is still checked here against the file before use: a
 * header is data from the user, and may be hostile. */
#include "io/safetensors.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

#ifdef RLX_HAVE_JSONC
#include <json.h>
#endif

typedef struct st_file {
  char* path;
  void* map;      /* NULL for a caller's buffer (rlx_safetensors_open_mem) */
  size_t map_len;
} st_file;

typedef struct st_name_ref {
  const char* name;
  int32_t index;
} st_name_ref;

/* A byte range of one tensor, sorted to find overlaps. */
typedef struct st_range {
  uint64_t begin, end;
  int32_t index;
} st_range;

typedef struct st_tensor {
  char* name;
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  uint64_t begin, end; /* within the data region of its shard */
  const uint8_t* data;
  int32_t shard;
} st_tensor;

struct rlx_safetensors {
  st_file* files;
  int32_t n_files, cap_files;
  st_tensor* tensors;
  int32_t n_tensors, cap_tensors;
  struct st_name_ref* by_name; /* sorted by name, for find */
  char** meta;      /* key, value, key, value, ... */
  int32_t n_meta, cap_meta;
  rlx_error err;    /* mutable through const handles: it is the message slot */
};

/* Most shards a folder or index may name: far above real checkpoints (a
 * 400B model ships ~200), low enough to bound what a bad index can open. */
#define ST_MAX_SHARDS 4096

/* ------------------------------------------------------------------ growable arrays */

static rlx_status grow(void** items, int32_t* cap, int32_t need, size_t item_size,
                       rlx_error* err) {
  if (need <= *cap) return RLX_OK;
  int32_t next = *cap ? *cap * 2 : 16;
  while (next < need) next *= 2;
  void* p = realloc(*items, (size_t)next * item_size);
  RLX_CHECK_ALLOC(err, p);
  *items = p;
  *cap = next;
  return RLX_OK;
}

static char* dup_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void rlx_safetensors_close(rlx_safetensors* st) {
  if (!st) return;
  for (int32_t i = 0; i < st->n_files; i++) {
    if (st->files[i].map) munmap(st->files[i].map, st->files[i].map_len);
    free(st->files[i].path);
  }
  for (int32_t i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
  for (int32_t i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
  free(st->files);
  free(st->tensors);
  free(st->by_name);
  free(st->meta);
  free(st);
}

static rlx_status add_file(rlx_safetensors* st, const char* path, int32_t* out_index,
                           rlx_error* err) {
  if (st->n_files >= ST_MAX_SHARDS)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "safetensors: more than %d shards", ST_MAX_SHARDS);
  RLX_RETURN_IF_ERROR(grow((void**)&st->files, &st->cap_files, st->n_files + 1,
                           sizeof *st->files, err));
  st_file* f = &st->files[st->n_files];
  memset(f, 0, sizeof *f);
  f->path = dup_string(path);
  RLX_CHECK_ALLOC(err, f->path);
  *out_index = st->n_files++;
  return RLX_OK;
}

#ifdef RLX_HAVE_JSONC

/* ------------------------------------------------------------------ dtypes */

static const struct {
  const char* name;
  rlx_dtype dtype;
} k_dtypes[] = {
    {"F64", RLX_F64},  {"F32", RLX_F32},  {"F16", RLX_F16},   {"BF16", RLX_BF16},
    {"I64", RLX_I64},  {"I32", RLX_I32},  {"I16", RLX_I16},   {"I8", RLX_I8},
    {"U64", RLX_U64},  {"U32", RLX_U32},  {"U16", RLX_U16},   {"U8", RLX_U8},
    {"BOOL", RLX_BOOL}, {"F8_E4M3", RLX_F8E4M3FN}, {"F8_E5M2", RLX_F8E5M2},
};

static int dtype_from_name(const char* name, rlx_dtype* out) {
  for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
    if (strcmp(name, k_dtypes[i].name) == 0) {
      *out = k_dtypes[i].dtype;
      return 1;
    }
  return 0;
}

/* ------------------------------------------------------------------ header of one file */

/* What one file's header is checked against. */
typedef struct st_source {
  const char* what;       /* the file's name in messages */
  const uint8_t* data;    /* its data region */
  uint64_t data_len;
  int32_t shard;
} st_source;

/* A non-negative JSON integer (json-c keeps integers exact in 64 bits). */
static int get_uint(json_object* v, uint64_t* out) {
  if (!json_object_is_type(v, json_type_int)) return 0;
  int64_t x = json_object_get_int64(v);
  if (x < 0) return 0;
  *out = (uint64_t)x;
  return 1;
}

static rlx_status parse_dtype(const st_source* src, const char* name, json_object* t,
                              rlx_dtype* out, rlx_error* err) {
  json_object* v = NULL;
  if (!json_object_object_get_ex(t, "dtype", &v) || !json_object_is_type(v, json_type_string))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': tensor '%s' has no \"dtype\" string", src->what, name);
  const char* d = json_object_get_string(v);
  if (!dtype_from_name(d, out))
    return rlx_fail(err, RLX_UNIMPLEMENTED,
                    "safetensors '%s': tensor '%s' has dtype '%.32s' (supported: F64 F32 F16 "
                    "BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3 F8_E5M2)",
                    src->what, name, d);
  return RLX_OK;
}

/* shape: an array of non-negative integers; *out_numel is their product,
 * refused when it overflows (a shape no file could hold). */
static rlx_status parse_shape(const st_source* src, st_tensor* t, json_object* obj,
                              uint64_t* out_numel, rlx_error* err) {
  json_object* v = NULL;
  if (!json_object_object_get_ex(obj, "shape", &v) || !json_object_is_type(v, json_type_array))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': tensor '%s' has no \"shape\" array", src->what, t->name);
  size_t rank = json_object_array_length(v);
  if (rank > RLX_MAX_RANK)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "safetensors '%s': tensor '%s' has rank %zu (at most %d)",
                    src->what, t->name, rank, RLX_MAX_RANK);
  uint64_t numel = 1;
  for (size_t d = 0; d < rank; d++) {
    uint64_t dim = 0;
    if (!get_uint(json_object_array_get_idx(v, d), &dim) || dim > (uint64_t)INT64_MAX)
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "safetensors '%s': tensor '%s': shape[%zu] is not a non-negative integer",
                      src->what, t->name, d);
    if (dim && numel > UINT64_MAX / dim)
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "safetensors '%s': tensor '%s': the shape's element count overflows",
                      src->what, t->name);
    numel *= dim;
    t->shape[d] = (int64_t)dim;
  }
  t->rank = (int32_t)rank;
  *out_numel = numel;
  return RLX_OK;
}

/* data_offsets [begin, end]: begin <= end <= the data region's length, and
 * end - begin == numel x dtype size. */
static rlx_status parse_offsets(const st_source* src, st_tensor* t, json_object* obj,
                                uint64_t numel, rlx_error* err) {
  json_object* v = NULL;
  if (!json_object_object_get_ex(obj, "data_offsets", &v) ||
      !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 2 ||
      !get_uint(json_object_array_get_idx(v, 0), &t->begin) ||
      !get_uint(json_object_array_get_idx(v, 1), &t->end))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': tensor '%s': \"data_offsets\" must be [begin, end] of "
                    "non-negative integers", src->what, t->name);
  if (t->begin > t->end || t->end > src->data_len)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': tensor '%s': data_offsets [%llu, %llu] outside the data "
                    "region of %llu bytes (or begin > end)",
                    src->what, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                    (unsigned long long)src->data_len);
  uint64_t size = rlx_dtype_size(t->dtype);
  if (numel > UINT64_MAX / size || numel * size != t->end - t->begin)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': tensor '%s': data_offsets span %llu bytes, but %llu "
                    "elements of %s take %llu",
                    src->what, t->name, (unsigned long long)(t->end - t->begin),
                    (unsigned long long)numel, rlx_dtype_name(t->dtype),
                    numel > UINT64_MAX / size ? 0ull : (unsigned long long)(numel * size));
  t->data = src->data + t->begin;
  return RLX_OK;
}

static rlx_status add_tensor(rlx_safetensors* st, const st_source* src, const char* name,
                             json_object* obj, rlx_error* err) {
  if (!json_object_is_type(obj, json_type_object))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': entry '%s' is not an object", src->what, name);
  RLX_RETURN_IF_ERROR(grow((void**)&st->tensors, &st->cap_tensors, st->n_tensors + 1,
                           sizeof *st->tensors, err));
  st_tensor* t = &st->tensors[st->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = dup_string(name);
  RLX_CHECK_ALLOC(err, t->name);
  st->n_tensors++; /* owned from here: close frees the name on any failure */
  t->shard = src->shard;
  uint64_t numel = 0;
  RLX_RETURN_IF_ERROR(parse_dtype(src, name, obj, &t->dtype, err));
  RLX_RETURN_IF_ERROR(parse_shape(src, t, obj, &numel, err));
  return parse_offsets(src, t, obj, numel, err);
}

static rlx_status add_meta(rlx_safetensors* st, const char* key, const char* value,
                           rlx_error* err) {
  RLX_RETURN_IF_ERROR(grow((void**)&st->meta, &st->cap_meta, 2 * (st->n_meta + 1),
                           sizeof *st->meta, err));
  char* k = dup_string(key);
  char* v = dup_string(value);
  if (!k || !v) {
    free(k);
    free(v);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  st->meta[2 * st->n_meta] = k;
  st->meta[2 * st->n_meta + 1] = v;
  st->n_meta++;
  return RLX_OK;
}

static rlx_status parse_metadata(rlx_safetensors* st, const st_source* src, json_object* obj,
                                 rlx_error* err) {
  if (!json_object_is_type(obj, json_type_object))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': \"__metadata__\" is not an object", src->what);
  json_object_object_foreach(obj, key, val) {
    const char* text = json_object_is_type(val, json_type_string)
                           ? json_object_get_string(val)
                           : json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN);
    RLX_RETURN_IF_ERROR(add_meta(st, key, text ? text : "", err));
  }
  return RLX_OK;
}

rlx_status rlx_json_parse_one(const char* text, size_t len, const char* what, int strict,
                              struct json_object** out, rlx_error* err) {
  *out = NULL;
  if (len > (size_t)INT32_MAX)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s: JSON text of %zu bytes is too long", what,
                    len);
  json_tokener* tok = json_tokener_new_ex(64);
  RLX_CHECK_ALLOC(err, tok);
  if (strict) json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  json_object* v = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error e = json_tokener_get_error(tok);
  size_t end = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  if (!v || e != json_tokener_success) {
    json_object_put(v);
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s: malformed JSON near byte %zu: %s", what, end,
                    e == json_tokener_continue ? "the text ends inside a value"
                                               : json_tokener_error_desc(e));
  }
  for (size_t i = end; i < len; i++)
    if (!strchr(" \t\r\n", text[i]) || text[i] == '\0') {
      json_object_put(v);
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "%s: unexpected byte 0x%02x at %zu after the JSON value", what,
                      (unsigned)(uint8_t)text[i], i);
    }
  *out = v;
  return RLX_OK;
}

static int compare_begin(const void* a, const void* b) {
  const st_range *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* No two tensors of one file share a byte (empty tensors share none). */
static rlx_status check_overlap(rlx_safetensors* st, const char* what, int32_t first,
                                rlx_error* err) {
  int32_t n = st->n_tensors - first;
  if (n < 2) return RLX_OK;
  st_range* order = malloc((size_t)n * sizeof *order);
  RLX_CHECK_ALLOC(err, order);
  int32_t k = 0;
  for (int32_t i = first; i < st->n_tensors; i++)
    if (st->tensors[i].end > st->tensors[i].begin)
      order[k++] = (st_range){st->tensors[i].begin, st->tensors[i].end, i};
  qsort(order, (size_t)k, sizeof *order, compare_begin);
  rlx_status s = RLX_OK;
  for (int32_t i = 1; i < k && s == RLX_OK; i++) {
    const st_tensor *a = &st->tensors[order[i - 1].index], *b = &st->tensors[order[i].index];
    if (b->begin < a->end)
      s = rlx_fail(err, RLX_INVALID_ARGUMENT,
                   "safetensors '%s': tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                   what, a->name, (unsigned long long)a->begin, (unsigned long long)a->end,
                   b->name, (unsigned long long)b->begin, (unsigned long long)b->end);
  }
  free(order);
  return s;
}

/* Parses one whole file held in buf[n] as shard `shard` of st. */
static rlx_status parse_file(rlx_safetensors* st, const uint8_t* buf, size_t n, int32_t shard,
                             rlx_error* err) {
  const char* what = st->files[shard].path;
  if (n < 8)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s' is %zu bytes: too short for the 8-byte header length", what,
                    n);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
  if (hlen < 2 || hlen > (uint64_t)RLX_SAFETENSORS_MAX_HEADER || hlen > n - 8)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s': header length %llu is impossible (file of %zu bytes, "
                    "limit %lld)", what, (unsigned long long)hlen, n,
                    (long long)RLX_SAFETENSORS_MAX_HEADER);
  char label[1100];
  snprintf(label, sizeof label, "safetensors '%s' header", what);
  json_object* root = NULL;
  RLX_RETURN_IF_ERROR(rlx_json_parse_one((const char*)buf + 8, (size_t)hlen, label, 1, &root, err));
  st_source src = {what, buf + 8 + hlen, n - 8 - hlen, shard};
  int32_t first = st->n_tensors;
  rlx_status s = RLX_OK;
  if (!json_object_is_type(root, json_type_object))
    s = rlx_fail(err, RLX_INVALID_ARGUMENT, "safetensors '%s': the header is not a JSON object",
                 what);
  else {
    json_object_object_foreach(root, key, val) {
      s = strcmp(key, "__metadata__") == 0 ? parse_metadata(st, &src, val, err)
                                           : add_tensor(st, &src, key, val, err);
      if (s != RLX_OK) break;
    }
  }
  json_object_put(root);
  return s == RLX_OK ? check_overlap(st, what, first, err) : s;
}

/* ------------------------------------------------------------------ name index */

static int compare_name(const void* a, const void* b) {
  return strcmp(((const st_name_ref*)a)->name, ((const st_name_ref*)b)->name);
}

static rlx_status build_name_index(rlx_safetensors* st, rlx_error* err) {
  st->by_name = malloc((size_t)(st->n_tensors ? st->n_tensors : 1) * sizeof *st->by_name);
  RLX_CHECK_ALLOC(err, st->by_name);
  for (int32_t i = 0; i < st->n_tensors; i++)
    st->by_name[i] = (st_name_ref){st->tensors[i].name, i};
  qsort(st->by_name, (size_t)st->n_tensors, sizeof *st->by_name, compare_name);
  for (int32_t i = 1; i < st->n_tensors; i++) {
    const st_tensor *a = &st->tensors[st->by_name[i - 1].index];
    const st_tensor *b = &st->tensors[st->by_name[i].index];
    if (strcmp(a->name, b->name) == 0)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "safetensors: tensor '%s' is in '%s' and in '%s'",
                      a->name, st->files[a->shard].path, st->files[b->shard].path);
  }
  return RLX_OK;
}

static int32_t find_index(const rlx_safetensors* st, const char* name) {
  int32_t lo = 0, hi = st->n_tensors - 1;
  while (lo <= hi) {
    int32_t mid = lo + (hi - lo) / 2;
    int c = strcmp(st->by_name[mid].name, name);
    if (c == 0) return st->by_name[mid].index;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* ------------------------------------------------------------------ opening */

static rlx_status new_handle(rlx_safetensors** out, rlx_error* err) {
  *out = calloc(1, sizeof **out);
  RLX_CHECK_ALLOC(err, *out);
  return RLX_OK;
}

rlx_status rlx_safetensors_open_mem(const void* buf, size_t n, const char* what,
                                    rlx_safetensors** out, rlx_error* err) {
  *out = NULL;
  rlx_safetensors* st = NULL;
  int32_t shard = 0;
  RLX_RETURN_IF_ERROR(new_handle(&st, err));
  rlx_status s = add_file(st, what ? what : "<memory>", &shard, err);
  if (s == RLX_OK) s = parse_file(st, buf, n, shard, err);
  if (s == RLX_OK) s = build_name_index(st, err);
  if (s != RLX_OK) {
    rlx_safetensors_close(st);
    return s;
  }
  *out = st;
  return RLX_OK;
}

/* Maps path as a new shard of st and parses it. */
static rlx_status map_shard(rlx_safetensors* st, const char* path, rlx_error* err) {
  int32_t shard = 0;
  RLX_RETURN_IF_ERROR(add_file(st, path, &shard, err));
  int fd = -1;
  int64_t size = 0;
  RLX_RETURN_IF_ERROR(rlx_file_open_regular(path, "safetensors", &fd, &size, err));
  if (size < 8 || (uint64_t)size > SIZE_MAX) {
    close(fd);
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "safetensors '%s' is %lld bytes: too short for the 8-byte header length",
                    path, (long long)size);
  }
  void* map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "safetensors '%s': cannot map %lld bytes", path,
                    (long long)size);
  st->files[shard].map = map;
  st->files[shard].map_len = (size_t)size;
  return parse_file(st, map, (size_t)size, shard, err);
}

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int is_directory(const char* path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char* path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static rlx_status join_path(char* out, size_t cap, const char* dir, const char* name,
                            rlx_error* err) {
  int w = snprintf(out, cap, "%s/%s", dir, name);
  if (w < 0 || (size_t)w >= cap)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "safetensors: path '%s/%s' is too long", dir, name);
  return RLX_OK;
}

/* The folder part of path ("." when it has none). */
static void dir_of(const char* path, char* out, size_t cap) {
  const char* slash = strrchr(path, '/');
  if (!slash) snprintf(out, cap, ".");
  else if (slash == path) snprintf(out, cap, "/");
  else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* A shard named by an index must be a plain file name beside it: the index
 * is user data and must not reach other folders. */
static int plain_file_name(const char* s) {
  return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int shard_of(const rlx_safetensors* st, const char* path) {
  for (int32_t i = 0; i < st->n_files; i++)
    if (strcmp(st->files[i].path, path) == 0) return i;
  return -1;
}

/* Opens every shard the weight_map names (in order of first mention). */
static rlx_status open_index_shards(rlx_safetensors* st, const char* index, const char* dir,
                                    json_object* map, rlx_error* err) {
  char path[4096];
  json_object_object_foreach(map, name, file) {
    if (!json_object_is_type(file, json_type_string) ||
        !plain_file_name(json_object_get_string(file)))
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "safetensors index '%s': weight_map['%s'] is not a file name beside the "
                      "index", index, name);
    RLX_RETURN_IF_ERROR(join_path(path, sizeof path, dir, json_object_get_string(file), err));
    if (shard_of(st, path) < 0) RLX_RETURN_IF_ERROR(map_shard(st, path, err));
  }
  return RLX_OK;
}

/* Every weight_map entry is a tensor of the shard it names. */
static rlx_status check_index(rlx_safetensors* st, const char* index, const char* dir,
                              json_object* map, rlx_error* err) {
  char path[4096];
  json_object_object_foreach(map, name, file) {
    RLX_RETURN_IF_ERROR(join_path(path, sizeof path, dir, json_object_get_string(file), err));
    int32_t t = find_index(st, name);
    if (t < 0 || st->tensors[t].shard != shard_of(st, path))
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "safetensors index '%s': tensor '%s' is not in its shard '%s'", index, name,
                      json_object_get_string(file));
  }
  return RLX_OK;
}

static rlx_status open_index(rlx_safetensors* st, const char* index, rlx_error* err) {
  void* text = NULL;
  size_t n = 0;
  RLX_RETURN_IF_ERROR(rlx_file_read_all(index, "safetensors index", RLX_SAFETENSORS_MAX_HEADER,
                                        &text, &n, err));
  char label[4200], dir[4096];
  snprintf(label, sizeof label, "safetensors index '%s'", index);
  dir_of(index, dir, sizeof dir);
  json_object* root = NULL;
  rlx_status s = rlx_json_parse_one(text, n, label, 1, &root, err);
  free(text);
  json_object* map = NULL;
  if (s == RLX_OK && (!json_object_is_type(root, json_type_object) ||
                      !json_object_object_get_ex(root, "weight_map", &map) ||
                      !json_object_is_type(map, json_type_object)))
    s = rlx_fail(err, RLX_INVALID_ARGUMENT, "%s: no \"weight_map\" object", label);
  if (s == RLX_OK) s = open_index_shards(st, index, dir, map, err);
  if (s == RLX_OK) s = build_name_index(st, err);
  if (s == RLX_OK) s = check_index(st, index, dir, map, err);
  json_object_put(root);
  return s;
}

static int compare_strings(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

/* A folder without an index: every *.safetensors file in it, by name. */
static rlx_status open_all_in_folder(rlx_safetensors* st, const char* dir, rlx_error* err) {
  DIR* d = opendir(dir);
  if (!d) return rlx_fail(err, RLX_NOT_FOUND, "safetensors: cannot list folder '%s'", dir);
  char** names = NULL;
  int32_t n = 0, cap = 0;
  rlx_status s = RLX_OK;
  for (struct dirent* e; s == RLX_OK && (e = readdir(d));) {
    if (!ends_with(e->d_name, ".safetensors") || e->d_name[0] == '.') continue;
    if (n >= ST_MAX_SHARDS) s = rlx_fail(err, RLX_INVALID_ARGUMENT, "safetensors: folder '%s' "
                                         "holds more than %d files", dir, ST_MAX_SHARDS);
    else s = grow((void**)&names, &cap, n + 1, sizeof *names, err);
    if (s == RLX_OK && !(names[n++] = dup_string(e->d_name)))
      s = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  closedir(d);
  if (s == RLX_OK && n == 0)
    s = rlx_fail(err, RLX_NOT_FOUND, "safetensors: folder '%s' holds no .safetensors file", dir);
  if (s == RLX_OK) qsort(names, (size_t)n, sizeof *names, compare_strings);
  char path[4096];
  for (int32_t i = 0; i < n && s == RLX_OK; i++) {
    s = join_path(path, sizeof path, dir, names[i], err);
    if (s == RLX_OK) s = map_shard(st, path, err);
  }
  for (int32_t i = 0; i < n; i++) free(names[i]);
  free(names);
  return s == RLX_OK ? build_name_index(st, err) : s;
}

static rlx_status open_path(rlx_safetensors* st, const char* path, rlx_error* err) {
  if (ends_with(path, ".index.json")) return open_index(st, path, err);
  if (!is_directory(path)) {
    RLX_RETURN_IF_ERROR(map_shard(st, path, err));
    return build_name_index(st, err);
  }
  char candidate[4096];
  RLX_RETURN_IF_ERROR(join_path(candidate, sizeof candidate, path, "model.safetensors.index.json",
                                err));
  if (is_file(candidate)) return open_index(st, candidate, err);
  RLX_RETURN_IF_ERROR(join_path(candidate, sizeof candidate, path, "model.safetensors", err));
  if (is_file(candidate)) {
    RLX_RETURN_IF_ERROR(map_shard(st, candidate, err));
    return build_name_index(st, err);
  }
  return open_all_in_folder(st, path, err);
}

static rlx_status open_checked(const char* path, rlx_safetensors** out, rlx_error* err) {
  if (!path || !out)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "safetensors: path and out are required");
  rlx_safetensors* st = NULL;
  RLX_RETURN_IF_ERROR(new_handle(&st, err));
  rlx_status s = open_path(st, path, err);
  if (s != RLX_OK) {
    rlx_safetensors_close(st);
    return s;
  }
  *out = st;
  return RLX_OK;
}

#else /* !RLX_HAVE_JSONC */

static rlx_status not_built(rlx_error* err) {
  return rlx_fail(err, RLX_UNIMPLEMENTED,
                  "safetensors: not built (the library was configured without json-c; install "
                  "libjson-c-dev and configure again)");
}

rlx_status rlx_safetensors_open_mem(const void* buf, size_t n, const char* what,
                                    rlx_safetensors** out, rlx_error* err) {
  (void)buf, (void)n, (void)what;
  *out = NULL;
  return not_built(err);
}

static rlx_status open_checked(const char* path, rlx_safetensors** out, rlx_error* err) {
  (void)path, (void)add_file;
  if (out) *out = NULL;
  return not_built(err);
}

static int32_t find_index(const rlx_safetensors* st, const char* name) {
  (void)st, (void)name;
  return -1;
}

#endif /* RLX_HAVE_JSONC */

/* ------------------------------------------------------------------ public API */

static rlx_status report(rlx_status s, const rlx_error* err, char** out_error) {
  if (!out_error) return s;
  *out_error = NULL;
  if (s != RLX_OK) *out_error = dup_string(err->msg);
  return s;
}

rlx_status rlx_safetensors_open(const char* path, rlx_safetensors** out, char** out_error) {
  rlx_error err = {{0}};
  if (out) *out = NULL;
  return report(open_checked(path, out, &err), &err, out_error);
}

const char* rlx_safetensors_last_error(const rlx_safetensors* st) {
  return st ? st->err.msg : "safetensors: NULL handle";
}

int32_t rlx_safetensors_count(const rlx_safetensors* st) { return st ? st->n_tensors : 0; }

static rlx_error* err_of(const rlx_safetensors* st) {
  return (rlx_error*)&st->err; /* the message slot is writable through a const handle */
}

static void fill_info(const rlx_safetensors* st, int32_t i, rlx_safetensors_tensor* out) {
  const st_tensor* t = &st->tensors[i];
  memset(out, 0, sizeof *out);
  out->name = t->name;
  out->dtype = t->dtype;
  out->rank = t->rank;
  memcpy(out->shape, t->shape, sizeof out->shape);
  out->bytes = t->end - t->begin;
  out->data = t->data;
  out->shard = t->shard;
}

rlx_status rlx_safetensors_get(const rlx_safetensors* st, int32_t index,
                               rlx_safetensors_tensor* out) {
  if (!st || !out) return RLX_INVALID_ARGUMENT;
  if (index < 0 || index >= st->n_tensors)
    return rlx_fail(err_of(st), RLX_OUT_OF_RANGE, "safetensors: tensor index %d outside [0, %d)",
                    (int)index, (int)st->n_tensors);
  fill_info(st, index, out);
  return RLX_OK;
}

rlx_status rlx_safetensors_find(const rlx_safetensors* st, const char* name,
                                rlx_safetensors_tensor* out) {
  if (!st || !out) return RLX_INVALID_ARGUMENT;
  if (!name) return rlx_fail(err_of(st), RLX_INVALID_ARGUMENT, "safetensors: NULL name");
  int32_t i = find_index(st, name);
  if (i < 0)
    return rlx_fail(err_of(st), RLX_NOT_FOUND, "safetensors: no tensor named '%s' (of %d)", name,
                    (int)st->n_tensors);
  fill_info(st, i, out);
  return RLX_OK;
}

int32_t rlx_safetensors_metadata_count(const rlx_safetensors* st) { return st ? st->n_meta : 0; }

rlx_status rlx_safetensors_metadata(const rlx_safetensors* st, int32_t index,
                                    const char** out_key, const char** out_value) {
  if (!st || !out_key || !out_value) return RLX_INVALID_ARGUMENT;
  if (index < 0 || index >= st->n_meta)
    return rlx_fail(err_of(st), RLX_OUT_OF_RANGE, "safetensors: metadata index %d outside [0, %d)",
                    (int)index, (int)st->n_meta);
  *out_key = st->meta[2 * index];
  *out_value = st->meta[2 * index + 1];
  return RLX_OK;
}

int32_t rlx_safetensors_shard_count(const rlx_safetensors* st) { return st ? st->n_files : 0; }

const char* rlx_safetensors_shard_path(const rlx_safetensors* st, int32_t shard) {
  if (!st || shard < 0 || shard >= st->n_files) return NULL;
  return st->files[shard].path;
}
