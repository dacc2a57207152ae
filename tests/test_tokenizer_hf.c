/* Tokenizers from Hugging Face tokenizer.json (rlx_tokenizer_from_hf).
 *
 * Without data: small tokenizer.json texts built here check the mapping
 * (byte-level BPE merges in both formats, SentencePiece scores derived from
 * merge ranks, added tokens, BOS from a TemplateProcessing and from the
 * config, the chat template) and that malformed files are refused naming
 * the file and key.
 *
 * With llama.cpp's vocab test data: tests/hf_tokenizer_json.py writes
 * tokenizer.json folders for gpt-2, llama-bpe, qwen2 and llama-spm into the
 * build dir (each in a different layout, see the script), and every .inp
 * vector must encode to the .out ids (made by the Hugging Face tokenizers
 * from the original files), to the same ids as the GGUF with BOS / EOS and
 * special tokens, and decode back. Exits 77 without third_party/llama.cpp. */
#include "harness.h"

#include <unistd.h>

#include "io/tokenizer.h"

#define MODELS "third_party/llama.cpp/models/"

/* ------------------------------------------------------------ in-memory files */

static rlx_status load_texts(const char* tok, const char* cfg, const char* gen,
                             rlx_tokenizer** t, char* msg, size_t cap) {
  hf_texts in = {tok, cfg, gen, NULL, strlen(tok), cfg ? strlen(cfg) : 0, gen ? strlen(gen) : 0,
                 0, "tok.json", "cfg.json", "gen.json"};
  rlx_error err = {{0}};
  rlx_status s = tok_from_hf_texts(&in, t, &err);
  snprintf(msg, cap, "%s", err.msg);
  return s;
}

