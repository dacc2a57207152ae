/* Fuzz target: config.json parsing into rlx_llm_config must refuse any
 * malformed or out-of-range config with a status, and what it accepts must
 * pass the builders' range checks (so a graph can be built from it). */
#include <stdint.h>
#include <stdlib.h>

#include "llm/llm.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx_llm_config c;
  char* why = NULL;
  rlx_status s = rlx_llm_config_parse((const char*)data, size, &c, &why);
  if ((s == RLX_OK) != (why == NULL)) abort(); /* a failure always says why */
  rlx_free(why);
  rlx_error err;
  if (s == RLX_OK && rlx_llm_config_check(&c, &err) != RLX_OK) abort();
  return 0;
}
