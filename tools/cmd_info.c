/* rlx info: what a graph takes and gives, what ops it holds, and how each
 * backend would run those ops (from the backends' static support rules, so
 * no device is started and a GPU backend answers even on a machine without
 * the GPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_common.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx info FILE [--json]\n"
          "\n"
          "Describes FILE (rlx text graph or .onnx model) without running it:\n"
          "  inputs, params, outputs  name, dtype and shape (symbolic dims by name);\n"
          "                           params also their number of values\n"
          "  symbols                  the symbolic dims (bind them with --bind SYM=N)\n"
          "  ops                      node count per op kind, and for every device how\n"
          "                           its backend runs that op: native (a device\n"
          "                           kernel), decomposed (rewritten into other ops\n"
          "                           that run natively), decomposed+host (rewritten,\n"
          "                           and some of the new ops need the host), host (the\n"
          "                           CPU fallback inside that backend), view\n"
          "                           (no kernel needed), or \"not built\" (backend left\n"
          "                           out of this build). The answer is the backend's\n"
          "                           static rule, the one compile applies: it holds on\n"
          "                           machines without that device (see `rlx devices`\n"
          "                           for what can run here). A mixed answer counts\n"
          "                           nodes, e.g. \"3 native, 1 host\".\n"
          "\n"
          "A .safetensors file, a model.safetensors.index.json or a folder of\n"
          "safetensors shards prints its tensor table instead (name, dtype, shape,\n"
          "bytes, shard) and its __metadata__; a folder's config.json is\n"
          "summarised first when it describes a supported LLM.\n"
          "A GGUF file (.gguf, or any file starting with the GGUF magic) is listed\n"
          "instead: its version, alignment, every metadata key with its type and\n"
          "value (long arrays and strings shortened), and the tensor table (name,\n"
          "ggml type, dims in the file's order, bytes, data offset).\n"
          "\n"
          "options:\n"
          "  --json              one JSON object instead of the table (not for GGUF)\n");
}

static const char* const k_devices[] = {"cpu", "cuda", "vulkan", "webgpu"};
enum { N_DEVICES = sizeof k_devices / sizeof k_devices[0], MAX_KINDS = 256 };

/* The op table of every device: ops[d][k]; built[d] = 0 when not built. */
typedef struct op_tables {
  int32_t n_kinds;
  rlx_op_support plain[MAX_KINDS]; /* kinds and node counts */
  rlx_op_support dev[N_DEVICES][MAX_KINDS];
  int built[N_DEVICES];
} op_tables;

