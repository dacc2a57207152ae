/* Real vision models exported by PyTorch (scripts/gen_vision_models.py):
 * ResNet-18/50, MobileNetV2, MobileNetV3 small/large, a small ViT and two
 * small U-Nets (interpolation / ConvTranspose up paths), each exported once
 * with a dynamic batch dim N. For each model on one device: import the
 * .onnx once, compile once, run at every batch size the generator wrote,
 * compare with PyTorch's outputs.
 *
 *   test_vision_models [DEVICE] [--dir DIR] [--size ci|full] [--batches 1,3]
 *                      [--models a,b,...] [--expect-fail a,b,...]
 *                      [--precision bf16|f16] [--channels-last]
 *
 * --precision compiles the f32 models in bf16 / f16 (rlx_compile_options.
 * precision) and compares with PyTorch's f32 outputs at a looser tolerance
 * (REL_TOL_REDUCED).
 *
 * Without --dir the generator runs first (Debian's /usr/bin/python3 with
 * python3-torch) into BUILD/vision_models/SIZE; it keeps a stamp (hash of
 * the script and its arguments), so later runs reuse the files. No torch:
 * exit 77 (ctest SKIP), never a pass. A model named in --expect-fail that
 * fails prints XFAIL with its error and does not fail the test; one that
 * passes prints XPASS (take it off the list). --channels-last compiles with
 * the channels_last option (the NCHW models run NHWC inside). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef RLX_BUILD_DIR
#define RLX_BUILD_DIR "build"
#endif

#define SKIP_CODE 77
/* f32 conv nets: per-element error relative to the output's largest
 * magnitude (accumulation order differs between backends and torch). */
#define REL_TOL 1e-3
/* The same in bf16 / f16 (ResNet-18 in bf16 on the CPU: 1.0e-2): a few
 * units of bf16's roundoff (2^-8) after some twenty layers that each round
 * what they store. */
#define REL_TOL_REDUCED 3e-2
#define ABS_TOL 1e-5

static const char* const ALL_MODELS =
    "resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,mobilenet_v3_large,vit,unet,unet_convt";

typedef struct run_config {
  const char* device;
  const char* dir;     /* generated models; NULL: generate into the build dir */
  const char* size;    /* "ci" or "full" */
  const char* batches; /* "1,3" */
  const char* models;
  const char* expect_fail;
  int32_t precision; /* rlx_precision */
  int channels_last; /* rlx_compile_options.channels_last */
} run_config;

/* Is name an entry of the comma-separated list? */
static int in_list(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* p = list; p && *p;) {
    const char* e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return 1;
    p = e ? e + 1 : NULL;
  }
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ one model */

/* The outcome of one model: ok, or the first error (a message to print). */
typedef struct model_result {
  int ok;
  char why[1024];
} model_result;

static void fail_with(model_result* r, const char* what, const char* msg) {
  r->ok = 0;
  snprintf(r->why, sizeof r->why, "%s: %s", what, msg ? msg : "(no message)");
}

/* Runs e at the input in input_bB.npy and compares output 0 with
 * output_bB.npy. */
static void run_batch(rlx_exec* e, const char* mdir, int batch, const char* label,
                      double rel_tol, model_result* r) {
  char in_path[1300], ref_path[1300];
  snprintf(in_path, sizeof in_path, "%s/input_b%d.npy", mdir, batch);
  snprintf(ref_path, sizeof ref_path, "%s/output_b%d.npy", mdir, batch);
  rlx_dtype dt;
  int32_t in_rank = 0, ref_rank = 0;
  int64_t in_shape[RLX_MAX_RANK], ref_shape[RLX_MAX_RANK];
  void *in = NULL, *ref = NULL;
  size_t in_bytes = 0, ref_bytes = 0;
  char* err = NULL;
  float* got = NULL;
  if (rlx_npy_load(in_path, &dt, &in_rank, in_shape, &in, &in_bytes, &err) != RLX_OK ||
      rlx_npy_load(ref_path, &dt, &ref_rank, ref_shape, &ref, &ref_bytes, &err) != RLX_OK) {
    fail_with(r, "reading the generated data", err);
    goto done;
  }
  if (rlx_exec_set_input(e, "input", RLX_F32, in_shape, in_rank, in, in_bytes) != RLX_OK) {
    fail_with(r, "set_input", rlx_exec_last_error(e));
    goto done;
  }
  double t0 = now_ms();
  if (rlx_exec_run(e) != RLX_OK) {
    fail_with(r, "run", rlx_exec_last_error(e));
    goto done;
  }
  double ms = now_ms() - t0;
  int32_t rank = 0;
  int64_t shape[RLX_MAX_RANK];
  rlx_exec_output_type(e, 0, &dt, &rank, shape);
  if (rank != ref_rank || memcmp(shape, ref_shape, sizeof(int64_t) * (size_t)rank) != 0) {
    fail_with(r, "output shape", "differs from PyTorch's");
    goto done;
  }
  size_t n = ref_bytes / sizeof(float);
  got = malloc(ref_bytes ? ref_bytes : 1);
  if (!got || rlx_exec_read_output(e, 0, RLX_F32, got, ref_bytes) != RLX_OK) {
    fail_with(r, "read_output", rlx_exec_last_error(e));
    goto done;
  }
  const float* want = ref;
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= max_err)) max_err = d; /* NaN propagates */
    if (fabs(want[i]) > max_ref) max_ref = fabs(want[i]);
  }
  double tol = rel_tol * max_ref + ABS_TOL;
  printf("  %-20s B=%-3d max|err| %.3g  max|ref| %.3g  rel %.3g  (%s)  run %.1f ms\n", label,
         batch, max_err, max_ref, max_ref > 0 ? max_err / max_ref : max_err,
         max_err <= tol ? "ok" : "TOO LARGE", ms);
  if (!(max_err <= tol)) {
    char msg[256];
    snprintf(msg, sizeof msg, "B=%d max|err| %.3g > %.3g (%g of max|ref| %.3g)", batch, max_err,
             tol, rel_tol, max_ref);
    fail_with(r, "outputs differ from PyTorch's", msg);
  }