/* Encodes text and compares with want[0..n). */
static int encodes_to(rlx_tokenizer* t, const char* text, int32_t flags, const int32_t* want,
                      int64_t n_want) {
  int32_t* ids = NULL;
  int64_t n = 0;
  if (rlx_tokenizer_encode(t, text, strlen(text), flags, &ids, &n) != RLX_OK) return 0;
  int same = n == n_want && memcmp(ids, want, (size_t)n * sizeof *ids) == 0;
  if (!same) {
    fprintf(stderr, "  '%s':", text);
    for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  rlx_free(ids);
  return same;
}

/* Encodes s[0..n) with BOS / EOS and special tokens; compares with want. */
static int encodes_to_n(rlx_tokenizer* t, const char* s, size_t n, const int32_t* want,
                        int64_t n_want) {
  int32_t* ids = NULL;
  int64_t m = 0;
  int32_t flags = RLX_TOKENIZE_ADD_SPECIAL | RLX_TOKENIZE_PARSE_SPECIAL;
  if (rlx_tokenizer_encode(t, s, n, flags, &ids, &m) != RLX_OK) return 0;
  int same = m == n_want && memcmp(ids, want, (size_t)m * sizeof *ids) == 0;
  if (!same) {
    fprintf(stderr, "   want:");
    for (int64_t i = 0; i < n_want && i < 40; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n    got:");
    for (int64_t i = 0; i < m && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  rlx_free(ids);
  return same;
}

#define BPE_VOCAB "{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"\\u0120ab\":4,\"c\":5}"

/* Byte-level BPE: "a b" and [a, b] merges, added tokens, template BOS. */
TEST(mini_byte_level) {
  if (!uni_available()) {
    printf("  (no ICU: byte-level BPE not built, case skipped)\n");
    return;
  }
  const char* forms[] = {"[\"a b\", \"\\u0120 ab\"]", "[[\"a\", \"b\"], [\"\\u0120\", \"ab\"]]"};
  for (int f = 0; f < 2; f++) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"added_tokens\":[{\"id\":6,\"content\":\"<s>\",\"special\":true},"
             "{\"id\":7,\"content\":\"<x>\",\"special\":false}],"
             "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":"
             "false,\"use_regex\":true},\"post_processor\":{\"type\":\"TemplateProcessing\","
             "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":"
             "\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[6],"
             "\"tokens\":[\"<s>\"]}}},"
             "\"model\":{\"type\":\"BPE\",\"vocab\":" BPE_VOCAB ",\"merges\":%s}}",
             forms[f]);
    rlx_tokenizer* t = NULL;
    char msg[1024];
    CHECK_MSG(load_texts(json, NULL, NULL, &t, msg, sizeof msg) == RLX_OK, "%s", msg);
    if (!t) continue;
    CHECK(rlx_tokenizer_vocab_size(t) == 8 && rlx_tokenizer_bos(t) == 6);
    CHECK(encodes_to(t, "ab ab", 0, (int32_t[]){2, 4}, 2));
    CHECK(encodes_to(t, "ab<x>c", RLX_TOKENIZE_ADD_SPECIAL, (int32_t[]){6, 2, 7, 5}, 4));
    CHECK(encodes_to(t, "<s>c", RLX_TOKENIZE_PARSE_SPECIAL, (int32_t[]){6, 5}, 2));
    CHECK(strstr(rlx_tokenizer_kind(t), "gpt-2") != NULL);
    rlx_tokenizer_destroy(t);
  }
}

#define SPM_VOCAB                                                                             \
  "{\"<unk>\":0,\"\\u2581\":1,\"a\":2,\"b\":3,\"\\u2581a\":4,\"ab\":5,\"\\u2581ab\":6,"        \
  "\"<0x41>\":7}"
#define SPM_NORMALIZER                                                                        \
  "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"   \
  "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]}"

/* SentencePiece from a byte_fallback BPE: scores are -(first merge rank);
 * a token no merge makes is never formed; <0xXX> byte fallback. */
TEST(mini_spm) {
  struct {
    const char* merges;
    int32_t want[3];
    int64_t n;
  } cases[] = {
      {"[\"\\u2581 a\", \"a b\", \"\\u2581a b\"]", {6}, 1},  /* ▁a first, then ▁a+b */
      {"[\"a b\", \"\\u2581 ab\"]", {6}, 1},                 /* ab first, then ▁+ab */
      {"[\"\\u2581 a\", \"a b\"]", {4, 3}, 2},               /* no merge makes ▁ab */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"normalizer\":" SPM_NORMALIZER ",\"pre_tokenizer\":null,\"model\":{\"type\":"
             "\"BPE\",\"byte_fallback\":true,\"unk_token\":\"<unk>\",\"vocab\":" SPM_VOCAB
             ",\"merges\":%s}}",
             cases[i].merges);
    rlx_tokenizer* t = NULL;
    char msg[1024];
    CHECK_MSG(load_texts(json, "{\"add_bos_token\":false}", NULL, &t, msg, sizeof msg) == RLX_OK,
              "%s", msg);
    if (!t) continue;
    CHECK_MSG(encodes_to(t, "ab", RLX_TOKENIZE_ADD_SPECIAL, cases[i].want, cases[i].n), "case %zu",
              i);
    CHECK(encodes_to(t, "A", 0, (int32_t[]){1, 7}, 2)); /* 'A' only as its byte token */
    char* back = NULL;
    CHECK(rlx_tokenizer_decode(t, (int32_t[]){6, 1, 7}, 3, 0, &back, NULL) == RLX_OK && back &&
          strcmp(back, "ab A") == 0);
    rlx_free(back);
    rlx_tokenizer_destroy(t);
  }
}

/* BOS / EOS and add_bos from the config and generation_config; chat template. */
TEST(mini_config) {
  const char* json = "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\","
                     "\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\",\"split\":false},"
                     "\"added_tokens\":[{\"id\":8,\"content\":\"</s>\",\"special\":true}],"
                     "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"vocab\":" SPM_VOCAB
                     ",\"merges\":[\"\\u2581 a\"]}}";
  const char* cfg = "{\"bos_token\":{\"content\":\"<unk>\"},\"add_bos_token\":true,"
                    "\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},"
                    "{\"name\":\"default\",\"template\":\"{{ messages }}\"}]}";
  rlx_tokenizer* t = NULL;
  char msg[1024];
  CHECK_MSG(load_texts(json, cfg, "{\"eos_token_id\":[8, 2]}", &t, msg, sizeof msg) == RLX_OK,
            "%s", msg);
  if (!t) return;
  CHECK(rlx_tokenizer_bos(t) == 0 && rlx_tokenizer_eos(t) == 8);
  const int32_t* ends = NULL;
  CHECK(rlx_tokenizer_end_ids(t, &ends) == 2 && ends[0] == 8 && ends[1] == 2);
  CHECK(rlx_tokenizer_chat_template(t) && strcmp(rlx_tokenizer_chat_template(t), "{{ messages }}") == 0);
  /* prepend_scheme "first": no '▁' after a special token */
  CHECK(encodes_to(t, "a</s>a", RLX_TOKENIZE_ADD_SPECIAL | RLX_TOKENIZE_PARSE_SPECIAL,
                   (int32_t[]){0, 4, 8, 2}, 4));
  /* Metaspace adds no '▁' before a text that starts with a space */
  CHECK(encodes_to(t, " a", 0, (int32_t[]){4}, 1));
  rlx_tokenizer_destroy(t);
}

/* Malformed files: INVALID_ARGUMENT naming file and key; unknown parts UNIMPLEMENTED. */
TEST(mini_refusals) {
  const char* ok_model = "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}";
  char bad_regex[512], bad_added[512], bad_wordpiece[512];
  snprintf(bad_regex, sizeof bad_regex,
           "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
           "\"pattern\":{\"Regex\":\"\\\\p{L}+\"},\"behavior\":\"Isolated\",\"invert\":false},"
           "{\"type\":\"ByteLevel\",\"use_regex\":false}]},%s}",
           ok_model);
  snprintf(bad_added, sizeof bad_added,
           "{\"added_tokens\":[{\"content\":\"x\"}],\"pre_tokenizer\":{\"type\":\"ByteLevel\"},%s}",
           ok_model);
  snprintf(bad_wordpiece, sizeof bad_wordpiece,
           "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}");
  char with_pre[512];
  snprintf(with_pre, sizeof with_pre, "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},%s}", ok_model);
  struct {
    const char *tok, *cfg, *gen;
    rlx_status want;
    const char* says;
  } cases[] = {
      {"{\"model\":", NULL, NULL, RLX_INVALID_ARGUMENT, "tok.json: malformed JSON"},
      {"[1]", NULL, NULL, RLX_INVALID_ARGUMENT, "tok.json: '(top level)'"},
      {"{\"model\":{\"vocab\":[]}}", NULL, NULL, RLX_INVALID_ARGUMENT, "tok.json: 'model.vocab'"},
      {"{\"model\":{\"vocab\":{\"a\":-1}}}", NULL, NULL, RLX_INVALID_ARGUMENT, "'model.vocab'"},
      {"{\"model\":{\"vocab\":{\"a\":900000000}}}", NULL, NULL, RLX_INVALID_ARGUMENT,
       "far beyond"},
      {"{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"vocab\":{\"a\":0},\"merges\":"
       "[7]}}",
       NULL, NULL, RLX_INVALID_ARGUMENT, "'model.merges'"},
      {bad_added, NULL, NULL, RLX_INVALID_ARGUMENT, "'added_tokens'"},
      {bad_wordpiece, NULL, NULL, RLX_UNIMPLEMENTED, "'WordPiece'"},
      {bad_regex, NULL, NULL, RLX_UNIMPLEMENTED, "Split regex '\\p{L}+'"},
      {with_pre, "{\"bos_token\":\"<zz>\"}", NULL, RLX_INVALID_ARGUMENT, "cfg.json: 'bos_token'"},
      {with_pre, "{\"add_bos_token\":1}", NULL, RLX_INVALID_ARGUMENT, "cfg.json: 'add_bos_token"},
      {with_pre, NULL, "{\"eos_token_id\":\"x\"}", RLX_INVALID_ARGUMENT, "gen.json: 'eos_token_id'"},
      {with_pre, NULL, "{\"eos_token_id\":5}", RLX_INVALID_ARGUMENT, "gen.json: 'eos_token_id'"},
      {with_pre, NULL, "{\"eos_token_id\":[0, 9]}", RLX_INVALID_ARGUMENT, "gen.json: 'eos_token_id'"},
      {with_pre, NULL, "{\"eos_token_id\":[]}", RLX_INVALID_ARGUMENT, "'eos_token_id' is an empty"},
      {with_pre, "{\"chat_template\":3}", NULL, RLX_INVALID_ARGUMENT, "cfg.json: 'chat_template'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (!uni_available() && strstr(cases[i].tok, "ByteLevel")) continue;
    rlx_tokenizer* t = NULL;
    char msg[1024];
    rlx_status s = load_texts(cases[i].tok, cases[i].cfg, cases[i].gen, &t, msg, sizeof msg);
    CHECK_MSG(s == cases[i].want && !t && strstr(msg, cases[i].says), "case %zu: %d '%s'", i,
              (int)s, msg);
    rlx_tokenizer_destroy(t);
  }
  rlx_tokenizer* t = NULL;
  char* msg = NULL;
  CHECK(rlx_tokenizer_from_hf("/nonexistent-dir/tokenizer.json", &t, &msg) != RLX_OK && !t &&
        msg && strstr(msg, "/nonexistent-dir/tokenizer.json"));
  rlx_free(msg);
}

/* ------------------------------------------------------------ llama.cpp's vectors */

static char g_dir[1024];

static char* read_text(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[len] = 0;
  *n = buf ? (size_t)len : 0;
  return buf;
}

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

static int same_ids(rlx_tokenizer* a, rlx_tokenizer* b, const char* s, size_t n, int32_t flags,
                    const int32_t* want, int64_t n_want, int* decoded) {
  int32_t *x = NULL, *y = NULL;
  int64_t nx = 0, ny = 0;
  int ok = rlx_tokenizer_encode(a, s, n, flags, &x, &nx) == RLX_OK &&
           rlx_tokenizer_encode(b, s, n, flags, &y, &ny) == RLX_OK && nx == ny &&
           memcmp(x, y, (size_t)nx * sizeof *x) == 0;
  if (want) ok = ok && nx == n_want && memcmp(x, want, (size_t)nx * sizeof *x) == 0;
  char* back = NULL;
  size_t len = 0;
  if (decoded && rlx_tokenizer_decode(a, x, nx, 0, &back, &len) == RLX_OK)
    *decoded += len == n && memcmp(back, s, n) == 0;
  rlx_free(back);
  rlx_free(x);
  rlx_free(y);
  return ok;
}

/* Every vector of vocab name: HF ids == .out ids == GGUF ids. */
static void run_vocab(const char* name) {
  char hf[1200], gg[256], inp_path[300], out_path[300];
  snprintf(hf, sizeof hf, "%s/%s", g_dir, name);
  snprintf(gg, sizeof gg, MODELS "ggml-vocab-%s.gguf", name);
  snprintf(inp_path, sizeof inp_path, "%s.inp", gg);
  snprintf(out_path, sizeof out_path, "%s.out", gg);
  rlx_tokenizer *t = NULL, *g = NULL;
  char* msg = NULL;
  CHECK_MSG(rlx_tokenizer_from_hf(hf, &t, &msg) == RLX_OK, "%s: %s", name, msg ? msg : "");
  rlx_free(msg);
  CHECK(rlx_tokenizer_load(gg, &g, NULL) == RLX_OK);
  if (!t || !g) {
    rlx_tokenizer_destroy(t);
    rlx_tokenizer_destroy(g);
    return;
  }
  CHECK(rlx_tokenizer_vocab_size(t) == rlx_tokenizer_vocab_size(g));
  CHECK_MSG(rlx_tokenizer_bos(t) == rlx_tokenizer_bos(g) && rlx_tokenizer_eos(t) == rlx_tokenizer_eos(g),
            "%s: bos %d/%d eos %d/%d", name, rlx_tokenizer_bos(t), rlx_tokenizer_bos(g),
            rlx_tokenizer_eos(t), rlx_tokenizer_eos(g));
  const char *ct = rlx_tokenizer_chat_template(t), *cg = rlx_tokenizer_chat_template(g);
  CHECK((!ct && !cg) || (ct && cg && strcmp(ct, cg) == 0));
  size_t n_inp, n_out;
  char* inp = read_text(inp_path, &n_inp);
  char* out = read_text(out_path, &n_out);
  static int32_t want[16384];
  const char* sep = "\n__ggml_vocab_test__\n";
  int inputs = 0, plain = 0, special = 0, decoded = 0;
  char* line = out;
  for (char* p = inp; p && line && *p; inputs++) {
    char* end = strstr(p, sep);
    if (!end) break;
    size_t len = (size_t)(end - p);
    int64_t n_want = parse_ids(line, want, 16384);
    plain += same_ids(t, g, p, len, 0, want, n_want, &decoded);
    special += same_ids(t, g, p, len, RLX_TOKENIZE_ADD_SPECIAL | RLX_TOKENIZE_PARSE_SPECIAL,
                        NULL, 0, NULL);
    p = end + strlen(sep);
    line = strchr(line, '\n');
    if (line) line++;
  }
  printf("  %-10s %-32s vectors %d/%d, with specials %d/%d, decode %d/%d\n", name,
         rlx_tokenizer_kind(t), plain, inputs, special, inputs, decoded, inputs);
  CHECK_MSG(inputs > 30 && plain == inputs && special == inputs && decoded == inputs, "%s", name);
  free(inp);
  free(out);
  rlx_tokenizer_destroy(t);
  rlx_tokenizer_destroy(g);
}

TEST(vocab_vectors) {
  const char* names[] = {"gpt-2", "llama-bpe", "qwen2", "llama-spm"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_vocab(names[i]);
}

/* The chat template and specials the HF text of a control token maps to. */
TEST(special_texts) {
  char hf[1200];
  snprintf(hf, sizeof hf, "%s/llama-bpe/tokenizer.json", g_dir);
  rlx_tokenizer* t = NULL;
  CHECK(rlx_tokenizer_load(hf, &t, NULL) == RLX_OK);
  if (!t) return;
  const char* s = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  CHECK(encodes_to(t, s, RLX_TOKENIZE_ADD_SPECIAL | RLX_TOKENIZE_PARSE_SPECIAL,
                   (int32_t[]){128000, 128006, 882, 128007, 271, 13347, 128009}, 7));
  rlx_tokenizer_destroy(t);
}

/* ------------------------------------------------------------ the JavaScript oracle */

static const char* g_module; /* @huggingface/tokenizers' dist/tokenizers.mjs */

/* Texts beyond llama.cpp's vectors: scripts, spacing, digits, emoji,
 * decomposed characters (NFC), the special tokens of the four vocabs. */
static const char* const k_texts[] = {
    "Hello World! How's it going? I'M FINE, THANK YOU'LL SEE'S",
    "  leading and trailing spaces   ",
    " ",
    "tabs\tand\nnew\r\nlines\n\n\n  \n",
    "numbers 1234567890 3.14159 1,000,000 \u0663\u0664\u0665 \u00bd 00 007",
    "emoji \U0001F999\U0001F680 \U0001F469\u200D\U0001F469\u200D\U0001F467 flag "
    "\U0001F1EB\U0001F1F7!!",
    "CJK \u4f60\u597d\u4e16\u754c \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u0420\u0443\u0441\u0441\u043a"
    "\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d"
    "\u0926\u0940",
    "decomposed e\u0301 vs \u00e9, A\u030a, n\u0303o",
    "code: for (int i = 0; i < n; i++) { x += y[i]; } // \"quoted\" 'single'",
    "<|endoftext|>Hi<|im_start|>user\nhello<|im_end|>\n",
    "<s>[INST] hi [/INST] ok</s>",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are<|eot_id|>",
};

/* Writes the vectors of vocab name (its GGUF's: a -metaspace layout is made
 * from llama-spm) and k_texts to path, separated like .inp files. */
static int write_texts(const char* name, const char* path) {
  char inp_path[300];
  size_t n = 0;
  const char* vocab = strcmp(name, "llama-spm-metaspace") == 0 ? "llama-spm" : name;
  snprintf(inp_path, sizeof inp_path, MODELS "ggml-vocab-%s.gguf.inp", vocab);
  char* inp = read_text(inp_path, &n);
  FILE* f = fopen(path, "wb");
  if (!f || !inp) {
    free(inp);
    if (f) fclose(f);
    return 0;
  }
  fwrite(inp, 1, n, f);
  for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++)
    fprintf(f, "%s\n__ggml_vocab_test__\n", k_texts[i]);
  free(inp);
  return fclose(f) == 0;
}

/* rlx's ids (BOS / EOS and special tokens on) against the JavaScript tokenizer's. */
static void oracle_vocab(const char* name) {
  char folder[1200], texts[1300], out[1300], cmd[4096];
  snprintf(folder, sizeof folder, "%s/%s", g_dir, name);
  snprintf(texts, sizeof texts, "%s.texts", folder);
  snprintf(out, sizeof out, "%s.oracle", folder);
  CHECK(write_texts(name, texts));
  snprintf(cmd, sizeof cmd, "node tests/hf_tokenizer_oracle.mjs '%s' '%s' '%s' '%s'", g_module,
           folder, texts, out);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  rlx_tokenizer* t = NULL;
  CHECK(rlx_tokenizer_from_hf(folder, &t, NULL) == RLX_OK);
  size_t n_in = 0, n_out = 0;
  char* in = read_text(texts, &n_in);
  char* ids = read_text(out, &n_out);
  static int32_t want[16384];
  const char* sep = "\n__ggml_vocab_test__\n";
  int inputs = 0, same = 0;
  char* line = ids;
  for (char* p = in; t && p && line && *p; inputs++) {
    char* end = strstr(p, sep);
    if (!end) break;
    int64_t n_want = parse_ids(line, want, 16384);
    int ok = encodes_to_n(t, p, (size_t)(end - p), want, n_want);
    if (!ok) fprintf(stderr, "  %s: input %d '%.*s'\n", name, inputs, (int)(end - p), p);
    same += ok;
    p = end + strlen(sep);
    line = strchr(line, '\n');
    if (line) line++;
  }
  printf("  %-19s the JavaScript tokenizer's ids: %d/%d\n", name, same, inputs);
  CHECK_MSG(inputs > 40 && same == inputs, "%s", name);
  free(in);
  free(ids);
  rlx_tokenizer_destroy(t);
}

TEST(oracle) {
  const char* names[] = {"gpt-2", "llama-bpe", "qwen2", "llama-spm", "llama-spm-metaspace"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) oracle_vocab(names[i]);
}

/* Writes the tokenizer.json folders into the build dir's folder sub (one
 * per mode: ctest may run both at once); 0 when it could. */
static int generate(const char* sub) {
  snprintf(g_dir, sizeof g_dir, "%s/%s", RLX_BUILD_DIR, sub);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "PYTHONPATH=third_party/llama.cpp/gguf-py /usr/bin/python3 tests/hf_tokenizer_json.py "
           MODELS " '%s'",
           g_dir);
  int code = system(cmd);
  if (code != 0) printf("SKIP: tests/hf_tokenizer_json.py exited %d (Debian's python3 + gguf-py)\n", code);
  return code;
}

/* test_tokenizer_hf [--oracle [MODULE]]: the oracle mode compares with
 * @huggingface/tokenizers (default third_party/tokenizers-js/dist/tokenizers.mjs). */
int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--oracle") == 0) {
    g_module = argc > 2 ? argv[2] : "third_party/tokenizers-js/dist/tokenizers.mjs";
    if (access(g_module, R_OK) != 0 || system("node --version >/dev/null 2>&1") != 0) {
      printf("SKIP: the oracle needs node and %s (scripts/setup_tokenizers_js.sh)\n", g_module);
      return 77;
    }
    if (access(MODELS "ggml-vocab-gpt-2.gguf", R_OK) != 0) {
      printf("SKIP: " MODELS " missing (scripts/setup_llama.sh)\n");
      return 77;
    }
    if (generate("hf_tokenizer_oracle") != 0) return 77;
    RUN(oracle);
    return test_summary();
  }
  RUN(mini_byte_level);
  RUN(mini_spm);
  RUN(mini_config);
  RUN(mini_refusals);
  if (access(MODELS "ggml-vocab-gpt-2.gguf", R_OK) != 0) {
    printf("SKIP: the vocab vectors: " MODELS " missing (scripts/setup_llama.sh)\n");
    return test_failures ? test_summary() : 77;
  }
  if (generate("hf_tokenizer_test") != 0) return test_failures ? test_summary() : 77;
  RUN(vocab_vectors);
  RUN(special_texts);
  return test_summary();
}
