/* Trainer checkpoints (rlx_trainer_save / rlx_trainer_load): one .npy per
 * param and state tensor in a directory, and a text manifest that names
 * them with their role, dtype and shape, the optimizer, the step count and
 * the loss-scale state. The values are the device's bytes, so a resumed
 * run continues bit for bit on the CPU. bf16 / float8 tensors have no
 * numpy dtype: their bits are written as u16 / u8 and the manifest keeps
 * the real dtype. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "runtime/train.h"

#define MANIFEST "manifest.txt"
#define MANIFEST_MAGIC "rlx-trainer-checkpoint"
#define MANIFEST_VERSION 1
#define MANIFEST_MAX_BYTES ((int64_t)64 << 20)
#define LINE_MAX_BYTES 8192

typedef rlx_ckpt_entry ckpt_entry;
typedef rlx_ckpt ckpt;

static const char* const optimizer_names[] = {"sgd", "adam", "adamw"};

/* ------------------------------------------------------------ files */

/* dir/name into a malloc'd string. */
static char* join(const char* dir, const char* name) {
  size_t a = strlen(dir), b = strlen(name);
  char* p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

/* The .npy file name of slot k: its name with every character outside
 * [A-Za-z0-9._-] replaced, prefixed with k when anything was replaced (so
 * "a/b" and "a_b" do not collide). */
static void file_name(const train_slot* s, int32_t k, char* out, size_t cap) {
  char clean[200];
  size_t n = 0;
  int changed = 0;
  for (const char* c = s->name; *c && n + 1 < sizeof clean; c++) {
    int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
             *c == '.' || *c == '_' || *c == '-';
    clean[n++] = ok ? *c : '_';
    changed |= !ok;
  }
  clean[n] = '\0';
  changed |= strlen(s->name) != n || n == 0 || clean[0] == '.';
  if (changed) snprintf(out, cap, "%d_%s.npy", (int)k, clean);
  else snprintf(out, cap, "%s.npy", clean);
}

/* npy has no bf16 / float8: their bits travel as unsigned integers. */
static rlx_dtype storage_dtype(rlx_dtype t) {
  if (t == RLX_BF16) return RLX_U16;
  if (rlx_dtype_is_float(t) && t != RLX_F32 && t != RLX_F16 && t != RLX_F64) return RLX_U8;
  return t;
}

static rlx_status make_dir(rlx_error* err, const char* dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return rlx_fail(err, RLX_NOT_FOUND, "checkpoint '%s': cannot create the directory: %s", dir,
                    strerror(errno));
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "checkpoint '%s' is not a directory", dir);
  return RLX_OK;
}

/* ------------------------------------------------------------ save */

