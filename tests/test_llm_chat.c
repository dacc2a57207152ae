/* The text helpers of `rlx generate MODEL.gguf` (tools/llm_chat.c): the
 * chat template family detector over template texts of the kind GGUF files
 * carry, the prompt each family writes, UTF-8-safe streaming and stop
 * strings. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm_chat.h"

/* Shortened but faithful in their markers to the templates models ship. */
static const struct {
  const char* text;
  chat_family want;
} k_templates[] = {
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
     CHAT_CHATML},
    {"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
     "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}",
     CHAT_LLAMA3},
    {"{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
     "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + "
     "content + ' [/INST]' }}",
     CHAT_LLAMA2},
    {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
     "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}",
     CHAT_MISTRAL},
    {"{%- if system_message %}{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}"
     "{%- endif %}{{- '[INST]' + message['content'] + '[/INST]' }}",
     CHAT_MISTRAL_V7},
    {"{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + "
     "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}",
     CHAT_GEMMA},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{'<|user|>' + '\\n' + "
     "message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}{% endif %}{% endfor %}",
     CHAT_PHI3},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
     "message['content'] + eos_token }}{% elif message['role'] == 'assistant' %}"
     "{{ '<|assistant|>\\n'  + message['content'] + eos_token }}{% endif %}{% endfor %}",
     CHAT_ZEPHYR},
    {"{% for message in messages %}{%- if message['role'] == 'user' %}"
     "{{'<\xef\xbd\x9cUser\xef\xbd\x9c>' + message['content']}}{%- endif %}{% endfor %}"
     "{{'<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>'}}",
     CHAT_DEEPSEEK3},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + "
     "message['content'] + '\\n\\n' }}{% else %}{{ 'Assistant: ' + message['content'] }}"
     "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}",
     CHAT_DEEPSEEK},
    {"{% for message in messages %}{{ message['content'] }}{% endfor %}", CHAT_UNKNOWN},
    {"", CHAT_UNKNOWN},
};

TEST(detect) {
  for (size_t i = 0; i < sizeof k_templates / sizeof *k_templates; i++) {
    chat_family got = chat_detect(k_templates[i].text);
    CHECK_MSG(got == k_templates[i].want, "template %zu: %s, expected %s", i,
              chat_family_name(got), chat_family_name(k_templates[i].want));
  }
  CHECK(chat_detect(NULL) == CHAT_UNKNOWN);
}

TEST(names_round_trip) {
  for (int f = 1; f < CHAT_COUNT; f++)
    CHECK(chat_family_from_name(chat_family_name((chat_family)f)) == (chat_family)f);
  CHECK(chat_family_from_name("jinja") == CHAT_UNKNOWN);
  CHECK(chat_family_from_name(NULL) == CHAT_UNKNOWN);
}

static void check_format(chat_family f, const char* sys, const char* want) {
  char* got = chat_format(f, sys, "Hi");
  CHECK_MSG(got && strcmp(got, want) == 0, "%s: got '%s'", chat_family_name(f), got ? got : "");
  free(got);
}

TEST(formats) {
  check_format(CHAT_CHATML, "S",
               "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
               "<|im_start|>assistant\n");
  check_format(CHAT_CHATML, NULL, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  check_format(CHAT_LLAMA3, "S",
               "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user"
               "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
               "\n\n");
  check_format(CHAT_LLAMA2, "S", "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]");
  check_format(CHAT_MISTRAL, "S", "[INST] S\n\nHi [/INST]");
  check_format(CHAT_MISTRAL, "", "[INST] Hi [/INST]");
  check_format(CHAT_MISTRAL_V7, "S", "[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST]Hi[/INST]");
  check_format(CHAT_GEMMA, NULL, "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  check_format(CHAT_PHI3, NULL, "<|user|>\nHi<|end|>\n<|assistant|>\n");
  check_format(CHAT_ZEPHYR, "S", "<|system|>\nS</s>\n<|user|>\nHi</s>\n<|assistant|>\n");
  check_format(CHAT_DEEPSEEK3, "S",
               "S<\xef\xbd\x9cUser\xef\xbd\x9c>Hi<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>");
  check_format(CHAT_DEEPSEEK, NULL, "User: Hi\n\nAssistant:");
  CHECK(chat_format(CHAT_UNKNOWN, NULL, "Hi") == NULL);
  CHECK(chat_format(CHAT_CHATML, NULL, NULL) == NULL);
}

TEST(utf8) {
  const char* e_acute = "caf\xc3\xa9";        /* 2-byte é */
  const char* euro = "\xe2\x82\xac";          /* 3-byte € */
  const char* emoji = "a\xf0\x9f\x98\x80";    /* 4-byte 😀 */
  CHECK(utf8_complete(e_acute, 5) == 5);
  CHECK(utf8_complete(e_acute, 4) == 3); /* the lead byte alone is held */
  CHECK(utf8_complete(euro, 1) == 0);
  CHECK(utf8_complete(euro, 2) == 0);
  CHECK(utf8_complete(euro, 3) == 3);
  for (size_t n = 2; n < 5; n++) CHECK(utf8_complete(emoji, n) == 1);
  CHECK(utf8_complete(emoji, 5) == 5);
  CHECK(utf8_complete("ab", 2) == 2);
  CHECK(utf8_complete("a\x80", 2) == 2); /* a stray continuation byte is not held */
  CHECK(utf8_complete("a\xff", 2) == 2); /* nor an invalid lead */
  CHECK(utf8_complete("", 0) == 0);
}

TEST(stops) {
  const char* stops[2] = {"</end>", "XY"};
  const char* t = "hello </end> more";
  CHECK(stop_find(t, strlen(t), stops, 2) == 6);
  CHECK(stop_find("aXYb</end>", 10, stops, 2) == 1); /* the earliest of any */
  CHECK(stop_find("hello", 5, stops, 2) == -1);
  CHECK(stop_hold("hello </e", 9, stops, 2) == 3);
  CHECK(stop_hold("hello X", 7, stops, 2) == 1);
  CHECK(stop_hold("hello", 5, stops, 2) == 0);
  CHECK(stop_hold("<", 1, stops, 2) == 1);
  CHECK(stop_hold("x", 1, stops, 0) == 0);
}

int main(void) {
  RUN(detect);
  RUN(names_round_trip);
  RUN(formats);
  RUN(utf8);
  RUN(stops);
  return test_summary();
}
