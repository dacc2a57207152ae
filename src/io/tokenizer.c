/* Tokenizer objects (see tokenizer.h): the vocab read from a GGUF file's
 * tokenizer.ggml.* keys, the text -> id hash, splitting the input at
 * special tokens, and the public encode / decode that hand the plain text
 * between special tokens to the family (BPE or SentencePiece). Everything
 * the tokenizer needs is copied out of the GGUF, so the file may be closed
 * after rlx_tokenizer_from_gguf. */
#include "io/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ the id hash */

static uint64_t hash_bytes(const char* s, size_t len) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
  return h;
}

int32_t tok_find(const rlx_tokenizer* t, const char* s, size_t len) {
  for (uint64_t i = hash_bytes(s, len) & t->by_text.mask;; i = (i + 1) & t->by_text.mask) {
    int32_t id = t->by_text.slots[i];
    if (id < 0) return -1;
    size_t n;
    const char* txt = tok_text(t, id, &n);
    if (n == len && memcmp(txt, s, len) == 0) return id;
  }
}

/* Builds the hash; a text that appears twice keeps its lowest id. */
static rlx_status build_map(rlx_tokenizer* t, rlx_error* err) {
  uint64_t cap = 16;
  while (cap < 2 * (uint64_t)t->n_tokens) cap *= 2;
  t->by_text.slots = malloc(cap * sizeof(int32_t));
  RLX_CHECK_ALLOC(err, t->by_text.slots);
  memset(t->by_text.slots, 0xFF, cap * sizeof(int32_t));
  t->by_text.mask = cap - 1;
  for (int32_t id = 0; id < t->n_tokens; id++) {
    size_t n;
    const char* s = tok_text(t, id, &n);
    if (tok_find(t, s, n) >= 0) continue;
    uint64_t i = hash_bytes(s, n) & t->by_text.mask;
    while (t->by_text.slots[i] >= 0) i = (i + 1) & t->by_text.mask;
    t->by_text.slots[i] = id;
  }
  return RLX_OK;
}

rlx_status tok_ids_push(tok_ids* ids, int32_t id, rlx_error* err) {
  if (ids->n == ids->cap) {
    int64_t cap = ids->cap ? 2 * ids->cap : 64;
    int32_t* v = realloc(ids->v, (size_t)cap * sizeof *v);
    RLX_CHECK_ALLOC(err, v);
    ids->v = v;
    ids->cap = cap;
  }
  ids->v[ids->n++] = id;
  return RLX_OK;
}

/* ------------------------------------------------------------ reading the vocab */

static int64_t need_key(rlx_gguf* g, const char* key, rlx_error* err) {
  int64_t i = rlx_gguf_find_key(g, key);
  if (i < 0) rlx_fail(err, RLX_INVALID_ARGUMENT, "tokenizer: the GGUF has no '%s'", key);
  return i;
}

/* An optional array of n elements of one of the given types. */
static rlx_status optional_array(rlx_gguf* g, const char* key, rlx_gguf_type want, int32_t n,
                                 int64_t* out_index, rlx_error* err) {
  *out_index = rlx_gguf_find_key(g, key);
  if (*out_index < 0) return RLX_OK;
  rlx_gguf_type et;
  uint64_t len;
  if (rlx_gguf_array_info(g, *out_index, &et, &len) != RLX_OK || et != want ||
      len != (uint64_t)n)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tokenizer: '%s' must be an array of %d %s (one per token)", key, n,
                    rlx_gguf_type_name(want));
  return RLX_OK;
}

/* Copies every token's bytes into one block. */
static rlx_status read_tokens(rlx_tokenizer* t, rlx_gguf* g, rlx_error* err) {
  int64_t k = need_key(g, "tokenizer.ggml.tokens", err);
  if (k < 0) return RLX_INVALID_ARGUMENT;
  rlx_gguf_type et;
  uint64_t n;
  if (rlx_gguf_array_info(g, k, &et, &n) != RLX_OK || et != RLX_GGUF_STRING || n == 0 ||
      n >= INT32_MAX)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tokenizer: tokenizer.ggml.tokens must be a non-empty array of strings");
  t->n_tokens = (int32_t)n;
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; i++) {
    rlx_gguf_string s;
    (void)rlx_gguf_array_string(g, k, i, &s);
    total += s.len;
  }
  t->text = malloc(total ? total : 1);
  t->text_at = malloc((n + 1) * sizeof *t->text_at);
  RLX_CHECK_ALLOC(err, t->text && t->text_at);
  uint64_t at = 0;
  for (uint64_t i = 0; i < n; i++) {
    rlx_gguf_string s;
    (void)rlx_gguf_array_string(g, k, i, &s);
    t->text_at[i] = at;
    memcpy(t->text + at, s.data, s.len);
    at += s.len;
  }
  t->text_at[n] = at;
  return RLX_OK;
}

