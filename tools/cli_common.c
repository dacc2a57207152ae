/* Shared CLI helpers: see cli_common.h. */
#include "cli_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* ------------------------------------------------------------ diagnostics */

void cli_error(const char* cmd, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "rlx %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int cli_is_help(const char* s) { return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0; }

int cli_verbose = 0;

int cli_quiet_begin(void) {
  if (cli_verbose) return -1;
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  int null_fd = open("/dev/null", O_WRONLY);
  if (saved < 0 || null_fd < 0 || dup2(null_fd, STDERR_FILENO) < 0) {
    /* cannot silence: better noisy than losing stderr */
    if (null_fd >= 0) close(null_fd);
    if (saved >= 0) close(saved);
    return -1;
  }
  close(null_fd);
  return saved;
}

void cli_quiet_end(int token) {
  if (token < 0) return;
  fflush(stderr);
  dup2(token, STDERR_FILENO);
  close(token);
}

/* ------------------------------------------------------------ option parsing */

int cli_opt_value(const char* cmd, int argc, char** argv, int* i, const char* name,
                  const char** out_value) {
  const char* arg = argv[*i];
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return 0;
  if (arg[n] == '=') {
    *out_value = arg + n + 1;
    return 1;
  }
  if (arg[n] != '\0') return 0;
  if (*i + 1 >= argc) {
    cli_error(cmd, "option %s needs a value", name);
    return -1;
  }
  *i += 1;
  *out_value = argv[*i];
  return 1;
}

int cli_parse_i64(const char* cmd, const char* what, const char* text, int64_t lo, int64_t hi,
                  int64_t* out) {
  char* end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || end == text || *end != '\0') {
    cli_error(cmd, "%s: '%s' is not an integer", what, text);
    return CLI_USAGE;
  }
  if (v < lo || v > hi) {
    cli_error(cmd, "%s: %lld is outside [%lld, %lld]", what, v, (long long)lo, (long long)hi);
    return CLI_USAGE;
  }
  *out = (int64_t)v;
  return CLI_OK;
}

int cli_parse_f64(const char* cmd, const char* what, const char* text, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end != '\0' || !isfinite(v)) {
    cli_error(cmd, "%s: '%s' is not a finite number", what, text);
    return CLI_USAGE;
  }
  *out = v;
  return CLI_OK;
}

/* ------------------------------------------------------------ graph loading */

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* .onnx through the importer. Without protobuf-c at build time the library
 * answers UNIMPLEMENTED with "ONNX import not built", passed on as is. */
static int load_onnx(const char* cmd, const char* path, rlx_graph** out_graph) {
  char* msg = NULL;
  rlx_status s = rlx_onnx_load(path, out_graph, &msg);
  if (s != RLX_OK) {
    cli_error(cmd, "%s: %s", path, msg ? msg : rlx_status_name(s));
    rlx_free(msg);
    rlx_graph_destroy(*out_graph);
    *out_graph = NULL;
    return CLI_FAIL;
  }
  rlx_free(msg);
  return CLI_OK;
}

int cli_is_onnx(const char* path) { return ends_with(path, ".onnx"); }

int cli_load_graph(const char* cmd, const char* path, rlx_graph** out_graph) {
  *out_graph = NULL;
  if (cli_is_onnx(path)) return load_onnx(cmd, path, out_graph);
  /* rlx_graph_load reads regular files only (a FIFO or device is refused,
   * never waited on) and names the file in its own errors. */
  char* msg = NULL;
  rlx_status s = rlx_graph_load(path, out_graph, &msg);
  if (s != RLX_OK) {
    /* A parse error starts with "line:col: " and needs the path before it. */
    int parse_error = msg && msg[0] >= '0' && msg[0] <= '9';
    fprintf(stderr, "rlx %s: %s%s%s\n", cmd, parse_error ? path : "", parse_error ? ":" : "",
            msg ? msg : rlx_status_name(s));
    rlx_free(msg);
    rlx_graph_destroy(*out_graph);
    *out_graph = NULL;
    return CLI_FAIL;
  }
  rlx_free(msg);
  return CLI_OK;
}

/* ------------------------------------------------------------ bindings */

void cli_bindings_free(cli_bindings* b) {
  for (int32_t i = 0; i < b->n; i++) free(b->names[i]);
  b->n = 0;
}

int64_t cli_bindings_find(const cli_bindings* b, const char* name) {
  for (int32_t i = 0; i < b->n; i++)
    if (strcmp(b->names[i], name) == 0) return b->sizes[i];
  return -1;
}

int cli_bindings_add(const char* cmd, cli_bindings* b, const char* name, int64_t size) {
  int64_t old = cli_bindings_find(b, name);
  if (old >= 0) {
    if (old == size) return CLI_OK;
    cli_error(cmd, "symbol '%s' bound to both %lld and %lld", name, (long long)old,
              (long long)size);
    return CLI_FAIL;
  }
  if (b->n >= CLI_MAX_BINDINGS) {
    cli_error(cmd, "too many symbol bindings (at most %d)", CLI_MAX_BINDINGS);
    return CLI_FAIL;
  }
  b->names[b->n] = strdup(name);
  if (!b->names[b->n]) {
    cli_error(cmd, "out of memory");
    return CLI_FAIL;
  }
  b->sizes[b->n++] = size;
  return CLI_OK;
}

