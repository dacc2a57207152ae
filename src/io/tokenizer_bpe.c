/* Byte-level BPE (tokenizer.ggml.model "gpt2"): GPT-2, Llama-3, Qwen2,
 * StarCoder and their relatives.
 *
 * Encoding: the text is split into pieces by the model's pre-tokenizer
 * (tokenizer.ggml.pre; the patterns below are hand-written matchers of the
 * regular expressions these models publish, tried left to right at each
 * position like the regex alternation); each piece's bytes are written as
 * the vocab's printable stand-in characters (GPT-2's byte -> code point
 * table: printable Latin-1 bytes stand for themselves, the other 68 bytes
 * for U+0100.. in byte order); then adjacent symbols merge by the rank of
 * their pair in tokenizer.ggml.merges, lowest first. */
#include "io/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ byte <-> char */

static int byte_is_printable(unsigned b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

static void build_byte_table(rlx_tokenizer* t) {
  unsigned next = 256;
  memset(t->cp_byte, 0xFF, sizeof t->cp_byte);
  for (unsigned b = 0; b < 256; b++) {
    t->byte_cp[b] = (uint16_t)(byte_is_printable(b) ? b : next++);
    t->cp_byte[t->byte_cp[b]] = (int16_t)b;
  }
  for (unsigned b = 0; b < 256; b++) {
    char c[4];
    int n = utf8_encode(t->byte_cp[b], c);
    t->byte_ids[b] = tok_find(t, c, (size_t)n);
  }
}

/* ------------------------------------------------------------ merges */

static uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  return k ^ (k >> 33);
}

static const bpe_merge* merge_find(const rlx_tokenizer* t, int32_t l, int32_t r) {
  uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r | (1ull << 63);
  for (uint64_t i = mix(key) & t->merges_mask;; i = (i + 1) & t->merges_mask) {
    if (t->merges[i].key == key) return &t->merges[i];
    if (t->merges[i].key == 0) return NULL;
  }
}

/* "left right" -> ids of left, right and left+right; 0 when a part is no token. */
static int parse_merge(const rlx_tokenizer* t, rlx_gguf_string m, int32_t* l, int32_t* r,
                       int32_t* merged, char* scratch) {
  const char* sp = m.len > 1 ? memchr(m.data + 1, ' ', m.len - 1) : NULL;
  if (!sp) return 0;
  size_t ln = (size_t)(sp - m.data), rn = m.len - ln - 1;
  *l = tok_find(t, m.data, ln);
  *r = tok_find(t, sp + 1, rn);
  memcpy(scratch, m.data, ln);
  memcpy(scratch + ln, sp + 1, rn);
  *merged = tok_find(t, scratch, ln + rn);
  return *l >= 0 && *r >= 0 && *merged >= 0;
}

rlx_status bpe_merges_reserve(rlx_tokenizer* t, uint64_t n, rlx_error* err) {
  uint64_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  t->merges = calloc(cap, sizeof *t->merges);
  RLX_CHECK_ALLOC(err, t->merges);
  t->merges_mask = cap - 1;
  return RLX_OK;
}

int bpe_merge_add(rlx_tokenizer* t, int32_t l, int32_t r, int32_t merged, int32_t rank) {
  if (merge_find(t, l, r)) return 0;
  uint64_t key = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r | (1ull << 63);
  uint64_t at = mix(key) & t->merges_mask;
  while (t->merges[at].key) at = (at + 1) & t->merges_mask;
  t->merges[at] = (bpe_merge){key, rank, merged};
  return 1;
}

