/* Tokenizers from GGUF vocabs against the test vectors llama.cpp ships
 * (third_party/llama.cpp/models/ggml-vocab-<name>.gguf with .inp: inputs
 * separated by "\n__ggml_vocab_test__\n", and .out: one line of ids per
 * input, made by the Hugging Face tokenizers). Every vector of every
 * supported vocab must pass (encode without BOS / EOS, as the vectors
 * were made), and decode back to the input. Prints
 * the pass count per vocab. Small vocabs built here in memory check the
 * algorithms and the refusals without the data; the vector tests are
 * skipped (and the run exits 77) without third_party/llama.cpp. */
#include "harness.h"

#include <unistd.h>

#include "io/gguf.h"

#define MODELS "third_party/llama.cpp/models/"

static char* read_text(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = malloc((size_t)len + 1);
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[len] = 0;
  *n = (size_t)len;
  return buf;
}

/* Parses one .out line ("  1 2 3") into ids; returns the count. */
static int64_t parse_ids(const char* line, int32_t* ids, int64_t cap) {
  int64_t n = 0;
  char* end;
  for (const char* p = line; *p && *p != '\n';) {
    long v = strtol(p, &end, 10);
    if (end == p) break;
    if (n < cap) ids[n] = (int32_t)v;
    n++;
    p = end;
  }
  return n;
}

typedef struct counts {
  int inputs, encoded, decoded;
} counts;