static rlx_status read_scores_and_types(rlx_tokenizer* t, rlx_gguf* g, rlx_error* err) {
  int64_t ks, kt;
  RLX_RETURN_IF_ERROR(optional_array(g, "tokenizer.ggml.scores", RLX_GGUF_F32, t->n_tokens, &ks, err));
  RLX_RETURN_IF_ERROR(
      optional_array(g, "tokenizer.ggml.token_type", RLX_GGUF_I32, t->n_tokens, &kt, err));
  t->types = malloc((size_t)t->n_tokens * sizeof *t->types);
  RLX_CHECK_ALLOC(err, t->types);
  const void* p;
  for (int32_t i = 0; i < t->n_tokens; i++) t->types[i] = TOK_NORMAL;
  if (kt >= 0 && rlx_gguf_array_data(g, kt, &p) == RLX_OK)
    memcpy(t->types, p, (size_t)t->n_tokens * sizeof *t->types);
  if (ks < 0) return RLX_OK;
  t->scores = malloc((size_t)t->n_tokens * sizeof *t->scores);
  RLX_CHECK_ALLOC(err, t->scores);
  if (rlx_gguf_array_data(g, ks, &p) == RLX_OK)
    memcpy(t->scores, p, (size_t)t->n_tokens * sizeof *t->scores);
  return RLX_OK;
}

/* An optional token id key; one outside the vocab counts as absent. */
static int32_t read_id(rlx_tokenizer* t, rlx_gguf* g, const char* key) {
  int64_t k = rlx_gguf_find_key(g, key);
  uint64_t v;
  if (k < 0 || rlx_gguf_get_u64(g, k, &v) != RLX_OK || v >= (uint64_t)t->n_tokens) return -1;
  return (int32_t)v;
}

static int read_flag(rlx_gguf* g, const char* key, int fallback) {
  int64_t k = rlx_gguf_find_key(g, key);
  int32_t b;
  if (k < 0 || rlx_gguf_get_bool(g, k, &b) != RLX_OK) return fallback;
  return b;
}

/* The model and pre-tokenizer names (pre may be absent: ""). */
static rlx_status read_names(rlx_gguf* g, char* model, char* pre, size_t cap, rlx_error* err) {
  int64_t k = need_key(g, "tokenizer.ggml.model", err);
  rlx_gguf_string s;
  if (k < 0) return RLX_INVALID_ARGUMENT;
  if (rlx_gguf_get_string(g, k, &s) != RLX_OK || s.len >= cap)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "tokenizer: tokenizer.ggml.model is not a short string");
  memcpy(model, s.data, s.len);
  model[s.len] = 0;
  pre[0] = 0;
  k = rlx_gguf_find_key(g, "tokenizer.ggml.pre");
  if (k >= 0 && rlx_gguf_get_string(g, k, &s) == RLX_OK && s.len < cap) {
    memcpy(pre, s.data, s.len);
    pre[s.len] = 0;
  }
  return RLX_OK;
}

/* tokenizer.chat_template, when the file has one, copied NUL-terminated. */
static rlx_status read_chat_template(rlx_tokenizer* t, rlx_gguf* g, rlx_error* err) {
  int64_t k = rlx_gguf_find_key(g, "tokenizer.chat_template");
  rlx_gguf_string s;
  if (k < 0 || rlx_gguf_get_string(g, k, &s) != RLX_OK) return RLX_OK;
  t->chat_template = malloc(s.len + 1);
  RLX_CHECK_ALLOC(err, t->chat_template);
  memcpy(t->chat_template, s.data, s.len);
  t->chat_template[s.len] = 0;
  return RLX_OK;
}

/* ------------------------------------------------------------ special tokens */