static rlx_status read_merges(rlx_tokenizer* t, rlx_gguf* g, rlx_error* err) {
  int64_t k = rlx_gguf_find_key(g, "tokenizer.ggml.merges");
  rlx_gguf_type et;
  uint64_t n;
  if (k < 0 || rlx_gguf_array_info(g, k, &et, &n) != RLX_OK || et != RLX_GGUF_STRING ||
      n >= INT32_MAX)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tokenizer: a gpt2 vocab needs tokenizer.ggml.merges (an array of strings)");
  RLX_RETURN_IF_ERROR(bpe_merges_reserve(t, n, err));
  char* scratch = NULL;
  size_t scratch_cap = 0;
  for (uint64_t i = 0; i < n; i++) {
    rlx_gguf_string m;
    (void)rlx_gguf_array_string(g, k, i, &m);
    if (m.len > scratch_cap) {
      free(scratch);
      scratch_cap = 2 * m.len;
      scratch = malloc(scratch_cap);
      RLX_CHECK_ALLOC(err, scratch);
    }
    int32_t l, r, merged;
    if (parse_merge(t, m, &l, &r, &merged, scratch)) (void)bpe_merge_add(t, l, r, merged, (int32_t)i);
  }
  free(scratch);
  return RLX_OK;
}

/* ------------------------------------------------------------ pre-tokenizer matchers */

/* Each matcher below implements one published regular expression (quoted
 * above it): tried at code point i, it returns the end of the match, or i
 * when the expression does not match there. */

static int is_l(uint32_t c) { return uni_is_letter(c); }
static int is_n(uint32_t c) { return uni_is_number(c); }
static int is_s(uint32_t c) { return uni_is_space(c); }
static int is_p(uint32_t c) { return uni_is_punct(c); }
static int is_other(uint32_t c) { return !is_s(c) && !is_l(c) && !is_n(c); }
static int is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
static int is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd at i (fold: ASCII case-insensitive): the end, or 0. */
static size_t contraction(const uint32_t* c, size_t end, size_t i, int fold) {
  if (c[i] != '\'' || i + 1 >= end) return 0;
  uint32_t a = fold ? lower_ascii(c[i + 1]) : c[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= end) return 0;
  uint32_t b = fold ? lower_ascii(c[i + 2]) : c[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

static size_t run(const uint32_t* c, size_t end, size_t j, int (*cls)(uint32_t)) {
  while (j < end && cls(c[j])) j++;
  return j;
}

/* \s+(?!\S)|\s+ : a run of white space, less its last character when that
 * one precedes a non-space (it then joins the next piece). */
static size_t space_run(const uint32_t* c, size_t end, size_t i) {
  size_t w = run(c, end, i, is_s);
  if (w == i) return i + 1; /* not reached: every character is in some class */
  if (w == end || w - i == 1) return w;
  return w - 1;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const uint32_t* c, size_t end, size_t i) {
  size_t j = contraction(c, end, i, 0);
  if (j) return j;
  size_t k = c[i] == ' ' && i + 1 < end ? i + 1 : i;
  if (is_l(c[k])) return run(c, end, k, is_l);
  if (is_n(c[k])) return run(c, end, k, is_n);
  if (is_other(c[k])) return run(c, end, k, is_other);
  return space_run(c, end, i);
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama-3: max 3) */
static size_t match_llama3_digits(const uint32_t* c, size_t end, size_t i, size_t max_digits) {
  size_t j = contraction(c, end, i, 1);
  if (j) return j;
  if (is_l(c[i])) return run(c, end, i, is_l);
  if (!is_crlf(c[i]) && !is_n(c[i]) && i + 1 < end && is_l(c[i + 1]))
    return run(c, end, i + 1, is_l);
  if (is_n(c[i])) {
    for (j = i; j < end && j - i < max_digits && is_n(c[j]);) j++;
    return j;
  }
  size_t k = c[i] == ' ' && i + 1 < end ? i + 1 : i;
  if (is_other(c[k])) return run(c, end, run(c, end, k, is_other), is_crlf);
  /* \s*[\r\n]+ : white space up to and including its last line break */
  size_t w = run(c, end, i, is_s), last = end;
  for (j = i; j < w; j++)
    if (is_crlf(c[j])) last = j;
  if (last != end) return last + 1;
  return space_run(c, end, i);
}

static size_t match_llama3(const uint32_t* c, size_t end, size_t i) {
  return match_llama3_digits(c, end, i, 3);
}

/* Qwen2: Llama-3's with \p{N} one at a time. */
static size_t match_qwen2(const uint32_t* c, size_t end, size_t i) {
  return match_llama3_digits(c, end, i, 1);
}

/* \p{N} */
static size_t match_one_number(const uint32_t* c, size_t end, size_t i) {
  (void)end;
  return is_n(c[i]) ? i + 1 : i;
}

/* \p{N}+ */
static size_t match_numbers(const uint32_t* c, size_t end, size_t i) {
  return run(c, end, i, is_n);
}

/* [\p{P}\$\+<=>\^~\|`]+ : punctuation, with the ASCII symbols counted in */
static int is_punct_or_ascii_symbol(uint32_t c) {
  return is_p(c) || (c < 128 && strchr("$+<=>^~|`", (int)c) && c);
}
static size_t match_punct(const uint32_t* c, size_t end, size_t i) {
  return run(c, end, i, is_punct_or_ascii_symbol);
}

/* [0-9][0-9][0-9] */
static size_t match_three_digits(const uint32_t* c, size_t end, size_t i) {
  return i + 3 <= end && is_ascii_digit(c[i]) && is_ascii_digit(c[i + 1]) &&
                 is_ascii_digit(c[i + 2])
             ? i + 3
             : i;
}

/* [\r\n] */
static size_t match_line_break(const uint32_t* c, size_t end, size_t i) {
  (void)end;
  return is_crlf(c[i]) ? i + 1 : i;
}

/* \s?X+ for a class X: one optional white space, then a run of X. */
static size_t space_then_run(const uint32_t* c, size_t end, size_t i, int (*cls)(uint32_t)) {
  if (cls(c[i])) return run(c, end, i, cls);
  if (is_s(c[i]) && i + 1 < end && cls(c[i + 1])) return run(c, end, i + 1, cls);
  return i;
}

/* \s?\p{L}+ and \s?\p{P}+ */
static size_t match_space_letters(const uint32_t* c, size_t end, size_t i) {
  return space_then_run(c, end, i, is_l);
}
static size_t match_space_punct(const uint32_t* c, size_t end, size_t i) {
  return space_then_run(c, end, i, is_p);
}

/* [一-龥ࠀ-一가-퟿]+ : CJK ideographs, U+0800..U+4E00, Hangul syllables */
static int is_cjk_range(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x0800 && c <= 0x4E00) ||
         (c >= 0xAC00 && c <= 0xD7FF);
}
static size_t match_cjk(const uint32_t* c, size_t end, size_t i) {
  return run(c, end, i, is_cjk_range);
}

/* \s?[<cased letters>]+ : DeepSeek-LLM spells out the letters that have
 * case (Latin, Greek, Cyrillic, ...); Unicode's cased-letter class (LC). */
static int is_cased_letter(uint32_t c) { return uni_is_cased_letter(c); }
static size_t match_space_cased(const uint32_t* c, size_t end, size_t i) {
  return space_then_run(c, end, i, is_cased_letter);
}

/* \s?[!-/:-~！-／：-～‘-‟　-。]+ : ASCII and full-width punctuation and symbols */
static int is_deepseek_punct(uint32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '~') || (c >= 0xFF01 && c <= 0xFF0F) ||
         (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) ||
         (c >= 0x3000 && c <= 0x3002);
}
static size_t match_space_deepseek_punct(const uint32_t* c, size_t end, size_t i) {
  return space_then_run(c, end, i, is_deepseek_punct);
}

