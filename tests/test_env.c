/* The environment-switch registry (src/base/env.def, env.h): every row well
 * formed, and each kind reads values as documented in docs/ENV.md. */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "harness.h"

/* Names are RLX_ + upper case, unique; INT/SIZE/NUM defaults parse whole. */
TEST(table_well_formed) {
  CHECK(RLX_ENV_COUNT > 40);
  for (int i = 0; i < RLX_ENV_COUNT; i++) {
    const rlx_env_info* e = &rlx_env_table[i];
    CHECK_MSG(strncmp(e->name, "RLX_", 4) == 0 && strlen(e->name) > 4, "%s", e->name);
    for (const char* p = e->name; *p; p++)
      CHECK_MSG((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_', "%s", e->name);
    CHECK_MSG(e->meaning && strlen(e->meaning) > 10, "%s has no meaning", e->name);
    CHECK(strcmp(rlx_env_kind_name(e->kind), "?") != 0);
    CHECK(strcmp(rlx_env_class_name(e->cls), "?") != 0);
    if (e->kind == RLX_ENV_KIND_INT || e->kind == RLX_ENV_KIND_SIZE || e->kind == RLX_ENV_KIND_NUM) {
      char* end = NULL;
      strtod(e->dflt, &end);
      CHECK_MSG(e->dflt[0] == 0 || *end == 0, "%s default \"%s\"", e->name, e->dflt);
    }
    for (int j = 0; j < i; j++) CHECK_MSG(strcmp(e->name, rlx_env_table[j].name) != 0, "%s twice", e->name);
  }
  CHECK(strcmp(rlx_env_table[RLX_ENV_VK_VALIDATION.id].name, "RLX_VK_VALIDATION") == 0);
}

/* FLAG: set, non-empty, not "0"; FLAG1: exactly "1"; PRESENT: set at all. */
TEST(flag_kinds) {
  CHECK(rlx_env_table[RLX_ENV_WG_SAFE.id].kind == RLX_ENV_KIND_FLAG);
  CHECK(rlx_env_table[RLX_ENV_VK_VALIDATION.id].kind == RLX_ENV_KIND_FLAG1);
  CHECK(rlx_env_table[RLX_ENV_WG_PROFILE.id].kind == RLX_ENV_KIND_PRESENT);
  static const struct { const char* v; int flag, flag1, present; } cases[] = {
      {NULL, 0, 0, 0}, {"", 0, 0, 1}, {"0", 0, 0, 1}, {"1", 1, 1, 1}, {"yes", 1, 0, 1}, {"2", 1, 0, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char* names[3] = {"RLX_WG_SAFE", "RLX_VK_VALIDATION", "RLX_WG_PROFILE"};
    for (int k = 0; k < 3; k++) {
      if (cases[i].v) setenv(names[k], cases[i].v, 1);
      else unsetenv(names[k]);
    }
    CHECK_MSG(rlx_env_flag(RLX_ENV_WG_SAFE) == cases[i].flag, "flag \"%s\"", cases[i].v ? cases[i].v : "(unset)");
    CHECK_MSG(rlx_env_flag(RLX_ENV_VK_VALIDATION) == cases[i].flag1, "flag1 \"%s\"", cases[i].v ? cases[i].v : "(unset)");
    CHECK_MSG(rlx_env_flag(RLX_ENV_WG_PROFILE) == cases[i].present, "present \"%s\"", cases[i].v ? cases[i].v : "(unset)");
  }
  unsetenv("RLX_WG_SAFE");
  unsetenv("RLX_VK_VALIDATION");
  unsetenv("RLX_WG_PROFILE");
}

/* INT: decimal, the default when unset or empty; SIZE takes 0x hex. */
TEST(numbers) {
  unsetenv("RLX_VK_ROWS_MIN");
  CHECK(rlx_env_int(RLX_ENV_VK_ROWS_MIN) == 1024);
  setenv("RLX_VK_ROWS_MIN", "", 1);
  CHECK(rlx_env_int(RLX_ENV_VK_ROWS_MIN) == 1024);
  setenv("RLX_VK_ROWS_MIN", "4", 1);
  CHECK(rlx_env_int(RLX_ENV_VK_ROWS_MIN) == 4);
  setenv("RLX_VK_ROWS_MIN", "010", 1); /* decimal, as atoi read it */
  CHECK(rlx_env_int(RLX_ENV_VK_ROWS_MIN) == 10);
  unsetenv("RLX_VK_ROWS_MIN");
  unsetenv("RLX_CUDA_STREAMS");
  CHECK(rlx_env_int(RLX_ENV_CUDA_STREAMS) == 1);
  unsetenv("RLX_VK_MAX_BINDING");
  CHECK(rlx_env_size(RLX_ENV_VK_MAX_BINDING) == 0);
  setenv("RLX_VK_MAX_BINDING", "0x10000", 1);
  CHECK(rlx_env_size(RLX_ENV_VK_MAX_BINDING) == 65536);
  setenv("RLX_VK_MAX_BINDING", "65536", 1);
  CHECK(rlx_env_size(RLX_ENV_VK_MAX_BINDING) == 65536);
  unsetenv("RLX_VK_MAX_BINDING");
  setenv("RLX_BENCH_WARMUP_MS", "2.5", 1);
  CHECK(rlx_env_num(RLX_ENV_BENCH_WARMUP_MS) == 2.5);
  unsetenv("RLX_BENCH_WARMUP_MS");
  CHECK(rlx_env_num(RLX_ENV_BENCH_WARMUP_MS) == 0.0);
}

/* STR is the raw value; LIST matches whole comma-separated items only. */
TEST(strings_and_lists) {
  unsetenv("RLX_VK_COOPMAT");
  CHECK(rlx_env_str(RLX_ENV_VK_COOPMAT) == NULL);
  CHECK(!rlx_env_is(RLX_ENV_VK_COOPMAT, "0"));
  setenv("RLX_VK_COOPMAT", "nv", 1);
  CHECK(rlx_env_is(RLX_ENV_VK_COOPMAT, "nv") && !rlx_env_is(RLX_ENV_VK_COOPMAT, "0"));
  CHECK(strcmp(rlx_env_str(RLX_ENV_VK_COOPMAT), "nv") == 0);
  unsetenv("RLX_VK_COOPMAT");
  setenv("RLX_VK_HOST_OPS", "softmax,matmul", 1);
  CHECK(rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "softmax"));
  CHECK(rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "matmul"));
  CHECK(!rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "max"));
  CHECK(!rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "soft"));
  CHECK(!rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "log_softmax"));
  setenv("RLX_VK_HOST_OPS", "log_softmax", 1);
  CHECK(!rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "softmax"));
  CHECK(rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "log_softmax"));
  unsetenv("RLX_VK_HOST_OPS");
  CHECK(!rlx_env_list_has(RLX_ENV_VK_HOST_OPS, "softmax"));
}

int main(void) {
  RUN(table_well_formed);
  RUN(flag_kinds);
  RUN(numbers);
  RUN(strings_and_lists);
  return test_summary();
}
