/* rlx generate MODEL.gguf --prompt TEXT and rlx bench MODEL.gguf: text
 * generation and llama-bench style throughput with the KV-cache form of
 * the LLM graph (rlx_llm_build_cache_graph). The caches stay on the
 * device; each step reads back only the sampled token id (8 bytes), which
 * the host needs anyway to stream text and check stop conditions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_common.h"
#include "llm_chat.h"
#include "llm_cli.h"

#define MAX_STOPS 16
#define MAX_EOG 16

/* ------------------------------------------------------------ shared: loading */

void llm_session_free(llm_session* s) {
  rlx_exec_destroy(s->e);
  rlx_llm_destroy(s->m);
  memset(s, 0, sizeof *s);
}

/* "[#####.....]  45%  12.3 / 27.0 MiB" on stderr: redrawn in place when
 * the percentage changes on a terminal, else one line at the end. */
static void progress_bar(int* last, int64_t done, int64_t total) {
  int pct = total > 0 ? (int)(100.0 * (double)done / (double)total) : 100;
  int tty = isatty(STDERR_FILENO);
  if (pct == *last || (!tty && done < total)) return;
  *last = pct;
  int width = 30, filled = pct * width / 100;
  char bar[32];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
  bar[width] = '\0';
  fprintf(stderr, "%sloading weights [%s] %3d%%  %.1f / %.1f MiB%s", tty ? "\r" : "", bar, pct,
          (double)done / 1048576.0, (double)total / 1048576.0, done >= total ? "\n" : "");
  fflush(stderr);
}

/* Every weight set one at a time, the bar redrawn between them. */
static rlx_status set_weights_with_bar(rlx_llm* m, rlx_exec* e) {
  int last = -1;
  int64_t done = 0, total = 0;
  for (int32_t i = 0; i < rlx_llm_weight_count(m); i++) {
    rlx_status s = rlx_llm_set_weights(m, e, i, 1, &done, &total);
    if (s != RLX_OK) return s;
    progress_bar(&last, done, total);
  }
  return RLX_OK;
}

int llm_cli_is_gguf(const char* path) {
  unsigned char magic[4] = {0};
  FILE* f = fopen(path, "rb");
  if (!f) return 0;
  size_t n = fread(magic, 1, 4, f);
  fclose(f);
  return n == 4 && memcmp(magic, "GGUF", 4) == 0;
}

int llm_cli_names_llm(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    if (llm_cli_is_gguf(argv[i]) || llm_cli_is_checkpoint(argv[i])) return 1;
  }
  return 0;
}

int llm_cli_is_checkpoint(const char* path) {
  char config[4096];
  struct stat st;
  snprintf(config, sizeof config, "%s/config.json", path);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(config, &st) == 0;
}

int llm_compute_opt(const char* cmd, int argc, char** argv, int* i, llm_compute* c) {
  const char* v = NULL;
  int m;
  if (strcmp(argv[*i], "--tf32") == 0) {
    c->tf32 = 1;
    return 1;
  }
  if ((m = cli_opt_value(cmd, argc, argv, i, "--precision", &v)) != 0)
    return m < 0 || cli_parse_precision(cmd, v, &c->precision) != CLI_OK ? -1 : 1;
  return 0;
}

