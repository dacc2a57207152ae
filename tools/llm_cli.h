/* `rlx generate MODEL.gguf` and `rlx bench MODEL.gguf` (generate_llm.c,
 * bench_llm.c): an LLM driven through the KV-cache form of its graph. */
#ifndef RLX_TOOLS_LLM_CLI_H
#define RLX_TOOLS_LLM_CLI_H

#include <stdint.h>

#include "rlx.h"

int cmd_generate_llm(int argc, char** argv);
int cmd_bench_llm(int argc, char** argv);

/* A GGUF file (by its magic); a folder holding config.json. */
int llm_cli_is_gguf(const char* path);
int llm_cli_is_checkpoint(const char* path);
/* Whether an argument that is not an option names a GGUF file or an LLM
 * checkpoint folder: `rlx generate` / `rlx bench` then run it as an LLM. */
int llm_cli_names_llm(int argc, char** argv);

/* A model compiled in its KV-cache form, weights set, caches zeroed. */
typedef struct llm_session {
  rlx_llm* m;
  rlx_exec* e;
  int64_t rows; /* cache rows: the context */
  double load_ms;
} llm_session;

/* How the session computes (rlx_compile_options): CPU threads (0: all
 * cores), --tf32 (allow_tf32) and --precision (rlx_precision). */
typedef struct llm_compute {
  int32_t threads, tf32, precision;
} llm_compute;

/* Loads path (cache rows = ctx, 0: the model's default), builds the cache
 * form with sampling s, compiles it for device with the caches as device
 * state, sets the weights (a progress bar on stderr) and zeros the caches.
 * Errors are printed; CLI_OK or CLI_FAIL. */
int llm_session_open(const char* cmd, const char* path, int64_t ctx, const char* device,
                     const llm_compute* c, const rlx_llm_sampling* s, llm_session* out);
/* Parses --tf32 / --precision P at argv[*i] into c: 1 consumed, 0 not one
 * of them, -1 a bad value (printed). */
int llm_compute_opt(const char* cmd, int argc, char** argv, int* i, llm_compute* c);
void llm_session_free(llm_session* s);
/* One run: n tokens at position start, padded to chunk; *next the token drawn. */
int llm_session_step(const char* cmd, llm_session* s, const int64_t* ids, int64_t n,
                     int64_t chunk, int64_t start, const int64_t* recent, int64_t n_recent,
                     int64_t* next);

#endif