static rlx_status save_slot(rlx_trainer* t, const char* dir, int32_t k) {
  train_slot* s = &t->slots[k];
  size_t bytes = (size_t)rlx_type_bytes(&s->type);
  void* data = malloc(bytes + 1);
  RLX_CHECK_ALLOC(&t->err, data);
  rlx_status st = rlx_train_read_slot(t, s, s->type.dtype, data, bytes);
  char name[256];
  file_name(s, k, name, sizeof name);
  char* path = join(dir, name);
  if (st == RLX_OK && !path) st = rlx_fail(&t->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  char* why = NULL;
  if (st == RLX_OK) {
    st = rlx_npy_save(path, storage_dtype(s->type.dtype), s->type.rank, s->type.shape, data, bytes,
                      &why);
    if (st != RLX_OK) rlx_fail(&t->err, st, "checkpoint: %s", why ? why : path);
  }
  rlx_free(why);
  free(path);
  free(data);
  return st;
}

static void write_manifest_body(const rlx_trainer* t, FILE* f) {
  fprintf(f, "%s %d\n", MANIFEST_MAGIC, MANIFEST_VERSION);
  fprintf(f, "optimizer %s\n", optimizer_names[t->opt.optimizer]);
  fprintf(f, "steps %lld\n", (long long)t->steps);
  fprintf(f, "micro %d\n", (int)t->micro);
  fprintf(f, "loss_scale %a\n", (double)t->loss_scale);
  fprintf(f, "good_steps %d\n", (int)t->good_steps);
  fprintf(f, "tensors %d\n", (int)t->n_slots);
  for (int32_t k = 0; k < t->n_slots; k++) {
    const train_slot* s = &t->slots[k];
    char name[256];
    file_name(s, k, name, sizeof name);
    fprintf(f, "%s %s %d", rlx_train_role_names[s->role], rlx_dtype_name(s->type.dtype),
            (int)s->type.rank);
    for (int32_t d = 0; d < s->type.rank; d++) fprintf(f, " %lld", (long long)s->type.shape[d]);
    fprintf(f, " %s %s\n", name, s->name);
  }
}

static rlx_status write_manifest(rlx_trainer* t, const char* dir) {
  char* path = join(dir, MANIFEST);
  RLX_CHECK_ALLOC(&t->err, path);
  FILE* f = fopen(path, "w");
  if (!f) {
    rlx_status s = rlx_fail(&t->err, RLX_NOT_FOUND, "checkpoint: cannot write '%s': %s", path,
                            strerror(errno));
    free(path);
    return s;
  }
  write_manifest_body(t, f);
  int bad = ferror(f) | fclose(f);
  rlx_status s = bad ? rlx_fail(&t->err, RLX_INTERNAL, "checkpoint: writing '%s' failed", path)
                     : RLX_OK;
  free(path);
  return s;
}

rlx_status rlx_trainer_save(rlx_trainer* t, const char* dir) {
  if (!t) return RLX_INVALID_ARGUMENT;
  if (!dir) return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "save: dir is NULL");
  RLX_RETURN_IF_ERROR(make_dir(&t->err, dir));
  for (int32_t k = 0; k < t->n_slots; k++) RLX_RETURN_IF_ERROR(save_slot(t, dir, k));
  return write_manifest(t, dir);
}

/* ------------------------------------------------------------ load */

void rlx_ckpt_free(rlx_ckpt* c) {
  if (!c) return;
  for (int32_t i = 0; i < c->n; i++) free(c->e[i].name);
  free(c->e);
  c->e = NULL;
  c->n = 0;
}

/* "role dtype rank d0 .. file name" (the name is the rest of the line). */
static int parse_entry(const char* line, ckpt_entry* e) {
  int used = 0;
  if (sscanf(line, "%31s %31s %d%n", e->role, e->dtype, &e->rank, &used) != 3) return 0;
  if (e->rank < 0 || e->rank > RLX_MAX_RANK) return 0;
  const char* p = line + used;
  for (int32_t d = 0; d < e->rank; d++) {
    long long v = 0;
    int n = 0;
    if (sscanf(p, "%lld%n", &v, &n) != 1 || v < 0) return 0;
    e->shape[d] = v;
    p += n;
  }
  int n = 0;
  if (sscanf(p, " %255s %n", e->file, &n) != 1) return 0;
  p += n;
  size_t len = strcspn(p, "\r\n");
  e->name = malloc(len + 1);
  if (!e->name) return 0;
  memcpy(e->name, p, len);
  e->name[len] = '\0';
  return len > 0;
}

/* The next line of *p without its newline, copied into buf (cap bytes,
 * NUL-terminated: sscanf on it never scans the rest of the text); NULL at
 * the text's end or for a line longer than buf. */
static const char* next_line(const char** p, char* buf, size_t cap) {
  if (!**p) return NULL;
  size_t len = strcspn(*p, "\n");
  const char* line = *p;
  *p += len + (line[len] == '\n');
  if (len >= cap) return NULL;
  memcpy(buf, line, len);
  buf[len] = '\0';
  return buf;
}

static int count_lines(const char* p) {
  int n = 0;
  for (; *p; n++) {
    const char* nl = strchr(p, '\n');
    p = nl ? nl + 1 : p + strlen(p);
  }
  return n;
}

/* The header (the first two lines): magic and version, then the optimizer
 * state and the tensor count. */
