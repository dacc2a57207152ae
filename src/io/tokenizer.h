/* Tokenizers built from a GGUF file's tokenizer.ggml.* metadata (public API
 * in rlx.h). The pieces:
 *   tokenizer.c          the vocab (tokens, scores, types, specials), the
 *                        text -> id hash, special-token splitting, decode
 *   tokenizer_bpe.c      byte-level BPE (GPT-2, Llama-3, Qwen2, StarCoder):
 *                        pre-tokenizer splits, byte -> char mapping, merges
 *   tokenizer_spm.c      SentencePiece (llama-spm): scores, byte fallback
 *   tokenizer_merge.c    the merge loop both share (a heap of candidate
 *                        pairs over a linked list of symbols)
 *   tokenizer_unicode.c  UTF-8 and the Unicode classes the pre-tokenizers
 *                        need (letter, number, white space, punctuation),
 *                        from ICU's libicuuc (Debian libicu-dev) */
#ifndef RLX_IO_TOKENIZER_H
#define RLX_IO_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "base/error.h"

/* token_type values of tokenizer.ggml.token_type */
enum {
  TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER_DEFINED = 4, TOK_UNUSED = 5,
  TOK_BYTE = 6
};

typedef enum tok_family { TOK_FAMILY_BPE, TOK_FAMILY_SPM } tok_family;

/* The byte-level BPE models whose pre-tokenizer changes other defaults. */
typedef enum bpe_pre { BPE_PRE_OTHER, BPE_PRE_LLAMA3 } bpe_pre;

/* One stage of a BPE pre-tokenizer, a hand-written matcher of one regular
 * expression: the end of its match at code point i of c[0..end), or i when
 * it does not match there. */
typedef size_t (*bpe_match_fn)(const uint32_t* c, size_t end, size_t i);
enum { BPE_MAX_STAGES = 6 };

/* A hash from byte strings to ids (open addressing, linear probing). */
typedef struct tok_map {
  int32_t* slots; /* id or -1 */
  uint64_t mask;
} tok_map;

/* A merge rule of byte-level BPE: left id + right id -> merged id, rank. */
typedef struct bpe_merge {
  uint64_t key; /* left << 32 | right; 0 marks an empty slot (ids are < 2^31) */
  int32_t rank, merged;
} bpe_merge;

struct rlx_tokenizer {
  tok_family family;
  bpe_pre pre;
  bpe_match_fn stages[BPE_MAX_STAGES]; /* applied in turn, each to every piece of the last */
  int n_stages;
  char kind[160];      /* "gpt2 (llama-bpe)" */
  int32_t n_tokens;
  char* text;          /* every token's bytes, back to back */
  uint64_t* text_at;   /* n_tokens + 1 offsets into text */
  float* scores;       /* SPM: n_tokens; NULL for BPE */
  int32_t* types;      /* n_tokens (TOK_NORMAL when the file has none) */
  tok_map by_text;
  bpe_merge* merges;   /* BPE: hash table by key */
  uint64_t merges_mask;
  int ignore_merges;   /* a pre-split piece that is a whole token skips merging (Llama-3) */
  int32_t bos, eos, unk;
  int add_bos, add_eos, add_space_prefix;
  int32_t byte_ids[256]; /* SPM byte fallback <0xXX>; BPE each byte's char token; -1 none */
  uint16_t byte_cp[256];  /* BPE: the code point each byte is written as in the vocab */
  int16_t cp_byte[324];   /* BPE: the inverse (-1: not a byte's code point) */
  int32_t* specials;   /* control and user-defined tokens, longest first */
  int32_t n_specials;
  uint8_t special_first[256]; /* 1 for a byte some special token starts with */
  char* chat_template; /* tokenizer.chat_template / tokenizer_config.json's; NULL: none */
  int normalize_nfc;      /* tokenizer.json normalizer NFC: the text is NFC'd before encoding */
  int space_prefix_first; /* Metaspace prepend_scheme "first": only the text's first piece */
  int space_prefix_unless_space; /* Metaspace: no prefix before a piece starting with ' ' */
  int32_t end_ids[8]; /* generation_config.json's eos_token_id (all of a list) */
  int32_t n_end_ids;
  rlx_error err;
};

/* ------------------------------------------------------------ vocab helpers (tokenizer.c) */

/* With text, text_at and types filled in: the text -> id hash and the
 * special-token list (rlx_tokenizer_from_gguf does the same). */
rlx_status tok_index_vocab(rlx_tokenizer* t, rlx_error* err);
/* A tokenizer from a Hugging Face tokenizer.json held in memory, with the
 * optional tokenizer_config.json, generation_config.json and chat template
 * texts (NULL: absent); names are the files' names for messages
 * (tokenizer_hf.c; rlx_tokenizer_from_hf reads the files). */
