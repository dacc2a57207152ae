/* safetensors loader: files written by tests/safetensors_write.py (Debian's
 * /usr/bin/python3 with numpy) into BUILD/safetensors_test: every dtype's
 * values, metadata, a sharded checkpoint with its index, and malformed files
 * that must be refused with the status and message the script expects.
 * Exits 77 (ctest SKIP) when the script cannot run, or when the library was
 * built without json-c. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "io/safetensors.h"

#define SKIP_CODE 77

static char g_dir[512];

static int generate(void) {
  const char* py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s tests/safetensors_write.py '%s'", py, g_dir);
  fflush(stdout);
  int st = system(cmd);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static void path_of(char* out, size_t cap, const char* name) {
  snprintf(out, cap, "%s/%s", g_dir, name);
}

/* Element i of the [2, 3] test tensor of dtype t (see value rules in the
 * script): floats (i - 2) / 2, signed (i - 2) * 3, unsigned i * 3, bool i % 2. */
static double expected_value(rlx_dtype t, int i) {
  switch (t) {
    case RLX_BOOL: return i % 2;
    case RLX_U8: case RLX_U16: case RLX_U32: case RLX_U64: return i * 3;
    case RLX_I8: case RLX_I16: case RLX_I32: case RLX_I64: return (i - 2) * 3;
    default: return (i - 2) * 0.5;
  }
}

TEST(every_dtype) {
  char path[1200];
  path_of(path, sizeof path, "all_dtypes.safetensors");
  rlx_safetensors* st = NULL;
  char* why = NULL;
  CHECK_MSG(rlx_safetensors_open(path, &st, &why) == RLX_OK, "%s", why ? why : "");
  static const char* const names[] = {"t_F64", "t_F32", "t_F16", "t_BF16", "t_F8_E4M3",
                                      "t_F8_E5M2", "t_I64", "t_I32", "t_I16", "t_I8",
                                      "t_U64", "t_U32", "t_U16", "t_U8", "t_BOOL"};
  static const rlx_dtype dtypes[] = {RLX_F64, RLX_F32, RLX_F16, RLX_BF16, RLX_F8E4M3FN,
                                     RLX_F8E5M2, RLX_I64, RLX_I32, RLX_I16, RLX_I8,
                                     RLX_U64, RLX_U32, RLX_U16, RLX_U8, RLX_BOOL};
  int n = (int)(sizeof names / sizeof names[0]);
  CHECK(rlx_safetensors_count(st) == n + 2);
  for (int k = 0; k < n; k++) {
    rlx_safetensors_tensor t;
    CHECK_MSG(rlx_safetensors_find(st, names[k], &t) == RLX_OK, "%s",
              rlx_safetensors_last_error(st));
    CHECK_MSG(t.dtype == dtypes[k], "%s: dtype %s", names[k], rlx_dtype_name(t.dtype));
    CHECK(t.rank == 2 && t.shape[0] == 2 && t.shape[1] == 3);
    CHECK(t.bytes == 6 * rlx_dtype_size(t.dtype));
    double v[6];
    uint64_t raw[6]; /* the data need not be aligned: copy before reading */
    memcpy(raw, t.data, t.bytes);
    CHECK(rlx_dtype_convert(v, RLX_F64, raw, t.dtype, 6) == RLX_OK);
    for (int i = 0; i < 6; i++)
      CHECK_MSG(v[i] == expected_value(t.dtype, i), "%s[%d] = %g", names[k], i, v[i]);
  }
  /* the table order is the header's: the first entry is the first written */
  rlx_safetensors_tensor t;
  CHECK(rlx_safetensors_get(st, 0, &t) == RLX_OK && strcmp(t.name, "t_F64") == 0);
  CHECK(rlx_safetensors_find(st, "scalar", &t) == RLX_OK && t.rank == 0 && t.bytes == 4);
  float scalar;
  memcpy(&scalar, t.data, 4);
  CHECK(scalar == 7.25f);
  CHECK(rlx_safetensors_find(st, "empty", &t) == RLX_OK && t.rank == 2 && t.bytes == 0);
  CHECK(rlx_safetensors_find(st, "nope", &t) == RLX_NOT_FOUND);
  CHECK(strstr(rlx_safetensors_last_error(st), "'nope'") != NULL);
  CHECK(rlx_safetensors_get(st, n + 2, &t) == RLX_OUT_OF_RANGE);
  CHECK(rlx_safetensors_metadata_count(st) == 2);
  const char *key = NULL, *value = NULL;
  CHECK(rlx_safetensors_metadata(st, 1, &key, &value) == RLX_OK);
  CHECK(strcmp(key, "note") == 0 && strcmp(value, "rlx test") == 0);
  CHECK(rlx_safetensors_shard_count(st) == 1);
  rlx_safetensors_close(st);
}