done:
  free(got);
  rlx_free(err);
  rlx_free(in);
  rlx_free(ref);
}

/* Import once, compile once, run at each batch size. */
static model_result check_model(const run_config* c, const char* name) {
  model_result r = {1, ""};
  char mdir[1200], onnx[1300];
  snprintf(mdir, sizeof mdir, "%s/%s", c->dir, name);
  snprintf(onnx, sizeof onnx, "%s/model.onnx", mdir);
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  char* err = NULL;
  double t0 = now_ms();
  if (rlx_onnx_load(onnx, &g, &err) != RLX_OK) {
    fail_with(&r, "import", err);
    goto done;
  }
  double t_import = now_ms() - t0;
  t0 = now_ms();
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.precision = c->precision;
  o.channels_last = c->channels_last;
  if (rlx_compile(g, c->device, &o, &e) != RLX_OK) {
    fail_with(&r, "compile", rlx_graph_last_error(g));
    goto done;
  }
  if (rlx_onnx_set_params(e, onnx, &err) != RLX_OK) {
    fail_with(&r, "set_params", err);
    goto done;
  }
  printf("  %-20s import %.0f ms, compile + params %.0f ms\n", name, t_import, now_ms() - t0);
  for (const char* p = c->batches; r.ok && p && *p;) {
    run_batch(e, mdir, atoi(p), name, c->precision ? REL_TOL_REDUCED : REL_TOL, &r);
    p = strchr(p, ',');
    p = p ? p + 1 : NULL;
  }
done:
  rlx_free(err);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return r;
}

/* ------------------------------------------------------------------ setup */

static int device_available(const char* device) {
  if (strcmp(device, "cpu") == 0) return 1; /* without starting the GPU drivers */
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && strcmp(info.name, device) == 0) {
      if (!info.available) printf("SKIP %s: %s\n", device, info.detail);
      return info.available;
    }
  }
  printf("SKIP %s: no such device\n", device);
  return 0;
}

/* Runs the generator into dir; returns its exit status (77: no torch). */
static int generate(const run_config* c, const char* dir) {
  const char* py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s scripts/gen_vision_models.py --out '%s' --size %s --batches %s",
           py, dir, c->size, c->batches);
  fflush(stdout);
  int st = system(cmd);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static void parse_args(int argc, char** argv, run_config* c) {
  for (int i = 1; i < argc; i++) {
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(argv[i], "--dir") == 0) c->dir = v, i++;
    else if (strcmp(argv[i], "--size") == 0) c->size = v, i++;
    else if (strcmp(argv[i], "--batches") == 0) c->batches = v, i++;
    else if (strcmp(argv[i], "--models") == 0) c->models = v, i++;
    else if (strcmp(argv[i], "--expect-fail") == 0) c->expect_fail = v, i++;
    else if (strcmp(argv[i], "--precision") == 0) {
      c->precision = strcmp(v, "bf16") == 0 ? RLX_PRECISION_BF16
                     : strcmp(v, "f16") == 0 ? RLX_PRECISION_F16 : -1;
      i++;
    }
    else if (strcmp(argv[i], "--channels-last") == 0) c->channels_last = 1;
    else c->device = argv[i];
  }
}

int main(int argc, char** argv) {
  run_config c = {"cpu", NULL, "ci", "1,3", ALL_MODELS, "", RLX_PRECISION_DEFAULT, 0};
  parse_args(argc, argv, &c);
  if (c.precision < 0) {
    printf("FAIL: --precision takes bf16 or f16\n");
    return 1;
  }
  if (!device_available(c.device)) return SKIP_CODE;
  static char gen_dir[1024];
  if (!c.dir) {
    snprintf(gen_dir, sizeof gen_dir, "%s/vision_models/%s", RLX_BUILD_DIR, c.size);
    int code = generate(&c, gen_dir);
    if (code == SKIP_CODE) {
      printf("SKIP: the generator needs PyTorch (Debian's python3-torch)\n");
      return SKIP_CODE;
    }
    if (code != 0) {
      printf("FAIL: scripts/gen_vision_models.py exited %d\n", code);
      return 1;
    }
    c.dir = gen_dir;
  }
  int failures = 0;
  for (const char* p = c.models; p && *p;) {
    char name[64];
    const char* e = strchr(p, ',');
    snprintf(name, sizeof name, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
    p = e ? e + 1 : NULL;
    model_result r = check_model(&c, name);
    int expected = in_list(c.expect_fail, name);
    const char* how = c.channels_last ? " (channels-last)" : "";
    if (r.ok)
      printf("%s %s on %s%s\n", expected ? "XPASS (take it off --expect-fail)" : "PASS", name,
             c.device, how);
    else
      printf("%s %s on %s%s: %s\n", expected ? "XFAIL" : "FAIL", name, c.device, how, r.why);
    fflush(stdout);
    failures += !r.ok && !expected;
  }
  printf("%d unexpected failure(s)\n", failures);
  return failures ? 1 : 0;
}
