/* LLMs from GGUF files against a torch oracle: tests/llm_gguf.py writes
 * the tiny seeded Llama (GQA, Llama 3.1 rope scaling as rope_freqs.weight,
 * q / k rows permuted as llama.cpp's converter does) and Qwen2 (q/k/v
 * biases, tied embeddings, linear rope scaling) and Qwen3 (q / k norms,
 * attention.key_length 128 != hidden / heads) of tests/llm_torch.py with
 * llama.cpp's gguf-py writer, once per weight type (f32, f16, q8_0, q4_0,
 * q4_k), and its GPT-2 and Gemma-2 (f32, f16, q8_0, q4_k), with float64
 * logits from the weights as the file stores them (dequantized by gguf-py). Each file is loaded with rlx_llm_load, compiled
 * on every device that can run here (or those named on the command line)
 * and compared: max |rlx - torch| / max |torch| < 1e-4. The reference of
 * the quantized files is the dequantized weights, so the bound holds for
 * them too. Also: the config read from the metadata, and files with a
 * missing key or tensor refused by name. Exits 77 (ctest SKIP) without
 * third_party/llama.cpp or Debian's torch. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "llm_common.h"

#define SKIP_CODE 77

static char g_dir[512];

static int generate(void) { return llm_generate("tests/llm_gguf.py", g_dir); }

static void model_path(const char* name, char* path, size_t cap) {
  snprintf(path, cap, "%s/%s/model.gguf", g_dir, name);
}

static void check_case(const char* name) {
  char dir[700], path[800];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  model_path(name, path, sizeof path);
  llm_check_case(dir, path, name);
}

TEST(llama_f32) { check_case("llama_f32"); }
TEST(llama_f16) { check_case("llama_f16"); }
TEST(llama_q8_0) { check_case("llama_q8_0"); }
TEST(llama_q4_0) { check_case("llama_q4_0"); }
TEST(llama_q4_k) { check_case("llama_q4_k"); }
TEST(qwen2_f32) { check_case("qwen2_f32"); }
TEST(qwen2_f16) { check_case("qwen2_f16"); }
TEST(qwen2_q8_0) { check_case("qwen2_q8_0"); }
TEST(qwen2_q4_0) { check_case("qwen2_q4_0"); }
TEST(qwen2_q4_k) { check_case("qwen2_q4_k"); }
TEST(qwen3_f32) { check_case("qwen3_f32"); }
TEST(qwen3_f16) { check_case("qwen3_f16"); }
TEST(qwen3_q8_0) { check_case("qwen3_q8_0"); }
TEST(qwen3_q4_0) { check_case("qwen3_q4_0"); }
TEST(qwen3_q4_k) { check_case("qwen3_q4_k"); }
TEST(gpt2_f32) { check_case("gpt2_f32"); }
TEST(gpt2_f16) { check_case("gpt2_f16"); }
TEST(gpt2_q8_0) { check_case("gpt2_q8_0"); }
TEST(gpt2_q4_k) { check_case("gpt2_q4_k"); }
TEST(gemma2_f32) { check_case("gemma2_f32"); }
TEST(gemma2_f16) { check_case("gemma2_f16"); }
TEST(gemma2_q8_0) { check_case("gemma2_q8_0"); }
TEST(gemma2_q4_k) { check_case("gemma2_q4_k"); }
TEST(mixtral_f32) { check_case("mixtral_f32"); }
TEST(mixtral_f16) { check_case("mixtral_f16"); }
TEST(mixtral_q8_0) { check_case("mixtral_q8_0"); }
TEST(mixtral_q4_0) { check_case("mixtral_q4_0"); }
TEST(mixtral_q4_k) { check_case("mixtral_q4_k"); }

/* Param named name in m's graph (its dtype), or -1 when absent. */
static int param_dtype(rlx_llm* m, const char* name) {
  for (int32_t i = 0; i < rlx_graph_param_count(rlx_llm_graph(m)); i++) {
    rlx_value_info p;
    if (rlx_graph_get_param(rlx_llm_graph(m), i, &p) == RLX_OK && strcmp(p.name, name) == 0)
      return (int)p.dtype;
  }
  return -1;
}

/* The config comes from the metadata and the tensors' shapes; quantized
 * Linear weights stay raw u8 params, the embedding becomes f32. */
