/* rlx bench: wall-clock latency of rlx_exec_run on one graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx bench FILE [options]\n"
          "\n"
          "Compiles FILE, feeds params and inputs as `rlx run` does, runs it --warmup\n"
          "times untimed, then --iters times, each timed alone on CLOCK_MONOTONIC\n"
          "(rlx_exec_run only: no upload or readback of the caller's data). Prints\n"
          "median / p10 / p90 in ms, then one JSON line:\n"
          "  {\"name\": FILE, \"device\": ..., \"iters\": N, \"median_ms\": ..., \"p10_ms\": ...,\n"
          "   \"p90_ms\": ..., \"runs_per_s\": ...}\n"
          "\n"
          "options:\n"
          "  --warmup N          untimed runs first (default 3)\n"
          "  --iters N           timed runs (default 20)\n");
  cli_model_opts_help(f, CLI_OPT_ALL);
}

/* JSON string body: the file name may hold quotes or backslashes. */
static void print_json_string(const char* s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static int time_runs(const char* cmd, rlx_exec* e, const char* file, int64_t warmup,
                     int64_t iters, double* samples) {
  for (int64_t k = 0; k < warmup + iters; k++) {
    double t0 = cli_now_ms();
    if (rlx_exec_run(e) != RLX_OK) {
      cli_error(cmd, "%s: run %lld failed: %s", file, (long long)k, rlx_exec_last_error(e));
      return CLI_FAIL;
    }
    if (k >= warmup) samples[k - warmup] = cli_now_ms() - t0;
  }
  return CLI_OK;
}

int cmd_bench(int argc, char** argv) {
  const char* cmd = "bench";
  cli_model_opts o;
  cli_model_opts_init(&o);
  int64_t warmup = 3, iters = 20;
  int rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK; i++) {
    const char* v = NULL;
    int m = cli_model_opt(cmd, argc, argv, &i, CLI_OPT_ALL, &o);
    if (m < 0) {
      rc = -m;
    } else if (m > 0) {
      continue;
    } else if (cli_is_help(argv[i])) {
      usage(stdout);
      cli_model_opts_free(&o);
      return CLI_OK;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--warmup", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--warmup", v, 0, 1000000, &warmup);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--iters", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--iters", v, 1, 1000000, &iters);
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx bench --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (o.file) {
      cli_error(cmd, "more than one FILE ('%s' and '%s')", o.file, argv[i]);
      rc = CLI_USAGE;
    } else {
      o.file = argv[i];
    }
  }
  if (rc == CLI_OK && !o.file) {
    cli_error(cmd, "missing FILE");
    usage(stderr);
    rc = CLI_USAGE;
  }
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  double* samples = NULL;
  if (rc == CLI_OK) rc = cli_prepare(cmd, &o, 1, &g, &e);
  if (rc == CLI_OK && !(samples = malloc((size_t)iters * sizeof *samples))) {
    cli_error(cmd, "out of memory");
    rc = CLI_FAIL;
  }
  if (rc == CLI_OK) rc = time_runs(cmd, e, o.file, warmup, iters, samples);
  if (rc == CLI_OK) {
    int n = (int)iters;
    double p10 = cli_quantile(samples, n, 0.1), med = cli_quantile(samples, n, 0.5),
           p90 = cli_quantile(samples, n, 0.9);
    const char* device = o.device;
    rlx_device_resolve(o.device, &device);
    printf("%s on %s: %d iters, median %.4f ms, p10 %.4f ms, p90 %.4f ms\n", o.file, device, n,
           med, p10, p90);
    printf("{\"name\": ");
    print_json_string(o.file);
    printf(", \"device\": \"%s\", \"iters\": %d, \"median_ms\": %.6f, \"p10_ms\": %.6f, "
           "\"p90_ms\": %.6f, \"runs_per_s\": %.3f}\n",
           device, n, med, p10, p90, med > 0 ? 1000.0 / med : 0.0);
  }
  free(samples);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  cli_model_opts_free(&o);
  return rc;
}
