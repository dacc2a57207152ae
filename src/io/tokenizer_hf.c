/* Hugging Face tokenizers (tokenizer.json, with tokenizer_config.json,
 * generation_config.json and chat_template.jinja when present) mapped onto
 * the GGUF tokenizer families (tokenizer.h): nothing here tokenizes, it
 * only fills in the same rlx_tokenizer fields the GGUF reader fills.
 *
 *   vocab + added_tokens  -> tokens by id (ids missing from both are
 *                            unused empty tokens); added special tokens
 *                            are control tokens, the other added ones
 *                            user-defined; <0xXX> with byte_fallback are
 *                            byte tokens, model.unk_token the unknown one
 *   ByteLevel pre_tokenizer -> byte-level BPE; the Split regex in front of
 *                            it names the pre-tokenizer (the table below)
 *   Prepend / Replace "▁" normalizer or Metaspace -> SentencePiece, whose
 *                            scores come from the merge ranks: a token's
 *                            score is -(rank of the first merge making it),
 *                            NaN (never merged into) when no merge does
 *   merges                -> "a b" or ["a", "b"]; rank = position
 *   post_processor TemplateProcessing -> add BOS / EOS when the config
 *                            does not say
 * Everything is copied: the JSON objects are freed before returning. */
#include "io/tokenizer.h"
#include "io/safetensors.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"

static rlx_status report(rlx_status s, const rlx_error* err, char** out_error) {
  if (out_error) *out_error = s == RLX_OK ? NULL : strdup(err->msg);
  return s;
}

#ifdef RLX_HAVE_JSONC
#include <json.h>

/* ------------------------------------------------------------ JSON helpers */

typedef struct hf_ctx {
  rlx_tokenizer* t;
  const hf_texts* in;
  json_object *tok, *cfg, *gen;
  const char* file; /* tokenizer.json's name, for messages */
  rlx_error* err;
} hf_ctx;

/* o[key], NULL when o is no object, the key is absent or its value null. */
static json_object* get(json_object* o, const char* key) {
  json_object* v = NULL;
  if (!o || !json_object_is_type(o, json_type_object)) return NULL;
  return json_object_object_get_ex(o, key, &v) ? v : NULL;
}
static int is(json_object* v, json_type type) { return v && json_object_is_type(v, type); }
static const char* str(json_object* v) { return is(v, json_type_string) ? json_object_get_string(v) : NULL; }
static int str_is(json_object* v, const char* s) { return str(v) && strcmp(str(v), s) == 0; }
/* A JSON boolean, or fallback when absent (anything else is -1: malformed). */
static int flag(json_object* v, int fallback) {
  if (!v) return fallback;
  return is(v, json_type_boolean) ? json_object_get_boolean(v) : -1;
}

static rlx_status malformed(hf_ctx* c, const char* file, const char* key, const char* what) {
  return rlx_fail(c->err, RLX_INVALID_ARGUMENT, "%s: '%s' %s", file, key, what);
}
static rlx_status unsupported(hf_ctx* c, const char* what, const char* name) {
  return rlx_fail(c->err, RLX_UNIMPLEMENTED, "%s: %s '%.80s' is not supported", c->file, what,
                  name ? name : "(none)");
}

/* A token id value: an integer in [0, 2^31). */
static int id_value(json_object* v, int64_t* id) {
  if (!is(v, json_type_int)) return 0;
  *id = json_object_get_int64(v);
  return *id >= 0 && *id < INT32_MAX;
}

/* ------------------------------------------------------------ the vocab */

typedef struct hf_entry {
  const char* s;
  size_t n;
  int32_t type;
} hf_entry;

