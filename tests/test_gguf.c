/* GGUF reader: files written by llama.cpp's gguf-py (tests/gguf_write.py)
 * are read back and every metadata value and tensor compared with the
 * writer's own list; then the same bytes, corrupted or truncated in
 * memory, must be refused with a message, never read out of bounds (the
 * sanitizer build runs this too). Exits 77 (skipped) when
 * third_party/llama.cpp is absent. */
#include "harness.h"

#include <inttypes.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/gguf.h"

static char dir[] = "/tmp/rlx_test_gguf_XXXXXX";

static uint64_t fnv1a64(const uint8_t* p, uint64_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

static uint8_t* read_file(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* buf = malloc((size_t)len + 1);
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *n = (size_t)len;
  return buf;
}

/* The bytes of a string written as hex ("-" for empty) equal s. */
static int hex_equals(const char* hex, rlx_gguf_string s) {
  if (strcmp(hex, "-") == 0) return s.len == 0;
  if (strlen(hex) != 2 * s.len) return 0;
  for (uint64_t i = 0; i < s.len; i++) {
    unsigned b;
    if (sscanf(hex + 2 * i, "%2x", &b) != 1 || (uint8_t)s.data[i] != b) return 0;
  }
  return 1;
}

/* Value j of key i (array element when is_array) equals the writer's text. */
static int value_matches(rlx_gguf* g, int64_t i, int is_array, uint64_t j, const char* type,
                         const char* want) {
  if (strcmp(type, "string") == 0) {
    rlx_gguf_string s;
    rlx_status st = is_array ? rlx_gguf_array_string(g, i, j, &s) : rlx_gguf_get_string(g, i, &s);
    return st == RLX_OK && hex_equals(want, s);
  }
  if (strcmp(type, "bool") == 0) {
    int32_t b;
    rlx_status st = is_array ? rlx_gguf_array_bool(g, i, j, &b) : rlx_gguf_get_bool(g, i, &b);
    return st == RLX_OK && b == atoi(want);
  }
  if (type[0] == 'f') {
    double d;
    rlx_status st = is_array ? rlx_gguf_array_f64(g, i, j, &d) : rlx_gguf_get_f64(g, i, &d);
    double w = strtod(want, NULL);
    return st == RLX_OK && d == w && signbit(d) == signbit(w);
  }
  if (type[0] == 'u') {
    uint64_t u;
    rlx_status st = is_array ? rlx_gguf_array_u64(g, i, j, &u) : rlx_gguf_get_u64(g, i, &u);
    return st == RLX_OK && u == strtoull(want, NULL, 10);
  }
  int64_t s;
  rlx_status st = is_array ? rlx_gguf_array_i64(g, i, j, &s) : rlx_gguf_get_i64(g, i, &s);
  return st == RLX_OK && s == strtoll(want, NULL, 10);
}

static int check_kv(rlx_gguf* g, char* line) {
  char* key = strtok(line + 3, " ");
  char* type = strtok(NULL, " ");
  char* value = strtok(NULL, " \n");
  int64_t i = rlx_gguf_find_key(g, key);
  rlx_gguf_type t;
  if (i < 0 || rlx_gguf_kv_type(g, i, &t) != RLX_OK || strcmp(rlx_gguf_type_name(t), type))
    return fprintf(stderr, "key %s: missing or wrong type\n", key), 0;
  if (!value_matches(g, i, 0, 0, type, value))
    return fprintf(stderr, "key %s: value differs from %s (%s)\n", key, value,
                   rlx_gguf_last_error(g)), 0;
  return 1;
}

static int check_array(rlx_gguf* g, char* line) {
  char* key = strtok(line + 4, " ");
  char* type = strtok(NULL, " ");
  uint64_t n = strtoull(strtok(NULL, " \n"), NULL, 10);
  int64_t i = rlx_gguf_find_key(g, key);
  rlx_gguf_type et;
  uint64_t len;
  if (i < 0 || rlx_gguf_array_info(g, i, &et, &len) != RLX_OK || len != n ||
      strcmp(rlx_gguf_type_name(et), type))
    return fprintf(stderr, "array %s: missing, wrong type or length\n", key), 0;
  for (uint64_t j = 0; j < n; j++) {
    char* v = strtok(NULL, " \n");
    if (!v || !value_matches(g, i, 1, j, type, v))
      return fprintf(stderr, "array %s[%" PRIu64 "] differs\n", key, j), 0;
  }
  /* one past the end is refused, with a message */
  uint64_t u;
  return rlx_gguf_array_u64(g, i, n, &u) != RLX_OK && strstr(rlx_gguf_last_error(g), key);
}

static int check_tensor(rlx_gguf* g, char* line) {
  char* name = strtok(line + 7, " ");
  uint32_t type = (uint32_t)atoi(strtok(NULL, " "));
  int32_t n_dims = atoi(strtok(NULL, " "));
  int64_t i = rlx_gguf_find_tensor(g, name);
  rlx_gguf_tensor_info t;
  if (i < 0 || rlx_gguf_tensor(g, i, &t) != RLX_OK || t.type != type || t.n_dims != n_dims)
    return fprintf(stderr, "tensor %s: missing or wrong type / rank\n", name), 0;
  int64_t numel = 1;
  for (int32_t d = 0; d < n_dims; d++) {
    int64_t want = atoll(strtok(NULL, " "));
    numel *= want;
    if (t.dims[d] != want) return fprintf(stderr, "tensor %s: dim %d differs\n", name, d), 0;
  }
  uint64_t bytes = strtoull(strtok(NULL, " "), NULL, 10);
  uint64_t hash = strtoull(strtok(NULL, " \n"), NULL, 16);
  if (t.numel != numel || t.bytes != bytes || fnv1a64(t.data, t.bytes) != hash ||
      strcmp(t.type_name, rlx_ggml_type_name(type)) || t.offset % rlx_gguf_alignment(g))
    return fprintf(stderr, "tensor %s: size, bytes or offset differ\n", name), 0;
  return 1;
}

/* Compares g with the .expect file the writer left next to it. */
static int check_expectations(rlx_gguf* g, const char* expect_path) {
  FILE* f = fopen(expect_path, "r");
  if (!f) return 0;
  char line[4096];
  int ok = 1, lines = 0;
  while (ok && fgets(line, sizeof line, f)) {
    lines++;
    unsigned long long v;
    if (strncmp(line, "kv ", 3) == 0) ok = check_kv(g, line);
    else if (strncmp(line, "arr ", 4) == 0) ok = check_array(g, line);
    else if (strncmp(line, "tensor ", 7) == 0) ok = check_tensor(g, line);
    else if (sscanf(line, "alignment %llu", &v) == 1) ok = rlx_gguf_alignment(g) == v;
    else if (sscanf(line, "kv_count %llu", &v) == 1) ok = rlx_gguf_kv_count(g) == (int64_t)v;
    else if (sscanf(line, "tensor_count %llu", &v) == 1)
      ok = rlx_gguf_tensor_count(g) == (int64_t)v;
    else ok = 0;
    if (!ok) fprintf(stderr, "expectation failed: %s", line);
  }
  fclose(f);
  return ok && lines > 30;
}

static void path_of(char* out, size_t n, const char* name, const char* ext) {
  snprintf(out, n, "%s/%s.%s", dir, name, ext);
}

TEST(reads_every_value_and_tensor) {
  const char* cases[] = {"default_align", "align1", "align64"};
  for (int c = 0; c < 3; c++) {
    char gpath[512], epath[512];
    path_of(gpath, sizeof gpath, cases[c], "gguf");
    path_of(epath, sizeof epath, cases[c], "expect");
    rlx_gguf* g = NULL;
    char* msg = NULL;
    CHECK_MSG(rlx_gguf_open(gpath, &g, &msg) == RLX_OK, "%s", msg ? msg : "");
    CHECK(rlx_gguf_version(g) == 3);
    int ok = check_expectations(g, epath);
    int64_t arch = rlx_gguf_find_key(g, "general.architecture");
    rlx_gguf_string s = {0};
    int arch_ok = arch >= 0 && rlx_gguf_get_string(g, arch, &s) == RLX_OK && s.len == 7 &&
                  memcmp(s.data, "rlxtest", 7) == 0;
    /* a wrong-typed getter names the key and both types */
    uint64_t u;
    int typed = rlx_gguf_get_u64(g, arch, &u) == RLX_INVALID_ARGUMENT &&
                strstr(rlx_gguf_last_error(g), "general.architecture") &&
                strstr(rlx_gguf_last_error(g), "string");
    int missing = rlx_gguf_find_key(g, "no.such.key") < 0 && rlx_gguf_find_tensor(g, "x") < 0;
    rlx_gguf_close(g);
    CHECK_MSG(ok, "case %s", cases[c]);
    CHECK(arch_ok && typed && missing);
  }
}

/* ------------------------------------------------------------------ corrupted bytes */

static uint8_t* base_file;
static size_t base_size;

static size_t find_bytes(const uint8_t* buf, size_t n, const char* s) {
  size_t len = strlen(s);
  for (size_t i = 0; i + len <= n; i++)
    if (memcmp(buf + i, s, len) == 0) return i;
  return (size_t)-1;
}

/* Opens a copy of the base file with fix applied at the end of the string
 * `anchor` plus skip bytes; expects failure with want in the message. */
static int refused(const char* anchor, size_t skip, const void* patch, size_t patch_len,
                   rlx_status want_status, const char* want) {
  size_t at = skip;
  if (anchor) {
    size_t found = find_bytes(base_file, base_size, anchor);
    if (found == (size_t)-1) return fprintf(stderr, "anchor '%s' not in the file\n", anchor), 0;
    at += found + strlen(anchor);
  }
  if (at + patch_len > base_size) return 0;
  uint8_t* b = malloc(base_size);
  memcpy(b, base_file, base_size);
  memcpy(b + at, patch, patch_len);
  rlx_gguf* g = NULL;
  rlx_error err = {{0}};
  rlx_status s = rlx_gguf_open_memory(b, base_size, "corrupt.gguf", &g, &err);
  int ok = s == want_status && g == NULL && strstr(err.msg, want) && strstr(err.msg, "corrupt");
  if (!ok) fprintf(stderr, "patch after '%s': status %d, message: %s\n", anchor, s, err.msg);
  rlx_gguf_close(g);
  free(b);
  return ok;
}

static int load_base(void) {
  if (base_file) return 1; /* read once, shared by the tests below */
  char path[512];
  path_of(path, sizeof path, "default_align", "gguf");
  base_file = read_file(path, &base_size);
  return base_file != NULL;
}

TEST(versions_and_magic) {
  CHECK(load_base());
  uint32_t v2 = 2, v1 = 1, be = 0x03000000;
  uint8_t* b = malloc(base_size);
  memcpy(b, base_file, base_size);
  memcpy(b + 4, &v2, 4);
  rlx_gguf* g = NULL;
  rlx_error err = {{0}};
  CHECK_MSG(rlx_gguf_open_memory(b, base_size, "v2", &g, &err) == RLX_OK, "%s", err.msg);
  CHECK(rlx_gguf_version(g) == 2 && rlx_gguf_tensor_count(g) == 6);
  rlx_gguf_close(g);
  free(b);
  CHECK(refused(NULL, 4, &v1, 4, RLX_UNIMPLEMENTED, "version 1"));
  CHECK(refused(NULL, 4, &be, 4, RLX_UNIMPLEMENTED, "big-endian"));
  CHECK(refused(NULL, 0, "GGUX", 4, RLX_INVALID_ARGUMENT, "not a GGUF file"));
}

TEST(corrupt_fields_are_named) {
  CHECK(load_base());
  uint64_t huge = 0x7FFFFFFFFFFFFFFFull;
  uint32_t bad_vtype = 99, removed_type = 4, nested = 9;
  uint64_t odd_dim = 63, bad_offset = 1, far_offset = 1ull << 40;
  uint8_t bool2 = 2;
  CHECK(refused(NULL, 16, &huge, 8, RLX_INVALID_ARGUMENT, "cannot fit"));
  CHECK(refused("test.scalar.u8", 0, &bad_vtype, 4, RLX_INVALID_ARGUMENT, "unknown value type"));
  CHECK(refused("test.scalar.string", 4, &huge, 8, RLX_INVALID_ARGUMENT, "truncated"));
  CHECK(refused("test.array.u32", 4, &nested, 4, RLX_UNIMPLEMENTED, "array of arrays"));
  CHECK(refused("test.array.string", 8, &huge, 8, RLX_INVALID_ARGUMENT, "cannot fit"));
  CHECK(refused("test.scalar.bool", 4, &bool2, 1, RLX_INVALID_ARGUMENT, "neither 0 nor 1"));
  /* tensor info of t.q8_0: n_dims u32, 2 dims u64, type u32, offset u64 */
  CHECK(refused("t.q8_0", 4, &odd_dim, 8, RLX_INVALID_ARGUMENT, "not a multiple of q8_0"));
  CHECK(refused("t.q8_0", 20, &removed_type, 4, RLX_UNIMPLEMENTED, "unknown ggml type 4"));
  CHECK(refused("t.q8_0", 24, &bad_offset, 8, RLX_INVALID_ARGUMENT, "alignment"));
  CHECK(refused("t.q8_0", 24, &far_offset, 8, RLX_INVALID_ARGUMENT, "end past"));
  CHECK(refused("t.q8_0", 0, &huge, 4, RLX_INVALID_ARGUMENT, "dims"));
  CHECK(refused("t.q8_0", 4, &huge, 8, RLX_INVALID_ARGUMENT, "t.q8_0"));
  /* a key renamed to an earlier one: duplicates are refused */
  CHECK(refused("test.scalar.", find_bytes(base_file, base_size, "test.scalar.i16") -
                                    find_bytes(base_file, base_size, "test.scalar."),
                "u", 1, RLX_INVALID_ARGUMENT, "'test.scalar.u16' appears twice"));
}

TEST(alignment_key) {
  char path[512];
  path_of(path, sizeof path, "align64", "gguf");
  size_t n;
  uint8_t* b = read_file(path, &n);
  CHECK(b);
  size_t at = find_bytes(b, n, "general.alignment") + strlen("general.alignment") + 4;
  uint32_t zero = 0;
  memcpy(b + at, &zero, 4);
  rlx_gguf* g = NULL;
  rlx_error err = {{0}};
  rlx_status s = rlx_gguf_open_memory(b, n, "a0", &g, &err);
  free(b);
  CHECK_MSG(s == RLX_INVALID_ARGUMENT && strstr(err.msg, "general.alignment is 0"), "%s", err.msg);
}

/* Every prefix shorter than the last tensor's end is refused (with a
 * message), and random byte flips never crash: either a clean open or an
 * error. */
TEST(truncations_and_flips) {
  CHECK(load_base());
  rlx_gguf* g = NULL;
  rlx_error err = {{0}};
  CHECK(rlx_gguf_open_memory(base_file, base_size, "base", &g, &err) == RLX_OK);
  size_t end = 0;
  for (int64_t i = 0; i < rlx_gguf_tensor_count(g); i++) {
    rlx_gguf_tensor_info t;
    CHECK(rlx_gguf_tensor(g, i, &t) == RLX_OK);
    size_t e = (size_t)((const uint8_t*)t.data - base_file) + t.bytes;
    if (e > end) end = e;
  }
  rlx_gguf_close(g);
  for (size_t n = 0; n < end; n++) {
    uint8_t* b = malloc(n ? n : 1); /* exact size: ASan sees any overread */
    memcpy(b, base_file, n);
    g = NULL;
    err.msg[0] = 0;
    rlx_status s = rlx_gguf_open_memory(b, n, "short", &g, &err);
    free(b);
    CHECK_MSG(s != RLX_OK && g == NULL && strstr(err.msg, "short"), "prefix %zu opened", n);
  }
  test_seed(17);
  for (int trial = 0; trial < 3000; trial++) {
    uint8_t* b = malloc(base_size);
    memcpy(b, base_file, base_size);
    int flips = (int)test_rand_int(1, 4);
    for (int k = 0; k < flips; k++)
      b[test_rand_int(0, (int64_t)end - 1)] ^= (uint8_t)test_rand_int(1, 255);
    g = NULL;
    err.msg[0] = 0;
    rlx_status s = rlx_gguf_open_memory(b, base_size, "flip", &g, &err);
    CHECK(s == RLX_OK ? g != NULL : (g == NULL && err.msg[0] != 0));
    rlx_gguf_close(g);
    free(b);
  }
}

TEST(files_that_are_not_gguf) {
  rlx_gguf* g = NULL;
  char* msg = NULL;
  CHECK(rlx_gguf_open("/nonexistent/x.gguf", &g, &msg) == RLX_NOT_FOUND && g == NULL);
  CHECK(msg && strstr(msg, "/nonexistent/x.gguf"));
  rlx_free(msg);
  CHECK(rlx_gguf_open(dir, &g, &msg) == RLX_INVALID_ARGUMENT && strstr(msg, "directory"));
  rlx_free(msg);
  char empty[512];
  snprintf(empty, sizeof empty, "%s/empty.gguf", dir);
  FILE* f = fopen(empty, "wb");
  CHECK(f);
  fclose(f);
  CHECK(rlx_gguf_open(empty, &g, &msg) == RLX_INVALID_ARGUMENT && strstr(msg, "not a GGUF"));
  rlx_free(msg);
  CHECK(rlx_ggml_type_name(12) && strcmp(rlx_ggml_type_name(12), "q4_K") == 0);
  int64_t be = 0, bb = 0;
  CHECK(rlx_ggml_type_block(14, &be, &bb) == RLX_OK && be == 256 && bb == 210);
  CHECK(rlx_ggml_type_block(4, &be, &bb) == RLX_UNIMPLEMENTED);
}

static int write_files(void) {
  if (!mkdtemp(dir)) return 0;
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/gguf_write.py %s", dir);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) == 0 : 0;
}

int main(void) {
  if (access("third_party/llama.cpp/gguf-py/gguf/gguf_writer.py", R_OK) != 0 ||
      access("/usr/bin/python3", X_OK) != 0) {
    printf("SKIP: third_party/llama.cpp (scripts/setup_llama.sh) or /usr/bin/python3 missing\n");
    return 77;
  }
  if (!write_files()) {
    fprintf(stderr, "tests/gguf_write.py failed\n");
    return 1;
  }
  RUN(reads_every_value_and_tensor);
  RUN(versions_and_magic);
  RUN(corrupt_fields_are_named);
  RUN(alignment_key);
  RUN(truncations_and_flips);
  RUN(files_that_are_not_gguf);
  free(base_file);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return test_summary();
}
