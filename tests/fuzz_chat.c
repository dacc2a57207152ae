/* Fuzz target: the text helpers of `rlx generate MODEL.gguf`
 * (tools/llm_chat.c, compiled in by cmake/tests.cmake). A chat template
 * comes from a file a user names and the generated text from a model: the
 * family detector, the formatter, the UTF-8 holder and the stop-string
 * scans must stay inside the text and agree with their contracts. The
 * input is split at its first NUL byte: template / text before, a stop
 * string after. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm_chat.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* text = malloc(size + 2);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  text[size + 1] = '\0';
  size_t n = strlen(text);
  const char* stop = text + n + 1; /* "" when the input has no NUL */
  chat_family f = chat_detect(text);
  if (f < CHAT_UNKNOWN || f >= CHAT_COUNT) abort();
  char* prompt = chat_format(f == CHAT_UNKNOWN ? CHAT_CHATML : f, stop, text);
  if (prompt && !strstr(prompt, text)) abort(); /* the user's text is in the prompt */
  free(prompt);
  size_t keep = utf8_complete(text, n);
  if (keep > n || n - keep > 3) abort();
  const char* stops[1] = {stop};
  int n_stops = *stop ? 1 : 0;
  long at = stop_find(text, n, stops, n_stops);
  if (at >= 0 && ((size_t)at + strlen(stop) > n || memcmp(text + at, stop, strlen(stop)) != 0))
    abort();
  size_t hold = stop_hold(text, n, stops, n_stops);
  if (hold > n || (n_stops && hold >= strlen(stop) && hold > 0)) abort();
  free(text);
  return 0;
}
