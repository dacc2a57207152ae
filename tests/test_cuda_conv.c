/* CUDA convolutions on cuDNN (src/backends/cuda/cuda_cudnn.c) and the
 * fallback without it. One graph holds the convolutions the cuDNN path
 * distinguishes: fused bias + ReLU + residual (NCHW), unfused bias with a
 * separate activation kernel on grouped channels-last, ConvTranspose with
 * output_padding, a dilated depthwise 1-D conv, bf16 channels-last, and one
 * with asymmetric padding (which cuDNN cannot take: decomposed even when
 * cuDNN is there). Checked:
 *   - every output against the CPU backend on the same inputs;
 *   - with cuDNN loaded, the dispatch report: five convs native, the
 *     asymmetric one decomposed, the backend's line naming cuDNN and no conv
 *     on the host;
 *   - the same program run again with RLX_CUDNN_LIB=/nonexistent (a child
 *     process: cuDNN is loaded once per process) decomposes every conv and
 *     gives the same numbers.
 * Exit 77 (ctest SKIP) without a CUDA device. */
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char** environ;

#define N_OUT 7
#define N_NATIVE 6 /* outputs 0..4 and 6 cuDNN takes; output 5 has asymmetric pads */

static rlx_tensor input(rlx_graph* g, const char* name, rlx_dtype t, rlx_dim a, rlx_dim b,
                        rlx_dim c, rlx_dim d, int rank) {
  rlx_dim s[4] = {a, b, c, d};
  rlx_tensor x = RLX_NONE;
  rlx_graph_add_input(g, name, t, s, rank, &x);
  return x;
}

