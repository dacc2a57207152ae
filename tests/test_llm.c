/* LLM builders from config.json + safetensors against a torch oracle:
 * tests/llm_torch.py (Debian's /usr/bin/python3 with python3-torch) writes
 * tiny seeded Llama, Qwen2, Qwen3, Mistral, GPT-2 and Gemma-2 checkpoints
 * (one of them bf16 in two shards, some f16 / bf16, a GPT-2 without the
 * "transformer." prefix) and their float64 logits into BUILD/llm_test.
 * Each is loaded with rlx_llm_load, compiled on every device that can run
 * here, or on those named on the command line (the others are reported as
 * skipped), and its logits compared:
 * max |rlx - torch| / max |torch| < 1e-4 (f32 compute). Also: config
 * errors and a checkpoint that does not match its config are refused by
 * name. Exits 77 (ctest SKIP) without torch or json-c. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "llm_common.h"

#define SKIP_CODE 77

static char g_dir[512];

static int generate(void) { return llm_generate("tests/llm_torch.py", g_dir); }

static void check_case(const char* name) {
  char dir[700];
  snprintf(dir, sizeof dir, "%s/%s", g_dir, name);
  llm_check_case(dir, dir, name);
}

TEST(llama) { check_case("llama"); }
TEST(llama_bf16_sharded) { check_case("llama_bf16_sharded"); }
TEST(qwen2) { check_case("qwen2"); }
TEST(qwen3) { check_case("qwen3"); }
TEST(mistral) { check_case("mistral"); }
TEST(gpt2) { check_case("gpt2"); }
TEST(gpt2_noprefix_f16) { check_case("gpt2_noprefix_f16"); }
TEST(gemma2) { check_case("gemma2"); }
TEST(gemma2_bf16) { check_case("gemma2_bf16"); }

/* GPT-2's n_* fields and Gemma-2's extras land in rlx_llm_config; the
 * bf16 Gemma's embedding scale is sqrt(72) rounded to bf16 (8.5). */
TEST(config_fields_gpt2_gemma2) {
  char path[700];
  rlx_llm_config c;
  char* why = NULL;
  snprintf(path, sizeof path, "%s/gpt2", g_dir);
  CHECK_MSG(rlx_llm_config_load(path, &c, &why) == RLX_OK, "%s", why ? why : "");
  rlx_free(why);
  CHECK(c.arch == RLX_LLM_GPT2 && c.hidden_size == 64 && c.intermediate_size == 256);
  CHECK(c.num_heads == 4 && c.num_kv_heads == 4 && c.head_dim == 16 && c.max_positions == 32);
  CHECK(c.tie_word_embeddings && c.attn_logit_softcap == 0.0f && c.embed_scale == 0.0f);
  snprintf(path, sizeof path, "%s/gemma2", g_dir);
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK);
  CHECK(c.arch == RLX_LLM_GEMMA2 && c.head_dim == 32 && c.num_kv_heads == 2);
  CHECK(c.attn_logit_softcap == 2.0f && c.final_logit_softcap == 10.0f);
  CHECK(c.query_pre_attn_scalar == 24.0f && c.sliding_window == 3 &&
        c.sliding_window_pattern == 2 && c.embed_scale == 8.0f && c.tie_word_embeddings);
  snprintf(path, sizeof path, "%s/gemma2_bf16", g_dir);
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK);
  CHECK(c.embed_scale == 8.5f);
}

TEST(mixtral) { check_case("mixtral"); }

/* Mixtral's expert fields, and their errors. */
TEST(moe_config) {
  char path[700];
  snprintf(path, sizeof path, "%s/mixtral", g_dir);
  rlx_llm_config c;
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK);
  CHECK(c.arch == RLX_LLM_MISTRAL && c.num_experts == 4 && c.num_experts_per_tok == 2);
  snprintf(path, sizeof path, "%s/llama", g_dir);
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK && c.num_experts == 0);
}

/* The config fields land where rlx_llm_config says. */
TEST(config_fields) {
  char path[700];
  snprintf(path, sizeof path, "%s/qwen3", g_dir);
  rlx_llm_config c;
  char* why = NULL;
  CHECK_MSG(rlx_llm_config_load(path, &c, &why) == RLX_OK, "%s", why ? why : "");
  CHECK(c.arch == RLX_LLM_QWEN3 && c.head_dim == 32 && c.qk_norm && !c.attention_bias);
  CHECK(c.num_heads == 4 && c.num_kv_heads == 2 && c.num_layers == 2 && c.vocab_size == 256);
  snprintf(path, sizeof path, "%s/llama/config.json", g_dir);
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK);
  CHECK(c.rope_scaling == RLX_LLM_ROPE_LLAMA3 && c.rope_factor == 8.0 &&
        c.rope_original_max_positions == 16 && !c.tie_word_embeddings);
  snprintf(path, sizeof path, "%s/qwen2", g_dir);
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK);
  CHECK(c.attention_bias && c.tie_word_embeddings && c.rope_scaling == RLX_LLM_ROPE_LINEAR);
  snprintf(path, sizeof path, "%s/mistral", g_dir);
  CHECK(rlx_llm_config_load(path, &c, NULL) == RLX_OK);
  CHECK(c.arch == RLX_LLM_MISTRAL && c.sliding_window == 3);
}