/* Counts the entries of vocab and added_tokens, checking each, and their largest id. */
static rlx_status scan_ids(hf_ctx* c, json_object* vocab, json_object* added, int64_t* count,
                           int64_t* max_id) {
  int64_t id;
  *count = 0;
  *max_id = -1;
  json_object_object_foreach(vocab, key, val) {
    if (!id_value(val, &id)) return malformed(c, c->file, "model.vocab", "maps a token to no id");
    (void)key;
    ++*count;
    if (id > *max_id) *max_id = id;
  }
  size_t n = added ? json_object_array_length(added) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object* a = json_object_array_get_idx(added, i);
    if (!id_value(get(a, "id"), &id) || !str(get(a, "content")))
      return malformed(c, c->file, "added_tokens", "has an entry without an id and content");
    ++*count;
    if (id > *max_id) *max_id = id;
  }
  if (*max_id < 0) return malformed(c, c->file, "model.vocab", "is empty");
  /* ids are dense in real files; a sparse one would allocate for nothing */
  if (*max_id >= 2 * *count + 1024)
    return malformed(c, c->file, "model.vocab", "has ids far beyond its token count");
  return RLX_OK;
}

/* "<0xXX>": the byte tokens of byte_fallback. */
static int is_byte_token(const char* s, size_t n) {
  return n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && strchr("0123456789ABCDEF", s[3]) &&
         strchr("0123456789ABCDEF", s[4]) && s[3] && s[4];
}

/* Copies the entries into the tokenizer's one block of text. */
static rlx_status store_tokens(hf_ctx* c, const hf_entry* e, int32_t n) {
  rlx_tokenizer* t = c->t;
  uint64_t total = 0;
  for (int32_t i = 0; i < n; i++) total += e[i].n;
  t->n_tokens = n;
  t->text = malloc(total ? total : 1);
  t->text_at = malloc(((size_t)n + 1) * sizeof *t->text_at);
  t->types = malloc((size_t)n * sizeof *t->types);
  RLX_CHECK_ALLOC(c->err, t->text && t->text_at && t->types);
  uint64_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    t->text_at[i] = at;
    if (e[i].n) memcpy(t->text + at, e[i].s, e[i].n);
    at += e[i].n;
    t->types[i] = e[i].type;
  }
  t->text_at[n] = at;
  return RLX_OK;
}

static rlx_status read_vocab(hf_ctx* c, json_object* model, int byte_fallback) {
  json_object* vocab = get(model, "vocab");
  json_object* added = get(c->tok, "added_tokens");
  if (!is(vocab, json_type_object))
    return malformed(c, c->file, "model.vocab", "must be an object of token -> id");
  if (added && !is(added, json_type_array))
    return malformed(c, c->file, "added_tokens", "must be an array");
  int64_t count, max_id;
  RLX_RETURN_IF_ERROR(scan_ids(c, vocab, added, &count, &max_id));
  int32_t n = (int32_t)(max_id + 1);
  hf_entry* e = calloc((size_t)n, sizeof *e);
  RLX_CHECK_ALLOC(c->err, e);
  for (int32_t i = 0; i < n; i++) e[i] = (hf_entry){"", 0, TOK_UNUSED};
  json_object_object_foreach(vocab, key, val) {
    int32_t id = (int32_t)json_object_get_int64(val);
    e[id] = (hf_entry){key, strlen(key), TOK_NORMAL};
    if (byte_fallback && is_byte_token(key, e[id].n)) e[id].type = TOK_BYTE;
  }
  size_t n_added = added ? json_object_array_length(added) : 0;
  for (size_t i = 0; i < n_added; i++) {
    json_object* a = json_object_array_get_idx(added, i);
    json_object* content = get(a, "content");
    int32_t id = (int32_t)json_object_get_int64(get(a, "id"));
    int special = flag(get(a, "special"), 0) == 1;
    e[id] = (hf_entry){json_object_get_string(content), (size_t)json_object_get_string_len(content),
                       special ? TOK_CONTROL : TOK_USER_DEFINED};
  }
  rlx_status s = store_tokens(c, e, n);
  free(e);
  return s;
}

/* ------------------------------------------------------------ merges */