static void check_sharded(const char* path) {
  rlx_safetensors* st = NULL;
  char* why = NULL;
  CHECK_MSG(rlx_safetensors_open(path, &st, &why) == RLX_OK, "%s: %s", path, why ? why : "");
  CHECK(rlx_safetensors_shard_count(st) == 2);
  CHECK(rlx_safetensors_count(st) == 3);
  static const char* const names[] = {"a.weight", "b.weight", "c.weight"};
  for (int k = 0; k < 3; k++) {
    rlx_safetensors_tensor t;
    CHECK(rlx_safetensors_find(st, names[k], &t) == RLX_OK);
    CHECK(t.shard == (k == 2) && t.dtype == RLX_F32 && t.bytes == 16);
    CHECK(strstr(rlx_safetensors_shard_path(st, t.shard), k == 2 ? "00002" : "00001"));
    float v[4];
    memcpy(v, t.data, sizeof v);
    for (int i = 0; i < 4; i++) CHECK(v[i] == (float)(i + 10 * k));
  }
  CHECK(rlx_safetensors_metadata_count(st) == 2);
  rlx_safetensors_close(st);
}

/* The folder (found through its index) and the index file itself. */
TEST(sharded) {
  char path[1200];
  path_of(path, sizeof path, "sharded");
  check_sharded(path);
  path_of(path, sizeof path, "sharded/model.safetensors.index.json");
  check_sharded(path);
}

/* Every malformed file of bad/expect.txt: refused, with its status and a
 * message naming the problem; nothing leaks (the sanitizer build checks). */
TEST(bad_files_refused) {
  char path[1200];
  path_of(path, sizeof path, "bad/expect.txt");
  FILE* f = fopen(path, "r");
  CHECK_MSG(f != NULL, "%s", path);
  char line[256];
  int cases = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char* status = strchr(line, '\t');
    char* piece = status ? strchr(status + 1, '\t') : NULL;
    if (!piece) continue;
    *status++ = '\0';
    *piece++ = '\0';
    char file[1100];
    path_of(file, sizeof file, line);
    rlx_safetensors* st = NULL;
    char* why = NULL;
    rlx_status s = rlx_safetensors_open(file, &st, &why);
    int ok = s != RLX_OK && st == NULL && why && strcmp(rlx_status_name(s), status) == 0 &&
             strstr(why, piece) != NULL;
    if (!ok) fprintf(stderr, "%s: got %s '%s', expected %s '%s'\n", line, rlx_status_name(s),
                     why ? why : "", status, piece);
    rlx_safetensors_close(st);
    rlx_free(why);
    CHECK(ok);
    cases++;
  }
  fclose(f);
  CHECK(cases >= 20);
}

TEST(missing_and_odd_paths) {
  rlx_safetensors* st = NULL;
  char* why = NULL;
  CHECK(rlx_safetensors_open("/nonexistent/x.safetensors", &st, &why) == RLX_NOT_FOUND);
  CHECK(st == NULL && why && strstr(why, "/nonexistent/x.safetensors"));
  rlx_free(why);
  CHECK(rlx_safetensors_open("/dev/null", &st, &why) == RLX_INVALID_ARGUMENT);
  rlx_free(why);
  CHECK(rlx_safetensors_open("tests", &st, &why) == RLX_NOT_FOUND); /* no .safetensors there */
  rlx_free(why);
  CHECK(rlx_safetensors_open(NULL, &st, NULL) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_safetensors_count(NULL) == 0);
}

/* Every prefix of a good file is refused (or, for the whole file,
 * accepted): a file cut anywhere never reads past its end. */
TEST(every_truncation_refused) {
  char path[1200];
  path_of(path, sizeof path, "all_dtypes.safetensors");
  FILE* f = fopen(path, "rb");
  CHECK(f != NULL);
  static uint8_t buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(n > 100 && n < sizeof buf);
  for (size_t cut = 0; cut <= n; cut++) {
    uint8_t* copy = malloc(cut ? cut : 1); /* exact size: ASan sees any overread */
    CHECK(copy != NULL);
    memcpy(copy, buf, cut);
    rlx_safetensors* st = NULL;
    rlx_error err;
    rlx_status s = rlx_safetensors_open_mem(copy, cut, "cut", &st, &err);
    rlx_safetensors_close(st);
    free(copy);
    CHECK_MSG((s == RLX_OK) == (cut == n), "cut at %zu: %s", cut, rlx_status_name(s));
  }
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s/safetensors_test", RLX_BUILD_DIR);
  rlx_safetensors* probe = NULL;
  char* why = NULL;
  if (rlx_safetensors_open("/nonexistent", &probe, &why) == RLX_UNIMPLEMENTED) {
    printf("SKIP: %s\n", why);
    rlx_free(why);
    return SKIP_CODE;
  }
  rlx_free(why);
  int code = generate();
  if (code != 0) {
    printf("SKIP: tests/safetensors_write.py exited %d (needs python3 with numpy)\n", code);
    return SKIP_CODE;
  }
  RUN(every_dtype);
  RUN(sharded);
  RUN(bad_files_refused);
  RUN(missing_and_odd_paths);
  RUN(every_truncation_refused);
  return test_summary();
}
