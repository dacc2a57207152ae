/* Fuzz target: the trainer checkpoint manifest (rlx_trainer_load reads it
 * from the directory a user names) must be refused with a status when
 * malformed, never crash, read past the text or allocate what a count
 * announces before the lines are there. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/train.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* text = malloc(size + 1); /* rlx_file_read_all's NUL after the bytes */
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  rlx_error err;
  rlx_ckpt c;
  if (rlx_ckpt_parse(&err, text, "fuzz", &c) == RLX_OK) {
    /* every entry is whole: a name, a rank in range */
    volatile size_t sink = 0;
    for (int32_t i = 0; i < c.n; i++) sink += strlen(c.e[i].name) + (size_t)c.e[i].rank;
    (void)sink;
  }
  rlx_ckpt_free(&c);
  free(text);
  return 0;
}