/* \s+$ : white space that runs to the end of the piece */
static size_t match_trailing_space(const uint32_t* c, size_t end, size_t i) {
  size_t w = run(c, end, i, is_s);
  return w == end ? w : i;
}

/* ------------------------------------------------------------ init */

typedef struct pre_def {
  const char* name;
  bpe_pre pre;
  bpe_match_fn stages[BPE_MAX_STAGES];
} pre_def;

/* tokenizer.ggml.pre values and the regular expressions each applies in
 * turn (each to every piece the previous one left, matches and the text
 * between them alike). */
static const pre_def pre_defs[] = {
    {"gpt-2", BPE_PRE_OTHER, {match_gpt2}},
    {"default", BPE_PRE_OTHER, {match_gpt2}},
    {"mpt", BPE_PRE_OTHER, {match_gpt2}},
    {"olmo", BPE_PRE_OTHER, {match_gpt2}},
    {"jais", BPE_PRE_OTHER, {match_gpt2}},
    {"llama-bpe", BPE_PRE_LLAMA3, {match_llama3}},
    {"llama3", BPE_PRE_LLAMA3, {match_llama3}},
    {"smaug-bpe", BPE_PRE_LLAMA3, {match_llama3}},
    {"qwen2", BPE_PRE_OTHER, {match_qwen2}},
    /* Qwen3.5: Qwen2's split reproduces all 50 of llama.cpp's vectors, combining
     * marks included; whether its published pattern differs elsewhere is unchecked */
    {"qwen35", BPE_PRE_OTHER, {match_qwen2}},
    {"starcoder", BPE_PRE_OTHER, {match_one_number, match_gpt2}},
    {"refact", BPE_PRE_OTHER, {match_one_number, match_gpt2}},
    {"command-r", BPE_PRE_OTHER, {match_one_number, match_gpt2}},
    {"smollm", BPE_PRE_OTHER, {match_one_number, match_gpt2}},
    {"falcon", BPE_PRE_OTHER, {match_punct, match_gpt2, match_three_digits}},
    {"deepseek-coder", BPE_PRE_OTHER,
     {match_line_break, match_space_letters, match_space_punct, match_cjk, match_one_number}},
    {"deepseek-llm", BPE_PRE_OTHER,
     {match_line_break, match_space_cased, match_space_deepseek_punct, match_trailing_space,
      match_cjk, match_numbers}},
};