/* One input against its expected line. */
static void check_one(rlx_tokenizer* t, const char* text, size_t len, const char* out_line,
                      counts* c, int verbose) {
  static int32_t want[16384];
  int64_t n_want = parse_ids(out_line, want, 16384);
  int32_t* ids = NULL;
  int64_t n = 0;
  c->inputs++;
  if (rlx_tokenizer_encode(t, text, len, 0, &ids, &n) != RLX_OK) {
    fprintf(stderr, "  encode failed: %s\n", rlx_tokenizer_last_error(t));
    return;
  }
  int same = n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0;
  c->encoded += same;
  if (!same && verbose) {
    fprintf(stderr, "  input '%.*s'\n   want:", (int)(len < 60 ? len : 60), text);
    for (int64_t i = 0; i < n_want && i < 40; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n    got:");
    for (int64_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  char* back = NULL;
  size_t back_len = 0;
  if (rlx_tokenizer_decode(t, ids, n, 0, &back, &back_len) == RLX_OK)
    c->decoded += back_len == len && memcmp(back, text, len) == 0;
  rlx_free(back);
  rlx_free(ids);
}

/* Runs every vector of vocab name; returns the counts (inputs 0: not loaded). */
static counts run_vocab(const char* name, int verbose) {
  counts c = {0, 0, 0};
  char path[256], inp_path[512], out_path[512];
  snprintf(path, sizeof path, MODELS "ggml-vocab-%s.gguf", name);
  snprintf(inp_path, sizeof inp_path, "%s.inp", path);
  snprintf(out_path, sizeof out_path, "%s.out", path);
  rlx_tokenizer* t = NULL;
  char* msg = NULL;
  if (rlx_tokenizer_load(path, &t, &msg) != RLX_OK) {
    printf("vocab %-15s not loaded: %s\n", name, msg ? msg : "?");
    rlx_free(msg);
    return c;
  }
  size_t n_inp, n_out;
  char* inp = read_text(inp_path, &n_inp);
  char* out = read_text(out_path, &n_out);
  const char* sep = "\n__ggml_vocab_test__\n";
  char* line = out;
  for (char* p = inp; p && line && *p;) {
    char* end = strstr(p, sep);
    if (!end) break;
    check_one(t, p, (size_t)(end - p), line, &c, verbose);
    p = end + strlen(sep);
    line = strchr(line, '\n');
    if (line) line++;
  }
  printf("vocab %-15s %-24s encode %d/%d pass, decode round trip %d/%d\n", name,
         rlx_tokenizer_kind(t), c.encoded, c.inputs, c.decoded, c.inputs);
  free(inp);
  free(out);
  rlx_tokenizer_destroy(t);
  return c;
}

/* Vocabs whose family is implemented: every vector must pass. */
static const char* const supported[] = {"gpt-2",     "llama-bpe", "llama-spm", "qwen2",
                                        "phi-3",     "starcoder", "refact",    "command-r", "mpt", "falcon", "deepseek-coder", "deepseek-llm",
                                        "qwen35"};

static int show_failures; /* -v: print each failing vector */

TEST(vocab_vectors) {
  for (size_t i = 0; i < sizeof supported / sizeof supported[0]; i++) {
    counts c = run_vocab(supported[i], show_failures);
    CHECK_MSG(c.inputs > 30 && c.encoded == c.inputs, "vocab %s: %d/%d", supported[i],
              c.encoded, c.inputs);
    CHECK_MSG(c.decoded == c.inputs, "vocab %s decode %d/%d",
              supported[i], c.decoded, c.inputs);
  }
}

/* Families not implemented yet: reported, not required. */
TEST(other_vocabs_reported) {
  const char* others[] = {"bert-bge", "gemma-4"};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) (void)run_vocab(others[i], 0);
  CHECK(1);
}

TEST(gpt2_hello_world) {
  rlx_tokenizer* t = NULL;
  CHECK(rlx_tokenizer_load(MODELS "ggml-vocab-gpt-2.gguf", &t, NULL) == RLX_OK);
  const char* text = "Hello world, this is GPT-2!";
  const int32_t want[] = {15496, 995, 11, 428, 318, 402, 11571, 12, 17, 0};
  int32_t* ids = NULL;
  int64_t n = 0;
  rlx_status s = rlx_tokenizer_encode(t, text, strlen(text), RLX_TOKENIZE_ADD_SPECIAL, &ids, &n);
  int ok = s == RLX_OK && n == 10 && memcmp(ids, want, sizeof want) == 0;
  char* back = NULL;
  ok = ok && rlx_tokenizer_decode(t, ids, n, 0, &back, NULL) == RLX_OK && strcmp(back, text) == 0;
  rlx_free(back);
  rlx_free(ids);
  rlx_tokenizer_destroy(t);
  CHECK(ok);
}

/* Llama-3: BOS added on request; a control token in the text becomes its
 * id only with PARSE_SPECIAL; decode drops control tokens unless asked. */
TEST(llama3_specials) {
  rlx_tokenizer* t = NULL;
  CHECK(rlx_tokenizer_load(MODELS "ggml-vocab-llama-bpe.gguf", &t, NULL) == RLX_OK);
  const char* text = "<|eot_id|>Hi";
  int32_t *plain = NULL, *special = NULL;
  int64_t n_plain = 0, n_special = 0;
  CHECK(rlx_tokenizer_encode(t, text, strlen(text), 0, &plain, &n_plain) == RLX_OK);
  CHECK(rlx_tokenizer_encode(t, text, strlen(text),
                             RLX_TOKENIZE_ADD_SPECIAL | RLX_TOKENIZE_PARSE_SPECIAL, &special,
                             &n_special) == RLX_OK);
  int ok = n_special == 3 && special[0] == rlx_tokenizer_bos(t) && special[0] == 128000 &&
           special[1] == 128009 && n_plain > 3;
  char *kept = NULL, *dropped = NULL;
  ok = ok && rlx_tokenizer_decode(t, special, n_special, RLX_TOKENIZE_PARSE_SPECIAL, &kept, NULL) == RLX_OK &&
       strcmp(kept, "<|begin_of_text|><|eot_id|>Hi") == 0;
  ok = ok && rlx_tokenizer_decode(t, special, n_special, 0, &dropped, NULL) == RLX_OK &&
       strcmp(dropped, "Hi") == 0;
  int32_t bad = 1 << 30;
  char* none = NULL;
  ok = ok && rlx_tokenizer_decode(t, &bad, 1, 0, &none, NULL) == RLX_INVALID_ARGUMENT &&
       strstr(rlx_tokenizer_last_error(t), "outside the vocab");
  rlx_free(kept);
  rlx_free(dropped);
  rlx_free(plain);
  rlx_free(special);
  rlx_tokenizer_destroy(t);
  CHECK(ok);
}

/* SentencePiece: BOS on request, byte fallback for characters the vocab
 * lacks, decode back to the text. */
TEST(spm_bytes_and_bos) {
  rlx_tokenizer* t = NULL;
  CHECK(rlx_tokenizer_load(MODELS "ggml-vocab-llama-spm.gguf", &t, NULL) == RLX_OK);
  const char* text = "Hello \xF0\x9F\xA6\x99 world"; /* the llama emoji is no token */
  int32_t* ids = NULL;
  int64_t n = 0;
  CHECK(rlx_tokenizer_encode(t, text, strlen(text), RLX_TOKENIZE_ADD_SPECIAL, &ids, &n) == RLX_OK);
  int bytes = 0;
  for (int64_t i = 0; i < n; i++) bytes += ids[i] >= 3 && ids[i] < 3 + 256;
  char* back = NULL;
  int ok = n > 4 && ids[0] == 1 && bytes == 4 &&
           rlx_tokenizer_decode(t, ids, n, 0, &back, NULL) == RLX_OK && strcmp(back, text) == 0;
  if (!ok && back) fprintf(stderr, "decoded '%s'\n", back);
  rlx_free(back);
  rlx_free(ids);
  rlx_tokenizer_destroy(t);
  CHECK(ok);
}

TEST(refused_vocabs) {
  rlx_tokenizer* t = NULL;
  char* msg = NULL;
  CHECK(rlx_tokenizer_load(MODELS "ggml-vocab-bert-bge.gguf", &t, &msg) == RLX_UNIMPLEMENTED);
  CHECK(t == NULL && msg && strstr(msg, "'bert'"));
  rlx_free(msg);
  CHECK(rlx_tokenizer_load(MODELS "ggml-vocab-gemma-4.gguf", &t, &msg) == RLX_UNIMPLEMENTED);
  CHECK(msg && strstr(msg, "'gemma4'"));
  rlx_free(msg);
  CHECK(rlx_tokenizer_load("/nonexistent.gguf", &t, &msg) == RLX_NOT_FOUND);
  rlx_free(msg);
}

/* ------------------------------------------------------------ GGUF files built here */

/* A growing GGUF image: header, then key/values (no tensors). */
typedef struct gbuf {
  uint8_t* p;
  size_t n, cap;
  uint64_t n_kv;
} gbuf;

static void put(gbuf* b, const void* v, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = 2 * (b->n + n) + 256;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, v, n);
  b->n += n;
}
static void put_u32(gbuf* b, uint32_t v) { put(b, &v, 4); }
static void put_u64(gbuf* b, uint64_t v) { put(b, &v, 8); }
static void put_str(gbuf* b, const char* s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void key(gbuf* b, const char* k, rlx_gguf_type t) {
  put_str(b, k);
  put_u32(b, (uint32_t)t);
  b->n_kv++;
}
static void kv_str(gbuf* b, const char* k, const char* v) {
  key(b, k, RLX_GGUF_STRING);
  put_str(b, v);
}
static void kv_u32(gbuf* b, const char* k, uint32_t v) {
  key(b, k, RLX_GGUF_U32);
  put_u32(b, v);
}
static void kv_strs(gbuf* b, const char* k, const char* const* v, int n) {
  key(b, k, RLX_GGUF_ARRAY);
  put_u32(b, RLX_GGUF_STRING);
  put_u64(b, (uint64_t)n);
  for (int i = 0; i < n; i++) put_str(b, v[i]);
}
static void kv_nums(gbuf* b, const char* k, rlx_gguf_type t, const void* v, int n) {
  key(b, k, RLX_GGUF_ARRAY);
  put_u32(b, (uint32_t)t);
  put_u64(b, (uint64_t)n);
  put(b, v, 4 * (size_t)n);
}
static gbuf gguf_start(void) {
  gbuf b = {0};
  put(&b, "GGUF", 4);
  put_u32(&b, 3);
  put_u64(&b, 0);
  put_u64(&b, 0); /* key/value count, patched by tokenizer_of */
  return b;
}

/* The tokenizer of b's vocab (b freed); status and message out. */
static rlx_status tokenizer_of(gbuf* b, rlx_tokenizer** t, char** msg) {
  memcpy(b->p + 16, &b->n_kv, 8);
  rlx_gguf* g = NULL;
  rlx_error err = {{0}};
  rlx_status s = rlx_gguf_open_memory(b->p, b->n, "mini", &g, &err);
  if (s == RLX_OK) s = rlx_tokenizer_from_gguf(g, t, msg);
  rlx_gguf_close(g);
  free(b->p);
  return s;
}

static int encodes_to(rlx_tokenizer* t, const char* text, const int32_t* want, int64_t n_want) {
  int32_t* ids = NULL;
  int64_t n = 0;
  int ok = rlx_tokenizer_encode(t, text, strlen(text), 0, &ids, &n) == RLX_OK && n == n_want &&
           memcmp(ids, want, (size_t)n * sizeof *ids) == 0;
  if (!ok) {
    fprintf(stderr, "'%s' ->", text);
    for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  rlx_free(ids);
  return ok;
}

/* SentencePiece on a vocab of 8 pieces + 256 byte tokens: the highest
 * scoring pair merges first, unknown characters fall back to bytes. */
TEST(mini_spm) {
  const char* toks[8 + 256] = {"<unk>", "<s>", "\xE2\x96\x81", "a", "b", "ab",
                               "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab"};
  float scores[8 + 256] = {0, 0, -1, -2, -2, -3, -1.5f, -0.5f};
  int32_t types[8 + 256] = {2, 3, 1, 1, 1, 1, 1, 1};
  char names[256][8];
  for (int i = 0; i < 256; i++) {
    snprintf(names[i], sizeof names[i], "<0x%02X>", i);
    toks[8 + i] = names[i];
    types[8 + i] = 6;
  }
  gbuf b = gguf_start();
  kv_str(&b, "tokenizer.ggml.model", "llama");
  kv_strs(&b, "tokenizer.ggml.tokens", toks, 8 + 256);
  kv_nums(&b, "tokenizer.ggml.scores", RLX_GGUF_F32, scores, 8 + 256);
  kv_nums(&b, "tokenizer.ggml.token_type", RLX_GGUF_I32, types, 8 + 256);
  kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
  rlx_tokenizer* t = NULL;
  char* msg = NULL;
  CHECK_MSG(tokenizer_of(&b, &t, &msg) == RLX_OK, "%s", msg ? msg : "");
  /* "▁ab▁ab": of the pairs ▁a (-1.5) and ab (-3), ▁a merges first (left
   * one first), then ▁a + b = ▁ab (-0.5); in "▁abc", c is no token: its byte */
  const int32_t ab[] = {7, 7};
  const int32_t abc[] = {7, 8 + 'c'};
  int ok = encodes_to(t, "ab ab", ab, 2) && encodes_to(t, "abc", abc, 2);
  char* back = NULL;
  ok = ok && rlx_tokenizer_decode(t, abc, 2, 0, &back, NULL) == RLX_OK && strcmp(back, "abc") == 0;
  rlx_free(back);
  rlx_tokenizer_destroy(t);
  CHECK(ok);
}

/* Byte-level BPE on a vocab of the 256 byte characters + 3 merges: the
 * lowest rank merges first, a merge whose parts are no tokens is ignored. */
TEST(mini_bpe) {
  static char chars[256][4];
  const char* toks[256 + 3];
  unsigned next = 256;
  for (unsigned c = 0; c < 256; c++) {
    int printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
    unsigned cp = printable ? c : next++;
    /* UTF-8 of cp < 0x800 */
    if (cp < 0x80) chars[c][0] = (char)cp;
    else {
      chars[c][0] = (char)(0xC0 | (cp >> 6));
      chars[c][1] = (char)(0x80 | (cp & 0x3F));
    }
    toks[c] = chars[c];
  }
  toks[256] = "ab";
  toks[257] = "bc";
  toks[258] = "abc";
  const char* merges[] = {"b c", "a b", "ab c", "x nothing"};
  gbuf b = gguf_start();
  kv_str(&b, "tokenizer.ggml.model", "gpt2");
  kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
  kv_strs(&b, "tokenizer.ggml.tokens", toks, 259);
  kv_strs(&b, "tokenizer.ggml.merges", merges, 4);
  rlx_tokenizer* t = NULL;
  char* msg = NULL;
  rlx_status s = tokenizer_of(&b, &t, &msg);
  if (s == RLX_UNIMPLEMENTED) { /* a build without ICU: BPE refused, by name */
    CHECK(msg && strstr(msg, "ICU"));
    rlx_free(msg);
    return;
  }
  CHECK_MSG(s == RLX_OK, "%s", msg ? msg : "");
  /* "abc": b c (rank 0) merges before a b (rank 1), leaving a + bc (no merge) */
  const int32_t abc[] = {'a', 257};
  /* " ab" is one piece: Ġ (byte 32's character, id 32) stays apart from ab */
  const int32_t ab_ab[] = {256, 32, 256};
  int ok = encodes_to(t, "abc", abc, 2) && encodes_to(t, "ab ab", ab_ab, 3);
  rlx_tokenizer_destroy(t);
  CHECK(ok);
}

/* A vocab that is not what it claims is refused with a message naming the key. */
TEST(mini_refusals) {
  const char* toks[] = {"a", "b"};
  float scores[] = {0};
  struct {
    const char* model;
    int with_tokens, with_scores, with_merges;
    const char* want;
  } cases[] = {
      {NULL, 1, 0, 0, "no 'tokenizer.ggml.model'"},
      {"llama", 0, 0, 0, "no 'tokenizer.ggml.tokens'"},
      {"llama", 1, 1, 0, "one per token"},
      {"llama", 1, 0, 0, "needs tokenizer.ggml.scores"},
      {"gpt2", 1, 0, 0, "tokenizer.ggml.merges"},
      {"rwkv", 1, 0, 0, "model 'rwkv' is not supported"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gbuf b = gguf_start();
    if (cases[i].model) kv_str(&b, "tokenizer.ggml.model", cases[i].model);
    if (cases[i].with_tokens) kv_strs(&b, "tokenizer.ggml.tokens", toks, 2);
    if (cases[i].with_scores) kv_nums(&b, "tokenizer.ggml.scores", RLX_GGUF_F32, scores, 1);
    rlx_tokenizer* t = NULL;
    char* msg = NULL;
    rlx_status s = tokenizer_of(&b, &t, &msg);
    int ok = s != RLX_OK && t == NULL && msg && strstr(msg, cases[i].want);
    if (!ok) fprintf(stderr, "case %zu: %s\n", i, msg ? msg : "(no message)");
    rlx_free(msg);
    CHECK(ok);
  }
}

int main(int argc, char** argv) {
  show_failures = argc > 1 && strcmp(argv[1], "-v") == 0;
  RUN(mini_spm);
  RUN(mini_bpe);
  RUN(mini_refusals);
  if (access(MODELS "ggml-vocab-gpt-2.gguf", R_OK) != 0) {
    printf("SKIP: the vocab vectors: " MODELS " missing (scripts/setup_llama.sh)\n");
    return test_failures ? test_summary() : 77;
  }
  RUN(vocab_vectors);
  RUN(other_vocabs_reported);
  RUN(gpt2_hello_world);
  RUN(llama3_specials);
  RUN(spm_bytes_and_bos);
  RUN(refused_vocabs);
  return test_summary();
}