static rlx_status parse_header(rlx_error* err, const char** p, const char* path, ckpt* c,
                               int* n_out) {
  char line[LINE_MAX_BYTES], magic[64];
  int version = 0, n = 0;
  if (!next_line(p, line, sizeof line) || sscanf(line, "%63s %d", magic, &version) != 2 ||
      strcmp(magic, MANIFEST_MAGIC) != 0)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "checkpoint '%s' is not a trainer manifest", path);
  if (version != MANIFEST_VERSION)
    return rlx_fail(err, RLX_UNIMPLEMENTED,
                    "checkpoint '%s' has format version %d (this build reads %d)", path, version,
                    MANIFEST_VERSION);
  /* "optimizer", "steps", "micro", "loss_scale", "good_steps", then "tensors N" */
  char head[6 * 64] = "";
  for (int k = 0; k < 6; k++) {
    if (!next_line(p, line, sizeof line) || strlen(line) >= 64) {
      head[0] = '\0';
      break;
    }
    strcat(head, line);
    strcat(head, " ");
  }
  if (!head[0] ||
      sscanf(head, "optimizer %31s steps %lld micro %d loss_scale %la good_steps %d tensors %d",
             c->optimizer, &c->steps, &c->micro, &c->loss_scale, &c->good_steps, &n) != 6 ||
      n < 0)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "checkpoint '%s': malformed manifest header", path);
  *n_out = n;
  return RLX_OK;
}

rlx_status rlx_ckpt_parse(rlx_error* err, const char* text, const char* path, rlx_ckpt* c) {
  memset(c, 0, sizeof *c);
  int n = 0;
  const char* p = text;
  RLX_RETURN_IF_ERROR(parse_header(err, &p, path, c, &n));
  /* a tensor per line: a count beyond the lines left is malformed, not an allocation */
  if (n > count_lines(p))
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "checkpoint '%s': %d tensors announced, fewer lines",
                    path, n);
  c->e = calloc((size_t)n + 1, sizeof *c->e);
  RLX_CHECK_ALLOC(err, c->e);
  char line[LINE_MAX_BYTES];
  for (int32_t i = 0; i < n; i++) {
    c->n = i + 1;
    if (!next_line(&p, line, sizeof line) || !parse_entry(line, &c->e[i]))
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "checkpoint '%s': tensor line %d is malformed",
                      path, (int)i + 1);
  }
  return RLX_OK;
}

static rlx_status read_manifest(rlx_error* err, const char* path, rlx_ckpt* c) {
  void* text = NULL;
  size_t n = 0;
  RLX_RETURN_IF_ERROR(
      rlx_file_read_all(path, "checkpoint manifest", MANIFEST_MAX_BYTES, &text, &n, err));
  rlx_status s = rlx_ckpt_parse(err, (const char*)text, path, c);
  free(text);
  return s;
}

static const ckpt_entry* find_entry(const ckpt* c, const char* name) {
  for (int32_t i = 0; i < c->n; i++)
    if (strcmp(c->e[i].name, name) == 0) return &c->e[i];
  return NULL;
}

static void shape_str(const char* dtype, int32_t rank, const int64_t* shape, char* out,
                      size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "%s[", dtype);
  for (int32_t d = 0; d < rank && n < cap; d++)
    n += (size_t)snprintf(out + n, cap - n, d ? ",%lld" : "%lld", (long long)shape[d]);
  if (n < cap) snprintf(out + n, cap - n, "]");
}

/* Slot s against its manifest entry: same role, dtype and shape. */
static rlx_status check_entry(rlx_trainer* t, const train_slot* s, const ckpt_entry* e) {
  if (!e)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "checkpoint has no '%s' (a %s of this trainer)",
                    s->name, rlx_train_role_names[s->role]);
  char here[160], there[160];
  shape_str(rlx_dtype_name(s->type.dtype), s->type.rank, s->type.shape, here, sizeof here);
  shape_str(e->dtype, e->rank, e->shape, there, sizeof there);
  if (strcmp(here, there) != 0)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "checkpoint '%s' is %s there, %s here", s->name,
                    there, here);
  if (strcmp(e->role, rlx_train_role_names[s->role]) != 0)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "checkpoint '%s' is a %s there, a %s here",
                    s->name, e->role, rlx_train_role_names[s->role]);
  return RLX_OK;
}