static int query_ops(const char* cmd, const rlx_graph* g, op_tables* t) {
  if (rlx_graph_op_support(g, NULL, t->plain, MAX_KINDS, &t->n_kinds) != RLX_OK) {
    cli_error(cmd, "op kinds: %s", rlx_graph_last_error(g));
    return CLI_FAIL;
  }
  if (t->n_kinds > MAX_KINDS) t->n_kinds = MAX_KINDS;
  for (int d = 0; d < N_DEVICES; d++) {
    int32_t n = 0;
    rlx_status s = rlx_graph_op_support(g, k_devices[d], t->dev[d], MAX_KINDS, &n);
    t->built[d] = s == RLX_OK;
    if (s != RLX_OK && s != RLX_UNIMPLEMENTED) {
      cli_error(cmd, "%s: %s", k_devices[d], rlx_graph_last_error(g));
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

/* "native", "host", ... when all nodes agree, else "2 native, 1 host". */
static const char* support_text(const rlx_op_support* s, char* buf, size_t cap) {
  enum { KINDS = 5 };
  const int32_t counts[KINDS] = {s->native, s->decomposed - s->decomposed_host,
                                 s->decomposed_host, s->host, s->views};
  static const char* const names[KINDS] = {"native", "decomposed", "decomposed+host", "host",
                                           "view"};
  int kinds = 0;
  for (int k = 0; k < KINDS; k++) kinds += counts[k] > 0;
  size_t at = 0;
  buf[0] = '\0';
  for (int k = 0; k < KINDS; k++) {
    if (!counts[k]) continue;
    int w = kinds == 1 ? snprintf(buf + at, cap - at, "%s", names[k])
                       : snprintf(buf + at, cap - at, "%s%d %s", at ? ", " : "",
                                  (int)counts[k], names[k]);
    if (w > 0 && (size_t)w < cap - at) at += (size_t)w;
  }
  if (!kinds) snprintf(buf, cap, "built at run time"); /* deferred: see rlx_graph_op_support */
  return buf;
}

/* Values in a tensor of that type, or -1 when a dim is symbolic. */
static int64_t static_numel(const rlx_value_info* v) {
  int64_t n = 1;
  for (int32_t d = 0; d < v->rank; d++) {
    if (v->shape[d] < 0) return -1;
    n *= v->shape[d];
  }
  return n;
}

typedef rlx_status (*get_fn)(const rlx_graph*, int32_t, rlx_value_info*);

/* ------------------------------------------------------------ table */

static void print_values(const char* title, const rlx_graph* g, int32_t n, get_fn get,
                         int is_param) {
  printf("%s (%d):\n", title, (int)n);
  int64_t total = 0;
  int symbolic = 0;
  for (int32_t i = 0; i < n; i++) {
    rlx_value_info v;
    if (get(g, i, &v) != RLX_OK) continue;
    char type[256], label[32];
    const char* name = v.name ? v.name : (snprintf(label, sizeof label, "out%d", (int)i), label);
    printf("  %-24s %s", name, cli_format_type(&v, type, sizeof type));
    int64_t numel = static_numel(&v);
    if (is_param && numel >= 0) printf("  (%lld values)", (long long)numel);
    putchar('\n');
    if (numel >= 0) total += numel;
    else symbolic = 1;
  }
  if (is_param && n)
    printf("  total %lld values%s\n", (long long)total, symbolic ? " (+ symbolic-sized)" : "");
}

static void print_symbols(const rlx_graph* g) {
  char names[1024];
  printf("symbols: %s\n", cli_graph_names(g, CLI_NAMES_SYMBOLS, names, sizeof names));
}

static void print_ops_table(const op_tables* t) {
  int32_t total = 0;
  for (int32_t k = 0; k < t->n_kinds; k++) total += t->plain[k].nodes;
  printf("ops (%d nodes, %d kinds; per device: how its backend runs them):\n", (int)total,
         (int)t->n_kinds);
  printf("  %-22s %5s", "op", "count");
  for (int d = 0; d < N_DEVICES; d++)
    printf(d + 1 < N_DEVICES ? "  %-16s" : "  %s", k_devices[d]);
  putchar('\n');
  for (int32_t k = 0; k < t->n_kinds; k++) {
    printf("  %-22s %5d", t->plain[k].op, (int)t->plain[k].nodes);
    for (int d = 0; d < N_DEVICES; d++) {
      char buf[96];
      const char* what = t->built[d] ? support_text(&t->dev[d][k], buf, sizeof buf) : "not built";
      printf(d + 1 < N_DEVICES ? "  %-16s" : "  %s", what);
    }
    putchar('\n');
  }
}

static void print_table(const char* file, const rlx_graph* g, const op_tables* t) {
  printf("graph: %s\n", file);
  print_values("inputs", g, rlx_graph_input_count(g), rlx_graph_get_input, 0);
  print_values("params", g, rlx_graph_param_count(g), rlx_graph_get_param, 1);
  print_values("outputs", g, rlx_graph_output_count(g), rlx_graph_get_output, 0);
  print_symbols(g);
  print_ops_table(t);
}

/* ------------------------------------------------------------ JSON */

static void json_value(const rlx_value_info* v, int32_t i) {
  char label[32];
  snprintf(label, sizeof label, "out%d", (int)i);
  printf("{\"name\": ");
  cli_print_json_string(v->name ? v->name : label);
  printf(", \"dtype\": \"%s\", \"shape\": [", rlx_dtype_name(v->dtype));
  for (int32_t d = 0; d < v->rank; d++) {
    if (d) printf(", ");
    if (v->shape[d] >= 0) printf("%lld", (long long)v->shape[d]);
    else cli_print_json_string(v->dim_names[d] ? v->dim_names[d] : "?");
  }
  int64_t numel = static_numel(v);
  if (numel >= 0) printf("], \"values\": %lld}", (long long)numel);
  else printf("], \"values\": null}");
}

static void json_values(const char* key, const rlx_graph* g, int32_t n, get_fn get) {
  printf(",\n  \"%s\": [", key);
  for (int32_t i = 0; i < n; i++) {
    rlx_value_info v;
    if (get(g, i, &v) != RLX_OK) continue;
    printf("%s\n    ", i ? "," : "");
    json_value(&v, i);
  }
  printf("%s]", n ? "\n  " : "");
}

static void json_ops(const op_tables* t) {
  printf(",\n  \"ops\": [");
  for (int32_t k = 0; k < t->n_kinds; k++) {
    printf("%s\n    {\"op\": ", k ? "," : "");
    cli_print_json_string(t->plain[k].op);
    printf(", \"count\": %d, \"devices\": {", (int)t->plain[k].nodes);
    for (int d = 0; d < N_DEVICES; d++) {
      const rlx_op_support* s = &t->dev[d][k];
      printf("%s\"%s\": ", d ? ", " : "", k_devices[d]);
      if (!t->built[d]) printf("\"not built\"");
      else
        printf("{\"native\": %d, \"decomposed\": %d, \"decomposed_host\": %d, \"host\": %d, "
               "\"view\": %d}",
               (int)s->native, (int)s->decomposed, (int)s->decomposed_host, (int)s->host,
               (int)s->views);
    }
    printf("}}");
  }
  printf("%s]", t->n_kinds ? "\n  " : "");
}

static void print_json(const char* file, const rlx_graph* g, const op_tables* t) {
  printf("{\"file\": ");
  cli_print_json_string(file);
  json_values("inputs", g, rlx_graph_input_count(g), rlx_graph_get_input);
  json_values("params", g, rlx_graph_param_count(g), rlx_graph_get_param);
  json_values("outputs", g, rlx_graph_output_count(g), rlx_graph_get_output);
  printf(",\n  \"symbols\": [");
  for (int32_t i = 0; i < rlx_graph_symbol_count(g); i++) {
    const char* name = NULL;
    if (rlx_graph_symbol_name(g, -(rlx_dim)i - 1, &name) != RLX_OK) name = "?";
    printf("%s", i ? ", " : "");
    cli_print_json_string(name);
  }
  printf("]");
  json_ops(t);
  printf("\n}\n");
}

/* ------------------------------------------------------------ safetensors */

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A safetensors file, index, or a folder (rlx_safetensors_open decides
 * what the folder holds and names the problem when it holds none). */
static int is_safetensors_path(const char* file) {
  struct stat sb;
  return ends_with(file, ".safetensors") || ends_with(file, ".index.json") ||
         (stat(file, &sb) == 0 && S_ISDIR(sb.st_mode));
}

static void shape_text(const rlx_safetensors_tensor* t, char* buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "[");
  for (int32_t d = 0; d < t->rank && at < cap; d++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  if (at < cap) snprintf(buf + at, cap - at, "]");
}

static void safetensors_table(const char* file, const rlx_safetensors* st) {
  int32_t n = rlx_safetensors_count(st), shards = rlx_safetensors_shard_count(st);
  uint64_t total = 0;
  printf("%s: %d tensors in %d file%s\n", file, (int)n, (int)shards, shards == 1 ? "" : "s");
  printf("  %-48s %-9s %-22s %12s %s\n", "name", "dtype", "shape", "bytes", "shard");
  for (int32_t i = 0; i < n; i++) {
    rlx_safetensors_tensor t;
    if (rlx_safetensors_get(st, i, &t) != RLX_OK) continue;
    char shape[160];
    shape_text(&t, shape, sizeof shape);
    printf("  %-48s %-9s %-22s %12llu %d\n", t.name, rlx_dtype_name(t.dtype), shape,
           (unsigned long long)t.bytes, (int)t.shard);
    total += t.bytes;
  }
  printf("  total %llu bytes\n", (unsigned long long)total);
  for (int32_t i = 0; i < shards; i++) printf("  shard %d: %s\n", (int)i,
                                             rlx_safetensors_shard_path(st, i));
  for (int32_t i = 0; i < rlx_safetensors_metadata_count(st); i++) {
    const char *k, *v;
    if (rlx_safetensors_metadata(st, i, &k, &v) == RLX_OK) printf("  metadata %s = %s\n", k, v);
  }
}

static void safetensors_json(const char* file, const rlx_safetensors* st) {
  printf("{\"file\": ");
  cli_print_json_string(file);
  printf(",\n  \"tensors\": [");
  for (int32_t i = 0; i < rlx_safetensors_count(st); i++) {
    rlx_safetensors_tensor t;
    if (rlx_safetensors_get(st, i, &t) != RLX_OK) continue;
    char shape[160];
    shape_text(&t, shape, sizeof shape);
    printf("%s\n    {\"name\": ", i ? "," : "");
    cli_print_json_string(t.name);
    printf(", \"dtype\": \"%s\", \"shape\": %s, \"bytes\": %llu, \"shard\": %d}",
           rlx_dtype_name(t.dtype), shape, (unsigned long long)t.bytes, (int)t.shard);
  }
  printf("\n  ],\n  \"metadata\": {");
  for (int32_t i = 0; i < rlx_safetensors_metadata_count(st); i++) {
    const char *k, *v;
    if (rlx_safetensors_metadata(st, i, &k, &v) != RLX_OK) continue;
    printf("%s", i ? ", " : "");
    cli_print_json_string(k);
    printf(": ");
    cli_print_json_string(v);
  }
  printf("}\n}\n");
}

/* The one-paragraph summary of an LLM config, after label. */
static void print_config_line(const char* label, const rlx_llm_config* c) {
  static const char* const archs[] = {"llama", "qwen2", "qwen3", "mistral", "gpt2", "gemma2"};
  static const char* const scalings[] = {"none", "linear", "llama3"};
  const char* arch = (unsigned)c->arch < sizeof archs / sizeof archs[0] ? archs[c->arch] : "?";
  printf("%s: %s, vocab %lld, hidden %lld, mlp %lld, %d layers, %d heads (%d kv) of %d,\n"
         "  rope theta %g scaling %s, rms eps %g%s%s%s, sliding window %d, max positions %lld\n",
         label, arch, (long long)c->vocab_size, (long long)c->hidden_size,
         (long long)c->intermediate_size, (int)c->num_layers, (int)c->num_heads,
         (int)c->num_kv_heads, (int)c->head_dim, c->rope_theta, scalings[c->rope_scaling],
         (double)c->rms_norm_eps, c->tie_word_embeddings ? ", tied embeddings" : "",
         c->attention_bias ? ", qkv bias" : "", c->qk_norm ? ", q/k norm" : "",
         (int)c->sliding_window, (long long)c->max_positions);
  if (c->arch == RLX_LLM_GEMMA2)
    printf("  softcaps attn %g final %g, query_pre_attn_scalar %g, window pattern %d, "
           "embed scale %g\n",
           (double)c->attn_logit_softcap, (double)c->final_logit_softcap,
           (double)c->query_pre_attn_scalar, (int)c->sliding_window_pattern,
           (double)c->embed_scale);
}

/* A model folder's config.json, when it has one (table mode only). */
static void print_llm_config(const char* file) {
  rlx_llm_config c;
  char* why = NULL;
  struct stat sb;
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", file);
  if (stat(file, &sb) != 0 || !S_ISDIR(sb.st_mode) || stat(path, &sb) != 0) return;
  if (rlx_llm_config_load(file, &c, &why) != RLX_OK) {
    printf("config.json: not a supported LLM config: %s\n", why ? why : "?");
    rlx_free(why);
    return;
  }
  print_config_line("config.json", &c);
}

/* The LLM config rlx_llm_load derives from a GGUF file, or why it cannot
 * load it as an LLM (a tokenizer-only file, another architecture). */
static void print_gguf_llm(const char* file) {
  rlx_llm* m = NULL;
  char* why = NULL;
  if (rlx_llm_load(file, NULL, &m, &why) != RLX_OK) {
    printf("\nllm: not loadable as an LLM: %s\n", why ? why : "?");
    rlx_free(why);
    return;
  }
  printf("\n");
  print_config_line("llm", rlx_llm_get_config(m));
  rlx_llm_destroy(m);
}

static int info_safetensors(const char* cmd, const char* file, int json) {
  rlx_safetensors* st = NULL;
  char* why = NULL;
  if (rlx_safetensors_open(file, &st, &why) != RLX_OK) {
    cli_error(cmd, "%s", why ? why : "cannot open");
    rlx_free(why);
    return CLI_FAIL;
  }
  if (json) {
    safetensors_json(file, st);
  } else {
    print_llm_config(file);
    safetensors_table(file, st);
  }
  rlx_safetensors_close(st);
  return CLI_OK;
}

/* ------------------------------------------------------------ GGUF files */

static int is_gguf(const char* file) {
  FILE* f = fopen(file, "rb");
  char magic[4] = {0};
  int yes = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
  if (f) fclose(f);
  return yes;
}

/* A string value, quoted, control bytes escaped, cut after max bytes. */
static void print_gguf_string(rlx_gguf_string s, uint64_t max) {
  putchar('"');
  for (uint64_t i = 0; i < s.len && i < max; i++) {
    unsigned char c = (unsigned char)s.data[i];
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
    else putchar(c);
  }
  printf(s.len > max ? "\"..." : "\"");
}

/* One value: element j of an array (is_array) or the scalar of key i. */
static void print_gguf_value(rlx_gguf* g, int64_t i, rlx_gguf_type t, int is_array, uint64_t j) {
  rlx_gguf_string s;
  uint64_t u;
  int64_t v;
  double d;
  int32_t b;
  rlx_status st = RLX_OK;
  if (t == RLX_GGUF_STRING) {
    st = is_array ? rlx_gguf_array_string(g, i, j, &s) : rlx_gguf_get_string(g, i, &s);
    if (st == RLX_OK) print_gguf_string(s, is_array ? 24 : 72);
  } else if (t == RLX_GGUF_BOOL) {
    st = is_array ? rlx_gguf_array_bool(g, i, j, &b) : rlx_gguf_get_bool(g, i, &b);
    if (st == RLX_OK) printf("%s", b ? "true" : "false");
  } else if (t == RLX_GGUF_F32 || t == RLX_GGUF_F64) {
    st = is_array ? rlx_gguf_array_f64(g, i, j, &d) : rlx_gguf_get_f64(g, i, &d);
    if (st == RLX_OK) printf("%.9g", d);
  } else if (t == RLX_GGUF_U8 || t == RLX_GGUF_U16 || t == RLX_GGUF_U32 || t == RLX_GGUF_U64) {
    st = is_array ? rlx_gguf_array_u64(g, i, j, &u) : rlx_gguf_get_u64(g, i, &u);
    if (st == RLX_OK) printf("%llu", (unsigned long long)u);
  } else {
    st = is_array ? rlx_gguf_array_i64(g, i, j, &v) : rlx_gguf_get_i64(g, i, &v);
    if (st == RLX_OK) printf("%lld", (long long)v);
  }
  if (st != RLX_OK) printf("?");
}

static void print_gguf_kv(rlx_gguf* g, int64_t i) {
  const char* key = "?";
  rlx_gguf_type t = RLX_GGUF_U8;
  (void)rlx_gguf_key(g, i, &key);
  (void)rlx_gguf_kv_type(g, i, &t);
  if (t != RLX_GGUF_ARRAY) {
    printf("  %-40s %-14s ", key, rlx_gguf_type_name(t));
    print_gguf_value(g, i, t, 0, 0);
    putchar('\n');
    return;
  }
  rlx_gguf_type et = RLX_GGUF_U8;
  uint64_t len = 0;
  (void)rlx_gguf_array_info(g, i, &et, &len);
  char type[48];
  snprintf(type, sizeof type, "%s[%llu]", rlx_gguf_type_name(et), (unsigned long long)len);
  printf("  %-40s %-14s [", key, type);
  for (uint64_t j = 0; j < len && j < 8; j++) {
    printf("%s", j ? ", " : "");
    print_gguf_value(g, i, et, 1, j);
  }
  printf("%s]\n", len > 8 ? ", ..." : "");
}

static void print_gguf_tensor(rlx_gguf* g, int64_t i) {
  rlx_gguf_tensor_info t;
  if (rlx_gguf_tensor(g, i, &t) != RLX_OK) return;
  char dims[160] = "";
  size_t at = 0;
  for (int32_t d = 0; d < t.n_dims && at < sizeof dims; d++)
    at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%lld", d ? " x " : "",
                           (long long)t.dims[d]);
  printf("  %-40s %-8s %-24s %14llu %14llu\n", t.name, t.type_name, dims,
         (unsigned long long)t.bytes, (unsigned long long)t.offset);
}

static int info_gguf(const char* cmd, const char* file, int json) {
  if (json) {
    cli_error(cmd, "--json is not available for GGUF files");
    return CLI_USAGE;
  }
  rlx_gguf* g = NULL;
  char* msg = NULL;
  if (rlx_gguf_open(file, &g, &msg) != RLX_OK) {
    cli_error(cmd, "%s", msg ? msg : "cannot open the GGUF file");
    rlx_free(msg);
    return CLI_FAIL;
  }
  printf("%s: GGUF version %u, alignment %u, %lld metadata keys, %lld tensors\n\nmetadata:\n",
         file, rlx_gguf_version(g), rlx_gguf_alignment(g), (long long)rlx_gguf_kv_count(g),
         (long long)rlx_gguf_tensor_count(g));
  for (int64_t i = 0; i < rlx_gguf_kv_count(g); i++) print_gguf_kv(g, i);
  printf("\ntensors (dims in file order, fastest first):\n  %-40s %-8s %-24s %14s %14s\n",
         "name", "type", "dims", "bytes", "offset");
  for (int64_t i = 0; i < rlx_gguf_tensor_count(g); i++) print_gguf_tensor(g, i);
  rlx_gguf_close(g);
  print_gguf_llm(file);
  return CLI_OK;
}

/* ------------------------------------------------------------ command */

int cmd_info(int argc, char** argv) {
  const char* cmd = "info";
  const char* file = NULL;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      usage(stdout);
      return CLI_OK;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx info --help)", argv[i]);
      return CLI_USAGE;
    } else if (file) {
      cli_error(cmd, "more than one FILE ('%s' and '%s')", file, argv[i]);
      return CLI_USAGE;
    } else {
      file = argv[i];
    }
  }
  if (!file) {
    cli_error(cmd, "missing FILE");
    usage(stderr);
    return CLI_USAGE;
  }
  if (is_safetensors_path(file)) return info_safetensors(cmd, file, json);
  if (is_gguf(file)) return info_gguf(cmd, file, json);
  rlx_graph* g = NULL;
  int rc = cli_load_graph(cmd, file, &g);
  op_tables* t = rc == CLI_OK ? calloc(1, sizeof *t) : NULL;
  if (rc == CLI_OK && !t) {
    cli_error(cmd, "out of memory");
    rc = CLI_FAIL;
  }
  if (rc == CLI_OK) rc = query_ops(cmd, g, t);
  if (rc == CLI_OK && json) print_json(file, g, t);
  else if (rc == CLI_OK) print_table(file, g, t);
  free(t);
  rlx_graph_destroy(g);
  return rc;
}