TEST(config_from_metadata) {
  char path[800];
  model_path("llama_q4_k", path, sizeof path);
  rlx_llm* m = NULL;
  char* why = NULL;
  CHECK_MSG(rlx_llm_load(path, NULL, &m, &why) == RLX_OK, "%s", why ? why : "");
  rlx_free(why);
  const rlx_llm_config* c = rlx_llm_get_config(m);
  CHECK(c && c->arch == RLX_LLM_LLAMA && c->hidden_size == 256 && c->intermediate_size == 512);
  CHECK(c && c->num_layers == 2 && c->num_heads == 4 && c->num_kv_heads == 2 &&
        c->head_dim == 64 && c->vocab_size == 128 && c->max_positions == 64);
  CHECK(c && !c->tie_word_embeddings && !c->attention_bias && fabs(c->rms_norm_eps - 1e-5) < 1e-9);
  CHECK(param_dtype(m, "blk.0.attn_q.weight") == RLX_U8);
  CHECK(param_dtype(m, "output.weight") == RLX_U8);
  CHECK(param_dtype(m, "token_embd.weight") == RLX_F32);
  CHECK(param_dtype(m, "blk.1.ffn_norm.weight") == RLX_F32);
  rlx_llm_destroy(m);
  model_path("qwen2_f16", path, sizeof path);
  CHECK(rlx_llm_load(path, NULL, &m, NULL) == RLX_OK);
  c = rlx_llm_get_config(m);
  CHECK(c && c->arch == RLX_LLM_QWEN2 && c->tie_word_embeddings && c->attention_bias &&
        c->rope_scaling == RLX_LLM_ROPE_LINEAR && c->rope_factor == 2.0);
  CHECK(param_dtype(m, "blk.0.attn_q.bias") == RLX_F32 && param_dtype(m, "output.weight") < 0);
  rlx_llm_destroy(m);
  model_path("qwen3_q8_0", path, sizeof path);
  CHECK(rlx_llm_load(path, NULL, &m, NULL) == RLX_OK);
  c = rlx_llm_get_config(m);
  CHECK(c && c->arch == RLX_LLM_QWEN3 && c->qk_norm && c->head_dim == 128 && !c->attention_bias);
  CHECK(param_dtype(m, "blk.1.attn_k_norm.weight") == RLX_F32);
  rlx_llm_destroy(m);
  /* Mixtral: arch llama with experts; quantized experts stay raw [E, rows, row_bytes] */
  model_path("mixtral_q4_k", path, sizeof path);
  CHECK(rlx_llm_load(path, NULL, &m, NULL) == RLX_OK);
  c = rlx_llm_get_config(m);
  CHECK(c && c->num_experts == 4 && c->num_experts_per_tok == 2);
  CHECK(param_dtype(m, "blk.0.ffn_gate_exps.weight") == RLX_U8);
  CHECK(param_dtype(m, "blk.1.ffn_down_exps.weight") == RLX_U8);
  CHECK(param_dtype(m, "blk.0.ffn_gate_inp.weight") == RLX_F32);
  rlx_llm_destroy(m);
}

/* GPT-2 and Gemma-2 metadata as llama.cpp reads it: GPT-2's LayerNorm eps,
 * tied head, learned positions (no RoPE tables); Gemma-2's caps and window
 * from their keys, every other layer sliding, the score scale
 * 1 / sqrt(head_dim) and the embedding scale sqrtf(hidden). */
TEST(config_gpt2_gemma2) {
  char path[800];
  rlx_llm* m = NULL;
  char* why = NULL;
  model_path("gpt2_q8_0", path, sizeof path);
  CHECK_MSG(rlx_llm_load(path, NULL, &m, &why) == RLX_OK, "%s", why ? why : "");
  rlx_free(why);
  const rlx_llm_config* c = rlx_llm_get_config(m);
  CHECK(c && c->arch == RLX_LLM_GPT2 && c->hidden_size == 256 && c->intermediate_size == 1024);
  CHECK(c && c->head_dim == 64 && c->max_positions == 64 && c->tie_word_embeddings &&
        c->attention_bias && fabs(c->rms_norm_eps - 1e-5) < 1e-9);
  CHECK(param_dtype(m, "blk.0.attn_qkv.weight") == RLX_U8);
  CHECK(param_dtype(m, "position_embd.weight") == RLX_F32 && param_dtype(m, "rope.cos") < 0);
  rlx_llm_destroy(m);
  model_path("gemma2_f16", path, sizeof path);
  CHECK(rlx_llm_load(path, NULL, &m, NULL) == RLX_OK);
  c = rlx_llm_get_config(m);
  CHECK(c && c->arch == RLX_LLM_GEMMA2 && c->head_dim == 128 && c->num_kv_heads == 2);
  CHECK(c && c->attn_logit_softcap == 2.0f && c->final_logit_softcap == 10.0f &&
        c->sliding_window == 3 && c->sliding_window_pattern == 2);
  CHECK(c && c->query_pre_attn_scalar == 128.0f && c->embed_scale == 16.0f);
  CHECK(param_dtype(m, "blk.2.post_ffw_norm.weight") == RLX_F32);
  rlx_llm_destroy(m);
}