typedef struct hf_texts {
  const char *tokenizer, *config, *generation, *chat_template;
  size_t tokenizer_len, config_len, generation_len, chat_template_len;
  const char *tokenizer_name, *config_name, *generation_name;
} hf_texts;
rlx_status tok_from_hf_texts(const hf_texts* in, rlx_tokenizer** out, rlx_error* err);

/* Id of the token whose bytes are s[0..len), or -1. */
int32_t tok_find(const rlx_tokenizer* t, const char* s, size_t len);
static inline const char* tok_text(const rlx_tokenizer* t, int32_t id, size_t* len) {
  *len = (size_t)(t->text_at[id + 1] - t->text_at[id]);
  return t->text + t->text_at[id];
}

/* A growable list of ids. */
typedef struct tok_ids {
  int32_t* v;
  int64_t n, cap;
} tok_ids;
rlx_status tok_ids_push(tok_ids* ids, int32_t id, rlx_error* err);

/* ------------------------------------------------------------ families */

/* Loads merges and picks the pre-tokenizer (tokenizer_bpe.c). */
rlx_status bpe_init(rlx_tokenizer* t, rlx_gguf* g, const char* pre, rlx_error* err);
/* bpe_init's parts, for vocabs not read from a GGUF (tokenizer_hf.c): picks
 * the pre-tokenizer by its tokenizer.ggml.pre name and builds the byte
 * table (the vocab must be complete); then room for n merges, and one
 * merge rule (0 when the pair already has a rule: the first rank stays). */
rlx_status bpe_setup(rlx_tokenizer* t, const char* pre, rlx_error* err);
rlx_status bpe_merges_reserve(rlx_tokenizer* t, uint64_t n, rlx_error* err);
int bpe_merge_add(rlx_tokenizer* t, int32_t left, int32_t right, int32_t merged, int32_t rank);
/* Appends the ids of text (no special tokens inside) to ids. */
rlx_status bpe_encode(rlx_tokenizer* t, const char* text, size_t len, tok_ids* ids);
/* Appends the bytes token id stands for (byte-level chars mapped back). */
rlx_status bpe_token_bytes(const rlx_tokenizer* t, int32_t id, char** buf, size_t* len,
                           size_t* cap, rlx_error* err);

rlx_status spm_init(rlx_tokenizer* t, rlx_error* err);
/* Every piece of plain text gets the space prefix (when the vocab asks for
 * it): it starts the input or follows a special token. */
rlx_status spm_encode(rlx_tokenizer* t, const char* text, size_t len, tok_ids* ids);
rlx_status spm_token_bytes(const rlx_tokenizer* t, int32_t id, char** buf, size_t* len,
                           size_t* cap, rlx_error* err);

/* ------------------------------------------------------------ merging (tokenizer_merge.c) */

/* Symbols are adjacent spans [start, start + len) of one text, each with a
 * token id (-1 when the span is no token). pair() says whether left + right
 * may merge: the merged id and a priority (lower merges first; equal
 * priorities merge leftmost first). */
typedef struct tok_sym {
  int32_t prev, next;
  uint32_t start, len;
  int32_t id;
} tok_sym;
typedef int (*tok_pair_fn)(const rlx_tokenizer* t, const char* text, const tok_sym* l,
                           const tok_sym* r, double* priority, int32_t* merged);
/* Merges syms[0..n) (a list linked by prev / next) until no pair applies.
 * Merged symbols are unlinked; walk from index 0 along next. */
rlx_status tok_merge(const rlx_tokenizer* t, const char* text, tok_sym* syms, int32_t n,
                     tok_pair_fn pair, rlx_error* err);

/* ------------------------------------------------------------ Unicode (tokenizer_unicode.c) */

/* Decodes one UTF-8 code point at s[0..n) (n >= 1): its length in bytes
 * (1 for an invalid byte, whose value is returned as U+FFFD's stand-in
 * 0xFFFD so classes treat it as a symbol). */
int utf8_decode(const unsigned char* s, size_t n, uint32_t* cp);
/* Encodes cp into out (4 bytes room); returns the byte count. */
int utf8_encode(uint32_t cp, char* out);
int uni_is_letter(uint32_t cp);
int uni_is_number(uint32_t cp);
int uni_is_space(uint32_t cp);
int uni_is_punct(uint32_t cp);
/* Letters with case (general category Lu, Ll, Lt). */
int uni_is_cased_letter(uint32_t cp);
/* The NFC form of s[0..n) in *out (malloc'd, NUL-terminated, *out_n bytes),
 * or *out NULL when s is already NFC or is no valid UTF-8 (left as it is).
 * RLX_UNIMPLEMENTED without ICU. */
rlx_status uni_nfc(const char* s, size_t n, char** out, size_t* out_n, rlx_error* err);
/* 1 when this build has the Unicode classes (ICU). */
int uni_available(void);

#endif
