/* The environment-switch registry (env.def) and its typed readers: the one
 * place in src/ that calls getenv (tests/env_doc_check.sh enforces it). */
#include "base/env.h"

#include <stdlib.h>
#include <string.h>

const rlx_env_info rlx_env_table[RLX_ENV_COUNT] = {
#define ENV(name, kind, cls, dflt, meaning) \
  {"RLX_" #name, RLX_ENV_KIND_##kind, RLX_ENV_CLASS_##cls, dflt, meaning},
#include "base/env.def"
#undef ENV
};

const char* rlx_env_kind_name(rlx_env_kind k) {
  static const char* const names[] = {"flag", "flag1", "present", "int",
                                      "size", "num",   "str",     "list"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

const char* rlx_env_class_name(rlx_env_class c) {
  static const char* const names[] = {"user", "diag", "test", "harness"};
  return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

static const char* raw(rlx_env_id id) { return getenv(rlx_env_table[id].name); }

/* The value if set and non-empty, else the registry's default. */
static const char* value_or_default(rlx_env_id id) {
  const char* v = raw(id);
  return v && v[0] ? v : rlx_env_table[id].dflt;
}

int rlx_env_flag(rlx_env_flag_key key) {
  const char* v = raw(key.id);
  switch (rlx_env_table[key.id].kind) {
    case RLX_ENV_KIND_FLAG1: return v && strcmp(v, "1") == 0;
    case RLX_ENV_KIND_PRESENT: return v != NULL;
    default: return v && v[0] && strcmp(v, "0") != 0;
  }
}

int64_t rlx_env_int(rlx_env_int_key key) {
  return strtoll(value_or_default(key.id), NULL, 10);
}

uint64_t rlx_env_size(rlx_env_size_key key) {
  return strtoull(value_or_default(key.id), NULL, 0);
}

double rlx_env_num(rlx_env_num_key key) { return strtod(value_or_default(key.id), NULL); }

const char* rlx_env_str(rlx_env_str_key key) { return raw(key.id); }

int rlx_env_is(rlx_env_str_key key, const char* value) {
  const char* v = raw(key.id);
  return v && strcmp(v, value) == 0;
}

int rlx_env_list_has(rlx_env_list_key key, const char* name) {
  const char* list = raw(key.id);
  size_t n = strlen(name);
  if (!list || !list[0] || n == 0) return 0;
  for (const char* p = list; (p = strstr(p, name)) != NULL; p += n) {
    int starts = p == list || p[-1] == ',';
    int ends = p[n] == '\0' || p[n] == ',';
    if (starts && ends) return 1;
  }
  return 0;
}
