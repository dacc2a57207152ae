/* .npy reader/writer. The header is a Python dict literal; we parse only the
 * subset numpy writes (string keys, string / bool / int-tuple values) and
 * reject anything else with a message, since these files also come from
 * users and fuzzers. */
#include "io/npy.h"

#include "base/file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ------------------------------------------------------------------ dtypes */

typedef struct dtype_code {
  const char* descr; /* without the byte-order character */
  rlx_dtype dtype;
} dtype_code;

static const dtype_code dtype_codes[] = {
    {"f4", RLX_F32}, {"f2", RLX_F16}, {"f8", RLX_F64}, {"i1", RLX_I8}, {"u1", RLX_U8},
    {"i4", RLX_I32}, {"i8", RLX_I64}, {"b1", RLX_BOOL}, {"i2", RLX_I16}, {"u2", RLX_U16},
    {"u4", RLX_U32}, {"u8", RLX_U64},
};

/* Maps a descr such as "<f4" to a dtype. One-byte types may carry any
 * byte-order mark; wider ones must be little-endian ('<', or '=' on our
 * little-endian targets). */
static rlx_status descr_to_dtype(const char* src, const char* descr, rlx_dtype* out,
                                 rlx_error* err) {
  size_t len = strlen(descr);
  if (len == 3 && strchr("<>|=", descr[0])) {
    for (size_t i = 0; i < sizeof dtype_codes / sizeof dtype_codes[0]; i++) {
      if (strcmp(descr + 1, dtype_codes[i].descr) != 0) continue;
      rlx_dtype t = dtype_codes[i].dtype;
      int one_byte = rlx_dtype_size(t) == 1;
      if (!one_byte && (descr[0] == '>' || descr[0] == '|'))
        return rlx_fail(err, RLX_UNIMPLEMENTED,
                        "npy '%s': dtype '%s' is not little-endian (only '<' is supported)",
                        src, descr);
      *out = t;
      return RLX_OK;
    }
  }
  return rlx_fail(err, RLX_UNIMPLEMENTED,
                  "npy '%s': unsupported dtype '%.40s' (supported: <f4 <f2 <f8 |i1 |u1 <i2 "
                  "<u2 <i4 <u4 <i8 <u8 |b1)",
                  src, descr);
}

static const char* dtype_to_descr(rlx_dtype t) {
  switch (t) {
    case RLX_F32: return "<f4";
    case RLX_F16: return "<f2";
    case RLX_F64: return "<f8";
    case RLX_I8: return "|i1";
    case RLX_U8: return "|u1";
    case RLX_I32: return "<i4";
    case RLX_I64: return "<i8";
    case RLX_BOOL: return "|b1";
    case RLX_I16: return "<i2";
    case RLX_U16: return "<u2";
    case RLX_U32: return "<u4";
    case RLX_U64: return "<u8";
    default: return NULL; /* bf16 and float8 have no numpy dtype (see rlx.h) */
  }
}

/* ------------------------------------------------------------------ header parsing */

typedef struct header_parser {
  const char* src;  /* file name for messages */
  const char* text; /* header text (not NUL-terminated) */
  size_t len, pos;
  rlx_error* err;
} header_parser;

typedef struct npy_header {
  char descr[16];
  int have_descr, have_fortran, have_shape;
  int fortran_order;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
} npy_header;

static rlx_status header_error(header_parser* p, const char* what) {
  return rlx_fail(p->err, RLX_INVALID_ARGUMENT, "npy '%s': malformed header at byte %zu: %s",
                  p->src, p->pos, what);
}

static void skip_space(header_parser* p) {
  while (p->pos < p->len && strchr(" \t\r\n", p->text[p->pos]) && p->text[p->pos] != '\0')
    p->pos++;
}

/* Consumes character c (after whitespace) if present. */
static int accept(header_parser* p, char c) {
  skip_space(p);
  if (p->pos < p->len && p->text[p->pos] == c) {
    p->pos++;
    return 1;
  }
  return 0;
}

static rlx_status expect(header_parser* p, char c, const char* what) {
  return accept(p, c) ? RLX_OK : header_error(p, what);
}

/* A quoted string without escapes (numpy never writes any) into out[cap]. */
static rlx_status parse_string(header_parser* p, char* out, size_t cap) {
  skip_space(p);
  if (p->pos >= p->len || (p->text[p->pos] != '\'' && p->text[p->pos] != '"'))
    return header_error(p, "expected a quoted string");
  char quote = p->text[p->pos++];
  size_t n = 0;
  while (p->pos < p->len && p->text[p->pos] != quote) {
    char c = p->text[p->pos];
    if (c == '\\' || c == '\0' || c == '\n') return header_error(p, "bad character in string");
    if (n + 1 >= cap) return header_error(p, "string too long");
    out[n++] = c;
    p->pos++;
  }
  if (p->pos >= p->len) return header_error(p, "unterminated string");
  p->pos++;
  out[n] = '\0';
  return RLX_OK;
}