static rlx_status check_manifest(rlx_trainer* t, const ckpt* c) {
  const char* want = optimizer_names[t->opt.optimizer];
  if (strcmp(c->optimizer, want) != 0)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                    "checkpoint was made with %s, this trainer uses %s", c->optimizer, want);
  for (int32_t k = 0; k < t->n_slots; k++)
    RLX_RETURN_IF_ERROR(check_entry(t, &t->slots[k], find_entry(c, t->slots[k].name)));
  for (int32_t i = 0; i < c->n; i++)
    if (!rlx_train_find_slot(t, c->e[i].name))
      return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                      "checkpoint has '%s' (a %s), which this trainer does not have", c->e[i].name,
                      c->e[i].role);
  return RLX_OK;
}

/* Reads the file of entry e and checks it holds what the manifest says. */
static rlx_status load_data(rlx_trainer* t, const char* dir, const train_slot* s,
                            const ckpt_entry* e, void** out) {
  if (strchr(e->file, '/') || e->file[0] == '.')
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                    "checkpoint: file name '%s' leaves the directory", e->file);
  char* path = join(dir, e->file);
  RLX_CHECK_ALLOC(&t->err, path);
  rlx_dtype dt;
  int32_t rank = 0;
  int64_t shape[RLX_MAX_RANK];
  size_t bytes = 0;
  char* why = NULL;
  rlx_status st = rlx_npy_load(path, &dt, &rank, shape, out, &bytes, &why);
  if (st != RLX_OK) rlx_fail(&t->err, st, "checkpoint: %s", why ? why : path);
  else if (dt != storage_dtype(s->type.dtype) || bytes != (size_t)rlx_type_bytes(&s->type) ||
           rank != s->type.rank) {
    st = rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                  "checkpoint: '%s' holds %s of %zu bytes, the manifest says %s of %lld bytes",
                  path, rlx_dtype_name(dt), bytes, e->dtype, (long long)rlx_type_bytes(&s->type));
    rlx_free(*out);
    *out = NULL;
  }
  rlx_free(why);
  free(path);
  return st;
}

static rlx_status load_slots(rlx_trainer* t, const char* dir, const ckpt* c) {
  for (int32_t k = 0; k < t->n_slots; k++) {
    train_slot* s = &t->slots[k];
    void* data = NULL;
    RLX_RETURN_IF_ERROR(load_data(t, dir, s, find_entry(c, s->name), &data));
    /* the bits as they were saved (bf16 travels as u16) */
    rlx_status st =
        rlx_train_write_slot(t, s, s->type.dtype, data, (size_t)rlx_type_bytes(&s->type));
    rlx_free(data);
    RLX_RETURN_IF_ERROR(st);
  }
  return RLX_OK;
}

rlx_status rlx_trainer_load(rlx_trainer* t, const char* dir) {
  if (!t) return RLX_INVALID_ARGUMENT;
  if (!dir) return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "load: dir is NULL");
  char* path = join(dir, MANIFEST);
  RLX_CHECK_ALLOC(&t->err, path);
  ckpt c = {0};
  rlx_status s = read_manifest(&t->err, path, &c);
  free(path);
  if (s == RLX_OK) s = check_manifest(t, &c);
  if (s == RLX_OK && (c.micro < 0 || c.micro >= t->opt.accumulate || c.steps < 0 ||
                      !(c.loss_scale > 0)))
    s = rlx_fail(&t->err, RLX_INVALID_ARGUMENT,
                 "checkpoint: step %lld, micro-step %d or loss scale %g out of range", c.steps,
                 c.micro, c.loss_scale);
  if (s == RLX_OK) s = load_slots(t, dir, &c);
  if (s == RLX_OK) {
    t->steps = c.steps;
    t->micro = c.micro;
    t->loss_scale = t->last_scale = (float)c.loss_scale;
    t->good_steps = c.good_steps;
  }
  rlx_ckpt_free(&c);
  return s;
}