typedef struct sized_id {
  size_t len;
  int32_t id;
} sized_id;

static int longer_first(const void* a, const void* b) {
  const sized_id *x = a, *y = b;
  if (x->len != y->len) return x->len > y->len ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* Control and user-defined tokens, longest first, for splitting input. */
static rlx_status build_specials(rlx_tokenizer* t, rlx_error* err) {
  sized_id* list = malloc((size_t)t->n_tokens * sizeof *list);
  t->specials = malloc((size_t)t->n_tokens * sizeof *t->specials);
  if (!list || !t->specials) {
    free(list);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (int32_t i = 0; i < t->n_tokens; i++) {
    size_t n;
    (void)tok_text(t, i, &n);
    if (n && (t->types[i] == TOK_CONTROL || t->types[i] == TOK_USER_DEFINED)) {
      list[t->n_specials++] = (sized_id){n, i};
      t->special_first[(unsigned char)t->text[t->text_at[i]]] = 1;
    }
  }
  qsort(list, (size_t)t->n_specials, sizeof *list, longer_first);
  for (int32_t k = 0; k < t->n_specials; k++) t->specials[k] = list[k].id;
  free(list);
  return RLX_OK;
}

rlx_status tok_index_vocab(rlx_tokenizer* t, rlx_error* err) {
  RLX_RETURN_IF_ERROR(build_map(t, err));
  return build_specials(t, err);
}

/* The special token starting at s[0..n) that this call may split out, or -1. */
static int32_t special_at(const rlx_tokenizer* t, const char* s, size_t n, int parse_control) {
  if (!t->special_first[(unsigned char)s[0]]) return -1; /* most positions: no scan */
  for (int32_t k = 0; k < t->n_specials; k++) {
    int32_t id = t->specials[k];
    if (!parse_control && t->types[id] == TOK_CONTROL) continue;
    size_t len;
    const char* txt = tok_text(t, id, &len);
    if (len <= n && txt[0] == s[0] && memcmp(txt, s, len) == 0) return id;
  }
  return -1;
}

/* ------------------------------------------------------------ building */

void rlx_tokenizer_destroy(rlx_tokenizer* t) {
  if (!t) return;
  free(t->text);
  free(t->text_at);
  free(t->scores);
  free(t->types);
  free(t->by_text.slots);
  free(t->merges);
  free(t->specials);
  free(t->chat_template);
  free(t);
}

static rlx_status build(rlx_tokenizer* t, rlx_gguf* g, rlx_error* err) {
  char model[64], pre[64];
  RLX_RETURN_IF_ERROR(read_names(g, model, pre, sizeof model, err));
  RLX_RETURN_IF_ERROR(read_tokens(t, g, err));
  RLX_RETURN_IF_ERROR(read_scores_and_types(t, g, err));
  RLX_RETURN_IF_ERROR(tok_index_vocab(t, err));
  RLX_RETURN_IF_ERROR(read_chat_template(t, g, err));
  t->bos = read_id(t, g, "tokenizer.ggml.bos_token_id");
  t->eos = read_id(t, g, "tokenizer.ggml.eos_token_id");
  t->unk = read_id(t, g, "tokenizer.ggml.unknown_token_id");
  t->add_eos = read_flag(g, "tokenizer.ggml.add_eos_token", 0);
  snprintf(t->kind, sizeof t->kind, "%s (%s)", model, pre[0] ? pre : "default");
  if (strcmp(model, "gpt2") == 0) {
    t->family = TOK_FAMILY_BPE;
    RLX_RETURN_IF_ERROR(bpe_init(t, g, pre, err));
    /* Llama-3 starts every sequence with <|begin_of_text|>; GPT-2 adds none */
    t->add_bos = read_flag(g, "tokenizer.ggml.add_bos_token", t->pre == BPE_PRE_LLAMA3);
    return RLX_OK;
  }
  if (strcmp(model, "llama") == 0) {
    t->family = TOK_FAMILY_SPM;
    t->add_bos = read_flag(g, "tokenizer.ggml.add_bos_token", 1);
    t->add_space_prefix = read_flag(g, "tokenizer.ggml.add_space_prefix", 1);
    return spm_init(t, err);
  }
  return rlx_fail(err, RLX_UNIMPLEMENTED,
                  "tokenizer: model '%s' is not supported (supported: gpt2 byte-level BPE, "
                  "llama SentencePiece)",
                  model);
}

static rlx_status report(rlx_status s, const rlx_error* err, char** out_error) {
  if (!out_error) return s;
  *out_error = s == RLX_OK ? NULL : strdup(err->msg);
  return s;
}

rlx_status rlx_tokenizer_from_gguf(rlx_gguf* g, rlx_tokenizer** out, char** out_error) {
  rlx_error err = {{0}};
  if (!g || !out)
    return report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "tokenizer: NULL argument"), &err,
                  out_error);
  *out = NULL;
  rlx_tokenizer* t = calloc(1, sizeof *t);
  if (!t) return report(rlx_fail(&err, RLX_RESOURCE_EXHAUSTED, "out of host memory"), &err, out_error);
  rlx_status s = build(t, g, &err);
  if (s != RLX_OK) {
    rlx_tokenizer_destroy(t);
    return report(s, &err, out_error);
  }
  *out = t;
  return report(RLX_OK, &err, out_error);
}