int llm_session_open(const char* cmd, const char* path, int64_t ctx, const char* device,
                     const llm_compute* c, const rlx_llm_sampling* s, llm_session* out) {
  memset(out, 0, sizeof *out);
  double t0 = cli_now_ms();
  rlx_llm_options lo;
  rlx_llm_options_init(&lo);
  lo.max_seq = ctx;
  char* why = NULL;
  if (rlx_llm_load(path, &lo, &out->m, &why) != RLX_OK) {
    cli_error(cmd, "%s: %s", path, why ? why : "cannot load");
    rlx_free(why);
    return CLI_FAIL;
  }
  out->rows = rlx_llm_cache_rows(out->m);
  rlx_graph* g = NULL;
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.threads = c->threads;
  o.allow_tf32 = c->tf32;
  o.precision = c->precision;
  rlx_status st = rlx_llm_build_cache_graph(out->m, s, 0, &g);
  if (st == RLX_OK) st = rlx_llm_cache_compile_options(out->m, &o);
  if (st != RLX_OK) {
    cli_error(cmd, "%s", rlx_llm_last_error(out->m));
    llm_session_free(out);
    return CLI_FAIL;
  }
  st = rlx_compile(g, device, &o, &out->e);
  if (st != RLX_OK) cli_error(cmd, "compiling for %s: %s", device, rlx_graph_last_error(g));
  rlx_graph_destroy(g);
  if (st == RLX_OK) {
    st = set_weights_with_bar(out->m, out->e);
    if (st == RLX_OK) st = rlx_llm_cache_reset(out->m, out->e);
    if (st != RLX_OK) cli_error(cmd, "%s", rlx_llm_last_error(out->m));
  }
  if (st != RLX_OK) {
    llm_session_free(out);
    return CLI_FAIL;
  }
  out->load_ms = cli_now_ms() - t0;
  return CLI_OK;
}