static void expect_config_error(const char* json, rlx_status want, const char* piece) {
  rlx_llm_config c;
  char* why = NULL;
  rlx_status s = rlx_llm_config_parse(json, strlen(json), &c, &why);
  int ok = s == want && why && strstr(why, piece);
  if (!ok) fprintf(stderr, "%s -> %s '%s'\n", json, rlx_status_name(s), why ? why : "");
  rlx_free(why);
  CHECK(ok);
}

#define SIZES "\"vocab_size\": 10, \"hidden_size\": 8, \"intermediate_size\": 16, " \
              "\"num_hidden_layers\": 1, "

TEST(config_errors) {
  expect_config_error("{", RLX_INVALID_ARGUMENT, "malformed JSON");
  expect_config_error("[]", RLX_INVALID_ARGUMENT, "not a JSON object");
  expect_config_error("{\"model_type\": \"falcon\"}", RLX_UNIMPLEMENTED, "'falcon'");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"hidden_size_x\": 1}",
                      RLX_INVALID_ARGUMENT, "\"num_attention_heads\"");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"num_attention_heads\": 2, "
                      "\"num_key_value_heads\": 3}", RLX_INVALID_ARGUMENT, "num_key_value_heads");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"num_attention_heads\": \"2\"}",
                      RLX_INVALID_ARGUMENT, "not an integer");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"num_attention_heads\": 2, "
                      "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
                      RLX_UNIMPLEMENTED, "'yarn'");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"num_attention_heads\": 2, "
                      "\"hidden_act\": \"gelu\"}", RLX_UNIMPLEMENTED, "'gelu'");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"num_attention_heads\": 2, "
                      "\"rms_norm_eps\": -1}", RLX_INVALID_ARGUMENT, "rms_norm_eps");
  expect_config_error("{\"model_type\": \"llama\", " SIZES "\"num_attention_heads\": 2, "
                      "\"num_hidden_layers\": 99999999999}", RLX_INVALID_ARGUMENT,
                      "num_hidden_layers");
  expect_config_error("{\"model_type\": \"qwen3\", " SIZES "\"num_attention_heads\": 2, "
                      "\"use_sliding_window\": true}", RLX_UNIMPLEMENTED, "use_sliding_window");
  expect_config_error("{\"model_type\": \"gpt2\", \"vocab_size\": 10, \"n_embd\": 8, "
                      "\"n_layer\": 1, \"n_head\": 2, \"activation_function\": \"relu\"}",
                      RLX_UNIMPLEMENTED, "'relu'");
  expect_config_error("{\"model_type\": \"gpt2\", \"vocab_size\": 10, \"n_embd\": 8, "
                      "\"n_layer\": 1, \"n_head\": 3}", RLX_INVALID_ARGUMENT, "n_head");
  expect_config_error("{\"model_type\": \"gemma2\", " SIZES "\"num_attention_heads\": 2, "
                      "\"attn_logit_softcapping\": -1}", RLX_INVALID_ARGUMENT,
                      "attn_logit_softcapping");
  expect_config_error("{\"model_type\": \"gemma2\", " SIZES "\"num_attention_heads\": 2, "
                      "\"layer_types\": [\"full_attention\"]}", RLX_UNIMPLEMENTED, "layer_types");
  expect_config_error("{\"model_type\": \"gemma2\", " SIZES "\"num_attention_heads\": 2, "
                      "\"hidden_activation\": \"silu\"}", RLX_UNIMPLEMENTED, "'silu'");
  expect_config_error("{\"model_type\": \"mixtral\", " SIZES "\"num_attention_heads\": 2}",
                      RLX_INVALID_ARGUMENT, "\"num_local_experts\"");
  expect_config_error("{\"model_type\": \"mixtral\", " SIZES "\"num_attention_heads\": 2, "
                      "\"num_local_experts\": 4, \"num_experts_per_tok\": 5}",
                      RLX_INVALID_ARGUMENT, "num_experts_per_tok");
  rlx_llm_config c;
  const char* good = "{\"architectures\": [\"MistralForCausalLM\"], " SIZES
                     "\"num_attention_heads\": 2, \"sliding_window\": null}";
  CHECK(rlx_llm_config_parse(good, strlen(good), &c, NULL) == RLX_OK);
  CHECK(c.arch == RLX_LLM_MISTRAL && c.sliding_window == 0 && c.head_dim == 4);
  /* Gemma-2: null turns a softcap off; layer_types as the builder makes them */
  const char* gemma = "{\"model_type\": \"gemma2\", " SIZES "\"num_attention_heads\": 2, "
                      "\"final_logit_softcapping\": null, \"layer_types\": "
                      "[\"sliding_attention\"], \"torch_dtype\": \"float16\"}";
  CHECK(rlx_llm_config_parse(gemma, strlen(gemma), &c, NULL) == RLX_OK);
  CHECK(c.arch == RLX_LLM_GEMMA2 && c.final_logit_softcap == 0.0f && c.attn_logit_softcap == 50.0f);
  CHECK(c.query_pre_attn_scalar == 256.0f && c.sliding_window == 4096 && c.tie_word_embeddings);
  CHECK(fabsf(c.embed_scale - sqrtf(8.0f)) < 2e-3f && c.embed_scale != sqrtf(8.0f)); /* f16 */
}