static rlx_graph* build(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_tensor y[N_OUT];
  int ok = 1;
  { /* 0: NCHW, 3x3 pad 1, bias + residual + ReLU (cuDNN's fused forward) */
    rlx_tensor x = input(g, "x0", RLX_F32, 2, 8, 10, 12, 4), w = input(g, "w0", RLX_F32, 16, 8, 3, 3, 4);
    rlx_tensor b = input(g, "b0", RLX_F32, 16, 0, 0, 0, 1), r = input(g, "r0", RLX_F32, 2, 16, 10, 12, 4);
    int64_t st[2] = {1, 1}, pd[4] = {1, 1, 1, 1}, dl[2] = {1, 1};
    ok &= rlx_graph_add_conv(g, x, w, b, r, 2, st, pd, dl, 1, RLX_ACT_RELU, RLX_CONV_CHANNELS_FIRST,
                             &y[0]) == RLX_OK;
  }
  { /* 1: NHWC, stride 2, groups 2, bias, sigmoid (unfused + unary kernel) */
    rlx_tensor x = input(g, "x1", RLX_F32, 2, 9, 9, 8, 4), w = input(g, "w1", RLX_F32, 8, 4, 3, 3, 4);
    rlx_tensor b = input(g, "b1", RLX_F32, 8, 0, 0, 0, 1);
    int64_t st[2] = {2, 2}, pd[4] = {1, 1, 1, 1}, dl[2] = {1, 1};
    ok &= rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, st, pd, dl, 2, RLX_ACT_SIGMOID,
                             RLX_CONV_CHANNELS_LAST, &y[1]) == RLX_OK;
  }
  { /* 2: ConvTranspose, stride 2, pad 1, output_padding 1, bias */
    rlx_tensor x = input(g, "x2", RLX_F32, 2, 8, 5, 5, 4), w = input(g, "w2", RLX_F32, 8, 4, 3, 3, 4);
    rlx_tensor b = input(g, "b2", RLX_F32, 4, 0, 0, 0, 1);
    int64_t st[2] = {2, 2}, pd[4] = {1, 1, 1, 1}, dl[2] = {1, 1}, op[2] = {1, 1};
    ok &= rlx_graph_add_conv_transpose(g, x, w, b, RLX_NONE, 2, st, pd, dl, op, 1, RLX_ACT_NONE,
                                       RLX_CONV_CHANNELS_FIRST, &y[2]) == RLX_OK;
  }
  { /* 3: 1-D depthwise, kernel 5, dilation 2, pad 4, no bias */
    rlx_tensor x = input(g, "x3", RLX_F32, 2, 8, 20, 0, 3), w = input(g, "w3", RLX_F32, 8, 1, 5, 0, 3);
    int64_t st[1] = {1}, pd[2] = {4, 4}, dl[1] = {2};
    ok &= rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 1, st, pd, dl, 8, RLX_ACT_NONE,
                             RLX_CONV_CHANNELS_FIRST, &y[3]) == RLX_OK;
  }
  { /* 4: bf16 NHWC, bias + ReLU (tensor cores) */
    rlx_tensor x = input(g, "x4", RLX_BF16, 2, 6, 6, 16, 4), w = input(g, "w4", RLX_BF16, 16, 16, 3, 3, 4);
    rlx_tensor b = input(g, "b4", RLX_BF16, 16, 0, 0, 0, 1);
    int64_t st[2] = {1, 1}, pd[4] = {1, 1, 1, 1}, dl[2] = {1, 1};
    ok &= rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, st, pd, dl, 1, RLX_ACT_RELU,
                             RLX_CONV_CHANNELS_LAST, &y[4]) == RLX_OK;
  }
  { /* 5: asymmetric padding: decomposed on every device */
    rlx_tensor x = input(g, "x5", RLX_F32, 1, 4, 7, 7, 4), w = input(g, "w5", RLX_F32, 4, 4, 2, 2, 4);
    int64_t st[2] = {1, 1}, pd[4] = {0, 0, 1, 1}, dl[2] = {1, 1};
    ok &= rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, st, pd, dl, 1, RLX_ACT_NONE,
                             RLX_CONV_CHANNELS_FIRST, &y[5]) == RLX_OK;
  }
  { /* 6: NHWC with an OHWI weight [OC, k, k, C/g] (no filter reorder), groups 2, bias */
    rlx_tensor x = input(g, "x6", RLX_F32, 2, 7, 9, 8, 4), w = input(g, "w6", RLX_F32, 6, 3, 3, 4, 4);
    rlx_tensor b = input(g, "b6", RLX_F32, 6, 0, 0, 0, 1);
    int64_t st[2] = {1, 2}, pd[4] = {1, 1, 1, 1}, dl[2] = {1, 1};
    ok &= rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, st, pd, dl, 2, RLX_ACT_RELU,
                             RLX_CONV_CHANNELS_LAST_OHWI, &y[6]) == RLX_OK;
  }
  ok = ok && rlx_graph_set_outputs(g, y, N_OUT) == RLX_OK;
  if (!ok) {
    fprintf(stderr, "building the conv graph failed: %s\n", rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* Every input random (same seed -> same data), converted to its dtype. */
static int set_inputs(rlx_exec* e) {
  int32_t n = rlx_exec_input_count(e);
  for (int32_t i = 0; i < n; i++) {
    rlx_value_info info;
    if (rlx_exec_get_input(e, i, &info) != RLX_OK) return 0;
    int64_t count = 1;
    for (int32_t d = 0; d < info.rank; d++) count *= info.shape[d];
    size_t es = rlx_dtype_size(info.dtype);
    float* f = malloc(sizeof(float) * (size_t)count);
    void* v = malloc(es * (size_t)count);
    test_seed(1234 + (uint64_t)i);
    if (f) test_fill_f32(f, count, -1, 1);
    int ok = f && v && rlx_dtype_convert(v, info.dtype, f, RLX_F32, count) == RLX_OK &&
             rlx_exec_set_input(e, info.name, info.dtype, info.shape, info.rank, v,
                                es * (size_t)count) == RLX_OK;
    free(f);
    free(v);
    if (!ok) return 0;
  }
  return 1;
}

/* Count in column col (1 native, 3 decomposed, 4 host) of the report row of op. */
static int report_count(const char* report, const char* op, int col) {
  for (const char* line = report; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char name[64];
    int v[4];
    if (sscanf(line, " %63s %d %d %d %d", name, &v[0], &v[1], &v[2], &v[3]) == 5 && strcmp(name, op) == 0)
      return v[col - 1];
  }
  return 0;
}

static rlx_exec* compile_run(rlx_graph* g, const char* device) {
  rlx_exec* e = test_compile_on(g, device, NULL);
  if (!e) return NULL;
  if (!set_inputs(e) || rlx_exec_run(e) != RLX_OK) {
    fprintf(stderr, "%s run: %s\n", device, rlx_exec_last_error(e));
    rlx_exec_destroy(e);
    return NULL;
  }
  return e;
}

/* Tolerance per output: bf16 rounds the inputs and the output. */
static double tol_of(int i) { return i == 4 ? 2e-2 : 1e-5; }

/* The child (RLX_CUDNN_LIB=/nonexistent): runs the graph on cuda, checks
 * that no conv went to cuDNN, and writes the outputs (f64) to path. */
static int child(const char* path) {
  rlx_graph* g = build();
  rlx_exec* e = g ? compile_run(g, "cuda") : NULL;
  if (!e) return 2;
  char* report = NULL;
  int bad = rlx_exec_report(e, &report) != RLX_OK ||
            report_count(report, "conv", 1) + report_count(report, "conv_transpose", 1) != 0 ||
            report_count(report, "conv", 3) != N_OUT - 1 ||
            report_count(report, "conv_transpose", 3) != 1 || strstr(report, "cuda conv:") != NULL;
  if (bad) fprintf(stderr, "child: convs not decomposed without cuDNN:\n%s", report ? report : "");
  rlx_free(report);
  FILE* f = fopen(path, "wb");
  for (int32_t i = 0; i < N_OUT && f && !bad; i++) {
    int64_t n = 0;
    double* v = test_read_output_f64(e, i, &n);
    bad |= !v || fwrite(&n, sizeof n, 1, f) != 1 || fwrite(v, sizeof *v, (size_t)n, f) != (size_t)n;
    free(v);
  }
  if (!f || fclose(f) != 0) bad = 1;
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return bad ? 3 : 0;
}

/* The child is this same program, whatever argv[0] says. */
static const char* const self_path = "/proc/self/exe";

TEST(cuda_matches_cpu_and_uses_cudnn) {
  rlx_graph* g = build();
  CHECK(g != NULL);
  rlx_exec* cpu = compile_run(g, "cpu");
  rlx_exec* gpu = compile_run(g, "cuda");
  CHECK(cpu && gpu);
  for (int32_t i = 0; i < N_OUT; i++) CHECK_MSG(test_outputs_match(gpu, cpu, i, tol_of(i)), "output %d", i);
  char* report = NULL;
  CHECK_OK_E(gpu, rlx_exec_report(gpu, &report));
  int native = report_count(report, "conv", 1) + report_count(report, "conv_transpose", 1);
  if (native == 0) {
    printf("note: no conv on cuDNN (not loaded here); the decomposition was checked\n");
    CHECK(report_count(report, "conv", 3) + report_count(report, "conv_transpose", 3) == N_OUT);
  } else {
    CHECK_MSG(native == N_NATIVE && report_count(report, "conv", 3) == 1, "%s", report);
    CHECK_MSG(strstr(report, "cuda conv: 6 on cuDNN") && strstr(report, "0 on the host"), "%s", report);
    printf("%s", report);
  }
  rlx_free(report);

  /* The same graph in a process without cuDNN. */
  char path[] = "/tmp/rlx_cuda_conv_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  setenv("RLX_CUDNN_LIB", "/nonexistent/libcudnn.so.9", 1);
  char* argv[] = {(char*)self_path, "--child", path, NULL};
  pid_t pid;
  int spawned = posix_spawn(&pid, self_path, NULL, NULL, argv, environ) == 0;
  unsetenv("RLX_CUDNN_LIB");
  int status = 0;
  CHECK(spawned && waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  FILE* f = fopen(path, "rb");
  CHECK(f != NULL);
  for (int32_t i = 0; i < N_OUT; i++) {
    int64_t n = 0, m = 0;
    double* mine = test_read_output_f64(gpu, i, &m);
    int ok = fread(&n, sizeof n, 1, f) == 1 && n == m && mine;
    double* theirs = ok ? malloc(sizeof(double) * (size_t)n) : NULL;
    ok = ok && theirs && fread(theirs, sizeof *theirs, (size_t)n, f) == (size_t)n;
    double rel = ok ? test_rel_l2(theirs, mine, n) : 1.0;
    free(mine);
    free(theirs);
    if (!ok || rel > tol_of(i)) fclose(f);
    CHECK_MSG(ok && rel <= tol_of(i), "output %d: decomposition vs cuDNN rel l2 %g", i, rel);
  }
  fclose(f);
  remove(path);
  rlx_exec_destroy(cpu);
  rlx_exec_destroy(gpu);
  rlx_graph_destroy(g);
}

static int cuda_available(void) {
  int32_t n = rlx_device_count();
  for (int32_t i = 0; i < n; i++) {
    rlx_device_info info;
    rlx_device_get(i, &info);
    if (strcmp(info.name, "cuda") != 0) continue;
    if (info.available) return 1;
    printf("SKIP cuda (%s)\n", info.detail);
    return 0;
  }
  printf("SKIP cuda (not built)\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (!cuda_available()) return 77;
  RUN(cuda_matches_cpu_and_uses_cudnn);
  return test_summary();
}
