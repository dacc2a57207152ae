/* Fuzz target: the safetensors header parser and its checks must refuse any
 * malformed file with a status, never crash or read outside the buffer. */
#include <stdint.h>
#include <stdlib.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx_safetensors* st = NULL;
  rlx_error err;
  if (rlx_safetensors_open_mem(data, size, "<fuzz>", &st, &err) != RLX_OK) return 0;
  /* Touch every byte of every tensor and look each one up by name, so a
   * wrong range or index shows up under ASan. */
  volatile uint8_t sink = 0;
  for (int32_t i = 0; i < rlx_safetensors_count(st); i++) {
    rlx_safetensors_tensor t, found;
    if (rlx_safetensors_get(st, i, &t) != RLX_OK) abort();
    for (uint64_t b = 0; b < t.bytes; b++) sink ^= ((const uint8_t*)t.data)[b];
    if (rlx_safetensors_find(st, t.name, &found) != RLX_OK || found.data != t.data) abort();
  }
  for (int32_t i = 0; i < rlx_safetensors_metadata_count(st); i++) {
    const char *k, *v;
    if (rlx_safetensors_metadata(st, i, &k, &v) != RLX_OK) abort();
    sink ^= (uint8_t)(k[0] ^ v[0]);
  }
  (void)sink;
  rlx_safetensors_close(st);
  return 0;
}