/* A folder, or a file whose name ends in ".json": Hugging Face files. */
static int is_hf_path(const char* path) {
  struct stat st;
  size_t n = strlen(path);
  if (n >= 5 && strcmp(path + n - 5, ".json") == 0) return 1;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

rlx_status rlx_tokenizer_load(const char* path, rlx_tokenizer** out, char** out_error) {
  rlx_gguf* g = NULL;
  if (out) *out = NULL;
  if (path && is_hf_path(path)) return rlx_tokenizer_from_hf(path, out, out_error);
  rlx_status s = rlx_gguf_open(path, &g, out_error);
  if (s != RLX_OK) return s;
  s = rlx_tokenizer_from_gguf(g, out, out_error);
  rlx_gguf_close(g);
  return s;
}

/* ------------------------------------------------------------ queries */

const char* rlx_tokenizer_last_error(const rlx_tokenizer* t) {
  return t ? t->err.msg : "NULL tokenizer";
}
const char* rlx_tokenizer_kind(const rlx_tokenizer* t) { return t ? t->kind : ""; }
int32_t rlx_tokenizer_vocab_size(const rlx_tokenizer* t) { return t ? t->n_tokens : 0; }
int32_t rlx_tokenizer_bos(const rlx_tokenizer* t) { return t ? t->bos : -1; }
int32_t rlx_tokenizer_eos(const rlx_tokenizer* t) { return t ? t->eos : -1; }
const char* rlx_tokenizer_chat_template(const rlx_tokenizer* t) {
  return t ? t->chat_template : NULL;
}
int32_t rlx_tokenizer_end_ids(const rlx_tokenizer* t, const int32_t** out) {
  if (out) *out = t ? t->end_ids : NULL;
  return t ? t->n_end_ids : 0;
}

rlx_status rlx_tokenizer_token_text(rlx_tokenizer* t, int32_t id, const char** out,
                                    size_t* out_len) {
  if (!t || !out || !out_len) return RLX_INVALID_ARGUMENT;
  if (id < 0 || id >= t->n_tokens)
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "tokenizer: id %d outside the vocab of %d",
                    id, t->n_tokens);
  *out = tok_text(t, id, out_len);
  return RLX_OK;
}

/* ------------------------------------------------------------ encode / decode */

/* Plain text s[0..n), which starts the input when first. */
static rlx_status encode_plain(rlx_tokenizer* t, const char* s, size_t n, int first,
                               tok_ids* ids) {
  if (n == 0) return RLX_OK;
  if (t->family == TOK_FAMILY_BPE) return bpe_encode(t, s, n, ids);
  int prefix = t->add_space_prefix;
  if ((t->space_prefix_first && !first) || (t->space_prefix_unless_space && s[0] == ' '))
    t->add_space_prefix = 0;
  rlx_status st = spm_encode(t, s, n, ids);
  t->add_space_prefix = prefix;
  return st;
}

/* Splits text at special tokens (user-defined always, control ones with
 * RLX_TOKENIZE_PARSE_SPECIAL) and encodes the plain text between them. */