int llm_session_step(const char* cmd, llm_session* s, const int64_t* ids, int64_t n, int64_t chunk,
                int64_t start, const int64_t* recent, int64_t n_recent, int64_t* next) {
  if (rlx_llm_cache_run(s->m, s->e, ids, n, chunk, start, recent, n_recent) != RLX_OK ||
      rlx_exec_read_output(s->e, 0, RLX_I64, next, sizeof *next) != RLX_OK) {
    cli_error(cmd, "%s", rlx_llm_last_error(s->m)[0] ? rlx_llm_last_error(s->m)
                                                      : rlx_exec_last_error(s->e));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* ------------------------------------------------------------ generate: options */

typedef struct gen_args {
  const char* model;
  const char* prompt;
  const char* system;
  const char* tokenizer; /* a GGUF or tokenizer.json whose vocab to use */
  const char* template_name;
  const char* device;
  int64_t tokens, ctx, batch, threads;
  llm_compute compute; /* --tf32, --precision (threads: above) */
  int chat;
  int verbose_prompt;
  uint64_t seed;
  int have_seed;
  rlx_llm_sampling s;
  const char* stops[MAX_STOPS];
  int n_stops;
} gen_args;

static void gen_usage(FILE* f) {
  fprintf(f,
          "usage: rlx generate MODEL --prompt TEXT [options]\n"
          "\n"
          "Generates text with MODEL, a GGUF file (Llama, Qwen2, Qwen3, Mistral,\n"
          "Mixtral, GPT-2, Gemma-2 architectures; f32 / f16 / q8_0 / q4_0 / q4_K\n"
          "weights) or a safetensors checkpoint folder (its tokenizer.json,\n"
          "tokenizer_config.json and generation_config.json give the vocab). The\n"
          "prompt is prefilled in chunks of --batch tokens, then one token per step;\n"
          "the keys and values stay in a cache on the device and the next token is\n"
          "drawn there. Tokens stream to stdout as they are made; loading progress\n"
          "and the timing (prompt and generation tokens per second) go to stderr.\n"
          "Generation ends after -n tokens, at the end-of-sequence / end-of-turn\n"
          "token, at a --stop string or when the context is full.\n"
          "\n"
          "options:\n"
          "  --prompt TEXT        the prompt (required)\n"
          "  -n, --tokens N       tokens to generate (default 128)\n"
          "  --temperature T      0: greedy; default 0.8\n"
          "  --top-k K            keep the K most likely tokens (0: off; default 40)\n"
          "  --top-p P            keep the most likely tokens holding P of the mass\n"
          "                       (1: off; default 0.95)\n"
          "  --min-p P            drop tokens below P times the top probability\n"
          "                       (0: off; default 0.05)\n"
          "  --repeat-penalty R   divide (multiply when negative) the logits of\n"
          "                       recent tokens by R (1: off; default 1)\n"
          "  --repeat-last-n N    tokens the penalty looks back over (default 64)\n"
          "  --seed N             sampling seed (default: from the clock, printed)\n"
          "  --stop STRING        end before STRING appears (repeatable, up to %d)\n"
          "  --chat               format the prompt with the model's chat template\n"
          "                       (tokenizer.chat_template, or tokenizer_config.json's\n"
          "                       chat_template) as one user turn plus the\n"
          "                       assistant's opening. rlx has no Jinja interpreter:\n"
          "                       it recognises the template family (chatml, llama-3,\n"
          "                       llama-2, mistral, mistral-v7, gemma, phi-3, zephyr,\n"
          "                       deepseek-3, deepseek) and writes that format; an\n"
          "                       unknown template is an error (see --chat-template)\n"
          "  --system TEXT        a system turn (with --chat)\n"
          "  --chat-template NAME use family NAME instead of the file's template\n"
          "  --tokenizer FILE     a GGUF file, tokenizer.json or Hugging Face folder\n"
          "                       whose tokenizer (and chat template) to use instead\n"
          "                       of the model's\n"
          "  --ctx N              context (cache rows; default: the model's, at most\n"
          "                       4096)\n"
          "  --batch N            prefill chunk (default 512)\n"
          "  --device D           cpu, cuda, vulkan, webgpu or best (default best)\n"
          "  --threads N          CPU threads (default: all cores)\n"
          "  --tf32               GPU backends may use TF32 tensor cores for f32 matmul\n"
          "  --precision P        bf16 or f16: compute the model's f32 activations in P\n"
          "                       (matmuls on tensor cores); f32: as built (default)\n"
          "  --verbose-prompt     print the (formatted) prompt and its token count to\n"
          "                       stderr\n"
          "\n"
          "rlx generate FILE (a graph) and CHECKPOINT_DIR (`rlx train --text`) are\n"
          "described by `rlx generate FILE --help`.\n",
          MAX_STOPS);
}

static int parse_f32(const char* cmd, const char* what, const char* v, float* out) {
  double d = 0;
  int rc = cli_parse_f64(cmd, what, v, &d);
  *out = (float)d;
  return rc;
}

/* Consumes one sampling option; 1 consumed, 0 not one, -1 bad. */
static int sampling_opt(const char* cmd, int argc, char** argv, int* i, rlx_llm_sampling* s) {
  const char* v = NULL;
  int64_t k = 0;
  int m, rc = CLI_OK;
  if ((m = cli_opt_value(cmd, argc, argv, i, "--temperature", &v)) != 0)
    rc = m < 0 ? CLI_USAGE : parse_f32(cmd, "--temperature", v, &s->temperature);
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--top-k", &v)) != 0) {
    rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--top-k", v, 0, 1 << 24, &k);
    s->top_k = (int32_t)k;
  } else if ((m = cli_opt_value(cmd, argc, argv, i, "--top-p", &v)) != 0)
    rc = m < 0 ? CLI_USAGE : parse_f32(cmd, "--top-p", v, &s->top_p);
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--min-p", &v)) != 0)
    rc = m < 0 ? CLI_USAGE : parse_f32(cmd, "--min-p", v, &s->min_p);
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--repeat-penalty", &v)) != 0)
    rc = m < 0 ? CLI_USAGE : parse_f32(cmd, "--repeat-penalty", v, &s->repeat_penalty);
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--repeat-last-n", &v)) != 0) {
    rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--repeat-last-n", v, 0, 65536, &k);
    s->repeat_last_n = (int32_t)k;
  } else
    return 0;
  return rc == CLI_OK ? 1 : -1;
}