/* Rewrites one byte string (Python escapes allowed) of the file at src into dst (same length, so
 * every offset stays valid): a key or tensor renamed away. */
static int rename_in_copy(const char* src, const char* dst, const char* from, const char* to) {
  char cmd[3000];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c \"import sys, codecs; b=lambda s: codecs.escape_decode(s)[0]; "
           "d=open(sys.argv[1],'rb').read(); f, t = b(sys.argv[3]), b(sys.argv[4]); "
           "assert d.count(f)==1; open(sys.argv[2],'wb').write(d.replace(f, t))\" "
           "'%s' '%s' '%s' '%s'", src, dst, from, to);
  return system(cmd) == 0;
}

static void expect_refused(const char* from, const char* to, rlx_status want, const char* piece) {
  char src[800], dst[800];
  model_path("qwen2_f32", src, sizeof src);
  snprintf(dst, sizeof dst, "%s/broken.gguf", g_dir);
  CHECK(rename_in_copy(src, dst, from, to));
  rlx_llm* m = NULL;
  char* why = NULL;
  rlx_status s = rlx_llm_load(dst, NULL, &m, &why);
  int ok = s == want && m == NULL && why && strstr(why, piece);
  if (!ok) fprintf(stderr, "%s -> %s: %s '%s'\n", from, to, rlx_status_name(s), why ? why : "");
  rlx_free(why);
  rlx_llm_destroy(m);
  CHECK(ok);
}

TEST(bad_files) {
  expect_refused("qwen2.block_count", "qwen2.block_kount", RLX_INVALID_ARGUMENT,
                 "'qwen2.block_count'");
  expect_refused("qwen2.attention.layer_norm_rms_epsilon",
                 "qwen2.attention.layer_norm_rms_epsilog", RLX_INVALID_ARGUMENT,
                 "layer_norm_rms_epsilon");
  expect_refused("blk.1.ffn_down.weight", "blk.1.ffn_dawn.weight", RLX_NOT_FOUND,
                 "blk.1.ffn_down.weight");
  /* general.architecture's value */
  expect_refused("\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00qwen2",
                 "\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00qwenX",
                 RLX_UNIMPLEMENTED, "'qwenX'");
}

/* test_llm_gguf [DEVICE...]: the devices to compare on (default: all). */
int main(int argc, char** argv) {
  if (argc > 1) {
    g_devices = (const char**)(argv + 1);
    g_n_devices = argc - 1;
  }
  snprintf(g_dir, sizeof g_dir, "%s/llm_gguf_test", RLX_BUILD_DIR);
  int code = generate();
  if (code != 0) {
    printf("SKIP: tests/llm_gguf.py exited %d (needs third_party/llama.cpp and Debian's "
           "python3-torch)\n", code);
    return SKIP_CODE;
  }
  RUN(config_from_metadata);
  RUN(llama_f32);
  RUN(llama_f16);
  RUN(llama_q8_0);
  RUN(llama_q4_0);
  RUN(llama_q4_k);
  RUN(qwen2_f32);
  RUN(qwen2_f16);
  RUN(qwen2_q8_0);
  RUN(qwen2_q4_0);
  RUN(qwen2_q4_k);
  RUN(qwen3_f32);
  RUN(qwen3_f16);
  RUN(qwen3_q8_0);
  RUN(qwen3_q4_0);
  RUN(qwen3_q4_k);
  RUN(config_gpt2_gemma2);
  RUN(gpt2_f32);
  RUN(gpt2_f16);
  RUN(gpt2_q8_0);
  RUN(gpt2_q4_k);
  RUN(gemma2_f32);
  RUN(gemma2_f16);
  RUN(gemma2_q8_0);
  RUN(gemma2_q4_k);
  RUN(mixtral_f32);
  RUN(mixtral_f16);
  RUN(mixtral_q8_0);
  RUN(mixtral_q4_0);
  RUN(mixtral_q4_k);
  RUN(bad_files);
  return test_summary();
}