rlx_status bpe_setup(rlx_tokenizer* t, const char* pre, rlx_error* err) {
  if (!uni_available())
    return rlx_fail(err, RLX_UNIMPLEMENTED,
                    "tokenizer: byte-level BPE needs Unicode classes, and this build has no "
                    "ICU (install libicu-dev and rebuild)");
  const char* want = pre[0] ? pre : "default";
  size_t i = 0, n = sizeof pre_defs / sizeof pre_defs[0];
  while (i < n && strcmp(pre_defs[i].name, want) != 0) i++;
  if (i == n)
    return rlx_fail(err, RLX_UNIMPLEMENTED,
                    "tokenizer: pre-tokenizer '%s' is not supported (supported: gpt-2, mpt, "
                    "olmo, jais, llama-bpe, smaug-bpe, qwen2, qwen35, starcoder, refact, "
                    "command-r, smollm, falcon, deepseek-coder, deepseek-llm)",
                    want);
  t->pre = pre_defs[i].pre;
  for (t->n_stages = 0; t->n_stages < BPE_MAX_STAGES && pre_defs[i].stages[t->n_stages];)
    t->stages[t->n_stages] = pre_defs[i].stages[t->n_stages], t->n_stages++;
  /* Llama-3's tokenizer takes a piece that is a whole token as it is */
  t->ignore_merges = t->pre == BPE_PRE_LLAMA3;
  build_byte_table(t);
  return RLX_OK;
}

rlx_status bpe_init(rlx_tokenizer* t, rlx_gguf* g, const char* pre, rlx_error* err) {
  RLX_RETURN_IF_ERROR(bpe_setup(t, pre, err));
  return read_merges(t, g, err);
}

/* ------------------------------------------------------------ splitting */

/* The text being split: its code points and where each starts in bytes. */
typedef struct cps {
  uint32_t* c;
  uint32_t* at; /* n + 1 byte offsets */
  size_t n;
} cps;

typedef rlx_status (*piece_fn)(rlx_tokenizer* t, const char* text, size_t len, tok_ids* ids);

/* Splits code points [from, to) with stage k: its matches and the text
 * between them each go on to stage k + 1; after the last stage, a piece's
 * bytes go to emit. */
static rlx_status split_stage(rlx_tokenizer* t, const char* text, const cps* p, int k,
                              size_t from, size_t to, piece_fn emit, tok_ids* ids) {
  if (from == to) return RLX_OK;
  if (k == t->n_stages) return emit(t, text + p->at[from], p->at[to] - p->at[from], ids);
  size_t gap = from;
  for (size_t i = from; i < to;) {
    size_t j = t->stages[k](p->c, to, i);
    if (j == i) {
      i++;
      continue;
    }
    RLX_RETURN_IF_ERROR(split_stage(t, text, p, k + 1, gap, i, emit, ids));
    RLX_RETURN_IF_ERROR(split_stage(t, text, p, k + 1, i, j, emit, ids));
    gap = i = j;
  }
  return split_stage(t, text, p, k + 1, gap, to, emit, ids);
}