static int check_sampling(const char* cmd, const rlx_llm_sampling* s) {
  const char* bad = NULL;
  if (!(s->temperature >= 0)) bad = "--temperature must be >= 0";
  else if (!(s->top_p > 0 && s->top_p <= 1)) bad = "--top-p must be in (0, 1]";
  else if (!(s->min_p >= 0 && s->min_p < 1)) bad = "--min-p must be in [0, 1)";
  else if (!(s->repeat_penalty > 0)) bad = "--repeat-penalty must be > 0";
  if (bad) cli_error(cmd, "%s", bad);
  return bad ? CLI_USAGE : CLI_OK;
}

/* Options with a value that are not sampling ones. */
static int gen_value_opt(const char* cmd, int argc, char** argv, int* i, gen_args* a) {
  const char* v = NULL;
  int m;
  int64_t seed = 0;
  if ((m = cli_opt_value(cmd, argc, argv, i, "--prompt", &v)) != 0) a->prompt = v;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--system", &v)) != 0) a->system = v;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--tokenizer", &v)) != 0) a->tokenizer = v;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--chat-template", &v)) != 0)
    a->template_name = v;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--device", &v)) != 0) a->device = v;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--tokens", &v)) != 0 ||
           (m = cli_opt_value(cmd, argc, argv, i, "-n", &v)) != 0)
    return m < 0 ? -1 : cli_parse_i64(cmd, "--tokens", v, 0, 1 << 24, &a->tokens) ? -1 : 1;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--ctx", &v)) != 0)
    return m < 0 ? -1 : cli_parse_i64(cmd, "--ctx", v, 1, 1 << 24, &a->ctx) ? -1 : 1;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--batch", &v)) != 0)
    return m < 0 ? -1 : cli_parse_i64(cmd, "--batch", v, 1, 1 << 16, &a->batch) ? -1 : 1;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--threads", &v)) != 0)
    return m < 0 ? -1 : cli_parse_i64(cmd, "--threads", v, 0, 4096, &a->threads) ? -1 : 1;
  else if ((m = llm_compute_opt(cmd, argc, argv, i, &a->compute)) != 0)
    return m;
  else if ((m = cli_opt_value(cmd, argc, argv, i, "--seed", &v)) != 0) {
    if (m < 0 || cli_parse_i64(cmd, "--seed", v, 0, INT64_MAX, &seed)) return -1;
    a->seed = (uint64_t)seed;
    a->have_seed = 1;
    return 1;
  } else if ((m = cli_opt_value(cmd, argc, argv, i, "--stop", &v)) != 0) {
    if (m < 0) return -1;
    if (a->n_stops == MAX_STOPS || !*v) {
      cli_error(cmd, "--stop: %s", *v ? "at most 16 stop strings" : "an empty stop string");
      return -1;
    }
    a->stops[a->n_stops++] = v;
    return 1;
  }
  return m < 0 ? -1 : m;
}

static int gen_parse(const char* cmd, int argc, char** argv, gen_args* a, int* help) {
  for (int i = 1; i < argc; i++) {
    int m = sampling_opt(cmd, argc, argv, &i, &a->s);
    if (m == 0) m = gen_value_opt(cmd, argc, argv, &i, a);
    if (m < 0) return CLI_USAGE;
    if (m > 0) continue;
    if (cli_is_help(argv[i])) {
      *help = 1;
      return CLI_OK;
    } else if (strcmp(argv[i], "--chat") == 0) {
      a->chat = 1;
    } else if (strcmp(argv[i], "--verbose-prompt") == 0) {
      a->verbose_prompt = 1;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx generate MODEL.gguf --help)", argv[i]);
      return CLI_USAGE;
    } else if (a->model) {
      cli_error(cmd, "more than one MODEL ('%s' and '%s')", a->model, argv[i]);
      return CLI_USAGE;
    } else {
      a->model = argv[i];
    }
  }
  if (!a->model || !a->prompt) {
    cli_error(cmd, "%s", !a->model ? "missing MODEL" : "missing --prompt TEXT");
    return CLI_USAGE;
  }
  if (a->template_name && chat_family_from_name(a->template_name) == CHAT_UNKNOWN) {
    cli_error(cmd, "--chat-template: unknown family '%s' (chatml, llama-3, llama-2, mistral, "
                   "mistral-v7, gemma, phi-3, zephyr, deepseek-3, deepseek)", a->template_name);
    return CLI_USAGE;
  }
  return check_sampling(cmd, &a->s);
}