int cli_bindings_parse(const char* cmd, cli_bindings* b, const char* text) {
  const char* eq = strchr(text, '=');
  if (!eq || eq == text) {
    cli_error(cmd, "--bind expects SYM=N, got '%s'", text);
    return CLI_USAGE;
  }
  char name[128];
  size_t n = (size_t)(eq - text);
  if (n >= sizeof name) {
    cli_error(cmd, "--bind: symbol name too long");
    return CLI_USAGE;
  }
  memcpy(name, text, n);
  name[n] = '\0';
  int64_t size = 0;
  int rc = cli_parse_i64(cmd, "--bind size", eq + 1, 0, INT32_MAX, &size);
  if (rc != CLI_OK) return rc;
  return cli_bindings_add(cmd, b, name, size) == CLI_OK ? CLI_OK : CLI_USAGE;
}

int cli_concrete_shape(const char* cmd, const cli_bindings* b, const rlx_value_info* t,
                       const char* what, int64_t* out_shape) {
  for (int32_t d = 0; d < t->rank; d++) {
    if (t->shape[d] >= 0) {
      out_shape[d] = t->shape[d];
      continue;
    }
    const char* sym = t->dim_names[d] ? t->dim_names[d] : "?";
    int64_t size = cli_bindings_find(b, sym);
    if (size < 0) {
      cli_error(cmd, "%s: symbol '%s' is unbound: give it with --bind %s=N or an --input .npy",
                what, sym, sym);
      return CLI_FAIL;
    }
    out_shape[d] = size;
  }
  return CLI_OK;
}

const char* cli_format_type(const rlx_value_info* t, char* buf, size_t cap) {
  size_t at = 0;
  int n = snprintf(buf, cap, "%s[", rlx_dtype_name(t->dtype));
  at = n > 0 ? (size_t)n : 0;
  for (int32_t d = 0; d < t->rank && at < cap; d++) {
    const char* sep = d ? "," : "";
    if (t->shape[d] >= 0) n = snprintf(buf + at, cap - at, "%s%lld", sep, (long long)t->shape[d]);
    else n = snprintf(buf + at, cap - at, "%s%s", sep, t->dim_names[d] ? t->dim_names[d] : "?");
    at += n > 0 ? (size_t)n : 0;
  }
  if (at < cap) snprintf(buf + at, cap - at, "]");
  return buf;
}

/* ------------------------------------------------------------ elements */

double cli_load_f64(const void* base, rlx_dtype dt, int64_t i) {
  double v = 0;
  rlx_dtype_convert(&v, RLX_F64, (const char*)base + (size_t)i * rlx_dtype_size(dt), dt, 1);
  return v;
}

int64_t cli_load_i64(const void* base, rlx_dtype dt, int64_t i) {
  int64_t v = 0;
  rlx_dtype_convert(&v, RLX_I64, (const char*)base + (size_t)i * rlx_dtype_size(dt), dt, 1);
  return v;
}

void cli_store_f64(void* base, rlx_dtype dt, int64_t i, double v) {
  rlx_dtype_convert((char*)base + (size_t)i * rlx_dtype_size(dt), dt, &v, RLX_F64, 1);
}

/* ------------------------------------------------------------ leaves */

/* The graph input named `name` into *out; 0 if there is none. */
static int find_input(const rlx_graph* g, const char* name, rlx_value_info* out) {
  for (int32_t i = 0; i < rlx_graph_input_count(g); i++)
    if (rlx_graph_get_input(g, i, out) == RLX_OK && strcmp(out->name, name) == 0) return 1;
  return 0;
}

static int64_t shape_numel(const int64_t* shape, int32_t rank) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) {
    if (shape[d] != 0 && n > INT64_MAX / shape[d]) return -1;
    n *= shape[d];
  }
  return n;
}

/* ------------------------------------------------------------ inputs */

void cli_inputs_free(cli_inputs* in) {
  for (int32_t i = 0; i < in->n; i++) {
    free(in->items[i].name);
    free(in->items[i].path);
    rlx_free(in->items[i].data);
  }
  in->n = 0;
}

/* An ONNX TensorProto file (the .pb files of the ONNX test data). */
static int read_tensor_pb(const char* cmd, cli_input* it) {
  char* msg = NULL;
  rlx_status s = rlx_onnx_read_tensor(it->path, &it->dtype, &it->rank, it->shape, &it->data,
                                      &it->bytes, &msg);
  if (s != RLX_OK) {
    cli_error(cmd, "input '%s': %s: %s", it->name, it->path, msg ? msg : rlx_status_name(s));
    rlx_free(msg);
    return CLI_FAIL;
  }
  rlx_free(msg);
  return CLI_OK;
}

int cli_inputs_add(const char* cmd, cli_inputs* in, const char* text) {
  const char* eq = strchr(text, '=');
  if (!eq || eq == text || eq[1] == '\0') {
    cli_error(cmd, "--input expects NAME=file.npy, got '%s'", text);
    return CLI_USAGE;
  }
  if (in->n >= CLI_MAX_INPUTS) {
    cli_error(cmd, "too many --input options (at most %d)", CLI_MAX_INPUTS);
    return CLI_USAGE;
  }
  cli_input* it = &in->items[in->n];
  memset(it, 0, sizeof *it);
  it->name = strndup(text, (size_t)(eq - text));
  it->path = strdup(eq + 1);
  if (!it->name || !it->path) {
    free(it->name);
    free(it->path);
    cli_error(cmd, "out of memory");
    return CLI_FAIL;
  }
  in->n++;
  for (int32_t i = 0; i + 1 < in->n; i++)
    if (strcmp(in->items[i].name, it->name) == 0) {
      cli_error(cmd, "input '%s' given twice", it->name);
      return CLI_USAGE;
    }
  if (ends_with(it->path, ".pb")) return read_tensor_pb(cmd, it);
  char* msg = NULL;
  if (rlx_npy_load(it->path, &it->dtype, &it->rank, it->shape, &it->data, &it->bytes, &msg) !=
      RLX_OK) {
    cli_error(cmd, "input '%s': %s", it->name, msg ? msg : "cannot read .npy");
    rlx_free(msg);
    return CLI_FAIL;
  }
  return CLI_OK;
}

