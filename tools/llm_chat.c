/* Chat template families, UTF-8 streaming and stop strings (llm_chat.h).
 *
 * A GGUF file's tokenizer.chat_template is a Jinja program; rlx has no
 * Jinja interpreter. Instead each family is recognised by the control
 * markers its template writes (checked most specific first: a Llama-3
 * template never holds <|im_start|>, a Zephyr one has <|user|> but not
 * Phi-3's <|end|>) and its one-exchange prompt is written here. */
#include "llm_chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* const k_names[CHAT_COUNT] = {
    "unknown", "chatml", "llama-3", "llama-2", "mistral", "mistral-v7",
    "gemma",   "phi-3",  "zephyr",  "deepseek-3", "deepseek",
};

const char* chat_family_name(chat_family f) {
  return f >= 0 && f < CHAT_COUNT ? k_names[f] : "unknown";
}

chat_family chat_family_from_name(const char* name) {
  for (int f = 1; name && f < CHAT_COUNT; f++)
    if (strcmp(name, k_names[f]) == 0) return (chat_family)f;
  return CHAT_UNKNOWN;
}

static int has(const char* text, const char* marker) { return strstr(text, marker) != NULL; }

chat_family chat_detect(const char* t) {
  if (!t) return CHAT_UNKNOWN;
  if (has(t, "<|start_header_id|>")) return CHAT_LLAMA3;
  if (has(t, "<|im_start|>")) return CHAT_CHATML;
  if (has(t, "<start_of_turn>")) return CHAT_GEMMA;
  if (has(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>")) return CHAT_DEEPSEEK3; /* <｜Assistant｜> */
  if (has(t, "<|assistant|>") && has(t, "<|end|>")) return CHAT_PHI3;
  if (has(t, "<|assistant|>")) return CHAT_ZEPHYR;
  if (has(t, "[SYSTEM_PROMPT]")) return CHAT_MISTRAL_V7;
  if (has(t, "[INST]") && has(t, "<<SYS>>")) return CHAT_LLAMA2;
  if (has(t, "[INST]")) return CHAT_MISTRAL;
  if (has(t, "User: ") && has(t, "Assistant:")) return CHAT_DEEPSEEK;
  return CHAT_UNKNOWN;
}

/* printf into a fresh buffer. */
static char* format(const char* fmt, const char* a, const char* b) {
  int n = snprintf(NULL, 0, fmt, a, b);
  char* s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s) snprintf(s, (size_t)n + 1, fmt, a, b);
  return s;
}

/* Families without a system role get it before the user's text. */
static char* merged(const char* fmt, const char* sys, const char* user) {
  if (!*sys) return format(fmt, user, "");
  char* joined = format("%s\n\n%s", sys, user);
  char* s = joined ? format(fmt, joined, "") : NULL;
  free(joined);
  return s;
}

char* chat_format(chat_family f, const char* system, const char* user) {
  const char* sys = system ? system : "";
  if (!user) return NULL;
  int with_sys = *sys != '\0';
  switch (f) {
    case CHAT_CHATML:
      return with_sys ? format("<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n"
                               "<|im_start|>assistant\n", sys, user)
                      : format("<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n%s", user, "");
    case CHAT_LLAMA3:
      return with_sys ? format("<|start_header_id|>system<|end_header_id|>\n\n%s<|eot_id|>"
                               "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n", sys, user)
                      : format("<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n%s", user, "");
    case CHAT_LLAMA2:
      return with_sys ? format("[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", sys, user)
                      : format("[INST] %s [/INST]%s", user, "");
    case CHAT_MISTRAL: return merged("[INST] %s [/INST]%s", sys, user);
    case CHAT_MISTRAL_V7:
      return with_sys ? format("[SYSTEM_PROMPT]%s[/SYSTEM_PROMPT][INST]%s[/INST]", sys, user)
                      : format("[INST]%s[/INST]%s", user, "");
    case CHAT_GEMMA:
      return merged("<start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n%s", sys, user);
    case CHAT_PHI3:
      return with_sys ? format("<|system|>\n%s<|end|>\n<|user|>\n%s<|end|>\n<|assistant|>\n", sys,
                               user)
                      : format("<|user|>\n%s<|end|>\n<|assistant|>\n%s", user, "");
    case CHAT_ZEPHYR:
      return with_sys ? format("<|system|>\n%s</s>\n<|user|>\n%s</s>\n<|assistant|>\n", sys, user)
                      : format("<|user|>\n%s</s>\n<|assistant|>\n%s", user, "");
    case CHAT_DEEPSEEK3:
      return format("%s<\xef\xbd\x9c" "User\xef\xbd\x9c>%s<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", sys,
                    user);
    case CHAT_DEEPSEEK: return merged("User: %s\n\nAssistant:%s", sys, user);
    default: return NULL;
  }
}

/* Bytes a sequence led by byte c takes (1 for ASCII and invalid leads). */
static size_t utf8_length(unsigned char c) {
  if (c >= 0xF0 && c <= 0xF4) return 4;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  return 1;
}

size_t utf8_complete(const char* s, size_t n) {
  /* the last lead byte is at most 3 bytes back */
  for (size_t back = 1; back <= 4 && back <= n; back++) {
    unsigned char c = (unsigned char)s[n - back];
    if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
    return utf8_length(c) > back ? n - back : n;
  }
  return n;
}

long stop_find(const char* text, size_t n, const char* const* stops, int n_stops) {
  long first = -1;
  for (int i = 0; i < n_stops; i++) {
    size_t len = strlen(stops[i]);
    for (size_t at = 0; len > 0 && at + len <= n; at++) {
      if (first >= 0 && (long)at >= first) break;
      if (memcmp(text + at, stops[i], len) == 0) {
        first = (long)at;
        break;
      }
    }
  }
  return first;
}

size_t stop_hold(const char* text, size_t n, const char* const* stops, int n_stops) {
  size_t hold = 0;
  for (int i = 0; i < n_stops; i++) {
    size_t len = strlen(stops[i]);
    /* the longest proper prefix of stops[i] that ends the text */
    for (size_t k = len > 0 ? len - 1 : 0; k > hold; k--)
      if (k <= n && memcmp(text + n - k, stops[i], k) == 0) {
        hold = k;
        break;
      }
  }
  return hold;
}
