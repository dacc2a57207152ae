/* rlx tokenize MODEL TEXT: the token ids of TEXT under the model's own
 * tokenizer (its GGUF vocab, or a Hugging Face folder's tokenizer.json), as
 * llama.cpp's llama-tokenize prints them; --decode turns ids back into text. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx tokenize MODEL TEXT [options]\n"
          "       rlx tokenize MODEL --decode IDS\n"
          "\n"
          "Tokenizes TEXT with MODEL's tokenizer (GPT-2 / Llama-3 / Qwen2 / StarCoder\n"
          "byte-level BPE, or SentencePiece) and prints the ids as a list: [15496,\n"
          "995]. MODEL is a GGUF file (its tokenizer.ggml.* metadata), a Hugging Face\n"
          "checkpoint folder (its tokenizer.json, tokenizer_config.json and\n"
          "generation_config.json) or a tokenizer.json. BOS / EOS are added where the\n"
          "vocab asks for them, and special tokens written in TEXT (\"<|eot_id|>\")\n"
          "become their ids.\n"
          "\n"
          "options:\n"
          "  --file PATH         read TEXT from PATH instead\n"
          "  --pieces            one line per token: id -> 'piece' (the vocab's text)\n"
          "  --no-bos            add no BOS / EOS\n"
          "  --no-parse-special  special tokens in TEXT are plain text\n"
          "  --decode            IDS (\"1,2,3\", \"[1, 2, 3]\" or \"1 2 3\") back to text\n");
}

typedef struct tok_opts {
  const char *model, *text, *file;
  int pieces, no_bos, no_special, decode;
} tok_opts;

static int parse_args(int argc, char** argv, tok_opts* o) {
  const char* cmd = "tokenize";
  for (int i = 1; i < argc; i++) {
    const char* v = NULL;
    int r;
    if (cli_is_help(argv[i])) {
      usage(stdout);
      return -1;
    } else if ((r = cli_opt_value(cmd, argc, argv, &i, "--file", &v)) != 0) {
      if (r < 0) return CLI_USAGE;
      o->file = v;
    } else if (strcmp(argv[i], "--pieces") == 0) {
      o->pieces = 1;
    } else if (strcmp(argv[i], "--no-bos") == 0) {
      o->no_bos = 1;
    } else if (strcmp(argv[i], "--no-parse-special") == 0) {
      o->no_special = 1;
    } else if (strcmp(argv[i], "--decode") == 0) {
      o->decode = 1;
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      cli_error(cmd, "unknown option '%s' (see rlx tokenize --help)", argv[i]);
      return CLI_USAGE;
    } else if (!o->model) {
      o->model = argv[i];
    } else if (!o->text) {
      o->text = argv[i];
    } else {
      cli_error(cmd, "more than one TEXT (quote it)");
      return CLI_USAGE;
    }
  }
  if (!o->model || (!o->text == !o->file)) {
    cli_error(cmd, "needs MODEL (GGUF, Hugging Face folder or tokenizer.json) and one TEXT "
                   "(or --file)");
    usage(stderr);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* The whole file at path (malloc'd, NUL-terminated). */
static char* read_file(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char* buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) {
      char* b = realloc(buf, cap *= 2);
      if (!b) free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (buf) buf[len] = 0;
  *n = len;
  return buf;
}

static void print_piece(const char* s, size_t n) {
  putchar('\'');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20) printf("\\x%02x", c);
    else putchar(c);
  }
  putchar('\'');
}

static int encode(const char* cmd, rlx_tokenizer* t, const tok_opts* o, const char* text,
                  size_t len) {
  int32_t flags = (o->no_bos ? 0 : RLX_TOKENIZE_ADD_SPECIAL) |
                  (o->no_special ? 0 : RLX_TOKENIZE_PARSE_SPECIAL);
  int32_t* ids = NULL;
  int64_t n = 0;
  if (rlx_tokenizer_encode(t, text, len, flags, &ids, &n) != RLX_OK) {
    cli_error(cmd, "%s", rlx_tokenizer_last_error(t));
    return CLI_FAIL;
  }
  if (!o->pieces) printf("[");
  for (int64_t i = 0; i < n; i++) {
    if (!o->pieces) {
      printf("%s%d", i ? ", " : "", (int)ids[i]);
      continue;
    }
    const char* s = "";
    size_t sl = 0;
    (void)rlx_tokenizer_token_text(t, ids[i], &s, &sl);
    printf("%6d -> ", (int)ids[i]);
    print_piece(s, sl);
    putchar('\n');
  }
  if (!o->pieces) printf("]\n");
  rlx_free(ids);
  return CLI_OK;
}

/* "1,2,3", "[1, 2, 3]" or "1 2 3". */
static int decode(const char* cmd, rlx_tokenizer* t, const char* text) {
  size_t cap = strlen(text) / 2 + 1;
  int32_t* ids = malloc(cap * sizeof *ids);
  int64_t n = 0;
  for (const char* p = text; ids && *p;) {
    if (*p == '[' || *p == ']' || *p == ',' || isspace((unsigned char)*p)) {
      p++;
      continue;
    }
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p) {
      cli_error(cmd, "--decode: '%s' is not a list of ids", text);
      free(ids);
      return CLI_USAGE;
    }
    ids[n++] = (int32_t)v;
    p = end;
  }
  char* out = NULL;
  size_t len = 0;
  int32_t flags = RLX_TOKENIZE_PARSE_SPECIAL;
  if (!ids || rlx_tokenizer_decode(t, ids, n, flags, &out, &len) != RLX_OK) {
    cli_error(cmd, "%s", ids ? rlx_tokenizer_last_error(t) : "out of memory");
    free(ids);
    return CLI_FAIL;
  }
  fwrite(out, 1, len, stdout);
  putchar('\n');
  rlx_free(out);
  free(ids);
  return CLI_OK;
}

int cmd_tokenize(int argc, char** argv) {
  const char* cmd = "tokenize";
  tok_opts o = {0};
  int rc = parse_args(argc, argv, &o);
  if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
  size_t len = 0;
  char* from_file = o.file ? read_file(o.file, &len) : NULL;
  if (o.file && !from_file) {
    cli_error(cmd, "cannot read '%s'", o.file);
    return CLI_FAIL;
  }
  rlx_tokenizer* t = NULL;
  char* msg = NULL;
  if (rlx_tokenizer_load(o.model, &t, &msg) != RLX_OK) {
    cli_error(cmd, "%s", msg ? msg : "cannot load the tokenizer");
    rlx_free(msg);
    free(from_file);
    return CLI_FAIL;
  }
  const char* text = from_file ? from_file : o.text;
  if (!from_file) len = strlen(text);
  rc = o.decode ? decode(cmd, t, text) : encode(cmd, t, &o, text, len);
  rlx_tokenizer_destroy(t);
  free(from_file);
  return rc;
}
