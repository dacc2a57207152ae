/* The built-in GPT of `rlx train --text` (tools/gpt_model.c): its param
 * table and init, the decode step against the KV cache (device state)
 * agreeing with the full-window forward at every position, the training
 * graph's loss against a cross-entropy computed here from the forward's
 * logits, and the checkpoint config file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpt_model.h"
#include "harness.h"

static const gpt_config k_small = {256, 12, 2, 2, 16};

TEST(config_checks) {
  char msg[256];
  CHECK(gpt_config_check(&k_small, msg, sizeof msg) == 0);
  gpt_config bad = k_small;
  bad.dim = 15; /* not a multiple of heads */
  CHECK(gpt_config_check(&bad, msg, sizeof msg) == 1 && strstr(msg, "multiple of heads"));
  bad = k_small;
  bad.layers = 0;
  CHECK(gpt_config_check(&bad, msg, sizeof msg) == 1 && strstr(msg, "layers"));
}

/* Mean and standard deviation of n floats. */
static void moments(const float* x, int64_t n, double* mean, double* sd) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) {
    s += x[i];
    s2 += (double)x[i] * x[i];
  }
  *mean = s / (double)n;
  *sd = sqrt(s2 / (double)n - *mean * *mean);
}

TEST(params_and_init) {
  gpt_config c = {256, 64, 4, 4, 64};
  CHECK(gpt_param_count(&c) == 4 + 12 * 4);
  int64_t C = c.dim, expect = c.vocab * C + c.ctx * C + 2 * C + c.layers * (12 * C * C + 13 * C);
  CHECK_MSG(gpt_param_total(&c) == expect, "%lld vs %lld", (long long)gpt_param_total(&c),
            (long long)expect);
  float* buf = malloc(sizeof(float) * (size_t)(c.vocab * C));
  gpt_param p;
  double mean, sd;
  gpt_param_get(&c, 0, &p);
  CHECK(strcmp(p.name, "wte") == 0 && p.numel == c.vocab * C);
  gpt_param_init(&c, &p, 7, buf);
  moments(buf, p.numel, &mean, &sd);
  CHECK_MSG(fabs(mean) < 2e-3 && fabs(sd - 0.02) < 1e-3, "wte mean %g sd %g", mean, sd);
  gpt_param_get(&c, 2 + 10, &p); /* block 0's mlp.c_proj.weight */
  CHECK(strcmp(p.name, "h.0.mlp.c_proj.weight") == 0 && p.shape[0] == 4 * C && p.shape[1] == C);
  gpt_param_init(&c, &p, 7, buf);
  moments(buf, p.numel, &mean, &sd);
  double want = 0.02 / sqrt(2.0 * (double)c.layers);
  CHECK_MSG(fabs(sd - want) < 0.1 * want, "c_proj sd %g, want %g", sd, want);
  gpt_param_get(&c, gpt_param_count(&c) - 2, &p);
  CHECK(strcmp(p.name, "ln_f.weight") == 0);
  gpt_param_init(&c, &p, 7, buf);
  CHECK(buf[0] == 1.0f && buf[C - 1] == 1.0f);
  /* the value depends on the seed */
  float first[2];
  gpt_param_get(&c, 0, &p);
  gpt_param_init(&c, &p, 7, buf);
  first[0] = buf[0];
  gpt_param_init(&c, &p, 8, buf);
  first[1] = buf[0];
  CHECK(first[0] != first[1]);
  free(buf);
}

static int set_params(rlx_exec* e, const gpt_config* c, uint64_t seed) {
  float* buf = malloc(sizeof(float) * (size_t)(c->vocab > 4 * c->dim ? c->vocab : 4 * c->dim) *
                      (size_t)(c->dim > c->ctx ? c->dim : c->ctx));
  int ok = buf != NULL;
  for (int32_t i = 0; ok && i < gpt_param_count(c); i++) {
    gpt_param p;
    gpt_param_get(c, i, &p);
    gpt_param_init(c, &p, seed, buf);
    /* larger weights than GPT-2's init, so the logits differ between tokens */
    for (int64_t k = 0; k < p.numel && p.init != GPT_INIT_ONE; k++) buf[k] = buf[k] * 20 + 0.01f;
    ok = rlx_exec_set_param(e, p.name, RLX_F32, buf, sizeof(float) * (size_t)p.numel) == RLX_OK;
    if (!ok) fprintf(stderr, "set %s: %s\n", p.name, rlx_exec_last_error(e));
  }
  free(buf);
  return ok;
}

/* Decodes k_small's whole window one token at a time (the caches stay on
 * the device) and compares each step's logits with the full forward's. */