/* ------------------------------------------------------------ generate: text */

/* The vocab: --tokenizer, else the model (a GGUF file, or a safetensors
 * folder's tokenizer.json). */
static const char* vocab_file(const char* cmd, const gen_args* a) {
  char path[4096];
  struct stat st;
  if (a->tokenizer || llm_cli_is_gguf(a->model)) return a->tokenizer ? a->tokenizer : a->model;
  snprintf(path, sizeof path, "%s/tokenizer.json", a->model);
  if (stat(path, &st) == 0) return a->model;
  cli_error(cmd,
            "%s is a safetensors folder without tokenizer.json: give the model's vocab with "
            "--tokenizer (a GGUF file, tokenizer.json or Hugging Face folder)",
            a->model);
  return NULL;
}

/* The prompt text, formatted as a chat exchange with --chat. */
static char* prompt_text(const char* cmd, const gen_args* a, rlx_tokenizer* tok) {
  if (!a->chat) return strdup(a->prompt);
  chat_family f = CHAT_UNKNOWN;
  if (a->template_name) {
    f = chat_family_from_name(a->template_name);
  } else {
    const char* text = rlx_tokenizer_chat_template(tok);
    if (!text) {
      cli_error(cmd, "--chat: the model has no chat template (tokenizer.chat_template, "
                     "chat_template in tokenizer_config.json); name a family with "
                     "--chat-template");
      return NULL;
    }
    f = chat_detect(text);
    if (f == CHAT_UNKNOWN) {
      cli_error(cmd, "--chat: the model's chat template is not one rlx knows (chatml, llama-3, "
                     "llama-2, mistral, gemma, phi-3, zephyr, deepseek; rlx has no Jinja "
                     "interpreter): name a family with --chat-template");
      return NULL;
    }
  }
  return chat_format(f, a->system, a->prompt);
}

/* End-of-generation tokens: EOS, EOT, generation_config.json's eos ids and
 * the end-of-turn markers the vocab has. */
static int end_tokens(rlx_tokenizer* tok, rlx_gguf* g, int64_t* out) {
  static const char* const markers[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>",
                                        "<|endoftext|>", "<|end_of_text|>"};
  int n = 0;
  if (rlx_tokenizer_eos(tok) >= 0) out[n++] = rlx_tokenizer_eos(tok);
  int64_t k = g ? rlx_gguf_find_key(g, "tokenizer.ggml.eot_token_id") : -1; /* g: GGUF vocabs */
  int64_t eot = -1;
  if (k >= 0 && rlx_gguf_get_i64(g, k, &eot) == RLX_OK && eot >= 0) out[n++] = eot;
  const int32_t* listed = NULL; /* generation_config.json's eos_token_id list */
  for (int32_t i = 0, m = rlx_tokenizer_end_ids(tok, &listed); i < m && n < MAX_EOG; i++)
    out[n++] = listed[i];
  for (int32_t id = 0; id < rlx_tokenizer_vocab_size(tok) && n < MAX_EOG; id++) {
    const char* text = NULL;
    size_t len = 0;
    if (rlx_tokenizer_token_text(tok, id, &text, &len) != RLX_OK) continue;
    for (size_t j = 0; j < sizeof markers / sizeof *markers && n < MAX_EOG; j++)
      if (len == strlen(markers[j]) && memcmp(text, markers[j], len) == 0) out[n++] = id;
  }
  return n;
}

