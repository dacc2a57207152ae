/* llama.cpp's CPU library (npm @node-llama-cpp/linux-x64, unpacked by
 * scripts/setup_llama.sh into third_party/llama-cpu/) opened with dlopen()
 * as an oracle (tests/test_llama_oracle.c) and a CPU peer
 * (bench/llama_cpu_bench.c). The prototypes come from the bundled source's
 * include/llama.h (same release as the binary, which setup_llama.sh
 * checks); the function pointers take their types from it, so a changed
 * signature fails the build, not the run. Header-only: both programs
 * include it. Built only when llama.h is there (RLX_HAVE_LLAMA_H). */
#ifndef RLX_TESTS_LLAMA_DL_H
#define RLX_TESTS_LLAMA_DL_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <llama.h>

/* X(name): every llama / ggml function the two programs call. */
#define LLAMA_DL_FUNCS(X)                                                                      \
  X(llama_backend_init)                                                                        \
  X(llama_backend_free)                                                                        \
  X(llama_log_set)                                                                             \
  X(llama_model_default_params)                                                                \
  X(llama_context_default_params)                                                              \
  X(llama_model_load_from_file)                                                                \
  X(llama_model_free)                                                                          \
  X(llama_model_get_vocab)                                                                     \
  X(llama_vocab_n_tokens)                                                                      \
  X(llama_init_from_model)                                                                     \
  X(llama_free)                                                                                \
  X(llama_get_memory)                                                                          \
  X(llama_memory_clear)                                                                        \
  X(llama_batch_init)                                                                          \
  X(llama_batch_free)                                                                          \
  X(llama_decode)                                                                              \
  X(llama_synchronize)                                                                         \
  X(llama_get_logits_ith)                                                                      \
  X(llama_model_desc)                                                                          \
  X(llama_model_size)                                                                          \
  X(llama_model_n_params)                                                                      \
  X(llama_tokenize)                                                                            \
  X(ggml_backend_load_all_from_path)

typedef struct llama_dl {
  void* llama; /* dlopen handle */
#define LLAMA_DL_FIELD(name) __typeof__(&name) name;
  LLAMA_DL_FUNCS(LLAMA_DL_FIELD)
#undef LLAMA_DL_FIELD
} llama_dl;

/* Quiet: the library logs every tensor at load; errors still reach stderr. */
static void llama_dl_log(enum ggml_log_level level, const char* text, void* user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* Opens dir/libllama.so (which loads dir's libggml), resolves every function and
 * loads the CPU backend variants found in dir (the best one for this CPU
 * is picked by ggml). 1 on success; 0 with the reason in why. */
static int llama_dl_open(llama_dl* l, const char* dir, int quiet, char* why, size_t cap) {
  char path[1024];
  memset(l, 0, sizeof *l);
  snprintf(path, sizeof path, "%s/libllama.so", dir);
  l->llama = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!l->llama) {
    snprintf(why, cap, "cannot open %s (run scripts/setup_llama.sh): %s", path, dlerror());
    return 0;
  }
/* dlsym on libllama's handle also searches its dependencies (libggml) */
#define LLAMA_DL_SYM(name)                                                                     \
  *(void**)&l->name = dlsym(l->llama, #name);                                                   \
  if (!l->name) {                                                                              \
    snprintf(why, cap, "%s: no symbol %s", path, #name);                                       \
    return 0;                                                                                  \
  }
  LLAMA_DL_FUNCS(LLAMA_DL_SYM)
#undef LLAMA_DL_SYM
  if (quiet) l->llama_log_set(llama_dl_log, NULL);
  l->ggml_backend_load_all_from_path(dir);
  l->llama_backend_init();
  return 1;
}

static void llama_dl_close(llama_dl* l) {
  if (l->llama_backend_free) l->llama_backend_free();
  /* the libraries stay loaded: ggml's registry keeps pointers into them */
  memset(l, 0, sizeof *l);
}

/* One batch of n tokens of sequence 0 at positions pos0 .. pos0 + n - 1;
 * logits for every position when all_logits, else for the last only. */
static void llama_dl_fill_batch(struct llama_batch* b, const llama_token* ids, int n, int pos0,
                                int all_logits) {
  b->n_tokens = n;
  for (int i = 0; i < n; i++) {
    b->token[i] = ids[i];
    b->pos[i] = pos0 + i;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = 0;
    b->logits[i] = (int8_t)(all_logits || i == n - 1);
  }
}

#endif