TEST(decode_matches_forward) {
  const gpt_config* c = &k_small;
  int64_t T = c->ctx, V = c->vocab;
  rlx_graph *gf = NULL, *gd = NULL;
  rlx_exec *ef = NULL, *ed = NULL;
  rlx_tensor logits;
  rlx_graph_create(&gf);
  rlx_graph_create(&gd);
  CHECK_OK_G(gf, gpt_build_forward(gf, c, 1, T, &logits));
  CHECK_OK_G(gf, rlx_graph_set_outputs(gf, &logits, 1));
  CHECK_OK_G(gd, gpt_build_decode(gd, c, 0, 0.0f));
  char names[8][32];
  const char* ptrs[8];
  int32_t outs[8];
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.n_states = gpt_decode_states(c, names, ptrs, outs, 8);
  o.state_inputs = ptrs;
  o.state_outputs = outs;
  CHECK(o.n_states == 4);
  CHECK_OK_G(gf, rlx_compile(gf, "cpu", NULL, &ef));
  CHECK_OK_G(gd, rlx_compile(gd, "cpu", &o, &ed));
  if (!ef || !ed) goto done;
  CHECK(set_params(ef, c, 3) && set_params(ed, c, 3));
  int32_t ids[12] = {72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100};
  rlx_dim fs[2] = {1, T};
  CHECK_OK_E(ef, rlx_exec_set_input(ef, "ids", RLX_I32, fs, 2, ids, sizeof ids));
  CHECK_OK_E(ef, rlx_exec_run(ef));
  float* full = malloc(sizeof(float) * (size_t)(T * V));
  float* row = malloc(sizeof(float) * (size_t)V);
  CHECK_OK_E(ef, rlx_exec_read_output(ef, 0, RLX_F32, full, sizeof(float) * (size_t)(T * V)));
  int64_t D = c->dim / c->heads, cache_n = T * c->heads * D;
  float* zeros = calloc((size_t)cache_n, sizeof(float));
  rlx_dim cs[4] = {1, T, c->heads, D}, one2[2] = {1, 1}, one1[1] = {1};
  for (int32_t i = 0; i < o.n_states; i++)
    CHECK_OK_E(ed, rlx_exec_set_input(ed, ptrs[i], RLX_F32, cs, 4, zeros,
                                      sizeof(float) * (size_t)cache_n));
  double worst = 0;
  int argmax_agree = 1;
  for (int32_t p = 0; p < T; p++) {
    CHECK_OK_E(ed, rlx_exec_set_input(ed, "ids", RLX_I32, one2, 2, &ids[p], sizeof(int32_t)));
    CHECK_OK_E(ed, rlx_exec_set_input(ed, "pos", RLX_I32, one1, 1, &p, sizeof p));
    CHECK_OK_E(ed, rlx_exec_run(ed));
    int64_t next = -1;
    CHECK_OK_E(ed, rlx_exec_read_output(ed, 0, RLX_I64, &next, sizeof next));
    CHECK_OK_E(ed,
               rlx_exec_read_output(ed, 1 + o.n_states, RLX_F32, row, sizeof(float) * (size_t)V));
    const float* want = full + (size_t)p * (size_t)V;
    double num = 0, den = 0;
    int64_t best = 0;
    for (int64_t v = 0; v < V; v++) {
      num += (row[v] - want[v]) * (row[v] - want[v]);
      den += (double)want[v] * want[v];
      if (want[v] > want[best]) best = v;
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    if (rel > worst) worst = rel;
    if (next != best) argmax_agree = 0;
  }
  CHECK_MSG(worst < 1e-4, "decode vs forward logits: worst rel L2 %g", worst);
  CHECK_MSG(argmax_agree, "greedy sample differs from the forward's argmax");
  free(full);
  free(row);
  free(zeros);
done:
  rlx_exec_destroy(ef);
  rlx_exec_destroy(ed);
  rlx_graph_destroy(gf);
  rlx_graph_destroy(gd);
}

/* The training graph's loss equals the mean cross-entropy of its logits
 * (computed here in double). */
TEST(train_graph_loss) {
  const gpt_config* c = &k_small;
  int64_t B = 2, T = 8, V = c->vocab;
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  rlx_tensor loss, logits;
  rlx_graph_create(&g);
  CHECK_OK_G(g, gpt_build_train(g, c, B, T, &loss, &logits));
  rlx_tensor both[2] = {loss, logits};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, both, 2));
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  if (!e) goto done;
  CHECK(set_params(e, c, 5));
  int32_t ids[16], targets[16];
  for (int i = 0; i < 16; i++) {
    ids[i] = (i * 37 + 11) % 256;
    targets[i] = (i * 53 + 7) % 256;
  }
  rlx_dim s[2] = {B, T};
  CHECK_OK_E(e, rlx_exec_set_input(e, "ids", RLX_I32, s, 2, ids, sizeof ids));
  CHECK_OK_E(e, rlx_exec_set_input(e, "targets", RLX_I32, s, 2, targets, sizeof targets));
  CHECK_OK_E(e, rlx_exec_run(e));
  float got = 0;
  double* lg = malloc(sizeof(double) * (size_t)(B * T * V));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, &got, sizeof got));
  CHECK_OK_E(e, rlx_exec_read_output(e, 1, RLX_F64, lg, sizeof(double) * (size_t)(B * T * V)));
  double total = 0;
  for (int64_t r = 0; r < B * T; r++) {
    const double* x = lg + r * V;
    double mx = x[0], sum = 0;
    for (int64_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    for (int64_t v = 0; v < V; v++) sum += exp(x[v] - mx);
    total += mx + log(sum) - x[targets[r]];
  }
  double want = total / (double)(B * T);
  CHECK_MSG(fabs(got - want) < 1e-4 * fabs(want) + 1e-5, "loss %g, want %g", got, want);
  free(lg);
done:
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(config_file) {
  char dir[] = "/tmp/rlx_gpt_cfg_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256], err[256];
  snprintf(path, sizeof path, "%s/gpt.cfg", dir);
  gpt_config c = {256, 128, 3, 4, 96}, back;
  CHECK(gpt_config_save(path, &c, err, sizeof err) == 0);
  CHECK_MSG(gpt_config_load(path, &back, err, sizeof err) == 0, "%s", err);
  CHECK(memcmp(&c, &back, sizeof c) == 0);
  FILE* f = fopen(path, "w");
  fputs("not a config\n", f);
  fclose(f);
  CHECK(gpt_config_load(path, &back, err, sizeof err) == 1 && strstr(err, "not an rlx GPT"));
  remove(path);
  CHECK(gpt_config_load(path, &back, err, sizeof err) == 1 && strstr(err, "No such file"));
  rmdir(dir);
}

int main(void) {
  RUN(config_checks);
  RUN(params_and_init);
  RUN(decode_matches_forward);
  RUN(train_graph_loss);
  RUN(config_file);
  return test_summary();
}
