/* Fuzz target: the GGUF reader must refuse any malformed input with a
 * status, never crash or read outside the buffer; on success every
 * accessor is walked so a table that points outside shows up under ASan. */
#include <stdint.h>
#include <stdlib.h>

#include "io/gguf.h"

static volatile uint64_t sink;

static void touch_bytes(const void* p, uint64_t n) {
  const uint8_t* b = p;
  for (uint64_t i = 0; i < n; i++) sink ^= b[i];
}

static void walk_array(rlx_gguf* g, int64_t i) {
  rlx_gguf_type et;
  uint64_t len;
  if (rlx_gguf_array_info(g, i, &et, &len) != RLX_OK) return;
  for (uint64_t j = 0; j < len && j < 4096; j++) {
    rlx_gguf_string s;
    uint64_t u;
    double d;
    if (rlx_gguf_array_string(g, i, j, &s) == RLX_OK) touch_bytes(s.data, s.len);
    if (rlx_gguf_array_u64(g, i, j, &u) == RLX_OK) sink ^= u;
    if (rlx_gguf_array_f64(g, i, j, &d) == RLX_OK) sink ^= (uint64_t)(d != 0);
  }
}

static void walk(rlx_gguf* g) {
  for (int64_t i = 0; i < rlx_gguf_kv_count(g); i++) {
    const char* key;
    rlx_gguf_string s;
    int64_t v;
    if (rlx_gguf_key(g, i, &key) == RLX_OK) sink ^= (uint64_t)rlx_gguf_find_key(g, key);
    if (rlx_gguf_get_string(g, i, &s) == RLX_OK) touch_bytes(s.data, s.len);
    if (rlx_gguf_get_i64(g, i, &v) == RLX_OK) sink ^= (uint64_t)v;
    walk_array(g, i);
  }
  for (int64_t i = 0; i < rlx_gguf_tensor_count(g); i++) {
    rlx_gguf_tensor_info t;
    if (rlx_gguf_tensor(g, i, &t) != RLX_OK) continue;
    touch_bytes(t.data, t.bytes);
    sink ^= (uint64_t)rlx_gguf_find_tensor(g, t.name);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx_gguf* g = NULL;
  rlx_error err;
  if (rlx_gguf_open_memory(data, size, "fuzz", &g, &err) == RLX_OK) {
    walk(g);
    rlx_gguf_close(g);
  }
  return 0;
}