static int match_word(header_parser* p, const char* word) {
  size_t n = strlen(word);
  skip_space(p);
  if (p->len - p->pos >= n && memcmp(p->text + p->pos, word, n) == 0) {
    p->pos += n;
    return 1;
  }
  return 0;
}

static rlx_status parse_bool(header_parser* p, int* out) {
  if (match_word(p, "True")) *out = 1;
  else if (match_word(p, "False")) *out = 0;
  else return header_error(p, "expected True or False");
  return RLX_OK;
}

/* A non-negative decimal dim (Python 2 files may append 'L'). */
static rlx_status parse_dim(header_parser* p, int64_t* out) {
  skip_space(p);
  if (p->pos >= p->len || p->text[p->pos] < '0' || p->text[p->pos] > '9')
    return header_error(p, "expected a non-negative integer dim");
  int64_t v = 0;
  while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
    int d = p->text[p->pos] - '0';
    if (v > (INT64_MAX - d) / 10) return header_error(p, "dim overflows int64");
    v = v * 10 + d;
    p->pos++;
  }
  if (p->pos < p->len && p->text[p->pos] == 'L') p->pos++;
  *out = v;
  return RLX_OK;
}

/* "()" , "(3,)" , "(2, 3)" , "(2, 3,)" */
static rlx_status parse_shape(header_parser* p, npy_header* h) {
  RLX_RETURN_IF_ERROR(expect(p, '(', "expected '(' to open the shape"));
  h->rank = 0;
  if (accept(p, ')')) return RLX_OK;
  for (;;) {
    if (h->rank >= RLX_MAX_RANK)
      return rlx_fail(p->err, RLX_INVALID_ARGUMENT, "npy '%s': rank exceeds %d", p->src,
                      RLX_MAX_RANK);
    RLX_RETURN_IF_ERROR(parse_dim(p, &h->shape[h->rank]));
    h->rank++;
    if (accept(p, ')')) return RLX_OK;
    RLX_RETURN_IF_ERROR(expect(p, ',', "expected ',' or ')' in the shape"));
    if (accept(p, ')')) return RLX_OK;
  }
}

static rlx_status parse_entry(header_parser* p, npy_header* h) {
  char key[32];
  RLX_RETURN_IF_ERROR(parse_string(p, key, sizeof key));
  RLX_RETURN_IF_ERROR(expect(p, ':', "expected ':' after a key"));
  if (strcmp(key, "descr") == 0 && !h->have_descr) {
    h->have_descr = 1;
    return parse_string(p, h->descr, sizeof h->descr);
  }
  if (strcmp(key, "fortran_order") == 0 && !h->have_fortran) {
    h->have_fortran = 1;
    return parse_bool(p, &h->fortran_order);
  }
  if (strcmp(key, "shape") == 0 && !h->have_shape) {
    h->have_shape = 1;
    return parse_shape(p, h);
  }
  return rlx_fail(p->err, RLX_INVALID_ARGUMENT, "npy '%s': unknown or repeated header key '%s'",
                  p->src, key);
}

static rlx_status parse_header(header_parser* p, npy_header* h) {
  memset(h, 0, sizeof *h);
  RLX_RETURN_IF_ERROR(expect(p, '{', "expected '{'"));
  while (!accept(p, '}')) {
    RLX_RETURN_IF_ERROR(parse_entry(p, h));
    if (accept(p, '}')) break;
    RLX_RETURN_IF_ERROR(expect(p, ',', "expected ',' or '}' after a value"));
  }
  skip_space(p);
  if (p->pos != p->len) return header_error(p, "unexpected text after the dict");
  if (!h->have_descr || !h->have_fortran || !h->have_shape)
    return rlx_fail(p->err, RLX_INVALID_ARGUMENT,
                    "npy '%s': header lacks one of 'descr', 'fortran_order', 'shape'", p->src);
  if (h->fortran_order && h->rank > 1) /* 0-D and 1-D are the same either way */
    return rlx_fail(p->err, RLX_UNIMPLEMENTED,
                    "npy '%s': fortran_order arrays are not supported (save in C order)",
                    p->src);
  return RLX_OK;
}

/* ------------------------------------------------------------------ reading */

