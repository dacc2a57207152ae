/* Fuzz target: Hugging Face tokenizer.json texts (rlx_tokenizer_from_hf's
 * parser, tokenizer_hf.c) must be refused with a status and a message,
 * never crash or read outside the buffer. The input is up to three texts
 * split at NUL bytes: tokenizer.json, tokenizer_config.json,
 * generation_config.json. A tokenizer that loads encodes and decodes a few
 * texts (its specials included) so every table it built is walked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/tokenizer.h"

static volatile uint64_t sink;

static void exercise(rlx_tokenizer* t) {
  static const char* const texts[] = {"Hello world", " a  b\n\n 12345 ", "\xE2\x96\x81x\xFF",
                                      "<s>hi</s><|end|>"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    int32_t* ids = NULL;
    int64_t n = 0;
    int32_t flags = (int32_t)(i & 3);
    if (rlx_tokenizer_encode(t, texts[i], strlen(texts[i]), flags, &ids, &n) != RLX_OK) continue;
    char* back = NULL;
    size_t len = 0;
    if (rlx_tokenizer_decode(t, ids, n, flags, &back, &len) == RLX_OK) sink ^= len;
    rlx_free(back);
    rlx_free(ids);
  }
  const char* chat = rlx_tokenizer_chat_template(t);
  sink ^= chat ? strlen(chat) : 0;
  sink ^= (uint64_t)rlx_tokenizer_bos(t) ^ (uint64_t)rlx_tokenizer_eos(t);
  const int32_t* ends = NULL;
  for (int32_t i = 0, n = rlx_tokenizer_end_ids(t, &ends); i < n; i++) sink ^= (uint64_t)ends[i];
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* parts[3] = {NULL, NULL, NULL};
  size_t lens[3] = {0, 0, 0};
  const char* p = (const char*)data;
  size_t left = size;
  for (int k = 0; k < 3; k++) {
    const char* nul = left ? memchr(p, 0, left) : NULL;
    parts[k] = p;
    lens[k] = nul ? (size_t)(nul - p) : left;
    if (!nul) break;
    left -= lens[k] + 1;
    p = nul + 1;
  }
  hf_texts in = {parts[0], parts[1], parts[2], NULL, lens[0], lens[1], lens[2], 0,
                 "tokenizer.json", "tokenizer_config.json", "generation_config.json"};
  rlx_tokenizer* t = NULL;
  rlx_error err = {{0}};
  if (tok_from_hf_texts(&in, &t, &err) == RLX_OK) {
    exercise(t);
    rlx_tokenizer_destroy(t);
  } else if (!err.msg[0]) {
    abort(); /* a refusal must say why */
  }
  return 0;
}