/* Merge i as its two halves. */
static int merge_halves(json_object* m, const char** l, size_t* ln, const char** r, size_t* rn) {
  if (is(m, json_type_string)) {
    const char* s = json_object_get_string(m);
    size_t n = (size_t)json_object_get_string_len(m);
    const char* sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
    if (!sp) return 0;
    *l = s, *ln = (size_t)(sp - s), *r = sp + 1, *rn = n - *ln - 1;
    return 1;
  }
  if (!is(m, json_type_array) || json_object_array_length(m) != 2) return 0;
  json_object *a = json_object_array_get_idx(m, 0), *b = json_object_array_get_idx(m, 1);
  if (!str(a) || !str(b)) return 0;
  *l = json_object_get_string(a), *ln = (size_t)json_object_get_string_len(a);
  *r = json_object_get_string(b), *rn = (size_t)json_object_get_string_len(b);
  return 1;
}

/* Each merge whose halves and result are tokens: a BPE rule (rank i), or
 * for SentencePiece the score of its result (the first rank making it). */
static rlx_status read_merges(hf_ctx* c, json_object* model) {
  rlx_tokenizer* t = c->t;
  json_object* merges = get(model, "merges");
  if (!is(merges, json_type_array))
    return malformed(c, c->file, "model.merges", "must be an array");
  size_t n = json_object_array_length(merges);
  if (n >= INT32_MAX) return malformed(c, c->file, "model.merges", "is too long");
  if (t->family == TOK_FAMILY_BPE) RLX_RETURN_IF_ERROR(bpe_merges_reserve(t, n, c->err));
  char* scratch = NULL;
  size_t cap = 0;
  rlx_status s = RLX_OK;
  for (size_t i = 0; i < n && s == RLX_OK; i++) {
    const char *l, *r;
    size_t ln, rn;
    if (!merge_halves(json_object_array_get_idx(merges, i), &l, &ln, &r, &rn)) {
      s = malformed(c, c->file, "model.merges", "has an entry that is neither \"a b\" nor [a, b]");
      break;
    }
    if (ln + rn > cap) {
      free(scratch);
      cap = 2 * (ln + rn);
      scratch = malloc(cap);
      if (!scratch) s = rlx_fail(c->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
      if (!scratch) break;
    }
    memcpy(scratch, l, ln);
    memcpy(scratch + ln, r, rn);
    int32_t li = tok_find(t, l, ln), ri = tok_find(t, r, rn), m = tok_find(t, scratch, ln + rn);
    if (li < 0 || ri < 0 || m < 0) continue;
    if (t->family == TOK_FAMILY_BPE) (void)bpe_merge_add(t, li, ri, m, (int32_t)i);
    else if (isnan(t->scores[m])) t->scores[m] = -(float)i;
  }
  free(scratch);
  return s;
}

/* ------------------------------------------------------------ pre-tokenizers */

/* The Split regexes real checkpoints write in front of ByteLevel, and the
 * pre-tokenizer (tokenizer_bpe.c) that implements each. */
static const struct {
  const char* regex;
  const char* pre;
} k_regexes[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", "gpt-2"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "llama-bpe"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     "qwen2"},
};

/* A ByteLevel pre-tokenizer: use_regex must be as wanted, no prefix space. */
static rlx_status check_byte_level(hf_ctx* c, json_object* p, int want_regex) {
  if (flag(get(p, "add_prefix_space"), 0) != 0)
    return unsupported(c, "ByteLevel pre-tokenizer with", "add_prefix_space");
  if (flag(get(p, "use_regex"), 1) != want_regex)
    return unsupported(c, "ByteLevel pre-tokenizer with use_regex", want_regex ? "false" : "true");
  return RLX_OK;
}

static rlx_status split_pre(hf_ctx* c, json_object* split, const char** pre) {
  const char* regex = str(get(get(split, "pattern"), "Regex"));
  if (!regex) return unsupported(c, "Split pre-tokenizer without", "pattern.Regex");
  if (!str_is(get(split, "behavior"), "Isolated") || flag(get(split, "invert"), 0) != 0)
    return unsupported(c, "Split behavior (Isolated, invert false are)", str(get(split, "behavior")));
  for (size_t i = 0; i < sizeof k_regexes / sizeof k_regexes[0]; i++)
    if (strcmp(regex, k_regexes[i].regex) == 0) {
      *pre = k_regexes[i].pre;
      return RLX_OK;
    }
  return rlx_fail(c->err, RLX_UNIMPLEMENTED,
                  "%s: the Split regex '%.100s' is not one rlx knows (GPT-2's, Llama-3's, "
                  "Qwen2's)",
                  c->file, regex);
}

/* Byte-level BPE: ByteLevel, Sequence [Split, ByteLevel] or [Digits, ByteLevel]. */
static rlx_status byte_level_pre(hf_ctx* c, json_object* p, const char** pre) {
  const char* type = str(get(p, "type"));
  if (str_is(get(p, "type"), "ByteLevel")) {
    *pre = "gpt-2";
    return check_byte_level(c, p, 1);
  }
  json_object* list = get(p, "pretokenizers");
  if (!str_is(get(p, "type"), "Sequence") || !is(list, json_type_array) ||
      json_object_array_length(list) != 2)
    return unsupported(c, "pre_tokenizer", type);
  json_object *first = json_object_array_get_idx(list, 0), *last = json_object_array_get_idx(list, 1);
  if (!str_is(get(last, "type"), "ByteLevel"))
    return unsupported(c, "pre_tokenizer Sequence ending in", str(get(last, "type")));
  if (str_is(get(first, "type"), "Digits")) {
    if (flag(get(first, "individual_digits"), 0) != 1)
      return unsupported(c, "Digits pre-tokenizer with individual_digits", "false");
    *pre = "starcoder";
    return check_byte_level(c, last, 1);
  }
  if (!str_is(get(first, "type"), "Split"))
    return unsupported(c, "pre_tokenizer Sequence starting with", str(get(first, "type")));
  RLX_RETURN_IF_ERROR(split_pre(c, first, pre));
  return check_byte_level(c, last, 0);
}

/* Normalizer of byte-level BPE: none, or NFC (applied before encoding). */
static rlx_status byte_level_normalizer(hf_ctx* c, json_object* nz) {
  if (!nz) return RLX_OK;
  if (str_is(get(nz, "type"), "NFC")) {
    c->t->normalize_nfc = 1;
    return RLX_OK;
  }
  return unsupported(c, "normalizer", str(get(nz, "type")));
}

/* ------------------------------------------------------------ SentencePiece style */

static const char k_space[] = "\xE2\x96\x81"; /* U+2581 */

/* Replace(" " -> "▁") and Prepend("▁"): sets *replace / *prepend. */
static int spm_normalizer_step(json_object* n, int* replace, int* prepend) {
  if (str_is(get(n, "type"), "Prepend") && str_is(get(n, "prepend"), k_space)) return *prepend = 1;
  if (str_is(get(n, "type"), "Replace") && str_is(get(get(n, "pattern"), "String"), " ") &&
      str_is(get(n, "content"), k_space))
    return *replace = 1;
  return 0;
}

/* Whether the file writes spaces as '▁' (SentencePiece), and sets the
 * space prefix: normalizer [Prepend, Replace] or pre_tokenizer Metaspace. */
static rlx_status spm_style(hf_ctx* c, json_object* nz, json_object* pre, int* is_spm) {
  int replace = 0, prepend = 0;
  json_object* list = get(nz, "normalizers");
  if (str_is(get(nz, "type"), "Sequence") && is(list, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(list); i++)
      if (!spm_normalizer_step(json_object_array_get_idx(list, i), &replace, &prepend))
        return unsupported(c, "normalizer step",
                           str(get(json_object_array_get_idx(list, i), "type")));
  } else if (nz && !spm_normalizer_step(nz, &replace, &prepend)) {
    *is_spm = 0;
    return RLX_OK;
  }
  if (str_is(get(pre, "type"), "Metaspace")) {
    if (!str_is(get(pre, "replacement"), k_space) || flag(get(pre, "split"), 1) != 0)
      return unsupported(c, "Metaspace pre-tokenizer (replacement '▁', split false is)", "other");
    const char* scheme = str(get(pre, "prepend_scheme"));
    replace = 1;
    prepend = scheme ? strcmp(scheme, "never") != 0 : flag(get(pre, "add_prefix_space"), 1) == 1;
    c->t->space_prefix_first = scheme && strcmp(scheme, "first") == 0;
    c->t->space_prefix_unless_space = 1; /* Metaspace prepends only to text not starting with '▁' */
  } else if (pre && replace) {
    return unsupported(c, "pre_tokenizer after a '▁' normalizer", str(get(pre, "type")));
  }
  *is_spm = replace;
  c->t->add_space_prefix = prepend;
  return RLX_OK;
}

/* ------------------------------------------------------------ the model */

/* A non-empty string option of model that rlx does not implement. */
static rlx_status refuse_affix(hf_ctx* c, json_object* model, const char* key) {
  const char* v = str(get(model, key));
  return v && *v ? unsupported(c, key, v) : RLX_OK;
}

/* SentencePiece: scores NaN until the merges set them; <0xXX> only with byte_fallback. */
static rlx_status spm_family(hf_ctx* c, int byte_fallback) {
  rlx_tokenizer* t = c->t;
  t->family = TOK_FAMILY_SPM;
  t->scores = malloc((size_t)t->n_tokens * sizeof *t->scores);
  RLX_CHECK_ALLOC(c->err, t->scores);
  for (int32_t i = 0; i < t->n_tokens; i++) t->scores[i] = NAN;
  RLX_RETURN_IF_ERROR(spm_init(t, c->err));
  if (!byte_fallback) memset(t->byte_ids, 0xFF, sizeof t->byte_ids);
  snprintf(t->kind, sizeof t->kind, "llama (default), tokenizer.json");
  return RLX_OK;
}

static rlx_status byte_level_family(hf_ctx* c, json_object* nz, json_object* pre,
                                    int byte_fallback, int ignore_merges) {
  rlx_tokenizer* t = c->t;
  const char* pre_name = "default";
  if (byte_fallback) return unsupported(c, "byte_fallback with pre_tokenizer", str(get(pre, "type")));
  if (!pre) return unsupported(c, "BPE without a ByteLevel or Metaspace pre_tokenizer:", "null");
  RLX_RETURN_IF_ERROR(byte_level_normalizer(c, nz));
  RLX_RETURN_IF_ERROR(byte_level_pre(c, pre, &pre_name));
  t->family = TOK_FAMILY_BPE;
  RLX_RETURN_IF_ERROR(bpe_setup(t, pre_name, c->err));
  if (ignore_merges >= 0) t->ignore_merges = ignore_merges; /* else the pre-tokenizer's default */
  snprintf(t->kind, sizeof t->kind, "gpt2 (%s), tokenizer.json", pre_name);
  return RLX_OK;
}

static rlx_status read_model(hf_ctx* c) {
  rlx_tokenizer* t = c->t;
  json_object* model = get(c->tok, "model");
  if (!is(model, json_type_object)) return malformed(c, c->file, "model", "must be an object");
  json_object* type = get(model, "type");
  if (type && !str_is(type, "BPE")) return unsupported(c, "model type", str(type));
  RLX_RETURN_IF_ERROR(refuse_affix(c, model, "continuing_subword_prefix"));
  RLX_RETURN_IF_ERROR(refuse_affix(c, model, "end_of_word_suffix"));
  int byte_fallback = flag(get(model, "byte_fallback"), 0);
  int ignore_merges = flag(get(model, "ignore_merges"), -2);
  if (byte_fallback < 0 || ignore_merges == -1)
    return malformed(c, c->file, "model.byte_fallback / model.ignore_merges", "must be a boolean");
  json_object *nz = get(c->tok, "normalizer"), *pre = get(c->tok, "pre_tokenizer");
  int is_spm = 0;
  RLX_RETURN_IF_ERROR(spm_style(c, nz, pre, &is_spm));
  RLX_RETURN_IF_ERROR(read_vocab(c, model, byte_fallback));
  RLX_RETURN_IF_ERROR(tok_index_vocab(t, c->err));
  RLX_RETURN_IF_ERROR(is_spm ? spm_family(c, byte_fallback)
                             : byte_level_family(c, nz, pre, byte_fallback, ignore_merges));
  const char* unk = str(get(model, "unk_token"));
  t->unk = unk ? tok_find(t, unk, strlen(unk)) : -1;
  if (t->unk >= 0 && t->types[t->unk] == TOK_NORMAL) t->types[t->unk] = TOK_UNKNOWN;
  return read_merges(c, model);
}

/* ------------------------------------------------------------ special tokens */

/* A token named by a config value: "text" or {"content": "text"}; -1 when absent. */
static rlx_status named_token(hf_ctx* c, json_object* v, const char* file, const char* key,
                              int32_t* id) {
  *id = -1;
  if (!v) return RLX_OK;
  const char* s = str(v) ? str(v) : str(get(v, "content"));
  if (!s) return malformed(c, file, key, "must be a string or {\"content\": string}");
  *id = tok_find(c->t, s, strlen(s));
  if (*id < 0) return malformed(c, file, key, "names a text that is no token");
  return RLX_OK;
}

/* An id value of generation_config.json: an integer or a non-empty list;
 * *id is the first, and all (up to 8) go to all[] when it is given. */
static rlx_status config_id(hf_ctx* c, json_object* v, const char* key, int32_t* id,
                            int32_t* all, int32_t* n_all) {
  int64_t x;
  *id = -1;
  if (!v) return RLX_OK;
  int list = is(v, json_type_array);
  size_t n = list ? json_object_array_length(v) : 1;
  for (size_t i = 0; i < n; i++) {
    json_object* e = list ? json_object_array_get_idx(v, i) : v;
    if (!id_value(e, &x) || x >= c->t->n_tokens)
      return malformed(c, c->in->generation_name, key, "must be a token id (or a list of them)");
    if (i == 0) *id = (int32_t)x;
    if (all && *n_all < 8) all[(*n_all)++] = (int32_t)x;
  }
  if (n == 0) return malformed(c, c->in->generation_name, key, "is an empty list");
  return RLX_OK;
}

/* The TemplateProcessing post-processor (alone or in a Sequence), or NULL. */
static json_object* template_processor(json_object* p) {
  if (str_is(get(p, "type"), "TemplateProcessing")) return p;
  json_object* list = get(p, "processors");
  if (!str_is(get(p, "type"), "Sequence") || !is(list, json_type_array)) return NULL;
  for (size_t i = 0; i < json_object_array_length(list); i++)
    if (str_is(get(json_object_array_get_idx(list, i), "type"), "TemplateProcessing"))
      return json_object_array_get_idx(list, i);
  return NULL;
}

/* The id of template piece {"SpecialToken": {"id": name}}, or -1 (no special token). */
static rlx_status template_piece(hf_ctx* c, json_object* proc, json_object* piece, int32_t* id) {
  *id = -1;
  json_object* name = get(get(piece, "SpecialToken"), "id");
  if (!name) return RLX_OK;
  json_object* ids = get(get(get(proc, "special_tokens"), str(name) ? str(name) : ""), "ids");
  int64_t x;
  if (is(ids, json_type_array) && json_object_array_length(ids) == 1 &&
      id_value(json_object_array_get_idx(ids, 0), &x) && x < c->t->n_tokens) {
    *id = (int32_t)x;
    return RLX_OK;
  }
  return named_token(c, name, c->file, "post_processor.single", id);
}

/* BOS / EOS the template puts around a single sequence. */
static rlx_status template_specials(hf_ctx* c, int32_t* bos, int32_t* eos) {
  json_object* proc = template_processor(get(c->tok, "post_processor"));
  json_object* single = get(proc, "single");
  *bos = *eos = -1;
  if (!proc) return RLX_OK;
  if (!is(single, json_type_array) || json_object_array_length(single) == 0)
    return malformed(c, c->file, "post_processor.single", "must be a non-empty array");
  size_t n = json_object_array_length(single);
  RLX_RETURN_IF_ERROR(template_piece(c, proc, json_object_array_get_idx(single, 0), bos));
  if (n > 1) RLX_RETURN_IF_ERROR(template_piece(c, proc, json_object_array_get_idx(single, n - 1), eos));
  return RLX_OK;
}

static rlx_status read_specials(hf_ctx* c) {
  rlx_tokenizer* t = c->t;
  const char* cfg = c->in->config_name;
  int32_t gen_bos, gen_eos, tpl_bos, tpl_eos;
  RLX_RETURN_IF_ERROR(named_token(c, get(c->cfg, "bos_token"), cfg, "bos_token", &t->bos));
  RLX_RETURN_IF_ERROR(named_token(c, get(c->cfg, "eos_token"), cfg, "eos_token", &t->eos));
  RLX_RETURN_IF_ERROR(config_id(c, get(c->gen, "bos_token_id"), "bos_token_id", &gen_bos, NULL, NULL));
  RLX_RETURN_IF_ERROR(config_id(c, get(c->gen, "eos_token_id"), "eos_token_id", &gen_eos,
                                t->end_ids, &t->n_end_ids));
  RLX_RETURN_IF_ERROR(template_specials(c, &tpl_bos, &tpl_eos));
  if (t->bos < 0) t->bos = gen_bos;
  if (t->eos < 0) t->eos = gen_eos;
  t->add_bos = flag(get(c->cfg, "add_bos_token"), -2);
  t->add_eos = flag(get(c->cfg, "add_eos_token"), -2);
  if (t->add_bos == -1 || t->add_eos == -1)
    return malformed(c, cfg, "add_bos_token / add_eos_token", "must be a boolean");
  /* no word from the config: what the post-processor adds */
  if (t->add_bos < 0) t->add_bos = tpl_bos >= 0;
  if (t->add_eos < 0) t->add_eos = tpl_eos >= 0;
  if (tpl_bos >= 0 && t->bos < 0) t->bos = tpl_bos;
  if (tpl_eos >= 0 && t->eos < 0) t->eos = tpl_eos;
  return RLX_OK;
}

/* ------------------------------------------------------------ the chat template */

static rlx_status copy_text(hf_ctx* c, const char* s, size_t n) {
  c->t->chat_template = malloc(n + 1);
  RLX_CHECK_ALLOC(c->err, c->t->chat_template);
  memcpy(c->t->chat_template, s, n);
  c->t->chat_template[n] = 0;
  return RLX_OK;
}

/* tokenizer_config.json's chat_template: a string, or a list of {name,
 * template} (the "default" one); else chat_template.jinja. */
static rlx_status read_chat_template(hf_ctx* c) {
  json_object* v = get(c->cfg, "chat_template");
  if (is(v, json_type_array)) {
    json_object* pick = NULL;
    for (size_t i = 0; i < json_object_array_length(v); i++) {
      json_object* e = json_object_array_get_idx(v, i);
      if (!str(get(e, "template")))
        return malformed(c, c->in->config_name, "chat_template", "has an entry without a template");
      if (!pick || str_is(get(e, "name"), "default")) pick = e;
    }
    v = get(pick, "template");
  }
  if (v && !str(v))
    return malformed(c, c->in->config_name, "chat_template", "must be a string or a list");
  if (v) return copy_text(c, json_object_get_string(v), (size_t)json_object_get_string_len(v));
  if (c->in->chat_template) return copy_text(c, c->in->chat_template, c->in->chat_template_len);
  return RLX_OK;
}

/* ------------------------------------------------------------ building */

static rlx_status parse_all(hf_ctx* c) {
  const hf_texts* in = c->in;
  RLX_RETURN_IF_ERROR(rlx_json_parse_one(in->tokenizer, in->tokenizer_len, c->file, 0, &c->tok, c->err));
  if (!is(c->tok, json_type_object))
    return malformed(c, c->file, "(top level)", "must be an object");
  if (in->config)
    RLX_RETURN_IF_ERROR(rlx_json_parse_one(in->config, in->config_len, in->config_name, 0, &c->cfg, c->err));
  if (in->generation)
    RLX_RETURN_IF_ERROR(
        rlx_json_parse_one(in->generation, in->generation_len, in->generation_name, 0, &c->gen, c->err));
  if (c->cfg && !is(c->cfg, json_type_object))
    return malformed(c, in->config_name, "(top level)", "must be an object");
  if (c->gen && !is(c->gen, json_type_object))
    return malformed(c, in->generation_name, "(top level)", "must be an object");
  return RLX_OK;
}

rlx_status tok_from_hf_texts(const hf_texts* in, rlx_tokenizer** out, rlx_error* err) {
  *out = NULL;
  hf_ctx c = {calloc(1, sizeof(rlx_tokenizer)), in, NULL, NULL, NULL,
              in->tokenizer_name ? in->tokenizer_name : "tokenizer.json", err};
  RLX_CHECK_ALLOC(err, c.t);
  c.t->bos = c.t->eos = c.t->unk = -1;
  rlx_status s = parse_all(&c);
  if (s == RLX_OK) s = read_model(&c);
  if (s == RLX_OK) s = read_specials(&c);
  if (s == RLX_OK) s = read_chat_template(&c);
  json_object_put(c.tok);
  json_object_put(c.cfg);
  json_object_put(c.gen);
  if (s != RLX_OK) {
    rlx_tokenizer_destroy(c.t);
    return s;
  }
  *out = c.t;
  return RLX_OK;
}

/* ------------------------------------------------------------ the files */

typedef struct hf_file {
  char path[4096];
  char* text;
  size_t len;
} hf_file;

/* Reads dir/name; an absent optional file leaves text NULL. */
static rlx_status read_one(const char* dir, const char* name, int required, hf_file* f,
                           rlx_error* err) {
  if (snprintf(f->path, sizeof f->path, "%s/%s", dir, name) >= (int)sizeof f->path)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "tokenizer: the path '%.200s' is too long", dir);
  struct stat st;
  if (!required && stat(f->path, &st) != 0) return RLX_OK;
  void* buf = NULL;
  rlx_status s = rlx_file_read_all(f->path, "tokenizer", (int64_t)1 << 30, &buf, &f->len, err);
  f->text = buf;
  return s;
}

