/* Regression tests of issue 13 (hardening) outside the ONNX importer (those
 * are in test_onnx.c; empty-axis max/min in test_contract.c, per device):
 * the loaders refuse files that are not regular files at once (a FIFO
 * would block them for ever: an alarm turns a hang into a failure) and name
 * the OS's reason for a missing one; a symbol that no tensor which matters
 * uses need not be bound; set_param's message lists the dtypes it takes. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

typedef struct scratch {
  char dir[64];
  char fifo[128];
} scratch;

static int scratch_make(scratch* s) {
  snprintf(s->dir, sizeof s->dir, "/tmp/rlx_hardening_XXXXXX");
  if (!mkdtemp(s->dir)) return 0;
  snprintf(s->fifo, sizeof s->fifo, "%s/fifo", s->dir);
  return mkfifo(s->fifo, 0600) == 0;
}

static void scratch_remove(scratch* s) {
  unlink(s->fifo);
  rmdir(s->dir);
}

/* rlx_graph_load: FIFO, directory, device, missing file. */
TEST(graph_text_file_must_be_regular) {
  scratch s;
  CHECK(scratch_make(&s));
  alarm(20);
  rlx_graph* g = NULL;
  char* msg = NULL;
  rlx_status st = rlx_graph_load(s.fifo, &g, &msg);
  int fifo_ok = st == RLX_INVALID_ARGUMENT && !g && msg && strstr(msg, "FIFO") &&
                strstr(msg, s.fifo);
  rlx_free(msg);
  st = rlx_graph_load(s.dir, &g, &msg);
  int dir_ok = st == RLX_INVALID_ARGUMENT && msg && strstr(msg, "directory");
  rlx_free(msg);
  st = rlx_graph_load("/dev/zero", &g, &msg);
  int dev_ok = st == RLX_INVALID_ARGUMENT && msg && strstr(msg, "character device");
  rlx_free(msg);
  st = rlx_graph_load("/nonexistent/graph.rlx", &g, &msg);
  int missing_ok = st == RLX_NOT_FOUND && msg && strstr(msg, "/nonexistent/graph.rlx") &&
                   strstr(msg, strerror(ENOENT));
  rlx_free(msg);
  alarm(0);
  scratch_remove(&s);
  CHECK(fifo_ok && dir_ok && dev_ok);
  CHECK(missing_ok);
}

/* A regular text file still loads. */
TEST(graph_text_file_loads) {
  char path[] = "/tmp/rlx_hardening_graph_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  const char* text = "rlx 1\n%0 = input name=\"x\" : f32[2]\n%1 = relu(%0) : f32[2]\noutputs %1\n";
  int wrote = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
  close(fd);
  rlx_graph* g = NULL;
  char* msg = NULL;
  rlx_status st = rlx_graph_load(path, &g, &msg);
  unlink(path);
  CHECK(wrote);
  CHECK_MSG(st == RLX_OK && g, "%s", msg ? msg : "");
  rlx_graph_destroy(g);
}

TEST(npy_file_must_be_regular) {
  scratch s;
  CHECK(scratch_make(&s));
  alarm(20);
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data = NULL;
  size_t bytes = 0;
  char* msg = NULL;
  rlx_status st = rlx_npy_load(s.fifo, &dt, &rank, shape, &data, &bytes, &msg);
  int fifo_ok = st == RLX_INVALID_ARGUMENT && !data && msg && strstr(msg, "FIFO");
  rlx_free(msg);
  st = rlx_npy_load("/dev/zero", &dt, &rank, shape, &data, &bytes, &msg);
  int dev_ok = st == RLX_INVALID_ARGUMENT && msg && strstr(msg, "character device");
  rlx_free(msg);
  st = rlx_npy_load("/nonexistent/x.npy", &dt, &rank, shape, &data, &bytes, &msg);
  int missing_ok = st == RLX_NOT_FOUND && msg && strstr(msg, strerror(ENOENT));
  rlx_free(msg);
  alarm(0);
  scratch_remove(&s);
  CHECK(fifo_ok && dev_ok && missing_ok);
}

/* Symbol n is declared but no tensor has it; symbol k only an input that
 * nothing reads. Neither blocks a run; setting the unread input binds k. */
TEST(unused_symbols_need_no_binding) {
  const char* text =
      "rlx 1\n"
      "symbols n m k\n"
      "%0 = input name=\"x\" : f32[m,2]\n"
      "%1 = input name=\"unread\" : f32[k]\n"
      "%2 = relu(%0) : f32[m,2]\n"
      "outputs %2\n";
  rlx_graph* g = NULL;
  char* msg = NULL;
  CHECK_MSG(rlx_graph_parse(text, &g, &msg) == RLX_OK, "%s", msg ? msg : "");
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  rlx_graph_destroy(g);
  CHECK(e);
  float x[4] = {-1, 1, -2, 2}, got[4], u[3] = {0};
  rlx_dim xs[2] = {2, 2}, us[1] = {3};
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, got, sizeof got));
  CHECK(got[0] == 0 && got[1] == 1 && got[2] == 0 && got[3] == 2);
  CHECK_OK_E(e, rlx_exec_set_input(e, "unread", RLX_F32, us, 1, u, sizeof u));
  CHECK_OK_E(e, rlx_exec_run(e));
  rlx_exec_destroy(e);
}

/* A symbol some computed tensor has is still required. */
TEST(used_symbol_still_required) {
  const char* text =
      "rlx 1\n"
      "%0 = input name=\"x\" : f32[m]\n"
      "%1 = relu(%0) : f32[m]\n"
      "outputs %1\n";
  rlx_graph* g = NULL;
  char* msg = NULL;
  CHECK_MSG(rlx_graph_parse(text, &g, &msg) == RLX_OK, "%s", msg ? msg : "");
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  rlx_graph_destroy(g);
  CHECK(e);
  rlx_status st = rlx_exec_run(e);
  int named = strstr(rlx_exec_last_error(e), "symbol 'm' is not bound") != NULL;
  rlx_exec_destroy(e);
  CHECK(st == RLX_FAILED_PRECONDITION && named);
}

/* set_param names what it accepts: the param's dtype, and f32 for the
 * other float dtypes only ("only f32 or f32" before). */
TEST(set_param_dtype_message) {
  rlx_graph* g = test_bias_relu_graph(); /* b: f32[3] */
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  rlx_graph_destroy(g);
  CHECK(e);
  int32_t b[3] = {1, 2, 3};
  rlx_status st = rlx_exec_set_param(e, "b", RLX_I32, b, sizeof b);
  const char* m = rlx_exec_last_error(e);
  int ok = st == RLX_INVALID_ARGUMENT && strstr(m, "only f32 data is accepted") &&
           !strstr(m, "f32 or f32");
  char copy[256];
  snprintf(copy, sizeof copy, "%s", m);
  rlx_exec_destroy(e);
  CHECK_MSG(ok, "%s", copy);
}

int main(void) {
  RUN(graph_text_file_must_be_regular);
  RUN(graph_text_file_loads);
  RUN(npy_file_must_be_regular);
  RUN(unused_symbols_need_no_binding);
  RUN(used_symbol_still_required);
  RUN(set_param_dtype_message);
  return test_summary();
}