/* A checkpoint whose tensors do not fit its config: the loader names the
 * tensor (a copy of the qwen3 case whose config claims another head_dim,
 * and one whose config asks for a layer the weights do not have). */
TEST(checkpoint_mismatch) {
  char src[600], dst[600], cmd[3000];
  snprintf(src, sizeof src, "%s/qwen3", g_dir);
  snprintf(dst, sizeof dst, "%s/qwen3_mismatch", g_dir);
  snprintf(cmd, sizeof cmd,
           "rm -rf '%s' && cp -r '%s' '%s' && sed -i 's/\"head_dim\": 32/\"head_dim\": 16/' "
           "'%s/config.json'", dst, src, dst, dst);
  CHECK(system(cmd) == 0);
  rlx_llm* m = NULL;
  char* why = NULL;
  CHECK(rlx_llm_load(dst, NULL, &m, &why) == RLX_INVALID_ARGUMENT && m == NULL);
  CHECK_MSG(why && strstr(why, "q_proj.weight") && strstr(why, "[128, 64]"), "%s", why);
  rlx_free(why);
  snprintf(cmd, sizeof cmd,
           "sed -i 's/\"head_dim\": 16/\"head_dim\": 32/; s/\"num_hidden_layers\": 2/"
           "\"num_hidden_layers\": 3/' '%s/config.json'", dst);
  CHECK(system(cmd) == 0);
  CHECK(rlx_llm_load(dst, NULL, &m, &why) == RLX_NOT_FOUND);
  CHECK_MSG(why && strstr(why, "model.layers.2."), "%s", why);
  rlx_free(why);
}

/* Symbolic batch and sequence: one compile serves two batch sizes. */
TEST(graph_shape) {
  char dir[700];
  snprintf(dir, sizeof dir, "%s/llama", g_dir);
  rlx_llm_options o;
  rlx_llm_options_init(&o);
  o.max_seq = 32;
  rlx_llm* m = NULL;
  CHECK(rlx_llm_load(dir, &o, &m, NULL) == RLX_OK);
  rlx_value_info in;
  CHECK(rlx_graph_get_input(rlx_llm_graph(m), 0, &in) == RLX_OK);
  CHECK(strcmp(in.name, "input_ids") == 0 && in.shape[0] < 0 && in.shape[1] < 0);
  rlx_value_info p;
  CHECK(rlx_graph_get_param(rlx_llm_graph(m), 0, &p) == RLX_OK);
  CHECK(strcmp(p.name, "rope.cos") == 0 && p.shape[0] == 32 && p.shape[1] == 8);
  rlx_llm_destroy(m);
}

/* test_llm [DEVICE...]: the devices to compare on (default: all). */
int main(int argc, char** argv) {
  if (argc > 1) {
    g_devices = (const char**)(argv + 1);
    g_n_devices = argc - 1;
  }
  snprintf(g_dir, sizeof g_dir, "%s/llm_test", RLX_BUILD_DIR);
  rlx_llm_config probe;
  char* why = NULL;
  if (rlx_llm_config_parse("x", 1, &probe, &why) == RLX_UNIMPLEMENTED) { /* not built */
    printf("SKIP: %s\n", why);
    rlx_free(why);
    return SKIP_CODE;
  }
  rlx_free(why);
  int code = generate();
  if (code != 0) {
    printf("SKIP: tests/llm_torch.py exited %d (needs Debian's python3-torch)\n", code);
    return SKIP_CODE;
  }
  RUN(config_fields);
  RUN(config_errors);
  RUN(llama);
  RUN(llama_bf16_sharded);
  RUN(qwen2);
  RUN(qwen3);
  RUN(mistral);
  RUN(config_fields_gpt2_gemma2);
  RUN(gpt2);
  RUN(gpt2_noprefix_f16);
  RUN(gemma2);
  RUN(gemma2_bf16);
  RUN(mixtral);
  RUN(moe_config);
  RUN(checkpoint_mismatch);
  RUN(graph_shape);
  return test_summary();
}