/* Splits the prelude (magic, version, header length) off buf. */
static rlx_status read_prelude(const char* src, const unsigned char* b, size_t n,
                               size_t* out_header_pos, size_t* out_header_len, rlx_error* err) {
  if (n < 10 || memcmp(b, npy_magic, sizeof npy_magic) != 0)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': not a .npy file (bad magic)", src);
  int major = b[6], minor = b[7];
  if (minor != 0 || major < 1 || major > 3)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "npy '%s': unsupported format version %d.%d", src,
                    major, minor);
  size_t pos, len;
  if (major == 1) {
    len = (size_t)b[8] | (size_t)b[9] << 8;
    pos = 10;
  } else {
    if (n < 12)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': truncated header length", src);
    len = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    pos = 12;
  }
  if (len > n - pos)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "npy '%s': header length %zu runs past the end of the file (%zu bytes)", src,
                    len, n);
  *out_header_pos = pos;
  *out_header_len = len;
  return RLX_OK;
}

/* Byte count of the payload, refusing element counts that overflow. */
static rlx_status payload_bytes(const char* src, const npy_header* h, rlx_dtype t,
                                size_t* out_bytes, rlx_error* err) {
  uint64_t numel = 1;
  for (int32_t i = 0; i < h->rank; i++) {
    uint64_t d = (uint64_t)h->shape[i];
    if (d != 0 && numel > UINT64_MAX / d) numel = UINT64_MAX; /* saturate, checked below */
    else numel *= d;
  }
  uint64_t size = rlx_dtype_size(t);
  if (numel > (uint64_t)INT64_MAX / size || numel * size > (uint64_t)SIZE_MAX)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "npy '%s': shape's element count overflows (absurd shape)", src);
  *out_bytes = (size_t)(numel * size);
  return RLX_OK;
}

static rlx_status parse_npy(const char* src, const void* buf, size_t n, rlx_error* err,
                            rlx_dtype* out_dtype, int32_t* out_rank, int64_t* out_shape,
                            void** out_data, size_t* out_bytes) {
  const unsigned char* b = buf;
  size_t hpos = 0, hlen = 0;
  if (!buf && n) return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': NULL buffer", src);
  RLX_RETURN_IF_ERROR(read_prelude(src, b, n, &hpos, &hlen, err));
  header_parser p = {src, (const char*)b + hpos, hlen, 0, err};
  npy_header h;
  RLX_RETURN_IF_ERROR(parse_header(&p, &h));
  rlx_dtype t = RLX_F32;
  RLX_RETURN_IF_ERROR(descr_to_dtype(src, h.descr, &t, err));
  size_t bytes = 0;
  RLX_RETURN_IF_ERROR(payload_bytes(src, &h, t, &bytes, err));
  size_t have = n - hpos - hlen;
  if (have < bytes)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "npy '%s': truncated data: shape needs %zu bytes, file has %zu", src, bytes,
                    have);
  if (have > bytes)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "npy '%s': %zu unexpected bytes after the data", src, have - bytes);
  void* data = malloc(bytes ? bytes : 1);
  if (!data)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "npy '%s': cannot allocate %zu bytes", src,
                    bytes);
  memcpy(data, b + hpos + hlen, bytes);
  if (t == RLX_BOOL) /* keep the 0/1 invariant of rlx bool tensors */
    for (size_t i = 0; i < bytes; i++) ((unsigned char*)data)[i] = ((unsigned char*)data)[i] != 0;
  *out_dtype = t;
  *out_rank = h.rank;
  for (int32_t i = 0; i < h.rank; i++) out_shape[i] = h.shape[i];
  *out_data = data;
  *out_bytes = bytes;
  return RLX_OK;
}

rlx_status rlx_npy_read_mem(const void* buf, size_t n, rlx_error* err, rlx_dtype* out_dtype,
                            int32_t* out_rank, int64_t* out_shape, void** out_data,
                            size_t* out_bytes) {
  return parse_npy("<memory>", buf, n, err, out_dtype, out_rank, out_shape, out_data,
                   out_bytes);
}

/* Most bytes of one .npy file: the header's 2^32 plus far more data than
 * any host holds, far below overflow. */
#define NPY_MAX_FILE_BYTES ((int64_t)1 << 40)

rlx_status rlx_npy_read(const char* path, rlx_error* err, rlx_dtype* out_dtype,
                        int32_t* out_rank, int64_t* out_shape, void** out_data,
                        size_t* out_bytes) {
  if (!path) return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy: NULL path");
  void* buf = NULL;
  size_t n = 0;
  RLX_RETURN_IF_ERROR(rlx_file_read_all(path, "npy", NPY_MAX_FILE_BYTES, &buf, &n, err));
  rlx_status s = parse_npy(path, buf, n, err, out_dtype, out_rank, out_shape, out_data,
                           out_bytes);
  free(buf);
  return s;
}

