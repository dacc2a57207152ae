/* Fuzz target: the .npy reader must reject any malformed input with a
 * status, never crash or read past the buffer. */
#include <stdint.h>
#include <stdlib.h>

#include "io/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx_error err;
  rlx_dtype dtype;
  int32_t rank = 0;
  int64_t shape[RLX_MAX_RANK];
  void* out = NULL;
  size_t bytes = 0;
  if (rlx_npy_read_mem(data, size, &err, &dtype, &rank, shape, &out, &bytes) == RLX_OK) {
    /* Touch every byte so a wrong size shows up under ASan. */
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < bytes; i++) sink ^= ((const uint8_t*)out)[i];
    (void)sink;
    free(out);
  }
  return 0;
}
