/* SentencePiece (tokenizer.ggml.model "llama"): Llama 1/2, Mistral, Phi-3.
 *
 * Encoding: a space is put before the text (tokenizer.ggml.add_space_prefix,
 * default on), every space becomes U+2581 '▁', and the text starts as one
 * symbol per UTF-8 character; adjacent symbols whose concatenation is a
 * token merge, highest score (tokenizer.ggml.scores) first, leftmost first
 * among equal scores. A final symbol that is no token is written as its
 * bytes through the <0xXX> byte tokens (or the unknown token). */
#include "io/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char k_space[] = "\xE2\x96\x81"; /* U+2581, SentencePiece's space */

rlx_status spm_init(rlx_tokenizer* t, rlx_error* err) {
  if (!t->scores)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tokenizer: a llama (SentencePiece) vocab needs tokenizer.ggml.scores");
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_ids[b] = tok_find(t, name, 6);
  }
  return RLX_OK;
}

static int spm_pair(const rlx_tokenizer* t, const char* text, const tok_sym* l, const tok_sym* r,
                    double* priority, int32_t* merged) {
  int32_t id = tok_find(t, text + l->start, (size_t)l->len + r->len);
  if (id < 0 || isnan(t->scores[id])) return 0; /* NaN: no merge forms it (tokenizer_hf.c) */
  *priority = -(double)t->scores[id];
  *merged = id;
  return 1;
}

/* The text as SentencePiece sees it: prefix space, spaces as '▁'. */
static char* escape_spaces(const rlx_tokenizer* t, const char* s, size_t len, size_t* out_len) {
  char* e = malloc(3 * (len + 1) + 1);
  if (!e) return NULL;
  size_t n = 0;
  if (t->add_space_prefix) {
    memcpy(e, k_space, 3);
    n = 3;
  }
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ' ') {
      memcpy(e + n, k_space, 3);
      n += 3;
    } else {
      e[n++] = s[i];
    }
  }
  *out_len = n;
  return e;
}

/* Appends a final symbol: its token, else its bytes. */
static rlx_status emit_symbol(rlx_tokenizer* t, const char* text, const tok_sym* s,
                              tok_ids* ids) {
  int32_t id = s->id >= 0 ? s->id : tok_find(t, text + s->start, s->len);
  if (id >= 0) return tok_ids_push(ids, id, &t->err);
  for (uint32_t k = 0; k < s->len; k++) {
    int32_t b = t->byte_ids[(unsigned char)text[s->start + k]];
    if (b < 0) b = t->unk;
    if (b >= 0) RLX_RETURN_IF_ERROR(tok_ids_push(ids, b, &t->err));
  }
  return RLX_OK;
}

rlx_status spm_encode(rlx_tokenizer* t, const char* text, size_t len, tok_ids* ids) {
  size_t n = 0;
  char* e = escape_spaces(t, text, len, &n);
  tok_sym* syms = malloc((n + 1) * sizeof *syms);
  rlx_status st = e && syms ? RLX_OK : rlx_fail(&t->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  int32_t count = 0;
  for (size_t i = 0; st == RLX_OK && i < n; count++) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char*)e + i, n - i, &cp);
    syms[count] = (tok_sym){count - 1, -1, (uint32_t)i, (uint32_t)k, tok_find(t, e + i, (size_t)k)};
    if (count) syms[count - 1].next = count;
    i += (size_t)k;
  }
  if (st == RLX_OK) st = tok_merge(t, e, syms, count, spm_pair, &t->err);
  for (int32_t i = 0; st == RLX_OK && count && i >= 0; i = syms[i].next)
    st = emit_symbol(t, e, &syms[i], ids);
  free(e);
  free(syms);
  return st;
}

static rlx_status append(char** buf, size_t* len, size_t* cap, const char* s, size_t n,
                         rlx_error* err) {
  if (*len + n + 1 > *cap) {
    size_t c = 2 * (*len + n + 1);
    char* b = realloc(*buf, c);
    RLX_CHECK_ALLOC(err, b);
    *buf = b;
    *cap = c;
  }
  memcpy(*buf + *len, s, n);
  *len += n;
  return RLX_OK;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* The byte a "<0xXX>" token stands for, or -1 (token text is not NUL-terminated). */
static int byte_token_value(const char* s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int hi = hex_digit(s[3]), lo = hex_digit(s[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

rlx_status spm_token_bytes(const rlx_tokenizer* t, int32_t id, char** buf, size_t* len,
                           size_t* cap, rlx_error* err) {
  size_t n;
  const char* s = tok_text(t, id, &n);
  int byte = t->types[id] == TOK_BYTE ? byte_token_value(s, n) : -1;
  if (byte >= 0) {
    char b = (char)byte;
    return append(buf, len, cap, &b, 1, err);
  }
  if (t->types[id] != TOK_NORMAL) return append(buf, len, cap, s, n, err);
  for (size_t i = 0; i < n;) {
    if (n - i >= 3 && memcmp(s + i, k_space, 3) == 0) {
      RLX_RETURN_IF_ERROR(append(buf, len, cap, " ", 1, err));
      i += 3;
    } else {
      RLX_RETURN_IF_ERROR(append(buf, len, cap, s + i, 1, err));
      i++;
    }
  }
  return RLX_OK;
}