/* What has been written to stdout of the generated text. */
typedef struct streamer {
  rlx_tokenizer* tok;
  const gen_args* a;
  int32_t* ids; /* the prompt's last token, then the generated ones */
  int64_t n;
  size_t skip;  /* bytes of the prompt token's own text */
  size_t printed;
  int stopped; /* a stop string was reached */
} streamer;

static int decode_ids(streamer* st, char** text, size_t* len) {
  if (rlx_tokenizer_decode(st->tok, st->ids, st->n, 0, text, len) == RLX_OK) return CLI_OK;
  cli_error("generate", "decoding token %d: %s", (int)st->ids[st->n - 1],
            rlx_tokenizer_last_error(st->tok));
  return CLI_FAIL;
}

/* Starts the stream after the prompt's last token: decoded with it, the
 * first generated piece keeps the space SentencePiece drops at the start
 * of a text. */
static int stream_start(streamer* st, int32_t last_prompt_token) {
  char* text = NULL;
  size_t len = 0;
  st->ids[0] = last_prompt_token;
  st->n = 1;
  if (decode_ids(st, &text, &len) != CLI_OK) return CLI_FAIL;
  st->skip = len;
  rlx_free(text);
  return CLI_OK;
}

/* Decodes every generated token again (SentencePiece joins pieces by
 * context) and prints what is new, holding back a partial UTF-8 sequence
 * and a possible start of a stop string; at the end (final) all of it. */
static int stream_text(streamer* st, int final) {
  char* full = NULL;
  size_t full_len = 0;
  if (decode_ids(st, &full, &full_len) != CLI_OK) return CLI_FAIL;
  size_t skip = st->skip < full_len ? st->skip : full_len;
  const char* text = full + skip;
  size_t len = full_len - skip;
  long at = stop_find(text, len, st->a->stops, st->a->n_stops);
  size_t upto = len;
  if (at >= 0) {
    upto = (size_t)at;
    st->stopped = 1;
  } else if (!final) {
    upto = utf8_complete(text, len - stop_hold(text, len, st->a->stops, st->a->n_stops));
  }
  if (upto > st->printed) {
    fwrite(text + st->printed, 1, upto - st->printed, stdout);
    fflush(stdout);
    st->printed = upto;
  }
  rlx_free(full);
  return CLI_OK;
}

static int is_end(const int64_t* ends, int n, int64_t tok) {
  for (int i = 0; i < n; i++)
    if (ends[i] == tok) return 1;
  return 0;
}

/* The prompt prefilled in chunks of --batch (the last padded: one binding). */
static int prefill(const char* cmd, llm_session* s, const gen_args* a, const int64_t* ids,
                   int64_t n, int64_t* next) {
  int64_t chunk = a->batch < n ? a->batch : n;
  for (int64_t at = 0; at < n; at += chunk) {
    int64_t len = n - at < chunk ? n - at : chunk;
    if (llm_session_step(cmd, s, ids + at, len, chunk, at, ids, at + len, next) != CLI_OK) return CLI_FAIL;
  }
  return CLI_OK;
}

typedef struct gen_stats {
  int64_t prompt, made;
  double prompt_ms, gen_ms;
  int64_t steps;     /* decode steps run */
  double steady_ms;  /* time of the steps after the first (which compiles T = 1) */
  const char* why;
} gen_stats;

