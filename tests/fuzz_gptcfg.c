/* Fuzz target: the built-in GPT's checkpoint config (`rlx generate DIR`
 * reads DIR/gpt.cfg, a file a user names) must be refused with a message
 * when malformed, never crash or read past the text; an accepted config
 * passes gpt_config_check, so the model sizes derived from it stay in
 * range. tools/gpt_model.c is compiled into this target (cmake/tests.cmake). */
#include <stdint.h>
#include <stdlib.h>

#include "gpt_model.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpt_config c;
  char msg[256];
  if (gpt_config_parse((const char*)data, size, "fuzz", &c, msg, sizeof msg) != 0) return 0;
  if (gpt_config_check(&c, msg, sizeof msg) != 0) abort(); /* parse accepted a bad config */
  volatile int64_t total = gpt_param_total(&c);
  (void)total;
  return 0;
}