/* ------------------------------------------------------------ merging a piece */

static int bpe_pair(const rlx_tokenizer* t, const char* text, const tok_sym* l, const tok_sym* r,
                    double* priority, int32_t* merged) {
  (void)text;
  if (l->id < 0 || r->id < 0) return 0;
  const bpe_merge* m = merge_find(t, l->id, r->id);
  if (!m) return 0;
  *priority = m->rank;
  *merged = m->merged;
  return 1;
}

/* One piece: its bytes as vocab characters, merged, appended as ids. */
static rlx_status encode_piece(rlx_tokenizer* t, const char* s, size_t len, tok_ids* ids) {
  char* mapped = malloc(2 * len + 1); /* each byte becomes a 1- or 2-byte character */
  tok_sym* syms = malloc(len * sizeof *syms);
  rlx_status st = mapped && syms ? RLX_OK : rlx_fail(&t->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  size_t m = 0;
  for (size_t i = 0; st == RLX_OK && i < len; i++) {
    int n = utf8_encode(t->byte_cp[(unsigned char)s[i]], mapped + m);
    syms[i] = (tok_sym){(int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1, (uint32_t)m,
                        (uint32_t)n, t->byte_ids[(unsigned char)s[i]]};
    m += (size_t)n;
  }
  int32_t whole = st == RLX_OK && t->ignore_merges ? tok_find(t, mapped, m) : -1;
  if (whole >= 0) st = tok_ids_push(ids, whole, &t->err);
  else if (st == RLX_OK) st = tok_merge(t, mapped, syms, (int32_t)len, bpe_pair, &t->err);
  /* a byte whose character the vocab lacks (Falcon has no 'ÿ') is dropped,
   * as the Hugging Face tokenizer does without an unknown token */
  for (int32_t i = 0; whole < 0 && st == RLX_OK && i >= 0 && len; i = syms[i].next)
    if (syms[i].id >= 0) st = tok_ids_push(ids, syms[i].id, &t->err);
  free(mapped);
  free(syms);
  return st;
}

rlx_status bpe_encode(rlx_tokenizer* t, const char* text, size_t len, tok_ids* ids) {
  cps p = {malloc((len + 1) * sizeof(uint32_t)), malloc((len + 1) * sizeof(uint32_t)), 0};
  rlx_status st = p.c && p.at ? RLX_OK : rlx_fail(&t->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (size_t i = 0; st == RLX_OK && i < len; p.n++) {
    p.at[p.n] = (uint32_t)i;
    i += (size_t)utf8_decode((const unsigned char*)text + i, len - i, &p.c[p.n]);
  }
  if (st == RLX_OK) {
    p.at[p.n] = (uint32_t)len;
    st = split_stage(t, text, &p, 0, 0, p.n, encode_piece, ids);
  }
  free(p.c);
  free(p.at);
  return st;
}

/* ------------------------------------------------------------ decoding */

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

rlx_status bpe_token_bytes(const rlx_tokenizer* t, int32_t id, char** buf, size_t* len,
                           size_t* cap, rlx_error* err) {
  size_t n;
  const char* s = tok_text(t, id, &n);
  /* added tokens (control, user-defined) are stored as plain text */
  if (t->types[id] == TOK_CONTROL || t->types[id] == TOK_USER_DEFINED)
    return append(buf, len, cap, s, n, err);
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char*)s + i, n - i, &cp);
    if (cp < 324 && t->cp_byte[cp] >= 0) {
      char b = (char)t->cp_byte[cp];
      RLX_RETURN_IF_ERROR(append(buf, len, cap, &b, 1, err));
    } else {
      RLX_RETURN_IF_ERROR(append(buf, len, cap, s + i, (size_t)k, err));
    }
    i += (size_t)k;
  }
  return RLX_OK;
}