static int decode_loop(const char* cmd, llm_session* s, const gen_args* a, int64_t* seq,
                       int64_t n_prompt, int64_t next, streamer* st, const int64_t* ends,
                       int n_ends, gen_stats* gs) {
  int64_t pos = n_prompt;
  gs->why = "the token limit (-n)";
  for (int64_t made = 0; made < a->tokens; made++) {
    if (is_end(ends, n_ends, next)) {
      gs->why = "the end-of-sequence token";
      break;
    }
    seq[pos] = next;
    st->ids[st->n++] = (int32_t)next;
    gs->made++;
    if (stream_text(st, 0) != CLI_OK) return CLI_FAIL;
    if (st->stopped) {
      gs->why = "a --stop string";
      break;
    }
    if (made + 1 == a->tokens) break;
    if (pos >= s->rows) { /* no cache row for the token just drawn */
      gs->why = "the full context (--ctx)";
      break;
    }
    rlx_exec_set_seed(s->e, a->seed + (uint64_t)pos);
    double t0 = cli_now_ms();
    if (llm_session_step(cmd, s, &seq[pos], 1, 1, pos, seq, pos + 1, &next) != CLI_OK)
      return CLI_FAIL;
    if (gs->steps++ > 0) gs->steady_ms += cli_now_ms() - t0;
    pos++;
  }
  return st->stopped ? CLI_OK : stream_text(st, 1);
}

/* The timing line on stderr. The prompt's time includes compiling for its
 * chunk size (the first run of that binding); the decode rate is also given
 * over the steps after the first, which compiles the T = 1 binding. */
static void report(const gen_stats* gs, double load_ms) {
  fprintf(stderr, "rlx: prompt %lld tokens in %.1f ms (%.2f t/s); generated %lld tokens in %.1f ms "
                  "(%.2f t/s",
          (long long)gs->prompt, gs->prompt_ms, gs->prompt * 1000.0 / fmax(gs->prompt_ms, 1e-3),
          (long long)gs->made, gs->gen_ms, gs->made * 1000.0 / fmax(gs->gen_ms, 1e-3));
  if (gs->steps > 1)
    fprintf(stderr, "; %.2f t/s over the %lld decode steps after the first",
            (gs->steps - 1) * 1000.0 / fmax(gs->steady_ms, 1e-3), (long long)(gs->steps - 1));
  fprintf(stderr, "); stopped at %s; load %.1f ms\n", gs->why ? gs->why : "the token limit (-n)",
          load_ms);
}

static int run_generate(const char* cmd, llm_session* s, const gen_args* a, rlx_tokenizer* tok,
                        rlx_gguf* g, const int32_t* prompt, int64_t n_prompt) {
  int64_t ends[MAX_EOG];
  int n_ends = end_tokens(tok, g, ends);
  int64_t cap = n_prompt + a->tokens + 1;
  int64_t* seq = malloc(sizeof(int64_t) * (size_t)cap);
  streamer st = {tok, a, malloc(sizeof(int32_t) * (size_t)(a->tokens + 2)), 0, 0, 0, 0};
  gen_stats gs = {n_prompt, 0, 0, 0, 0, 0, NULL};
  int rc = seq && st.ids ? CLI_OK : CLI_FAIL;
  if (rc == CLI_OK) rc = stream_start(&st, prompt[n_prompt - 1]);
  for (int64_t i = 0; rc == CLI_OK && i < n_prompt; i++) seq[i] = prompt[i];
  int64_t next = -1;
  double t0 = cli_now_ms();
  rlx_exec_set_seed(s->e, a->seed);
  if (rc == CLI_OK) rc = prefill(cmd, s, a, seq, n_prompt, &next);
  gs.prompt_ms = cli_now_ms() - t0;
  t0 = cli_now_ms();
  if (rc == CLI_OK && a->tokens > 0)
    rc = decode_loop(cmd, s, a, seq, n_prompt, next, &st, ends, n_ends, &gs);
  gs.gen_ms = cli_now_ms() - t0;
  if (rc == CLI_OK) {
    printf("\n");
    report(&gs, s->load_ms);
  }
  free(seq);
  free(st.ids);
  return rc;
}