static rlx_status encode_all(rlx_tokenizer* t, const char* text, size_t len, int32_t flags,
                             tok_ids* ids) {
  int parse_control = (flags & RLX_TOKENIZE_PARSE_SPECIAL) != 0;
  size_t plain = 0;
  for (size_t i = 0; i < len;) {
    int32_t id = t->n_specials ? special_at(t, text + i, len - i, parse_control) : -1;
    if (id < 0) {
      i++;
      continue;
    }
    RLX_RETURN_IF_ERROR(encode_plain(t, text + plain, i - plain, plain == 0, ids));
    RLX_RETURN_IF_ERROR(tok_ids_push(ids, id, &t->err));
    size_t n;
    (void)tok_text(t, id, &n);
    i += n;
    plain = i;
  }
  return encode_plain(t, text + plain, len - plain, plain == 0, ids);
}

rlx_status rlx_tokenizer_encode(rlx_tokenizer* t, const char* text, size_t len, int32_t flags,
                                int32_t** out_ids, int64_t* out_n) {
  if (!t || (!text && len) || !out_ids || !out_n) return RLX_INVALID_ARGUMENT;
  *out_ids = NULL;
  *out_n = 0;
  if (len >= INT32_MAX) /* symbols and code points are indexed in 32 bits */
    return rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "tokenizer: a text of %zu bytes is over 2 GiB",
                    len);
  tok_ids ids = {0};
  int add = (flags & RLX_TOKENIZE_ADD_SPECIAL) != 0;
  rlx_status s = RLX_OK;
  if (add && t->add_bos && t->bos >= 0) s = tok_ids_push(&ids, t->bos, &t->err);
  char* nfc = NULL; /* the NFC form, when the vocab asks for it and it differs */
  if (s == RLX_OK && t->normalize_nfc && len) s = uni_nfc(text, len, &nfc, &len, &t->err);
  if (s == RLX_OK) s = encode_all(t, nfc ? nfc : text ? text : "", len, flags, &ids);
  free(nfc);
  if (s == RLX_OK && add && t->add_eos && t->eos >= 0) s = tok_ids_push(&ids, t->eos, &t->err);
  if (s == RLX_OK && !ids.v) { /* no ids: still hand back an allocation, never NULL */
    ids.v = malloc(sizeof *ids.v);
    if (!ids.v) s = rlx_fail(&t->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  if (s != RLX_OK) {
    free(ids.v);
    return s;
  }
  *out_ids = ids.v;
  *out_n = ids.n;
  return RLX_OK;
}

rlx_status rlx_tokenizer_decode(rlx_tokenizer* t, const int32_t* ids, int64_t n, int32_t flags,
                                char** out_text, size_t* out_len) {
  if (!t || (!ids && n) || !out_text) return RLX_INVALID_ARGUMENT;
  *out_text = NULL;
  char* buf = malloc(64);
  size_t len = 0, cap = 64;
  RLX_CHECK_ALLOC(&t->err, buf);
  rlx_status s = RLX_OK;
  int wrote = 0; /* a token has been written: only the first loses its space */
  for (int64_t i = 0; i < n && s == RLX_OK; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= t->n_tokens) {
      s = rlx_fail(&t->err, RLX_INVALID_ARGUMENT, "tokenizer: id %d (at %lld) outside the vocab of %d",
                   id, (long long)i, t->n_tokens);
      break;
    }
    if (t->types[id] == TOK_CONTROL && !(flags & RLX_TOKENIZE_PARSE_SPECIAL)) continue;
    int first = !wrote;
    wrote = 1;
    s = t->family == TOK_FAMILY_BPE ? bpe_token_bytes(t, id, &buf, &len, &cap, &t->err)
                                    : spm_token_bytes(t, id, &buf, &len, &cap, &t->err);
    /* the space SentencePiece put before the first word is not the user's */
    if (s == RLX_OK && first && t->family == TOK_FAMILY_SPM && t->add_space_prefix &&
        len > 0 && buf[0] == ' ' && t->types[id] == TOK_NORMAL) {
      memmove(buf, buf + 1, --len);
    }
  }
  if (s == RLX_OK && len + 1 > cap) {
    char* b = realloc(buf, len + 1);
    if (!b) s = rlx_fail(&t->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    else buf = b;
  }
  if (s != RLX_OK) {
    free(buf);
    return s;
  }
  buf[len] = 0;
  *out_text = buf;
  if (out_len) *out_len = len;
  return RLX_OK;
}