int cli_bind_from_inputs(const char* cmd, const rlx_graph* g, const cli_inputs* in,
                         cli_bindings* b) {
  for (int32_t i = 0; i < in->n; i++) {
    const cli_input* it = &in->items[i];
    rlx_value_info info;
    if (!find_input(g, it->name, &info)) {
      char names[512];
      cli_error(cmd, "--input %s: the graph has no input named '%s' (inputs: %s)", it->path,
                it->name, cli_graph_names(g, CLI_NAMES_INPUTS, names, sizeof names));
      return CLI_FAIL;
    }
    const rlx_value_info* t = &info;
    if (t->rank != it->rank) {
      cli_error(cmd, "input '%s': the graph declares rank %d, %s has rank %d", it->name,
                (int)t->rank, it->path, (int)it->rank);
      return CLI_FAIL;
    }
    for (int32_t d = 0; d < t->rank; d++) {
      if (t->shape[d] >= 0) {
        if (t->shape[d] != it->shape[d]) {
          cli_error(cmd, "input '%s': dim %d is %lld in the graph but %lld in %s", it->name,
                    (int)d, (long long)t->shape[d], (long long)it->shape[d], it->path);
          return CLI_FAIL;
        }
        continue;
      }
      if (cli_bindings_add(cmd, b, t->dim_names[d] ? t->dim_names[d] : "?", it->shape[d]) != CLI_OK)
        return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ compile */

/* The registry's "available: ..." / "not built" / "unavailable: why" line. */
static const char* device_detail(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && strcmp(info.name, name) == 0) return info.detail;
  }
  return "unknown device";
}

double cli_last_compile_ms = 0;

int cli_compile(const char* cmd, rlx_graph* g, const cli_model_opts* mo, rlx_exec** out_exec) {
  *out_exec = NULL;
  const char* device = mo->device;
  const char* resolved = NULL;
  int quiet = cli_quiet_begin(); /* probing starts the drivers */
  rlx_status s = rlx_device_resolve(device, &resolved);
  cli_quiet_end(quiet);
  if (s == RLX_NOT_FOUND) {
    cli_error(cmd, "unknown device '%s' (see `rlx devices`)", device);
    return CLI_FAIL;
  }
  if (s != RLX_OK) {
    cli_error(cmd, "device '%s' cannot be used: %s", device,
              device_detail(resolved ? resolved : device));
    return CLI_FAIL;
  }
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.strict = mo->strict;
  o.allow_tf32 = mo->tf32;
  o.threads = mo->threads;
  o.symbol_names = (const char* const*)mo->bindings.names;
  o.symbol_sizes = mo->bindings.sizes;
  o.n_symbols = mo->bindings.n;
  o.precision = mo->precision;
  o.channels_last = mo->channels_last;
  quiet = cli_quiet_begin();
  double t0 = cli_now_ms();
  s = rlx_compile(g, resolved, &o, out_exec);
  cli_last_compile_ms = cli_now_ms() - t0;
  cli_quiet_end(quiet);
  if (s != RLX_OK) {
    cli_error(cmd, "compile for %s failed (%s): %s", resolved, rlx_status_name(s),
              rlx_graph_last_error(g));
    rlx_exec_destroy(*out_exec);
    *out_exec = NULL;
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ deterministic RNG */

uint64_t cli_rng_next(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t cli_hash_name(const char* name, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char* p = (const unsigned char*)name; *p; p++) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  uint64_t state = h ^ (seed * 0x9e3779b97f4a7c15ull);
  return cli_rng_next(&state);
}

double cli_rng_uniform(uint64_t* state) {
  return (double)(cli_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

double cli_rng_normal(uint64_t* state) {
  /* Box-Muller; 1 - u keeps the log argument in (0, 1]. */
  double u1 = 1.0 - cli_rng_uniform(state);
  double u2 = cli_rng_uniform(state);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ------------------------------------------------------------ params */

/* The documented init rule: norm scales start at 1, norm shifts and biases at
 * 0, every other weight at normal(0, 0.02) (GPT-2's init), so a model with
 * no checkpoint still computes something well-scaled and reproducible. */
static double param_fill_kind(const char* name) {
  if (ends_with(name, "gamma") || ends_with(name, "weight_ln") || ends_with(name, ".g"))
    return 1.0;
  if (ends_with(name, "beta") || ends_with(name, "bias") || ends_with(name, ".b")) return 0.0;
  return NAN; /* random */
}

static int init_one_param(const char* cmd, rlx_exec* e, const char* name, rlx_dtype dt,
                          int64_t numel, uint64_t seed) {
  int is_float = rlx_dtype_is_float(dt);
  /* Float params are handed over as f32 (the executable converts); others in
   * their own dtype. */
  rlx_dtype src = is_float ? RLX_F32 : dt;
  size_t bytes = (size_t)numel * rlx_dtype_size(src);
  void* buf = malloc(bytes ? bytes : 1);
  if (!buf) {
    cli_error(cmd, "param '%s': out of memory (%zu bytes)", name, bytes);
    return CLI_FAIL;
  }
  double fill = param_fill_kind(name);
  uint64_t state = cli_hash_name(name, seed);
  for (int64_t i = 0; i < numel; i++) {
    double v;
    if (!is_float) v = (double)(cli_rng_next(&state) % (dt == RLX_BOOL ? 2 : 4));
    else if (isnan(fill)) v = 0.02 * cli_rng_normal(&state);
    else v = fill;
    cli_store_f64(buf, src, i, v);
  }
  rlx_status s = rlx_exec_set_param(e, name, src, buf, bytes);
  free(buf);
  if (s != RLX_OK) {
    cli_error(cmd, "param '%s': %s", name, rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* DIR/<name>.npy, with '/' in the name replaced by '_' so any name maps to
 * one file in DIR. */
static void param_file_path(const char* dir, const char* name, char* buf, size_t cap) {
  snprintf(buf, cap, "%s/%s.npy", dir, name);
  for (char* p = buf + strlen(dir) + 1; *p; p++)
    if (*p == '/') *p = '_';
}

/* Whether anything is at path; never opens it (a FIFO would block). What
 * it is, the loader checks: only regular files are read. */
static int file_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static int load_one_param(const char* cmd, rlx_exec* e, const char* name, rlx_dtype want,
                          const char* path) {
  char* msg = NULL;
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data = NULL;
  size_t bytes = 0;
  if (rlx_npy_load(path, &dt, &rank, shape, &data, &bytes, &msg) != RLX_OK) {
    cli_error(cmd, "param '%s': %s", name, msg ? msg : "cannot read .npy");
    rlx_free(msg);
    return CLI_FAIL;
  }
  /* A float file of another float dtype (an f64 or f16 checkpoint) goes in
   * through f32, which set_param converts to the param's dtype. */
  if (dt != want && rlx_dtype_is_float(dt) && rlx_dtype_is_float(want) && dt != RLX_F32) {
    int64_t n = (int64_t)(bytes / rlx_dtype_size(dt));
    float* f = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!f) {
      rlx_free(data);
      cli_error(cmd, "param '%s': out of memory", name);
      return CLI_FAIL;
    }
    rlx_dtype_convert(f, RLX_F32, data, dt, n);
    rlx_free(data);
    data = f;
    dt = RLX_F32;
    bytes = (size_t)n * sizeof(float);
  }
  rlx_status s = rlx_exec_set_param(e, name, dt, data, bytes);
  rlx_free(data);
  if (s != RLX_OK) {
    cli_error(cmd, "param '%s' from %s: %s", name, path, rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

const char* cli_graph_names(const rlx_graph* g, int which, char* buf, size_t cap) {
  int32_t n = which == CLI_NAMES_INPUTS   ? rlx_graph_input_count(g)
              : which == CLI_NAMES_PARAMS ? rlx_graph_param_count(g)
                                          : rlx_graph_symbol_count(g);
  size_t at = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < n; i++) {
    rlx_value_info info;
    const char* name = NULL;
    if (which == CLI_NAMES_SYMBOLS) {
      if (rlx_graph_symbol_name(g, -(rlx_dim)i - 1, &name) != RLX_OK) continue;
    } else if ((which == CLI_NAMES_INPUTS ? rlx_graph_get_input(g, i, &info)
                                          : rlx_graph_get_param(g, i, &info)) == RLX_OK) {
      name = info.name;
    }
    if (!name) continue;
    int w = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", name);
    if (w < 0 || (size_t)w >= cap - at) { /* full: end with the total */
      enum { TAIL = 28 };
      snprintf(buf + (at + TAIL < cap ? at : cap - TAIL), TAIL, ", ... (%d in all)", (int)n);
      return buf;
    }
    at += (size_t)w;
  }
  if (!at) snprintf(buf, cap, "none");
  return buf;
}

/* Every DIR/<file>.npy must be the file of some param: a file that matches
 * none is a misspelt or stale name, which would silently leave the param it
 * meant without its value. */
static int check_param_files(const char* cmd, const rlx_graph* g, const char* dir) {
  DIR* d = opendir(dir);
  if (!d) {
    cli_error(cmd, "--params %s: %s", dir, strerror(errno));
    return CLI_FAIL;
  }
  int rc = CLI_OK;
  char path[4096], want[4096];
  for (struct dirent* ent; rc == CLI_OK && (ent = readdir(d)) != NULL;) {
    if (!ends_with(ent->d_name, ".npy")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    int matched = 0;
    for (int32_t i = 0; i < rlx_graph_param_count(g) && !matched; i++) {
      rlx_value_info info;
      if (rlx_graph_get_param(g, i, &info) != RLX_OK) continue;
      param_file_path(dir, info.name, want, sizeof want);
      matched = strcmp(want, path) == 0;
    }
    if (!matched) {
      char names[1024];
      cli_error(cmd, "--params: %s matches no param of the graph (params: %s)", path,
                cli_graph_names(g, CLI_NAMES_PARAMS, names, sizeof names));
      rc = CLI_FAIL;
    }
  }
  closedir(d);
  return rc;
}

static int check_params_dir(const char* cmd, const rlx_graph* g, const char* dir) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    cli_error(cmd, "--params %s: %s", dir, strerror(errno));
    return CLI_FAIL;
  }
  if (!S_ISDIR(st.st_mode)) {
    cli_error(cmd, "--params %s: not a folder (it should hold one NAME.npy per param)", dir);
    return CLI_FAIL;
  }
  return check_param_files(cmd, g, dir);
}

/* Made-up values for one param without any (o->random_params). */
static int make_up_param(const char* cmd, rlx_exec* e, const cli_model_opts* o,
                         const rlx_value_info* t, int64_t* values) {
  char what[300];
  snprintf(what, sizeof what, "param '%s'", t->name);
  int64_t shape[RLX_MAX_RANK];
  if (cli_concrete_shape(cmd, &o->bindings, t, what, shape) != CLI_OK) return CLI_FAIL;
  int64_t numel = shape_numel(shape, t->rank);
  if (numel < 0) {
    cli_error(cmd, "%s: element count overflows", what);
    return CLI_FAIL;
  }
  *values += numel;
  return init_one_param(cmd, e, t->name, t->dtype, numel, o->init_seed);
}

/* The params with no value from the model file or DIR: made up when allowed,
 * else listed in one error. */
enum { MISSING_NAMED = 8 }; /* names listed in the error; the count says the rest */

static int fill_missing_params(const char* cmd, const rlx_graph* g, rlx_exec* e,
                               const cli_model_opts* o, int from_model) {
  char missing[1024] = "", path[4096];
  size_t at = 0;
  int32_t n_missing = 0, made_up = 0;
  int64_t values = 0;
  for (int32_t i = 0; i < rlx_graph_param_count(g) && !from_model; i++) {
    rlx_value_info info;
    if (rlx_graph_get_param(g, i, &info) != RLX_OK) return CLI_FAIL;
    if (o->params_dir) {
      param_file_path(o->params_dir, info.name, path, sizeof path);
      if (file_exists(path)) continue;
    }
    if (o->random_params) {
      if (make_up_param(cmd, e, o, &info, &values) != CLI_OK) return CLI_FAIL;
      made_up++;
      continue;
    }
    if (n_missing++ < MISSING_NAMED) {
      int w = snprintf(missing + at, sizeof missing - at, "%s%s", at ? ", " : "", info.name);
      if (w > 0 && (size_t)w < sizeof missing - at) at += (size_t)w;
    }
  }
  if (n_missing) {
    cli_error(cmd, "%d param(s) have no value: %s%s. Give them with --params DIR "
              "(DIR/NAME.npy), or ask for made-up weights with --random-params",
              (int)n_missing, missing, n_missing > MISSING_NAMED ? ", ..." : "");
    return CLI_FAIL;
  }
  if (made_up)
    fprintf(stderr, "rlx %s: --random-params: made up %d param(s), %lld values (seed %llu)\n",
            cmd, (int)made_up, (long long)values, (unsigned long long)o->init_seed);
  return CLI_OK;
}

int cli_set_params(const char* cmd, const rlx_graph* g, rlx_exec* e, const cli_model_opts* o,
                   const char* onnx_path, const rlx_onnx_frozen_input* frozen,
                   int32_t n_frozen) {
  if (o->params_dir && check_params_dir(cmd, g, o->params_dir) != CLI_OK) return CLI_FAIL;
  /* An ONNX model carries every param as an initializer. */
  if (fill_missing_params(cmd, g, e, o, onnx_path != NULL) != CLI_OK) return CLI_FAIL;
  if (onnx_path) {
    char* msg = NULL;
    rlx_status s = rlx_onnx_set_params_frozen(e, onnx_path, frozen, n_frozen, &msg);
    if (s != RLX_OK) {
      cli_error(cmd, "%s: initializers: %s", onnx_path, msg ? msg : rlx_status_name(s));
      rlx_free(msg);
      return CLI_FAIL;
    }
    rlx_free(msg);
  }
  char path[4096];
  for (int32_t i = 0; o->params_dir && i < rlx_graph_param_count(g); i++) {
    rlx_value_info info;
    if (rlx_graph_get_param(g, i, &info) != RLX_OK) return CLI_FAIL;
    param_file_path(o->params_dir, info.name, path, sizeof path);
    if (file_exists(path) && load_one_param(cmd, e, info.name, info.dtype, path) != CLI_OK)
      return CLI_FAIL;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ inputs */

static const cli_input* find_given(const cli_inputs* given, const char* name) {
  for (int32_t i = 0; given && i < given->n; i++)
    if (strcmp(given->items[i].name, name) == 0) return &given->items[i];
  return NULL;
}

/* Random data for an input nobody gave: floats uniform [-1, 1), integers in
 * [0, 4) (valid indices for any dim >= 4), bools 0/1. */
static int set_random_input(const char* cmd, rlx_exec* e, const cli_bindings* b,
                            const rlx_value_info* t, uint64_t seed) {
  const char* name = t->name;
  char what[300];
  snprintf(what, sizeof what, "input '%s'", name);
  int64_t shape[RLX_MAX_RANK];
  if (cli_concrete_shape(cmd, b, t, what, shape) != CLI_OK) return CLI_FAIL;
  int64_t numel = shape_numel(shape, t->rank);
  size_t esize = rlx_dtype_size(t->dtype);
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / (esize ? esize : 1)) {
    cli_error(cmd, "%s: element count overflows", what);
    return CLI_FAIL;
  }
  size_t bytes = (size_t)numel * esize;
  void* buf = malloc(bytes ? bytes : 1);
  if (!buf) {
    cli_error(cmd, "%s: out of memory (%zu bytes)", what, bytes);
    return CLI_FAIL;
  }
  uint64_t state = cli_hash_name(name, seed);
  int is_float = rlx_dtype_is_float(t->dtype);
  for (int64_t i = 0; i < numel; i++) {
    double v = is_float ? 2.0 * cli_rng_uniform(&state) - 1.0
                        : (double)(cli_rng_next(&state) % (t->dtype == RLX_BOOL ? 2 : 4));
    cli_store_f64(buf, t->dtype, i, v);
  }
  rlx_status s = rlx_exec_set_input(e, name, t->dtype, shape, t->rank, buf, bytes);
  free(buf);
  if (s != RLX_OK) {
    cli_error(cmd, "%s: %s", what, rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

int cli_set_inputs(const char* cmd, const rlx_graph* g, rlx_exec* e, const cli_bindings* b,
                   const cli_inputs* given, uint64_t seed) {
  for (int32_t i = 0; i < rlx_graph_input_count(g); i++) {
    rlx_value_info info;
    if (rlx_graph_get_input(g, i, &info) != RLX_OK) return CLI_FAIL;
    const cli_input* it = find_given(given, info.name);
    if (!it) {
      if (set_random_input(cmd, e, b, &info, seed) != CLI_OK) return CLI_FAIL;
      continue;
    }
    /* bfloat16 tensors are often stored as UINT16 bit patterns (NumPy has no
     * bfloat16; the ONNX test data does so): where the graph declares bf16,
     * u16 data is taken as its bits (same bytes). */
    rlx_dtype dt = it->dtype == RLX_U16 && info.dtype == RLX_BF16 ? RLX_BF16 : it->dtype;
    if (rlx_exec_set_input(e, it->name, dt, it->shape, it->rank, it->data, it->bytes) != RLX_OK) {
      cli_error(cmd, "input '%s' from %s: %s", it->name, it->path, rlx_exec_last_error(e));
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ outputs */

const char* cli_output_name(const rlx_graph* g, int32_t i, char* buf, size_t cap) {
  rlx_value_info info;
  if (i >= 0 && i < rlx_graph_output_count(g) && rlx_graph_get_output(g, i, &info) == RLX_OK &&
      info.name)
    return info.name;
  snprintf(buf, cap, "out%d", (int)i);
  return buf;
}

static void format_shape(const int64_t* shape, int32_t rank, char* buf, size_t cap) {
  size_t len = (size_t)snprintf(buf, cap, "[");
  for (int32_t d = 0; d < rank && len < cap; d++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? "," : "", (long long)shape[d]);
  if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Reads output i in its own dtype (bf16/f16 as f32 when as_f32_if_half). */
static int read_output(const char* cmd, const rlx_exec* e, int32_t i, int as_f32_if_half,
                       rlx_dtype* out_dt, int32_t* out_rank, int64_t* out_shape,
                       int64_t* out_numel, void** out_data) {
  *out_data = NULL;
  if (rlx_exec_output_type(e, i, out_dt, out_rank, out_shape) != RLX_OK) {
    cli_error(cmd, "output %d: %s", (int)i, rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  if (as_f32_if_half && (*out_dt == RLX_BF16 || *out_dt == RLX_F16)) *out_dt = RLX_F32;
  *out_numel = shape_numel(out_shape, *out_rank);
  size_t bytes = (size_t)(*out_numel > 0 ? *out_numel : 0) * rlx_dtype_size(*out_dt);
  *out_data = malloc(bytes ? bytes : 1);
  if (!*out_data) {
    cli_error(cmd, "output %d: out of memory", (int)i);
    return CLI_FAIL;
  }
  if (rlx_exec_read_output(e, i, *out_dt, *out_data, bytes) != RLX_OK) {
    cli_error(cmd, "output %d: %s", (int)i, rlx_exec_last_error(e));
    free(*out_data);
    *out_data = NULL;
    return CLI_FAIL;
  }
  return CLI_OK;
}

enum { PREVIEW_VALUES = 8 };

int cli_print_outputs(const char* cmd, const rlx_graph* g, const rlx_exec* e) {
  int32_t n = rlx_exec_output_count(e);
  for (int32_t i = 0; i < n; i++) {
    rlx_dtype dt;
    int32_t rank;
    int64_t shape[RLX_MAX_RANK], numel;
    void* data;
    if (read_output(cmd, e, i, 0, &dt, &rank, shape, &numel, &data) != CLI_OK) return CLI_FAIL;
    char name[32], sh[256];
    format_shape(shape, rank, sh, sizeof sh);
    printf("output %d %s: %s%s =", (int)i, cli_output_name(g, i, name, sizeof name),
           rlx_dtype_name(dt), sh);
    int is_float = rlx_dtype_is_float(dt);
    double sum = 0, abs_sum = 0;
    for (int64_t k = 0; k < numel; k++) {
      double v = cli_load_f64(data, dt, k);
      sum += v;
      abs_sum += fabs(v);
      if (k < PREVIEW_VALUES) {
        if (is_float) printf(" %.6g", v);
        else if (dt == RLX_U64) printf(" %llu", (unsigned long long)((const uint64_t*)data)[k]);
        else printf(" %lld", (long long)cli_load_i64(data, dt, k));
      }
    }
    if (numel > PREVIEW_VALUES) printf(" ... (%lld values)", (long long)numel);
    printf("  sum=%.9g abs_sum=%.9g\n", sum, abs_sum);
    free(data);
  }
  return CLI_OK;
}

int cli_save_outputs(const char* cmd, const rlx_exec* e, const char* dir) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    cli_error(cmd, "cannot create '%s': %s", dir, strerror(errno));
    return CLI_FAIL;
  }
  int32_t n = rlx_exec_output_count(e);
  for (int32_t i = 0; i < n; i++) {
    rlx_dtype dt;
    int32_t rank;
    int64_t shape[RLX_MAX_RANK], numel;
    void* data;
    if (read_output(cmd, e, i, 1, &dt, &rank, shape, &numel, &data) != CLI_OK) return CLI_FAIL;
    char path[4096];
    snprintf(path, sizeof path, "%s/out%d.npy", dir, (int)i);
    char* msg = NULL;
    size_t bytes = (size_t)(numel > 0 ? numel : 0) * rlx_dtype_size(dt);
    rlx_status s = rlx_npy_save(path, dt, rank, shape, data, bytes, &msg);
    free(data);
    if (s != RLX_OK) {
      cli_error(cmd, "cannot write %s: %s", path, msg ? msg : rlx_status_name(s));
      rlx_free(msg);
      return CLI_FAIL;
    }
    printf("saved output %d to %s\n", (int)i, path);
  }
  return CLI_OK;
}

int cli_print_report(const char* cmd, const rlx_exec* e) {
  char* text = NULL;
  if (rlx_exec_report(e, &text) != RLX_OK) {
    cli_error(cmd, "report: %s", rlx_exec_last_error(e));
    return CLI_FAIL;
  }
  fputs(text, stdout);
  if (text[0] && text[strlen(text) - 1] != '\n') fputc('\n', stdout);
  rlx_free(text);
  return CLI_OK;
}

void cli_print_json_string(const char* s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

/* ------------------------------------------------------------ time */

double cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double cli_quantile(double* samples, int n, double q) {
  if (n <= 0) return 0;
  qsort(samples, (size_t)n, sizeof *samples, cmp_double);
  double pos = q * (double)(n - 1);
  int lo = (int)pos;
  if (lo >= n - 1) return samples[n - 1];
  double frac = pos - (double)lo;
  return samples[lo] * (1.0 - frac) + samples[lo + 1] * frac;
}

/* ------------------------------------------------------------ the usual flow */

void cli_model_opts_init(cli_model_opts* o) {
  memset(o, 0, sizeof *o);
  o->device = "cpu";
}

void cli_model_opts_free(cli_model_opts* o) {
  cli_bindings_free(&o->bindings);
  cli_inputs_free(&o->inputs);
}

static int seed_opt(const char* cmd, const char* what, const char* v, uint64_t* out) {
  int64_t x = 0;
  int rc = cli_parse_i64(cmd, what, v, 0, INT64_MAX, &x);
  *out = (uint64_t)x;
  return rc;
}

/* --precision bf16|f16|f32 (f32: the graph's own dtypes). */
int cli_parse_precision(const char* cmd, const char* v, int32_t* out) {
  if (strcmp(v, "bf16") == 0) *out = RLX_PRECISION_BF16;
  else if (strcmp(v, "f16") == 0) *out = RLX_PRECISION_F16;
  else if (strcmp(v, "f32") == 0) *out = RLX_PRECISION_DEFAULT;
  else {
    cli_error(cmd, "--precision '%s': expected bf16, f16 or f32", v);
    return CLI_USAGE;
  }
  return CLI_OK;
}

int cli_model_opt(const char* cmd, int argc, char** argv, int* i, unsigned accept,
                  cli_model_opts* o) {
  const char* v = NULL;
  int m;
  if ((accept & CLI_OPT_STRICT) && strcmp(argv[*i], "--strict") == 0) {
    o->strict = 1;
    return 1;
  }
  if ((accept & CLI_OPT_STRICT) && strcmp(argv[*i], "--tf32") == 0) {
    o->tf32 = 1;
    return 1;
  }
  if ((accept & CLI_OPT_STRICT) && strcmp(argv[*i], "--channels-last") == 0) {
    o->channels_last = 1;
    return 1;
  }
#define TRY(bit, name)                                                      \
  if ((accept & (bit)) && (m = cli_opt_value(cmd, argc, argv, i, name, &v)) != 0)
  TRY(CLI_OPT_STRICT, "--precision") {
    if (m < 0) return -CLI_USAGE;
    return cli_parse_precision(cmd, v, &o->precision) == CLI_OK ? 1 : -CLI_USAGE;
  }
  TRY(CLI_OPT_DEVICE, "--device") {
    if (m < 0) return -CLI_USAGE;
    o->device = v;
    return 1;
  }
  TRY(CLI_OPT_SEED, "--seed") {
    if (m < 0) return -CLI_USAGE;
    return seed_opt(cmd, "--seed", v, &o->seed) == CLI_OK ? 1 : -CLI_USAGE;
  }
  if ((accept & CLI_OPT_INIT) && strcmp(argv[*i], "--random-params") == 0) {
    o->random_params = 1;
    return 1;
  }
  TRY(CLI_OPT_INIT, "--init-params") {
    if (m < 0) return -CLI_USAGE;
    o->random_params = 1;
    return seed_opt(cmd, "--init-params", v, &o->init_seed) == CLI_OK ? 1 : -CLI_USAGE;
  }
  TRY(CLI_OPT_THREADS, "--threads") {
    int64_t n = 0;
    if (m < 0 || cli_parse_i64(cmd, "--threads", v, 0, 1024, &n) != CLI_OK) return -CLI_USAGE;
    o->threads = (int32_t)n;
    return 1;
  }
  TRY(CLI_OPT_PARAMS, "--params") {
    if (m < 0) return -CLI_USAGE;
    o->params_dir = v;
    return 1;
  }
  TRY(CLI_OPT_BIND, "--bind") {
    if (m < 0) return -CLI_USAGE;
    int rc = cli_bindings_parse(cmd, &o->bindings, v);
    return rc == CLI_OK ? 1 : -rc;
  }
  TRY(CLI_OPT_INPUT, "--input") {
    if (m < 0) return -CLI_USAGE;
    int rc = cli_inputs_add(cmd, &o->inputs, v);
    return rc == CLI_OK ? 1 : -rc;
  }
#undef TRY
  return 0;
}

void cli_model_opts_help(FILE* f, unsigned accept) {
  if (accept & CLI_OPT_DEVICE)
    fprintf(f, "  --device NAME       cpu (default), cuda, vulkan, webgpu or best\n");
  if (accept & CLI_OPT_INPUT)
    fprintf(f,
            "  --input NAME=F.npy  data for graph input NAME (repeatable); its shape binds\n"
            "                      the input's symbolic dims. F may also be an ONNX\n"
            "                      TensorProto .pb file (as in the ONNX test data)\n");
  if (accept & CLI_OPT_SEED)
    fprintf(f,
            "  --seed N            seed of the random data for inputs not given (default 0):\n"
            "                      floats uniform in [-1, 1), integers in [0, 4), bools 0/1\n");
  if (accept & CLI_OPT_PARAMS)
    fprintf(f,
            "  --params DIR        load param NAME from DIR/NAME.npy ('/' in NAME -> '_').\n"
            "                      DIR must exist, and every .npy in it must name a param.\n"
            "                      An .onnx model brings its params (initializers); files\n"
            "                      in DIR replace them. Any other param without a value\n"
            "                      is an error, unless --random-params\n");
  if (accept & CLI_OPT_INIT)
    fprintf(f,
            "  --random-params     make up the params that have no value (one line on\n"
            "                      stderr says how many), deterministically from the\n"
            "                      param seed (--init-params, default 0) and each name:\n"
            "                      names ending in \"gamma\", \"weight_ln\"\n"
            "                      or \".g\" -> 1; ending in \"beta\", \"bias\" or \".b\" -> 0;\n"
            "                      anything else normal(0, 0.02)\n"
            "  --init-params SEED  --random-params with seed SEED (default 0)\n");
  if (accept & CLI_OPT_THREADS)
    fprintf(f, "  --threads N         CPU backend worker threads (default 0: one per core)\n");
  if (accept & CLI_OPT_BIND)
    fprintf(f, "  --bind SYM=N        bind symbolic dim SYM to N (repeatable)\n");
  if (accept & CLI_OPT_STRICT)
    fprintf(f, "  --strict            an op the device cannot run natively is an error\n"
               "                      (instead of a host fallback)\n"
               "  --tf32              GPU backends may use TF32 tensor cores for f32 matmul\n"
               "                      and convolution (default: exact f32)\n"
               "  --precision P       bf16 or f16: compute the graph's f32 values in P\n"
               "                      (inputs, params and outputs stay f32); f32: as\n"
               "                      the graph says (default)\n"
               "  --channels-last     run NCHW convolution networks channels-last (NHWC)\n"
               "                      inside; inputs and outputs keep their layout\n");
}

/* A --bind for a symbol the graph does not have is almost surely a typo. */
static int check_bound_symbols_exist(const char* cmd, const rlx_graph* g,
                                     const cli_bindings* b) {
  for (int32_t i = 0; i < b->n; i++) {
    int found = 0;
    for (int32_t s = 0; s < rlx_graph_symbol_count(g) && !found; s++) {
      const char* name = NULL;
      found = rlx_graph_symbol_name(g, -(rlx_dim)s - 1, &name) == RLX_OK &&
              strcmp(name, b->names[i]) == 0;
    }
    if (!found) {
      char names[512];
      cli_error(cmd, "--bind %s: the graph has no symbol '%s' (symbols: %s)", b->names[i],
                b->names[i], cli_graph_names(g, CLI_NAMES_SYMBOLS, names, sizeof names));
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

int cli_prepare(const char* cmd, cli_model_opts* o, int set_inputs, rlx_graph** out_graph,
                rlx_exec** out_exec) {
  *out_graph = NULL;
  *out_exec = NULL;
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  int rc = cli_load_graph(cmd, o->file, &g);
  if (rc != CLI_OK) return rc;
  if (check_bound_symbols_exist(cmd, g, &o->bindings) != CLI_OK ||
      cli_bind_from_inputs(cmd, g, &o->inputs, &o->bindings) != CLI_OK ||
      cli_compile(cmd, g, o, &e) != CLI_OK ||
      cli_set_params(cmd, g, e, o, cli_is_onnx(o->file) ? o->file : NULL, NULL, 0) != CLI_OK ||
      (set_inputs && cli_set_inputs(cmd, g, e, &o->bindings, &o->inputs, o->seed) != CLI_OK)) {
    rlx_exec_destroy(e);
    rlx_graph_destroy(g);
    return CLI_FAIL;
  }
  *out_graph = g;
  *out_exec = e;
  return CLI_OK;
}