static rlx_status from_files(const char* path, rlx_tokenizer** out, rlx_error* err) {
  struct stat st;
  char dir[4096], given[4096];
  const char* name = "tokenizer.json";
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(dir, sizeof dir, "%s", path);
  } else {
    snprintf(given, sizeof given, "%s", path);
    snprintf(dir, sizeof dir, "%s", dirname(given));
    snprintf(given, sizeof given, "%s", path);
    name = basename(given);
  }
  hf_file f[4] = {{{0}, NULL, 0}};
  rlx_status s = read_one(dir, name, 1, &f[0], err);
  if (s == RLX_OK) s = read_one(dir, "tokenizer_config.json", 0, &f[1], err);
  if (s == RLX_OK) s = read_one(dir, "generation_config.json", 0, &f[2], err);
  if (s == RLX_OK) s = read_one(dir, "chat_template.jinja", 0, &f[3], err);
  hf_texts in = {f[0].text, f[1].text, f[2].text, f[3].text, f[0].len, f[1].len, f[2].len,
                 f[3].len,  f[0].path, f[1].path, f[2].path};
  if (s == RLX_OK) s = tok_from_hf_texts(&in, out, err);
  for (int i = 0; i < 4; i++) free(f[i].text);
  return s;
}

rlx_status rlx_tokenizer_from_hf(const char* path, rlx_tokenizer** out, char** out_error) {
  rlx_error err = {{0}};
  if (!path || !out)
    return report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "tokenizer: NULL argument"), &err,
                  out_error);
  *out = NULL;
  return report(from_files(path, out, &err), &err, out_error);
}

#else /* no json-c */

rlx_status tok_from_hf_texts(const hf_texts* in, rlx_tokenizer** out, rlx_error* err) {
  (void)in;
  *out = NULL;
  return rlx_fail(err, RLX_UNIMPLEMENTED,
                  "tokenizer.json: this build has no json-c (install libjson-c-dev and rebuild)");
}

rlx_status rlx_tokenizer_from_hf(const char* path, rlx_tokenizer** out, char** out_error) {
  rlx_error err = {{0}};
  (void)path;
  if (out) *out = NULL;
  return report(rlx_fail(&err, RLX_UNIMPLEMENTED,
                         "tokenizer.json: this build has no json-c (install libjson-c-dev and "
                         "rebuild)"),
                &err, out_error);
}

#endif
