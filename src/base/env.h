/* Environment switches: typed reads of the variables listed in env.def.
 *
 * Each switch has a key RLX_ENV_<NAME> whose type follows its kind, so
 *   if (rlx_env_flag(RLX_ENV_VK_VALIDATION)) ...
 *   int64_t n = rlx_env_int(RLX_ENV_CUDA_STREAMS);
 * compile, while a switch that is not in env.def, or an INT read as a flag,
 * does not. Values are read from the environment at every call (tests change
 * them between runs with setenv); nothing is cached. */
#ifndef RLX_BASE_ENV_H
#define RLX_BASE_ENV_H

#include <stdint.h>

typedef enum rlx_env_id {
#define ENV(name, kind, cls, dflt, meaning) RLX_ENV_ID_##name,
#include "base/env.def"
#undef ENV
  RLX_ENV_COUNT
} rlx_env_id;

typedef enum rlx_env_kind {
  RLX_ENV_KIND_FLAG,
  RLX_ENV_KIND_FLAG1,
  RLX_ENV_KIND_PRESENT,
  RLX_ENV_KIND_INT,
  RLX_ENV_KIND_SIZE,
  RLX_ENV_KIND_NUM,
  RLX_ENV_KIND_STR,
  RLX_ENV_KIND_LIST
} rlx_env_kind;

typedef enum rlx_env_class {
  RLX_ENV_CLASS_USER,
  RLX_ENV_CLASS_DIAG,
  RLX_ENV_CLASS_TEST,
  RLX_ENV_CLASS_HARNESS
} rlx_env_class;

/* One key type per accessor: the three flag kinds share one (the kind in
 * the table says how the value reads). */
typedef struct rlx_env_flag_key { rlx_env_id id; } rlx_env_flag_key;
typedef struct rlx_env_int_key { rlx_env_id id; } rlx_env_int_key;
typedef struct rlx_env_size_key { rlx_env_id id; } rlx_env_size_key;
typedef struct rlx_env_num_key { rlx_env_id id; } rlx_env_num_key;
typedef struct rlx_env_str_key { rlx_env_id id; } rlx_env_str_key;
typedef struct rlx_env_list_key { rlx_env_id id; } rlx_env_list_key;

#define RLX_ENV_KEY_FLAG rlx_env_flag_key
#define RLX_ENV_KEY_FLAG1 rlx_env_flag_key
#define RLX_ENV_KEY_PRESENT rlx_env_flag_key
#define RLX_ENV_KEY_INT rlx_env_int_key
#define RLX_ENV_KEY_SIZE rlx_env_size_key
#define RLX_ENV_KEY_NUM rlx_env_num_key
#define RLX_ENV_KEY_STR rlx_env_str_key
#define RLX_ENV_KEY_LIST rlx_env_list_key

/* The keys: constants in every file that includes this header (unused ones
 * cost nothing and draw no warning from a header). */
#define ENV(name, kind, cls, dflt, meaning) \
  static const RLX_ENV_KEY_##kind RLX_ENV_##name = {RLX_ENV_ID_##name};
#include "base/env.def"
#undef ENV

/* A row of the registry, for listings and the documentation check. */
typedef struct rlx_env_info {
  const char* name; /* the variable, "RLX_..." */
  rlx_env_kind kind;
  rlx_env_class cls;
  const char* dflt;
  const char* meaning;
} rlx_env_info;

extern const rlx_env_info rlx_env_table[RLX_ENV_COUNT];
const char* rlx_env_kind_name(rlx_env_kind k);
const char* rlx_env_class_name(rlx_env_class c);

/* FLAG: set, non-empty, not "0"; FLAG1: exactly "1"; PRESENT: set at all. */
int rlx_env_flag(rlx_env_flag_key key);
/* Decimal integer; the registry's default when unset or empty. */
int64_t rlx_env_int(rlx_env_int_key key);
/* Byte count (decimal or 0x hex); the default when unset or empty. */
uint64_t rlx_env_size(rlx_env_size_key key);
/* Decimal number; the default when unset or empty. */
double rlx_env_num(rlx_env_num_key key);
/* The raw value, NULL when unset. */
const char* rlx_env_str(rlx_env_str_key key);
/* Set and equal to value. */
int rlx_env_is(rlx_env_str_key key, const char* value);
/* The comma-separated list names `name` as one of its items. */
int rlx_env_list_has(rlx_env_list_key key, const char* name);

#endif