/* Tokenizes the (chat-formatted) prompt. */
static int encode_prompt(const char* cmd, const gen_args* a, rlx_tokenizer* tok, int32_t** ids,
                         int64_t* n) {
  char* text = prompt_text(cmd, a, tok);
  if (!text) return CLI_USAGE;
  int32_t flags = RLX_TOKENIZE_ADD_SPECIAL | (a->chat ? RLX_TOKENIZE_PARSE_SPECIAL : 0);
  rlx_status st = rlx_tokenizer_encode(tok, text, strlen(text), flags, ids, n);
  if (st == RLX_OK && a->verbose_prompt)
    fprintf(stderr, "rlx: prompt (%lld tokens):\n%s\n", (long long)*n, text);
  free(text);
  if (st != RLX_OK) {
    cli_error(cmd, "tokenizing the prompt: %s", rlx_tokenizer_last_error(tok));
    return CLI_FAIL;
  }
  if (*n == 0) {
    cli_error(cmd, "the prompt has no tokens");
    return CLI_USAGE;
  }
  return CLI_OK;
}

static int generate_with(const char* cmd, gen_args* a, rlx_gguf* g, rlx_tokenizer* tok) {
  int32_t* ids = NULL;
  int64_t n = 0;
  int rc = encode_prompt(cmd, a, tok, &ids, &n);
  llm_session s;
  memset(&s, 0, sizeof s);
  llm_compute c = {(int32_t)a->threads, a->compute.tf32, a->compute.precision};
  if (rc == CLI_OK) rc = llm_session_open(cmd, a->model, a->ctx, a->device, &c, &a->s, &s);
  if (rc == CLI_OK && n >= s.rows) {
    cli_error(cmd, "the prompt has %lld tokens; the context holds %lld (--ctx)", (long long)n,
              (long long)s.rows);
    rc = CLI_USAGE;
  }
  if (rc == CLI_OK) {
    const char* dev = a->device;
    rlx_device_resolve(a->device, &dev);
    fprintf(stderr, "rlx: %s on %s, %lld prompt tokens, seed %llu\n", a->model, dev,
            (long long)n, (unsigned long long)a->seed);
    rc = run_generate(cmd, &s, a, tok, g, ids, n);
  }
  llm_session_free(&s);
  rlx_free(ids);
  return rc;
}

int cmd_generate_llm(int argc, char** argv) {
  const char* cmd = "generate";
  gen_args a;
  memset(&a, 0, sizeof a);
  rlx_llm_sampling_init(&a.s);
  a.s.temperature = 0.8f;
  a.s.top_k = 40;
  a.s.top_p = 0.95f;
  a.s.min_p = 0.05f;
  a.tokens = 128;
  a.batch = 512;
  a.device = "best";
  int help = 0;
  int rc = gen_parse(cmd, argc, argv, &a, &help);
  if (help) {
    gen_usage(stdout);
    return CLI_OK;
  }
  if (rc != CLI_OK) return rc;
  if (!a.have_seed) a.seed = (uint64_t)time(NULL);
  const char* vocab = vocab_file(cmd, &a);
  if (!vocab) return CLI_USAGE;
  rlx_gguf* g = NULL; /* kept open for a GGUF vocab's eot id; NULL for tokenizer.json */
  rlx_tokenizer* tok = NULL;
  char* why = NULL;
  rlx_status st = llm_cli_is_gguf(vocab) ? rlx_gguf_open(vocab, &g, &why)
                                         : rlx_tokenizer_load(vocab, &tok, &why);
  if (st != RLX_OK || (g && rlx_tokenizer_from_gguf(g, &tok, &why) != RLX_OK)) {
    cli_error(cmd, "%s: %s", vocab, why ? why : "cannot read the tokenizer");
    rlx_free(why);
    rlx_gguf_close(g);
    return CLI_FAIL;
  }
  rc = generate_with(cmd, &a, g, tok);
  rlx_tokenizer_destroy(tok);
  rlx_gguf_close(g);
  return rc;
}
