/* Fuzz target: tokenizers on arbitrary bytes (invalid UTF-8 included) must
 * never crash, and byte-level BPE must decode back to exactly the input
 * where every byte's character is a plain token (Falcon and StarCoder lack
 * some, such as 'ÿ', which are dropped; DeepSeek-LLM stores some only as
 * user-defined tokens, which decode as their text, as llama.cpp does:
 * those are checked for crashes only).
 * The first byte picks a vocab from llama.cpp's test data (loaded once;
 * without third_party/llama.cpp every input is a no-op) and the flags. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx.h"

static const char* const vocabs[] = {"gpt-2", "llama-bpe", "qwen2", "falcon", "deepseek-llm",
                                     "starcoder", "llama-spm", "phi-3"};
enum { N_VOCABS = sizeof vocabs / sizeof vocabs[0] };
/* the vocabs whose encode / decode must round-trip every byte string */
static const int round_trips[N_VOCABS] = {1, 1, 1, 0, 0, 0, 0, 0};
static rlx_tokenizer* loaded[N_VOCABS];
static int tried[N_VOCABS];

static rlx_tokenizer* vocab(int i) {
  if (!tried[i]) {
    char path[256];
    snprintf(path, sizeof path, "third_party/llama.cpp/models/ggml-vocab-%s.gguf", vocabs[i]);
    tried[i] = 1;
    if (rlx_tokenizer_load(path, &loaded[i], NULL) != RLX_OK) loaded[i] = NULL;
  }
  return loaded[i];
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  int which = data[0] % N_VOCABS;
  int32_t flags = (data[0] >> 4) & 3;
  rlx_tokenizer* t = vocab(which);
  if (!t) return 0;
  const char* text = (const char*)data + 1;
  size_t len = size - 1;
  int32_t* ids = NULL;
  int64_t n = 0;
  if (rlx_tokenizer_encode(t, text, len, flags, &ids, &n) != RLX_OK) return 0;
  char* back = NULL;
  size_t back_len = 0;
  /* decode with the same special handling, so every token is written out */
  if (rlx_tokenizer_decode(t, ids, n, flags & RLX_TOKENIZE_PARSE_SPECIAL, &back, &back_len) ==
      RLX_OK) {
    int plain = !(flags & RLX_TOKENIZE_ADD_SPECIAL);
    if (round_trips[which] && plain && (back_len != len || memcmp(back, text, len) != 0)) {
      fprintf(stderr, "%s: decode(encode(x)) != x\n", vocabs[which]);
      abort();
    }
  }
  rlx_free(back);
  rlx_free(ids);
  return 0;
}
