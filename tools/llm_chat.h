/* Text helpers of `rlx generate MODEL.gguf`: the chat template families
 * (recognised from the text of tokenizer.chat_template, no Jinja
 * interpreter), UTF-8-safe streaming and stop strings. Plain C, no rlx
 * calls: tests/test_llm_chat.c checks them directly. */
#ifndef RLX_TOOLS_LLM_CHAT_H
#define RLX_TOOLS_LLM_CHAT_H

#include <stddef.h>

typedef enum chat_family {
  CHAT_UNKNOWN = 0,
  CHAT_CHATML,     /* <|im_start|>role\n...<|im_end|> (Qwen, Hermes, SmolLM, ...) */
  CHAT_LLAMA3,     /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
  CHAT_LLAMA2,     /* [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] */
  CHAT_MISTRAL,    /* [INST] ... [/INST] (no system role: put before the user's text) */
  CHAT_MISTRAL_V7, /* [SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]...[/INST] */
  CHAT_GEMMA,      /* <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n */
  CHAT_PHI3,       /* <|user|>\n...<|end|>\n<|assistant|>\n */
  CHAT_ZEPHYR,     /* <|user|>\n...</s>\n<|assistant|>\n */
  CHAT_DEEPSEEK3,  /* ...<｜User｜>...<｜Assistant｜> (DeepSeek V3 / R1) */
  CHAT_DEEPSEEK,   /* User: ...\n\nAssistant: (DeepSeek LLM chat) */
  CHAT_COUNT
} chat_family;

/* The family whose markers the template text holds; CHAT_UNKNOWN when none. */
chat_family chat_detect(const char* template_text);
/* "chatml", "llama-3", ...; chat_family_from_name is its inverse (CHAT_UNKNOWN
 * for another name). */
const char* chat_family_name(chat_family f);
chat_family chat_family_from_name(const char* name);
/* The prompt of one exchange: the system turn (NULL or "": none), the user
 * turn and the assistant's opening, as the family writes them, without the
 * BOS token (the tokenizer adds it). malloc'd; NULL when out of memory or
 * the family is unknown. */
char* chat_format(chat_family f, const char* system, const char* user);

/* The bytes of s[0 .. n) that may be printed: n, less a trailing multibyte
 * UTF-8 sequence that is not complete yet (a lead byte whose continuation
 * bytes have not all arrived). Invalid bytes are not held. */
size_t utf8_complete(const char* s, size_t n);

/* Stop strings over generated text[0 .. n): the offset of the first
 * occurrence of any of stops[0 .. n_stops) (or -1), and the bytes at the
 * end of text that must be held back because they could begin a stop
 * string that has not fully arrived. */
long stop_find(const char* text, size_t n, const char* const* stops, int n_stops);
size_t stop_hold(const char* text, size_t n, const char* const* stops, int n_stops);

#endif