/* ------------------------------------------------------------------ writing */

/* Formats the header dict, padded with spaces and ending in '\n' so that the
 * data starts at a multiple of 64 bytes (as numpy does). Returns its length. */
static size_t format_header(char* out, size_t cap, const char* descr, int32_t rank,
                            const int64_t* shape, size_t prelude) {
  size_t n = (size_t)snprintf(out, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                              descr);
  for (int32_t i = 0; i < rank && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (n < cap) n += (size_t)snprintf(out + n, cap - n, rank == 1 ? ",), }" : "), }");
  while (n < cap - 1 && (prelude + n + 1) % 64 != 0) out[n++] = ' ';
  if (n < cap) out[n++] = '\n';
  return n;
}

rlx_status rlx_npy_write(const char* path, rlx_dtype dtype, int32_t rank, const int64_t* shape,
                         const void* data, rlx_error* err) {
  const char* descr = dtype_to_descr(dtype);
  if (!path) return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy: NULL path");
  if (!descr)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "npy '%s': dtype %s has no .npy equivalent", path,
                    rlx_dtype_name(dtype));
  if (rank < 0 || rank > RLX_MAX_RANK || (rank > 0 && !shape))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': bad rank %d", path, (int)rank);
  uint64_t numel = 1;
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': dim %d is not static (%lld)", path,
                      (int)i, (long long)shape[i]);
    if (shape[i] && numel > (uint64_t)INT64_MAX / (uint64_t)shape[i])
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': element count overflows", path);
    numel *= (uint64_t)shape[i];
  }
  uint64_t bytes = numel * rlx_dtype_size(dtype);
  if (bytes && !data) return rlx_fail(err, RLX_INVALID_ARGUMENT, "npy '%s': NULL data", path);
  char header[512];
  size_t hlen = format_header(header, sizeof header, descr, rank, shape, 10);
  unsigned char prelude[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                               (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
  FILE* f = fopen(path, "wb");
  if (!f) return rlx_fail(err, RLX_NOT_FOUND, "npy '%s': cannot create file", path);
  int ok = fwrite(prelude, 1, sizeof prelude, f) == sizeof prelude &&
           fwrite(header, 1, hlen, f) == hlen &&
           (bytes == 0 || fwrite(data, 1, (size_t)bytes, f) == (size_t)bytes);
  ok = (fclose(f) == 0) && ok;
  if (!ok) return rlx_fail(err, RLX_INTERNAL, "npy '%s': write failed", path);
  return RLX_OK;
}

/* ------------------------------------------------------------------ public API */

/* A copy of the message for the caller (NULL on success or no memory). */
static rlx_status npy_report(rlx_status s, const rlx_error* err, char** out_error) {
  if (!out_error) return s;
  *out_error = NULL;
  if (s == RLX_OK) return s;
  const char* msg = err->msg[0] ? err->msg : rlx_status_name(s);
  size_t n = strlen(msg) + 1;
  *out_error = malloc(n);
  if (*out_error) memcpy(*out_error, msg, n);
  return s;
}

rlx_status rlx_npy_load(const char* path, rlx_dtype* out_dtype, int32_t* out_rank,
                        int64_t* out_shape, void** out_data, size_t* out_bytes,
                        char** out_error) {
  rlx_error err = {{0}};
  if (!path || !out_dtype || !out_rank || !out_shape || !out_data || !out_bytes)
    return npy_report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "npy: path and every out-parameter are required"),
                      &err, out_error);
  rlx_status s = rlx_npy_read(path, &err, out_dtype, out_rank, out_shape, out_data, out_bytes);
  return npy_report(s, &err, out_error);
}

rlx_status rlx_npy_save(const char* path, rlx_dtype dtype, int32_t rank, const int64_t* shape,
                        const void* data, size_t bytes, char** out_error) {
  rlx_error err = {{0}};
  uint64_t numel = 1;
  for (int32_t i = 0; shape && i < rank && i < RLX_MAX_RANK; i++)
    numel = shape[i] >= 0 ? numel * (uint64_t)shape[i] : 0;
  rlx_status s;
  if ((unsigned)dtype < RLX_DTYPE_COUNT && rank >= 0 && rank <= RLX_MAX_RANK &&
      (rank == 0 || shape) && numel * rlx_dtype_size(dtype) != bytes)
    s = rlx_fail(&err, RLX_INVALID_ARGUMENT, "npy '%s': %zu bytes given, the shape needs %llu",
                 path ? path : "(null)", bytes,
                 (unsigned long long)(numel * rlx_dtype_size(dtype)));
  else
    s = rlx_npy_write(path, dtype, rank, shape, data, &err);
  return npy_report(s, &err, out_error);
}
